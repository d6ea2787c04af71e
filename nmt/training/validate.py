"""Validation during training: dev loss and perplexity, and greedy BLEU/chrF against every
dev reference, decoded by core search.

Under torchrun the ranks share the work: each takes every world-th dev pair and source, and
the loss sums and translations are gathered, so every rank gets the same scores (and no rank
waits alone in a collective while rank 0 decodes the whole set). A stop signal abandons a
validation between chunks: a stopping job reaches its checkpoint in seconds, not after the
dev set (torchrun kills its workers 30 s after its SIGTERM).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch

from nmt.config.schema import Config
from nmt.data.batching import Example, collate, sorted_batches
from nmt.data.tokenizer import Tokenizer
from nmt.decoding.scoring import score
from nmt.decoding.search import search_sentences
from nmt.training.data import TrainData
from nmt.training.distributed import Distributed
from nmt.training.step import token_loss

CHUNK = 1024  # sentences (per rank) between two collective looks at the stop flags


class ValidationStopped(Exception):
    """A stop signal arrived during a validation, which was abandoned."""


@torch.no_grad()
def dev_loss_sums(
    model: torch.nn.Module, examples: Sequence[Example], batch_size: int, device: torch.device
) -> tuple[torch.Tensor, int]:
    """Summed cross-entropy (a device scalar: the caller reads it once, not each batch) and
    target tokens (counted on the host's batch) of ``examples`` (teacher forcing, no dropout)."""
    model.eval()
    total, tokens = torch.zeros((), device=device), 0
    for indices in sorted_batches([len(ex.src_ids) for ex in examples], batch_size):
        batch = collate([examples[i] for i in indices])
        tokens += batch.num_tgt_tokens
        batch = batch.to(device)
        logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
        total += token_loss(logits, batch.tgt_out)
    return total, tokens


def validate(
    model,
    data: TrainData,
    config: Config,
    tgt_tok: Tokenizer,
    device: torch.device,
    ddp: Distributed | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> dict[str, float]:
    """{dev_loss, dev_ppl, dev_bleu, dev_chrf} of ``model`` (greedy decoding), on every rank.

    ``stop`` (this process's stop flag) is read before each batch: once it is set, this rank
    does no more work, and at the next chunk's end (a collective under torchrun, made as
    often on every rank) all ranks raise ``ValidationStopped`` together."""
    ddp = ddp or Distributed()
    pairs = [data.dev[i] for i in range(ddp.rank, len(data.dev), ddp.world)]
    loss_sum, tokens = 0.0, 0.0
    for chunk in _chunks(pairs, len(data.dev), ddp.world):
        chunk_loss = torch.zeros((), device=device)  # read once a chunk, not once a batch
        for indices in sorted_batches([len(ex.src_ids) for ex in chunk], config.train.batch_size):
            if stop():
                break
            batch_loss, batch_tokens = dev_loss_sums(model, [chunk[i] for i in indices], len(indices), device)
            chunk_loss, tokens = chunk_loss + batch_loss, tokens + batch_tokens
        loss_sum += chunk_loss.item()
        if ddp.any(stop(), device):
            raise ValidationStopped
    loss_sum, tokens = ddp.sum([loss_sum, tokens], device)
    rows = sorted(range(ddp.rank, len(data.dev_sources), ddp.world), key=lambda r: -len(data.dev_sources[r]))
    translations: list[list[int] | None] = [None] * len(data.dev_sources)
    found_rows, found = [], []
    for chunk in _chunks(rows, len(data.dev_sources), ddp.world):
        for start in range(0, len(chunk), config.decode.batch_size):  # a search batch at a time (longest first)
            if stop():
                break
            batch = chunk[start : start + config.decode.batch_size]
            hypotheses = search_sentences(
                model, [data.dev_sources[r] for r in batch], config.decode.with_beam(1), device
            )
            found_rows += batch
            found += [best[0].tokens for best in hypotheses]
        if ddp.any(stop(), device):
            raise ValidationStopped
    for rank_rows, rank_found in ddp.all_gather((found_rows, found)):
        for row, ids in zip(rank_rows, rank_found, strict=True):
            translations[row] = ids
    scores = score(tgt_tok.decode([ids or [] for ids in translations]), data.dev_references, metrics=("bleu", "chrf"))
    loss = loss_sum / max(1, tokens)
    return {
        "dev_loss": loss,
        "dev_ppl": math.exp(min(loss, 50)),
        "dev_bleu": scores["bleu"],
        "dev_chrf": scores["chrf"],
    }


def _chunks(items: list, total: int, world: int) -> list[list]:
    """``items`` (this rank's share of ``total``) in as many chunks as every rank makes."""
    count = max(1, math.ceil(total / (CHUNK * world)))
    size = max(1, math.ceil(len(items) / count))
    return [items[i * size : (i + 1) * size] for i in range(count)]


def validation_seconds(model, data: TrainData, config: Config, device: torch.device, sample: int = 32) -> float:
    """About how long one ``validate`` takes in one process: the loss and greedy decoding of
    ``sample`` dev pairs and sources spread over the set, timed and scaled to all of them."""
    pairs = [data.dev[i] for i in _spread(len(data.dev), sample)]
    sources = [data.dev_sources[i] for i in _spread(len(data.dev_sources), sample)]
    start = time.perf_counter()
    dev_loss_sums(model, pairs, config.train.batch_size, device)
    middle = time.perf_counter()
    found = search_sentences(model, sources, config.decode.with_beam(1), device)
    end = time.perf_counter()
    loss_seconds = (middle - start) * len(data.dev) / max(1, len(pairs))
    decode_seconds = (end - middle) * len(data.dev_sources) / max(1, len(sources))
    # Greedy decoding costs by the step: an untrained model decodes to the length limit, a trained
    # one about as long as the references. Timed at the run's start, the first read 3.7 min where
    # the run's validations took 15 s; counted at the references' length, the estimate holds for both.
    decoded = sum(len(hypotheses[0].tokens) + 1 for hypotheses in found)
    expected = len(sources) * (sum(len(pair.tgt_ids) + 1 for pair in pairs) / max(1, len(pairs)))
    return loss_seconds + decode_seconds * min(1.0, expected / max(1, decoded))


def _spread(total: int, count: int) -> range:
    """About ``count`` indices spread evenly over ``range(total)``."""
    return range(0, total, max(1, total // max(1, count)))
