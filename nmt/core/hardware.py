"""What machine this runs on, in one line (for checkpoints, model cards and benchmarks)."""

from __future__ import annotations

import os
import platform

import torch


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, or the architecture where that is unavailable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.machine()


def hardware_description(device: torch.device | None = None) -> str:
    """CPU, cores, torch threads and version; the GPU first when ``device`` is CUDA."""
    text = f"{cpu_name()}, {os.cpu_count()} cores, {torch.get_num_threads()} threads, torch {torch.__version__}"
    if device is not None and device.type == "cuda":
        text = f"{torch.cuda.get_device_name(device)}; " + text
    return text
