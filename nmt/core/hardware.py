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


def available_memory(device: torch.device) -> int | None:
    """Bytes a new model may take on ``device``: a GPU's free memory, or the CPU's available
    memory within a container's limit (None where neither can be read)."""
    if device.type == "cuda":
        try:
            free, _ = torch.cuda.mem_get_info(device)
        except (RuntimeError, AttributeError):  # a runtime without cudaMemGetInfo (a simulated device)
            return None
        return int(free)
    if device.type != "cpu":
        return None
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            found += [int(line.split()[1]) * 1024 for line in handle if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            with open(limit_file, encoding="ascii") as limit, open(usage_file, encoding="ascii") as usage:
                text = limit.read().strip()
                if text != "max" and int(text) < 1 << 60:
                    found.append(int(text) - int(usage.read().strip()))
        except (OSError, ValueError):
            continue
    return min(found) if found else None
