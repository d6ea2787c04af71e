"""Corpus scores with sacrebleu against every reference of each source, on detokenized text."""

from __future__ import annotations

import itertools
import unicodedata

from sacrebleu.metrics import BLEU, CHRF, TER

from nmt.core.errors import NmtError


def reference_streams(references: list[list[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists -> sacrebleu's streams, padded with None (no reference)."""
    width = max((len(refs) for refs in references), default=0)
    return [[refs[i] if i < len(refs) else None for refs in references] for i in range(width)]


def score(hypotheses: list[str], references: list[list[str]], metrics=("bleu", "chrf", "ter")) -> dict:
    """BLEU / chrF / TER of ``hypotheses`` against all ``references[i]`` of each sentence.

    Returns {"bleu": float, "chrf": float, "ter": float, "signature": {...}, "num_sentences",
    "num_references": max refs per sentence}.
    """
    if len(hypotheses) != len(references):
        raise NmtError(f"{len(hypotheses)} hypotheses but {len(references)} reference sets.")
    if not hypotheses:
        raise NmtError("Nothing to score: no sentences.")
    if any(not refs for refs in references):
        raise NmtError("Every sentence needs at least one reference.")
    streams = reference_streams(references)
    scorers = {"bleu": BLEU(), "chrf": CHRF(), "ter": TER()}
    result: dict = {"signature": {}}
    for name in metrics:
        metric = scorers[name]
        result[name] = round(metric.corpus_score(hypotheses, streams).score, 2)  # type: ignore[arg-type]  # None: no reference
        result["signature"][name] = str(metric.get_signature())
    result["num_sentences"] = len(hypotheses)
    result["num_references"] = len(streams)
    return result


def _bare(word: str) -> str:
    """A word without the punctuation at its ends ("आहे." -> "आहे")."""
    start, end = 0, len(word)
    while start < end and unicodedata.category(word[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(word[end - 1]).startswith("P"):
        end -= 1
    return word[start:end]


def repeats_a_word(text: str) -> bool:
    """Whether some word is followed by itself ("चहा चहा आवडतो का?"), punctuation ignored."""
    words = [bare for bare in map(_bare, text.split()) if bare]
    return any(a == b for a, b in itertools.pairwise(words))


def repeated_word_share(texts: list[str]) -> float:
    """Percentage of ``texts`` with a word repeated back to back."""
    return 100.0 * sum(map(repeats_a_word, texts)) / max(1, len(texts))


LENGTH_BUCKETS = ((1, 3), (4, 5), (6, 7), (8, 10), (11, 1000))


def score_by_length(
    hypotheses: list[str], references: list[list[str]], sources: list[str], buckets=LENGTH_BUCKETS
) -> list[dict]:
    """Corpus BLEU per bucket of source length in words (Bahdanau et al.'s Figure 2, in small).

    Returns [{"bucket": "4-5", "sentences": n, "bleu": b}] for every non-empty bucket.
    """
    rows = []
    for low, high in buckets:
        picked = [i for i, src in enumerate(sources) if low <= len(src.split()) <= high]
        if not picked:
            continue
        label = f"{low}-{high}" if high < 1000 else f"{low}+"
        bleu = score([hypotheses[i] for i in picked], [references[i] for i in picked], metrics=("bleu",))["bleu"]
        rows.append({"bucket": label, "sentences": len(picked), "bleu": bleu})
    return rows
