"""The simulated-CUDA tier's setup: torch.cuda answers for the simulated device, and the tier
refuses to run at all if the shim did not take or autocast would silently stay off (a moved
PyTorch pin must fail here, loudly, not pass in float32)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ..helpers import write_run_config
from .simulator import SimulatedCuda, SimulatedDevice, shim_loaded

DEVICE = SimulatedDevice(capability=(8, 0))
DEVICE.install()


def autocast_enables(dtype: torch.dtype) -> bool:
    with torch.autocast("cuda", dtype=dtype):
        return torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") == dtype


if not (shim_loaded() and autocast_enables(torch.float16) and autocast_enables(torch.bfloat16)):
    raise RuntimeError(
        "the simulated-CUDA tier did not take: the shim must load before torch (tests/conftest.py) and "
        "torch.autocast('cuda') must really enable; a new PyTorch may need tests/simcuda/shim.cpp updated"
    )


@pytest.fixture
def simulated():
    """A strict simulated CUDA for the test's body: a host sync anywhere raises."""
    with SimulatedCuda(strict=True) as mode:
        yield mode


def write_config(tmp_path: Path, name: str = "run", model: dict | None = None, **train) -> Path:
    train = {"epochs": 1, "batch_size": 16, "loader_workers": 0, **train}
    return write_run_config(tmp_path, name, train, {"dropout": 0.0, **(model or {})})
