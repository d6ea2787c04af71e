"""The GPU tier: ``pytest -m gpu``. Each test runs on every accelerator PyTorch sees (CUDA,
Apple's MPS) and skips with the reason where there is none; the rest of the suite stays on
the CPU (tests/conftest.py).

``NMT_GPU_TIER_ALSO=cpu pytest -m gpu`` runs the same tests on the CPU as well: a check, on a
machine without a GPU, that the tier itself is sound.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.device import BF16, FLOAT32, mps_available, select_precision

from .helpers import model_config, small_model, synthetic_pairs, tiny_config, write_anki
from .test_device import batch_of

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

ACCELERATORS = [
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (PyTorch sees none)")
    ),
    pytest.param("mps", marks=pytest.mark.skipif(not mps_available(), reason="no Apple GPU (MPS)")),
]
if os.environ.get("NMT_GPU_TIER_ALSO") == "cpu":
    ACCELERATORS.append(pytest.param("cpu"))

pytestmark = pytest.mark.gpu


def write_config(tmp_path: Path, name: str, **train) -> Path:
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(
        tmp_path,
        data,
        run_dir=str(tmp_path / name),
        data={"prepared_dir": str(tmp_path / "prepared")},
        train={"epochs": 2, "batch_size": 16, **train},
        model={"dropout": 0.2},
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def nmt(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def translate(config: str, device: str, source: Path) -> list[str]:
    output = source.with_suffix(f".{device}.out")
    nmt("translate", "--config", config, "--device", device, "--input", str(source), "--output", str(output))
    return output.read_text(encoding="utf-8").splitlines()


def last_checkpoint(tmp_path: Path, name: str) -> dict:
    return torch.load(tmp_path / name / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)


@pytest.mark.parametrize("device", ACCELERATORS)
def test_train_translate_evaluate_end_to_end(tmp_path, device):
    config = str(write_config(tmp_path, "run", epochs=3))
    nmt("train", "--config", config, "--device", device)
    log = (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
    assert f"device {device}" in log
    assert select_precision("auto", torch.device(device)).describe() in log
    source = tmp_path / "in.txt"
    source.write_text("I see apples.\nwe like tea.\n", encoding="utf-8")
    assert len(translate(config, device, source)) == 2
    assert "BLEU" in nmt("evaluate", "--config", config, "--device", device)


@pytest.mark.parametrize("device", ACCELERATORS)
def test_deterministic_resume_is_bit_exact(tmp_path, device):
    straight = str(write_config(tmp_path, "straight", deterministic=True, epochs=2))
    nmt("train", "--config", straight, "--device", device)
    split = str(write_config(tmp_path, "split", deterministic=True, epochs=2))
    nmt("train", "--config", split, "--device", device, "--set", "train.epochs=1")
    nmt("train", "--config", split, "--device", device, "--resume")
    a, b = last_checkpoint(tmp_path, "straight"), last_checkpoint(tmp_path, "split")
    assert a["progress"]["step"] == b["progress"]["step"] > 0
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@pytest.mark.parametrize(
    "order", [dict(attention="bahdanau"), dict(attention="luong-concat", input_feeding=True)], ids=["bahdanau", "luong"]
)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_autocast_keeps_recurrences_float32_with_finite_gradients(device, order):
    precision = select_precision("auto", torch.device(device))
    if precision == FLOAT32:
        precision = BF16  # the CPU and MPS train in float32 by default; check autocast there all the same
    model = small_model(**order).to(device)
    model_config(**order)
    batch = batch_of().to(torch.device(device))
    with torch.autocast(device, dtype=precision.autocast):
        memory, state = model.encode(batch.src, batch.src_lengths)
        logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
    assert memory.enc_outputs.dtype == state.hidden.dtype == torch.float32
    assert logits.dtype == precision.autocast
    logits.float().logsumexp(-1).sum().backward()
    for name, parameter in model.named_parameters():
        assert torch.isfinite(parameter.grad).all() and parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize("device", ACCELERATORS)
def test_a_checkpoint_trained_on_the_gpu_translates_the_same_on_the_cpu(tmp_path, device):
    config = str(write_config(tmp_path, "run", epochs=12))
    nmt("train", "--config", config, "--device", device, "--set", "train.learning_rate=0.005")
    source = tmp_path / "in.txt"
    source.write_text("I see apples.\nwe like tea.\nthey eat rice.\nshe wants water.\n", encoding="utf-8")
    on_device = translate(config, device, source)
    assert on_device == translate(config, "cpu", source)
    assert len(set(on_device)) >= 2  # not one sentence for every input: it has learned something


@pytest.mark.parametrize("device", ACCELERATORS)
def test_compiled_steps_train_on_the_device(tmp_path, device):
    if device == "cpu" and not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("torch.compile on the CPU needs a C++ compiler")
    config = str(write_config(tmp_path, "run", compile="default", epochs=1))
    nmt("train", "--config", config, "--device", device)
    weights = last_checkpoint(tmp_path, "run")["model"]
    assert all(torch.isfinite(tensor).all() for tensor in weights.values() if tensor.is_floating_point())


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 or more CUDA GPUs")
def test_torchrun_with_nccl_on_every_gpu(tmp_path):
    gpus = torch.cuda.device_count()
    config = write_config(tmp_path, "parallel", batch_size=8, epochs=1)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}"]
    command += ["-m", "nmt", "train", "--config", str(config), "--device", "cuda"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Data parallel over {gpus} processes" in (tmp_path / "parallel" / "train.log").read_text(encoding="utf-8")
    rng = last_checkpoint(tmp_path, "parallel")["rng"]
    assert isinstance(rng, list) and len(rng) == gpus  # one random state per rank


@pytest.mark.parametrize("device", ACCELERATORS)
def test_the_padded_encoder_runs_on_contiguous_weights_and_equals_the_packed(device, recwarn):
    packed = small_model(rnn_input="packed").to(device)
    padded = small_model(rnn_input="padded").to(device)
    padded.load_state_dict(packed.state_dict())
    batch = batch_of().to(torch.device(device))
    for _ in range(2):  # the second call finds the weights already laid out per direction
        out_padded, final_padded = padded.encoder(batch.src, batch.src_lengths)
    out_packed, final_packed = packed.encoder(batch.src, batch.src_lengths)
    assert torch.allclose(out_padded, out_packed, atol=1e-5) and torch.allclose(final_padded, final_packed, atol=1e-5)
    assert not [w for w in recwarn if "contiguous chunk of memory" in str(w.message)]
