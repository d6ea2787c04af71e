"""torchrun with 2 CPU processes (gloo) against one process with the same global batch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import yaml
from typer.testing import CliRunner

from nmt.cli import app

from .helpers import synthetic_pairs, tiny_config, write_anki

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="PyTorch built without gloo")
def test_two_process_torchrun_matches_single_process_with_the_same_global_batch(tmp_path):
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    shared = {"prepared_dir": str(tmp_path / "prepared")}

    def config(name: str, batch_size: int) -> Path:
        raw = tiny_config(
            tmp_path,
            data,
            run_dir=str(tmp_path / name),
            data=shared,
            train={"epochs": 2, "batch_size": batch_size, "threads": 1},
        )
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        return path

    single = config("single", 16)
    assert CliRunner().invoke(app, ["train", "--config", str(single)]).exit_code == 0
    parallel = config("parallel", 8)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "nmt",
        "train",
        "--config",
        str(parallel),
    ]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "effective batch 2 x 8 = 16 sentences" in (tmp_path / "parallel" / "train.log").read_text(encoding="utf-8")

    a = torch.load(tmp_path / "single" / "checkpoints" / "last.pt", weights_only=True)
    b = torch.load(tmp_path / "parallel" / "checkpoints" / "last.pt", weights_only=True)
    assert a["progress"]["step"] == b["progress"]["step"] > 0
    for name, tensor in a["model"].items():
        assert torch.allclose(tensor, b["model"][name], rtol=1e-4, atol=1e-5), name
    lines = (tmp_path / "parallel" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2]  # written once, by rank 0
