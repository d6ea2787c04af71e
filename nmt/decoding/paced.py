"""A search model whose decoding steps run at the CPU thread count a ``ThreadTuner`` measures.

Decoding is small work: a whole test set takes a second or two on a CPU, too few batches to
compare thread counts by. Each decoding step is a unit instead (its work: the rows it advances),
so a tuner sees hundreds in one file and alternates the counts step by step while it measures
(nmt/core/threads.py). Search sees the model it wraps, unchanged.
"""

from __future__ import annotations

import torch

from nmt.core.threads import ThreadTuner
from nmt.decoding.search import SearchModel


class PacedModel:
    """``model`` with each ``decode_step`` timed by ``tuner`` and run at its count."""

    def __init__(self, model: SearchModel, tuner: ThreadTuner):
        self.model, self.tuner = model, tuner
        self.wrapped = model  # what search puts in eval mode (nmt.decoding.search.evaluating)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor):
        self.tuner.apply()
        return self.model.encode(src, src_lengths)

    def decode_step(self, prev_tokens: torch.Tensor, state, memory):
        with self.tuner.unit(prev_tokens.size(0)):
            return self.model.decode_step(prev_tokens, state, memory)
