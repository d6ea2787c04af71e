"""Choosing the device, and the one global numeric switch that goes with a GPU."""

from __future__ import annotations

import torch

from nmt.errors import NmtError

DEVICE_NAMES = ("auto", "cpu", "cuda")


def select_device(name: str) -> torch.device:
    """auto | cpu | cuda -> the device (auto: CUDA when PyTorch sees a GPU)."""
    if name not in DEVICE_NAMES:
        raise NmtError(f"--device: got {name!r}, expected one of {', '.join(map(repr, DEVICE_NAMES))}.")
    if name == "cuda" and not torch.cuda.is_available():
        raise NmtError("Device 'cuda' was asked for, but PyTorch sees no CUDA GPU. Use --device cpu or auto.")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def enable_tf32(device: torch.device) -> None:
    """On a CUDA device, let float32 matrix products and cuDNN RNNs use TF32 tensor cores
    (10-bit mantissa inputs, float32 accumulation). A process-wide switch; no-op on the CPU."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
