"""Translating text with a loaded model: lines in, exactly one line out per line in.

``Translator`` is the front end the CLI, the evaluation and the server share: it
normalises and encodes text, runs core search (``nmt.search``) and detokenizes. Its
``search`` gives the full hypotheses — n-best, scores, per-token log-probabilities,
attention — for whoever wants more than the text.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from nmt.data.anki import normalize_text
from nmt.errors import NmtError
from nmt.fileio import read_lines, split_lines
from nmt.forced import score_pairs
from nmt.loading import LoadedModel
from nmt.search import Hypothesis, search_sentences


@dataclass
class Heatmap:
    """One sentence's attention, ready to draw: weights (target rows, source columns)."""

    source: str
    translation: str
    src_labels: list[str]  # source pieces + <eos>
    tgt_labels: list[str]  # target pieces (+ <eos> when the hypothesis ended)
    weights: torch.Tensor  # (len(tgt_labels), len(src_labels))


class Translator:
    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded
        self.model, self.src_tok, self.tgt_tok = loaded.model, loaded.src_tok, loaded.tgt_tok
        self.decode, self.device = loaded.config.decode, loaded.device

    def encode(self, lines: list[str]) -> list[list[int]]:
        """Normalised, encoded source lines; blank lines give no ids; overlong ones are clipped."""
        texts = [normalize_text(line) for line in lines]
        src_ids = [ids if text else [] for text, ids in zip(texts, self.src_tok.encode(texts))]
        limit = self.decode.max_input_len
        too_long = sum(len(ids) > limit for ids in src_ids)
        if too_long:
            tqdm.write(
                f"warning: {too_long} input line(s) longer than {limit} subwords clipped (decode.max_input_len)."
            )
            src_ids = [ids[:limit] for ids in src_ids]
        return src_ids

    def search(
        self,
        lines: list[str],
        beam_size: int | None = None,
        n_best: int = 1,
        with_attention: bool = False,
        progress: bool = False,
    ) -> list[list[Hypothesis]]:
        """The ``n_best`` hypotheses of each line, best first."""
        return search_sentences(
            self.model, self.encode(lines), self.decode, self.device, beam_size, n_best, with_attention, progress
        )

    def score(self, sources: list[str], translations: list[str], progress: bool = False) -> list[Hypothesis]:
        """Forced decoding: the log-probability of each given translation of each source
        (``Hypothesis.score`` is the sum of its token log-probabilities, <eos> included)."""
        if len(sources) != len(translations):
            raise NmtError(f"{len(sources)} sources but {len(translations)} translations: give one per source.")
        targets = self.tgt_tok.encode([normalize_text(line) for line in translations])
        return score_pairs(self.model, self.encode(sources), targets, self.decode, self.device, progress)

    def detokenize(self, hypothesis: Hypothesis) -> str:
        return " ".join(self.tgt_tok.decode([hypothesis.tokens])[0].split())

    def translate(self, lines: list[str], beam_size: int | None = None, progress: bool = False) -> list[str]:
        """One output line per input line; an empty (or blank) line gives an empty line."""
        hypotheses = self.search(lines, beam_size, progress=progress)
        return [" ".join(text.split()) for text in self.tgt_tok.decode([best[0].tokens for best in hypotheses])]

    def heatmaps(self, lines: list[str], beam_size: int | None = None) -> list[Heatmap]:
        """Attention of the best translation of each non-blank line."""
        lines = [line for line in lines if line.strip()]
        heatmaps = []
        for line, src_ids, hypotheses in zip(
            lines, self.encode(lines), self.search(lines, beam_size, with_attention=True)
        ):
            best = hypotheses[0]
            src_labels = self.src_tok.labels(src_ids)
            tgt_labels = self.tgt_tok.labels(best.tokens, with_eos=best.ended)
            heatmaps.append(Heatmap(line, self.detokenize(best), src_labels, tgt_labels, best.attention))
        return heatmaps


def read_input_lines(path: str | None) -> list[str]:
    """Lines of a UTF-8 file, or of stdin when ``path`` is None or '-'.

    Bytes that are not UTF-8 become U+FFFD rather than an error: every line still gets
    exactly one output line.
    """
    if path in (None, "-"):
        return split_lines(sys.stdin.buffer.read().decode("utf-8", errors="replace").removeprefix("\ufeff"))
    if not Path(path).is_file():
        raise NmtError(f"Input file not found: {path}")
    return read_lines(path, errors="replace")
