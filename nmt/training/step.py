"""One training update: loss (with guided alignment's term where asked), backward, clipping, and
a skip for non-finite values; and word dropout, applied to a batch before it (not to the model,
so inference never sees it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from nmt.config.schema import TrainConfig
from nmt.core.device import FLOAT32, Precision
from nmt.core.errors import NmtError
from nmt.data.batching import Batch
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from nmt.model.base import TranslationModel


def token_loss(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over non-pad target tokens; logits (B, T, V), targets (B, T).

    ``F.cross_entropy``'s function, with label smoothing as it defines it (the smoothed share
    spread over all V classes), computed in float32 by ``TokenLoss``."""
    return TokenLoss.apply(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), label_smoothing)


class TokenLoss(torch.autograd.Function):
    """Cross-entropy from the log-sum-exp of each row, with its gradient written directly,
    softmax − (1 − ε)·onehot − ε/V, into one (N, V) tensor: no log-softmax kept, no zero-filled
    gradient of it, no second term for the smoothing (about a third of the loss's time, which is
    a few per cent of a step's). Equal to ``F.cross_entropy(..., ignore_index=PAD_ID,
    reduction="sum", label_smoothing=ε)`` in value and gradient (tests/test_model.py)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, smoothing: float) -> torch.Tensor:
        """logits (N, V) float32, targets (N,) -> the summed loss of the rows whose target is not padding."""
        real = targets.ne(PAD_ID)  # (N,)
        log_total = torch.logsumexp(logits, dim=-1)  # (N,) log Σ_v exp(x_v)
        per_token = log_total - logits.gather(1, targets.unsqueeze(1)).squeeze(1)  # −log p(target)
        if smoothing:  # ε · the mean over v of −log p(v)
            per_token = (1.0 - smoothing) * per_token + smoothing * (log_total - logits.mean(dim=-1))
        ctx.save_for_backward(logits, targets, log_total, real)
        ctx.smoothing = smoothing
        return per_token.masked_fill(~real, 0.0).sum()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        logits, targets, log_total, real = ctx.saved_tensors
        smoothing = ctx.smoothing
        grads = (logits - log_total.unsqueeze(1)).exp_()  # softmax (N, V)
        if smoothing:
            grads.sub_(smoothing / logits.size(1))
        grads.scatter_add_(1, targets.unsqueeze(1), grads.new_full((targets.size(0), 1), smoothing - 1.0))
        grads.mul_((grad * real).unsqueeze(1))  # padding rows: no gradient
        return grads, None, None


def alignment_loss(attention: torch.Tensor, guide: torch.Tensor) -> torch.Tensor:
    """Guided alignment (Chen et al. 2016; Garg et al. 2019): the cross-entropy between the
    reference attention ``guide`` (B, T, S) and the model's ``attention`` (B, T, S), summed over
    the target positions that have links (the others' rows of ``guide`` are zero), in float32."""
    return -(guide * attention.float().clamp(min=1e-9).log()).sum()


class StepResult(NamedTuple):
    loss_sum: torch.Tensor  # summed token loss (device tensor)
    nonfinite: torch.Tensor  # bool: the update was skipped (a loss scaler's overflow included)
    grad_norm: torch.Tensor  # gradient norm before clipping (not finite where the update was skipped)


def train_step(
    model: torch.nn.Module,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    tokens: float | torch.Tensor,
    precision: Precision = FLOAT32,
    scaler: torch.amp.GradScaler | None = None,
    agree: Callable[[torch.Tensor], torch.Tensor] = lambda flag: flag,
) -> StepResult:
    """One update on ``batch``, its loss divided by ``tokens`` (a number, or a device tensor
    under DDP). Returns the loss, whether the update was skipped, and the gradient norm, as
    device tensors (no host sync).

    Under ``precision``'s autocast the forward pass runs in bf16 or fp16 (its recurrences in
    float32); the loss is computed in float32. With fp16, ``scaler`` scales the loss so that
    small gradients do not underflow, and skips the update itself when the unscaled gradients
    are not finite (it then lowers the scale).

    A non-finite loss or gradient norm skips the update, and is counted as such (with a loss
    scaler too: NaN gradients under a finite loss would otherwise make it halve the scale
    forever, unseen). ``agree`` makes the flag true on every rank if it is on one (under
    DDP): all ranks skip alike. On CUDA the fused optimizer reads the flag as ``found_inf`` on
    the device (no host sync); elsewhere it is checked on the host, which costs nothing on a CPU.
    """
    optimizer.zero_grad(set_to_none=True)
    amp_dtype = precision.autocast
    guided = cfg.guided_alignment > 0 and batch.guide is not None
    with torch.autocast(batch.src.device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
        if guided:
            if not isinstance(model, TranslationModel):  # DDP's wrapper syncs gradients through forward alone
                raise NmtError("train.guided_alignment trains in one process: run `nmt train` without torchrun.")
            logits, attention = model.guided_forward(batch.src, batch.src_lengths, batch.tgt_in, cfg.teacher_forcing)
        else:
            logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in, cfg.teacher_forcing)
    loss_sum = token_loss(logits, batch.tgt_out, cfg.label_smoothing)
    loss = loss_sum / tokens
    if guided:
        assert batch.guide is not None
        loss = loss + cfg.guided_alignment * alignment_loss(attention, batch.guide) / tokens
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if scaler is not None:
        scaler.unscale_(optimizer)
    max_norm = cfg.clip_grad_norm if cfg.clip_grad_norm > 0 else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    # the gradients are all-reduced already (every rank has the same norm); the loss is this rank's
    nonfinite = agree(~(torch.isfinite(grad_norm) & torch.isfinite(loss_sum)))
    if scaler is not None:
        scaler.step(optimizer)  # skipped when the gradients are not finite, without a host sync for fused optimizers
        scaler.update()
        return StepResult(loss_sum.detach(), nonfinite, grad_norm.detach())
    if loss_sum.is_cuda and optimizer.defaults.get("fused"):
        optimizer.found_inf = nonfinite.float()  # type: ignore[attr-defined]  # read by the fused step
        optimizer.step()
    elif not bool(nonfinite):
        optimizer.step()
    return StepResult(loss_sum.detach(), nonfinite, grad_norm.detach())


def word_dropout(batch: Batch, p: float) -> Batch:
    """Each real source token and target *input* token becomes <unk> with probability ``p``
    (word dropout: Sennrich & Zhang, 2019; Gal & Ghahramani, 2016). Padding, <bos>, <eos>
    and the targets the loss compares with are never changed."""
    if p <= 0.0:
        return batch

    def drop(ids: torch.Tensor) -> torch.Tensor:
        droppable = (ids != PAD_ID) & (ids != BOS_ID) & (ids != EOS_ID)
        return ids.masked_fill(droppable & (torch.rand(ids.shape, device=ids.device) < p), UNK_ID)

    return Batch(drop(batch.src), batch.src_lengths, drop(batch.tgt_in), batch.tgt_out, batch.guide)
