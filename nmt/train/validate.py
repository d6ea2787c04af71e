"""Validation during training: dev loss and perplexity, and greedy BLEU/chrF against every
dev reference, decoded by core search."""

from __future__ import annotations

import math
import time

import torch

from nmt.config import Config
from nmt.data.batching import Example, collate, sorted_batches
from nmt.scoring import score
from nmt.search import search_sentences
from nmt.tokenizer import Tokenizer
from nmt.train.data import TrainData
from nmt.train.step import token_loss


@torch.no_grad()
def dev_loss(model: torch.nn.Module, examples: list[Example], batch_size: int, device: torch.device) -> float:
    """Mean per-token cross-entropy on ``examples`` (teacher forcing, no dropout)."""
    model.eval()
    total, tokens = 0.0, 0
    for indices in sorted_batches([len(ex.src_ids) for ex in examples], batch_size):
        batch = collate([examples[i] for i in indices]).to(device)
        logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
        total += token_loss(logits, batch.tgt_out).item()
        tokens += batch.num_tgt_tokens
    return total / max(1, tokens)


def validate(model, data: TrainData, config: Config, tgt_tok: Tokenizer, device: torch.device) -> dict[str, float]:
    """{dev_loss, dev_ppl, dev_bleu, dev_chrf} of ``model`` (greedy decoding)."""
    loss = dev_loss(model, data.dev, config.train.batch_size, device)
    found = search_sentences(model, data.dev_sources, config.decode, device, beam_size=1)
    hypotheses = tgt_tok.decode([best[0].tokens for best in found])
    scores = score(hypotheses, data.dev_references, metrics=("bleu", "chrf"))
    return {
        "dev_loss": loss,
        "dev_ppl": math.exp(min(loss, 50)),
        "dev_bleu": scores["bleu"],
        "dev_chrf": scores["chrf"],
    }


def validation_seconds(model, data: TrainData, config: Config, device: torch.device, sample: int = 32) -> float:
    """About how long one ``validate`` takes: the loss and greedy decoding of ``sample`` dev
    pairs and sources spread over the set, timed and scaled to all of them."""
    pairs = [data.dev[i] for i in _spread(len(data.dev), sample)]
    sources = [data.dev_sources[i] for i in _spread(len(data.dev_sources), sample)]
    start = time.perf_counter()
    dev_loss(model, pairs, config.train.batch_size, device)
    middle = time.perf_counter()
    search_sentences(model, sources, config.decode, device, beam_size=1)
    end = time.perf_counter()
    loss_seconds = (middle - start) * len(data.dev) / max(1, len(pairs))
    decode_seconds = (end - middle) * len(data.dev_sources) / max(1, len(sources))
    return loss_seconds + decode_seconds


def _spread(total: int, count: int) -> range:
    """About ``count`` indices spread evenly over ``range(total)``."""
    return range(0, total, max(1, total // max(1, count)))
