"""Data-parallel training under ``torchrun`` (DistributedDataParallel; NCCL on GPUs, gloo on CPU).

``torchrun --nproc_per_node=N -m nmt train --config C`` starts N processes. Each epoch's
bucketed batches are built for the global batch (N x train.batch_size sentences) with the
same seed everywhere, and rank r takes every N-th sentence of each: together the ranks see
exactly the batches a single process with the global batch size would. The loss is
normalised by the global number of target tokens, so the averaged gradient equals the
single-process one. Only rank 0 prepares data, validates, logs and writes checkpoints;
its validation results are broadcast so every rank steps the same LR schedule and stops
together.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self, requested: torch.device) -> torch.device:
        """One GPU per process under torchrun; CPU stays CPU."""
        if self.enabled and requested.type == "cuda":
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return requested

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def global_tokens(self, tokens: int, device: torch.device) -> int:
        """Target tokens of this step summed over ranks."""
        if not self.enabled:
            return tokens
        total = torch.tensor([tokens], dtype=torch.long, device=device)
        dist.all_reduce(total)
        return int(total.item())

    def any(self, flag: bool, device: torch.device) -> bool:
        """True on every rank if it is true on one (a stop signal, say)."""
        if not self.enabled:
            return flag
        value = torch.tensor([int(flag)], device=device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def broadcast(self, obj):
        """Rank 0's ``obj`` on every rank."""
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """The module the training step calls: ``model`` itself, or DDP around it under torchrun."""
        if not self.enabled:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def shard(self, indices: list[int]) -> list[int]:
        """This rank's part of a global batch (every world-th sentence)."""
        return indices[self.rank :: self.world] if self.enabled else indices


def setup(device_type: str) -> Distributed:
    """Join the process group torchrun describes in the environment (no-op without it)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed()
    if not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" and torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend=backend)
    return Distributed(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def teardown(context: Distributed) -> None:
    if context.enabled and dist.is_initialized():
        dist.destroy_process_group()
