"""Regularisers applied to training batches (not to the model), so inference never sees them."""

from __future__ import annotations

import torch

from nmt.data.batching import Batch
from nmt.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID


def word_dropout(batch: Batch, p: float) -> Batch:
    """Each real source token and target *input* token becomes <unk> with probability ``p``
    (word dropout: Sennrich & Zhang, 2019; Gal & Ghahramani, 2016). Padding, <bos>, <eos>
    and the targets the loss compares with are never changed."""
    if p <= 0.0:
        return batch

    def drop(ids: torch.Tensor) -> torch.Tensor:
        droppable = (ids != PAD_ID) & (ids != BOS_ID) & (ids != EOS_ID)
        return ids.masked_fill(droppable & (torch.rand(ids.shape, device=ids.device) < p), UNK_ID)

    return Batch(drop(batch.src), batch.src_lengths, drop(batch.tgt_in), batch.tgt_out)
