"""Ensembles: several models that share a target vocabulary, decoded as one (of any families:
an RNN and a Transformer make one ensemble).

Each step averages the members' log-probabilities. Those averages are logits in the sense
of the ``SearchModel`` protocol (``nmt.decoding.search``): search normalises them, which makes the
ensemble's distribution the normalised geometric mean of its members'. ``Ensemble`` has
the same ``encode`` / ``decode_step`` as one model, so search does not know which it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from nmt.model.base import TranslationModel


@dataclass
class EnsembleParts:
    """One memory or state per member; ``select`` applies to each."""

    parts: list

    def select(self, index: torch.Tensor) -> EnsembleParts:
        return EnsembleParts([part.select(index) for part in self.parts])


class Ensemble(nn.Module):
    def __init__(self, models: Sequence[TranslationModel]):
        super().__init__()
        self.members = nn.ModuleList(models)

    @property
    def models(self) -> list[TranslationModel]:
        """The members, as the models they are (a ModuleList only knows Modules)."""
        return cast(list[TranslationModel], list(self.members))

    @property
    def config(self):
        """The first member's model config (what plotting and messages look at)."""
        return self.models[0].config

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[EnsembleParts, EnsembleParts]:
        encoded = [member.encode(src, src_lengths) for member in self.models]
        return EnsembleParts([m for m, _ in encoded]), EnsembleParts([s for _, s in encoded])

    def decode_step(self, prev_tokens: torch.Tensor, state: EnsembleParts, memory: EnsembleParts):
        """Logits (B, V) = the members' mean log-probabilities, the new states, mean attention (B, S)."""
        outputs = [
            member.decode_step(prev_tokens, s, m) for member, s, m in zip(self.models, state.parts, memory.parts)
        ]
        log_probs = torch.stack([torch.log_softmax(logits, dim=-1) for logits, _, _ in outputs]).mean(0)
        weights = torch.stack([w for _, _, w in outputs]).mean(0)
        return log_probs, EnsembleParts([s for _, s, _ in outputs]), weights

    def forward(self, src, src_lengths, tgt_in, teacher_forcing: float = 1.0):
        """Teacher-forced: mean log-probabilities (B, T, V) and mean attention (B, T, S)."""
        outputs = [member(src, src_lengths, tgt_in, teacher_forcing) for member in self.members]
        log_probs = torch.stack([torch.log_softmax(logits.float(), dim=-1) for logits, _ in outputs]).mean(0)
        shown = [attn for _, attn in outputs if attn is not None]  # a Transformer in training makes none
        return log_probs, torch.stack(shown).mean(0) if shown else None
