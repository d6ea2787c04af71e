"""Shared pieces of the benchmark scripts: data loading, child processes, memory, tables."""

from __future__ import annotations

import gc
import multiprocessing
import resource
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nmt.config.files import load_config
from nmt.config.schema import Config
from nmt.core.hardware import hardware_description
from nmt.pipelines.prepare import prepare


def load(config_path: str, overrides: list[str]) -> Config:
    config = load_config(config_path, overrides)
    prepare(config, log=lambda _: None)  # reuses prepared data when it is up to date
    return config


def setup_device(name: str, threads: int) -> torch.device:
    from nmt.core.device import prepare_device

    if threads:
        torch.set_num_threads(threads)
    device = prepare_device(name)  # as in training
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    return device


def model_and_optimizer(config: Config, device: torch.device):
    """The tokenizers, model and optimizer as the Trainer builds them."""
    from nmt.runtime.loading import load_tokenizers, new_model
    from nmt.training.optim import build_optimizer

    src_tok, tgt_tok = load_tokenizers(config)
    model = new_model(config, src_tok, tgt_tok).to(device)
    if config.train.compile != "none":
        model.compile_steps(config.train.compile)
    return src_tok, tgt_tok, model, build_optimizer(model, config.train)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def settle(device: torch.device) -> None:
    """Before a timed region: finish queued GPU work, and collect the garbage that loading left,
    so that a full collection of the start-up heap is not charged to whichever row crosses its
    threshold first (measured: one such collection is ~75 ms, a third of a greedy run)."""
    sync(device)
    gc.collect()


def peak_memory_mib(device: torch.device) -> float:
    """Peak GPU memory allocated (CUDA) or peak resident memory of this process (CPU)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_child(function, *args):
    """Run ``function(*args)`` in a fresh process: its peak memory and threads are its own."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def interleaved_runs(jobs: list[tuple[str, Callable, tuple]], repeats: int, note: str = "") -> dict[str, list[dict]]:
    """Each job (label, function, args) run ``repeats`` times, each time in a fresh process
    (``in_child``), the jobs interleaved: a slow spell of a shared machine hits every row."""
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in jobs}
    for repeat in range(1, repeats + 1):
        for label, function, args in jobs:
            print(f"measuring: {label}{note} ({repeat}/{repeats}) ...", flush=True)
            runs[label].append(in_child(function, *args))
    return runs


def median_run(runs: list[dict], key: str) -> dict:
    """The run whose ``key`` is the median of ``runs`` (the lower middle one for an even count),
    with the spread of ``key`` over all runs added as ``spread`` (max / min - 1)."""
    ordered = sorted(runs, key=lambda r: r[key])
    values = [r[key] for r in ordered]
    return {**ordered[(len(ordered) - 1) // 2], "spread": values[-1] / values[0] - 1 if values[0] else 0.0}


def paired_ratio(runs: list[dict], peer_runs: list[dict], key: str) -> str:
    """``key`` of each run over its peer's, taken back to back in the same repeat: the median
    ratio and its range, steadier on a shared machine than a ratio of medians."""
    values = sorted(a[key] / b[key] for a, b in zip(runs, peer_runs))
    text = f"{values[(len(values) - 1) // 2]:.2f}x"
    return (
        text
        if len(values) == 1
        else f"{text} (median of {len(values)} back-to-back pairs; range {values[0]:.2f}-{values[-1]:.2f}x)"
    )


def hardware() -> str:
    """The machine in one line; the GPU first when one is present."""
    return hardware_description(torch.device("cuda") if torch.cuda.is_available() else None)


def print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    """columns: (key, heading, format)."""
    print("| " + " | ".join(h for _, h, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(format(row[k], f) if k in row else "" for k, _, f in columns) + " |")
