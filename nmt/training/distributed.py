"""Data-parallel training under ``torchrun`` (DistributedDataParallel; NCCL on GPUs, gloo on CPU).

``torchrun --nproc_per_node=N -m nmt train --config C`` starts N processes. Each epoch's
bucketed batches are built for the global batch (N x train.batch_size sentences) with the
same seed everywhere, and rank r takes every N-th sentence of each: together the ranks see
exactly the batches a single process with the global batch size would. The loss is
normalised by the global number of target tokens, so the averaged gradient equals the
single-process one. Every rank validates its share of the dev set and gets the gathered
scores, so every rank steps the same LR schedule and stops together. Only rank 0 prepares
data, logs and writes checkpoints; collectives wait ``train.ddp_timeout_minutes`` for it.
Each rank draws its own random numbers (dropout, word dropout, Gumbel noise), seeded by
(train.seed, rank); the model's initial weights come from train.seed alone.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from datetime import timedelta

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
        """One GPU per process under torchrun (``setup`` bound it); CPU stays CPU."""
        if self.enabled and requested.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return requested

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def global_tokens(self, tokens: int, device: torch.device) -> int | torch.Tensor:
        """Target tokens of this step summed over ranks: under DDP a device tensor, which the
        loss is divided by without reading it back (no host sync)."""
        if not self.enabled:
            return tokens
        total = torch.full((1,), float(tokens), device=device)  # filled on the device: no copy from the host
        dist.all_reduce(total)
        return total[0]

    def agree(self, flag: torch.Tensor) -> torch.Tensor:
        """A device bool tensor, true on every rank if it is true on one (a collective, but no
        host sync: the answer stays on the device)."""
        if not self.enabled:
            return flag
        values = flag.to(torch.uint8)
        dist.all_reduce(values, op=dist.ReduceOp.MAX)
        return values.bool()

    def sum(self, values: list[float], device: torch.device) -> list[float]:
        """Each value summed over ranks (one collective)."""
        if not self.enabled:
            return values
        totals = torch.tensor(values, dtype=torch.float32, device=device)  # no float64: MPS has none
        dist.all_reduce(totals)
        return totals.tolist()

    def all_gather(self, obj) -> list:
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        gathered = [None] * self.world
        dist.all_gather_object(gathered, obj)
        return gathered

    def any(self, flag: bool, device: torch.device) -> bool:
        """True on every rank if it is true on one (a stop signal, say)."""
        return self.any_of([flag], device)[0]

    def any_of(self, flags: list[bool], device: torch.device) -> list[bool]:
        """Each flag, true on every rank if it is true on one: one collective (one host sync
        on a GPU) for all of them."""
        if not self.enabled:
            return flags
        values = torch.tensor([int(flag) for flag in flags], device=device)
        dist.all_reduce(values, op=dist.ReduceOp.MAX)
        return [bool(value) for value in values.tolist()]

    def gather(self, obj) -> list | None:
        """Every rank's ``obj``, in rank order, on rank 0 (None elsewhere)."""
        if not self.enabled:
            return [obj]
        gathered = [None] * self.world if self.is_main else None
        dist.gather_object(obj, gathered, dst=0)
        return gathered

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """The module the training step calls: ``model`` itself, or DDP around it under torchrun."""
        if not self.enabled:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def shard(self, indices: list[int]) -> list[int]:
        """This rank's part of a global batch (every world-th sentence)."""
        return indices[self.rank :: self.world] if self.enabled else indices


def setup(requested: torch.device, timeout_minutes: float = 60.0) -> Distributed:
    """Join the process group torchrun describes in the environment (no-op without it). On
    GPUs each rank is bound to its own before the first collective, and NCCL is told which
    (``device_id``), so no rank's communicator lands on GPU 0 by default. A collective waits
    ``timeout_minutes`` for the other ranks (NCCL's own default, 10 minutes, is shorter than
    rank 0's prepare of a large corpus)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    timeout = timedelta(minutes=timeout_minutes)
    if not dist.is_initialized():
        if requested.type == "cuda":
            torch.cuda.set_device(local_rank)
            dist.init_process_group(backend="nccl", device_id=torch.device("cuda", local_rank), timeout=timeout)
        else:
            dist.init_process_group(backend="gloo", timeout=timeout)
    return Distributed(dist.get_rank(), dist.get_world_size(), local_rank)


def teardown(context: Distributed) -> None:
    """Leave the process group while the interpreter is whole. What still holds the group (a
    DDP wrapper in a reference cycle with its Trainer and callbacks) is collected first and
    after: left to the interpreter's exit, gloo's worker threads were seen to outlive the
    objects they work on and abort the process ("terminate called without an active
    exception", after a run that had finished)."""
    if context.enabled and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
        gc.collect()
