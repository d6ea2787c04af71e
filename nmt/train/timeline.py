"""``<run_dir>/timeline.jsonl``: the attention forming over a training run.

At every epoch's validation the Trainer translates a few probe sentences (``train.probes``: the
first N distinct dev sources of 6 to 20 subwords, long enough to show reordering) greedily
with the weights just validated and appends one record: epoch, step, dev BLEU and, per
probe, its source and target subwords, the translation and the attention matrix. The
page's timeline view scrubs through the records,
``nmt plot`` draws them as a strip of heatmaps, and an exported package carries the file.
"""

from __future__ import annotations

from pathlib import Path

import torch

from nmt.config.schema import Config
from nmt.data.tokenizer import BOS_ID, EOS_ID, Tokenizer
from nmt.decoding.search import evaluating, search_sentences
from nmt.train.metrics import MetricsFile
from nmt.train.state import Progress

PROBE_LENGTHS = (6, 20)  # subwords: a probe long enough to show an alignment, short enough to read


def probe_sources(dev_sources: list[list[int]], count: int) -> list[list[int]]:
    """The first ``count`` dev sources whose length is within PROBE_LENGTHS (the shortest
    first-come ones are often one word, "Jump!"), topped up with the others in order."""
    low, high = PROBE_LENGTHS
    fitting = [ids for ids in dev_sources if low <= len(ids) <= high]
    others = [ids for ids in dev_sources if ids and not low <= len(ids) <= high]
    return (fitting + others)[:count]


def probe_translations(
    model, sources: list[list[int]], config: Config, tokenizers: tuple[Tokenizer, Tokenizer], device: torch.device
) -> list[dict]:
    """Each probe's subwords, greedy translation and attention (rows: target subwords and
    <eos>; columns: source subwords and <eos>)."""
    src_tok, tgt_tok = tokenizers
    found = search_sentences(model, sources, config.decode.with_beam(1), device, with_attention=True)
    probes = []
    for ids, hypotheses in zip(sources, found):
        best = hypotheses[0]
        attention = best.attention.tolist() if best.attention is not None else []
        probe = {
            "source_tokens": src_tok.labels(ids),
            "tokens": tgt_tok.labels(best.tokens, with_eos=best.ended),
            "translation": " ".join(tgt_tok.decode([best.tokens])[0].split()),
            "attention": [[round(w, 5) for w in row] for row in attention],
        }
        if model.has_heads:  # each head of each layer (a Transformer's), for the lab's head picker
            src = torch.tensor([[*ids, EOS_ID]], device=device)  # (1, S): <eos> closes the source
            tgt_in = torch.tensor([[BOS_ID, *best.tokens]], device=device)[:, : len(probe["tokens"])]  # (1, T)
            with evaluating(model):
                heads = model.every_head(src, tgt_in).cpu()  # (layers, heads, T, S)
            probe["heads"] = [
                [[[round(w, 5) for w in row] for row in head] for head in layer] for layer in heads.tolist()
            ]
        probes.append(probe)
    return probes


class Timeline(MetricsFile):
    """The records, read and written like metrics.jsonl (trimmed on resume, reset on a new run)."""

    @staticmethod
    def included(record: dict, progress: Progress) -> bool:
        """Entries of the epochs the checkpoint completed (probes are recorded at an epoch's end, or
        where the budget ended it: that epoch's end is recorded again)."""
        return record["epoch"] <= progress.epoch


def read_timeline(path: Path) -> list[dict]:
    return Timeline(path).read()
