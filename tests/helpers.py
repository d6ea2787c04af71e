"""Small model builders shared by tests."""

from __future__ import annotations

import torch

from nmt.config import ModelConfig
from nmt.data.batching import source_tensor
from nmt.model.seq2seq import Seq2Seq


def small_model(vocab: int = 20, dim: int = 16, dropout: float = 0.0, seed: int = 0) -> Seq2Seq:
    torch.manual_seed(seed)
    config = ModelConfig(
        embed_dim=dim, encoder_hidden=dim, decoder_hidden=dim, attention_dim=dim, output_dim=dim, dropout=dropout
    )
    return Seq2Seq(config, vocab, vocab)


def random_sources(n: int, vocab: int = 20, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 8, (n,), generator=gen).tolist()
    ids = [torch.randint(4, vocab, (length,), generator=gen).tolist() for length in lengths]
    return source_tensor(ids)
