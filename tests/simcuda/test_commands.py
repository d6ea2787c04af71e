"""The commands on the simulated CUDA device, end to end: nmt train (a pinned two-worker
loader, a checkpoint, a resume), nmt translate, nmt serve answering a request."""

from __future__ import annotations

from dataclasses import replace

import torch
from typer.testing import CliRunner

from nmt.cli import app
from nmt.pipelines.translate import Translator
from nmt.serve.app import build_app

from ..helpers import local_client, random_translator
from .conftest import write_config
from .simulator import SimulatedCuda

runner = CliRunner()


def nmt(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def test_train_resume_and_translate_on_cuda(tmp_path):
    config = str(write_config(tmp_path, epochs=2, loader_workers=-1))  # auto: two workers, pinned, on a GPU
    source = tmp_path / "in.txt"
    source.write_text("I see apples.\nwe like tea.\n", encoding="utf-8")
    with SimulatedCuda(strict=False) as mode:
        nmt("prepare", "--config", config)
        nmt("train", "--config", config, "--device", "cuda", "--set", "train.epochs=1")
        nmt("train", "--config", config, "--device", "cuda", "--resume")
        output = ["--input", str(source), "--output", str(source) + ".cuda"]
        nmt("translate", "--config", config, "--device", "cuda", *output)
    log = (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
    assert "device cuda, bf16 autocast" in log
    saved = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    assert saved["progress"]["epoch"] == 2
    assert saved["rng"]["cuda"].dtype == torch.uint8  # the CUDA generator's state: a token (not simulated)
    assert not [s for s in mode.syncs if s.function.startswith("nmt/training/step.py")]
    nmt("translate", "--config", config, "--device", "cpu", "--input", str(source), "--output", str(source) + ".cpu")
    on_cuda = (tmp_path / "in.txt.cuda").read_text(encoding="utf-8").splitlines()
    assert on_cuda == (tmp_path / "in.txt.cpu").read_text(encoding="utf-8").splitlines() and len(on_cuda) == 2


def test_serve_answers_a_request_on_cuda(tmp_path):
    body = {"text": "I see apples.", "beam_size": 3, "n_best": 2, "attention": True}
    with local_client(build_app({"m": random_translator(tmp_path / "cpu")})) as client:
        on_cpu = client.post("/api/translate", json=body).json()
    with SimulatedCuda(strict=False):
        on_host = random_translator(tmp_path / "cuda").loaded  # the same weights (seeded), moved to the GPU
        cuda = torch.device("cuda")
        translator = Translator(replace(on_host, model=on_host.model.to(cuda), device=cuda))
        with local_client(build_app({"m": translator})) as client:
            response = client.post("/api/translate", json=body)
    assert response.status_code == 200, response.text
    found = response.json()
    assert [t["tokens"] for t in found["translations"]] == [t["tokens"] for t in on_cpu["translations"]]
    torch.testing.assert_close(torch.tensor(found["attention"]), torch.tensor(on_cpu["attention"]), atol=1e-6, rtol=0)
