"""One training update: loss, backward, clipping, and a skip for non-finite values."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from nmt.config import TrainConfig
from nmt.data.batching import Batch
from nmt.device import FLOAT32, Precision
from nmt.tokenizer import PAD_ID


def token_loss(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over non-pad target tokens; logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        targets.reshape(-1),
        ignore_index=PAD_ID,
        reduction="sum",
        label_smoothing=label_smoothing,
    )


class StepResult(NamedTuple):
    loss_sum: torch.Tensor  # summed token loss (device tensor)
    nonfinite: torch.Tensor  # bool: the update was skipped
    grad_norm: torch.Tensor  # gradient norm before clipping


def train_step(
    model: torch.nn.Module,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    tokens: float | torch.Tensor,
    precision: Precision = FLOAT32,
    scaler: torch.amp.GradScaler | None = None,
) -> StepResult:
    """One update on ``batch``, its loss divided by ``tokens`` (a number, or a device tensor
    under DDP). Returns the loss, whether the update was skipped, and the gradient norm, as
    device tensors (no host sync).

    Under ``precision``'s autocast the forward pass runs in bf16 or fp16 (its recurrences in
    float32); the loss is computed in float32. With fp16, ``scaler`` scales the loss so that
    small gradients do not underflow, and skips the update itself when the scaled gradients
    overflow (it then lowers the scale: an expected event, not counted as non-finite).

    A non-finite loss or gradient norm skips the update: on CUDA the fused optimizer reads
    the flag as ``found_inf`` on the device (no host sync); elsewhere it is checked on the
    host, which costs nothing on a CPU.
    """
    optimizer.zero_grad(set_to_none=True)
    amp_dtype = precision.autocast
    with torch.autocast(batch.src.device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
        logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in, cfg.teacher_forcing)
    loss_sum = token_loss(logits, batch.tgt_out, cfg.label_smoothing)
    loss = loss_sum / tokens
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if scaler is not None:
        scaler.unscale_(optimizer)
    max_norm = cfg.clip_grad_norm if cfg.clip_grad_norm > 0 else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if scaler is not None:
        scaler.step(optimizer)  # skipped on overflow, without a host sync for fused optimizers
        scaler.update()
        nonfinite = ~torch.isfinite(loss_sum)
        return StepResult(loss_sum.detach(), nonfinite, torch.nan_to_num(grad_norm.detach(), posinf=0.0))
    nonfinite = ~(torch.isfinite(grad_norm) & torch.isfinite(loss_sum))
    if loss_sum.is_cuda and optimizer.defaults.get("fused"):
        optimizer.found_inf = nonfinite.float()
        optimizer.step()
    elif not bool(nonfinite):
        optimizer.step()
    return StepResult(loss_sum.detach(), nonfinite, grad_norm.detach())
