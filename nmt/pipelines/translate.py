"""Translating text with a loaded model: lines in, exactly one line out per line in.

``Translator`` is the front end the CLI, the evaluation and the server share: it
normalises and encodes text, runs core search (``nmt.decoding.search``) and detokenizes. Its
``search`` gives the full hypotheses — n-best, scores, per-token log-probabilities,
attention — for whoever wants more than the text.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from nmt.config.schema import DecodeConfig
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines, split_lines
from nmt.core.threads import FixedThreads, ThreadTuner
from nmt.data.batching import source_tensor
from nmt.data.pairs import normalize_text
from nmt.data.related import source_tag
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, tagged
from nmt.decoding.forced import forced_steps, next_tokens, score_pairs
from nmt.decoding.mbr import mbr_choice, utility_function
from nmt.decoding.paced import PacedModel
from nmt.decoding.rules import Ranking
from nmt.decoding.search import Hypothesis, PrefixedModel, SearchesItself, SearchModel, search_sentences
from nmt.runtime.loading import LoadedModel


@dataclass
class Heatmap:
    """One sentence's attention, ready to draw: weights (target rows, source columns)."""

    source: str
    translation: str
    src_labels: list[str]  # source pieces + <eos>
    tgt_labels: list[str]  # target pieces (+ <eos> when the hypothesis ended)
    weights: torch.Tensor  # (len(tgt_labels), len(src_labels))


@dataclass
class Translation:
    """One hypothesis, ready to show."""

    text: str  # detokenized
    score: float  # what search ranked it by (log-probability / length penalty)
    tokens: list[str]  # its subwords, then "<eos>" when it ended
    token_logprobs: list[float]  # log p of each entry of ``tokens``

    @classmethod
    def of(cls, hypothesis: Hypothesis, translator: Translator) -> Translation:
        labels = translator.tgt_tok.labels(hypothesis.tokens, with_eos=hypothesis.ended)
        return cls(translator.detokenize(hypothesis), hypothesis.score, labels, hypothesis.token_logprobs)


@dataclass
class Explanation:
    """A source line with its n-best translations and the attention of the best."""

    source: str
    source_tokens: list[str]  # its subwords, then "<eos>"
    translations: list[Translation]  # best first
    attention: list[list[float]]  # one row per entry of the best's tokens, one column per source token


class Translator:
    """A loaded model as text in, translations out. A model of several targets (``data.related``)
    translates into ``tgt_lang`` (default: its own pair's target, ``data.tgt_lang``). ``threads``:
    the tuner that chooses the CPU threads of each decoding step (``--threads auto``), if any."""

    def __init__(
        self,
        loaded: LoadedModel,
        tgt_lang: str | None = None,
        decode: DecodeConfig | None = None,
        threads: ThreadTuner | FixedThreads | None = None,
    ):
        self.loaded, self.threads = loaded, threads or FixedThreads()
        self.model, self.src_tok, self.tgt_tok = loaded.model, loaded.src_tok, loaded.tgt_tok
        # what search and scoring run: the model, its decoding steps paced by the tuner
        paced = not isinstance(self.model, SearchesItself)  # an engine that searches itself runs its own threads
        self.searched: SearchModel = (
            PacedModel(self.model, self.threads) if isinstance(self.threads, ThreadTuner) and paced else self.model
        )
        # the decoding settings, whole: the model's config's, or a command's (nmt.config.parsing.decoding_settings)
        self.decode, self.device = decode or loaded.config.decode, loaded.device
        data = loaded.config.data
        if tgt_lang is not None and tgt_lang not in data.targets:
            raise NmtError(
                f"--tgt-lang {tgt_lang}: this model translates {data.src_lang} into {', '.join(data.targets)} only."
            )
        self.tgt_lang = tgt_lang or data.tgt_lang
        self.tag = source_tag(data, self.tgt_lang)  # the tag that leads each source, if any

    def source_ids(self, lines: list[str]) -> list[list[int]]:
        """Normalised, encoded source lines (led by the target's tag in a model of several
        targets); blank lines give no ids; overlong ones are clipped."""
        texts = [normalize_text(line) for line in lines]
        src_ids = [ids if text else [] for text, ids in zip(texts, self.src_tok.encode(tagged(texts, self.tag)))]
        limit = self.decode.max_input_len
        too_long = sum(len(ids) > limit for ids in src_ids)
        if too_long:
            tqdm.write(  # stderr: stdout holds the translations, one line per line in
                f"warning: {too_long} input line(s) longer than {limit} subwords clipped (decode.max_input_len).",
                file=sys.stderr,
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
        decode = self.decode.with_beam(beam_size)
        return search_sentences(
            self.searched, self.source_ids(lines), decode, self.device, n_best, with_attention, progress
        )

    def score(self, sources: list[str], translations: list[str], progress: bool = False) -> list[Hypothesis]:
        """Forced decoding: the log-probability of each given translation of each source
        (``Hypothesis.score`` is the sum of its token log-probabilities, <eos> included)."""
        if len(sources) != len(translations):
            raise NmtError(f"{len(sources)} sources but {len(translations)} translations: give one per source.")
        targets = self.tgt_tok.encode([normalize_text(line) for line in translations])
        return score_pairs(self.searched, self.source_ids(sources), targets, self.decode, self.device, progress)

    def explain(
        self,
        lines: list[str],
        beam_size: int | None = None,
        n_best: int = 1,
        prefix: str | list[str] = "",
        with_attention: bool = True,
    ) -> list[Explanation]:
        """Each line's ``n_best`` translations with subwords, per-token log-probabilities and
        (``with_attention``) the best one's attention. A ``prefix`` (text, or target subwords)
        is the start every translation must have: it is read as given (scored, not searched)
        and search continues after it."""
        prefix_ids = self.prefix_ids(prefix)
        if prefix_ids == self.tgt_tok.code_ids:  # no prefix but the language code: search puts it in front
            prefix_ids = []
        model = PrefixedModel(self.searched, prefix_ids) if prefix_ids else self.searched
        src_ids = self.source_ids(lines)
        decode = self.decode.with_beam(beam_size)
        found = search_sentences(model, src_ids, decode, self.device, n_best, with_attention, token_scores=True)
        explanations = []
        for line, ids, hypotheses in zip(lines, src_ids, found):
            if prefix_ids and ids:
                hypotheses = self._after_prefix(ids, prefix_ids, hypotheses)
            best = hypotheses[0].attention if with_attention else None
            explanations.append(
                Explanation(
                    line,
                    self.src_tok.labels(ids) if ids else [],
                    [Translation.of(h, self) for h in hypotheses],
                    best.tolist() if best is not None else [],
                )
            )
        return explanations

    def _after_prefix(self, src_ids: list[int], prefix_ids: list[int], found: list[Hypothesis]) -> list[Hypothesis]:
        """Hypotheses that continued ``prefix_ids``, with the prefix put in front: its tokens,
        their log-probabilities and attention rows; scores recomputed over the whole."""
        src, lengths = source_tensor([src_ids])
        fed = torch.tensor([prefix_ids], device=self.device)
        log_probs, attention, _ = forced_steps(self.model, src.to(self.device), lengths, fed)
        prefix_logprobs = log_probs[0].gather(1, fed[0].unsqueeze(1)).squeeze(1).tolist()
        prefix_rows = attention[0].float().cpu()  # (len(prefix), S)
        ranking = Ranking.of(self.decode)
        whole = []
        for h in found:
            token_logprobs = prefix_logprobs + h.token_logprobs
            rows = prefix_rows if h.attention is None else torch.cat([prefix_rows, h.attention])
            penalty = ranking.coverage(rows.sum(0)) if ranking.coverage_penalty and h.attention is not None else 0.0
            score = ranking.score(sum(token_logprobs), len(token_logprobs), penalty)
            whole.append(Hypothesis(prefix_ids + h.tokens, token_logprobs, score, rows))
        return sorted(whole, key=lambda h: h.score, reverse=True)

    def alternatives(self, line: str, prefix: str | list[str] = "", k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` most probable next subwords after ``prefix`` (the start of a translation of
        ``line``: text, or target subwords), with their log-probabilities, most probable first."""
        prefix_ids = self.prefix_ids(prefix)
        src, lengths = source_tensor(self.source_ids([line]))
        ids, log_probs = next_tokens(self.model, src.to(self.device), lengths, prefix_ids, k)
        return list(zip(self.tgt_tok.labels(ids, with_eos=False), log_probs))

    def prefix_ids(self, prefix: str | list[str]) -> list[int]:
        """Target ids of a prefix given as text (segmented as usual) or as subwords (taken as they
        are), led by the target's language code where the model has one (as every translation is)."""
        code = self.tgt_tok.code_ids
        if isinstance(prefix, str):
            return self.tgt_tok.encode([normalize_text(prefix)])[0] if prefix.strip() else list(code)
        try:
            ids = self.tgt_tok.piece_ids(prefix)
        except KeyError as error:
            raise NmtError(f"{error.args[0]!r} is not a subword of the target vocabulary") from None
        if code and ids[: len(code)] != code:
            ids = code + ids
        special = next((piece for piece, i in zip(prefix, ids) if i in (PAD_ID, BOS_ID, EOS_ID)), None)
        if special is not None:
            raise NmtError(
                f"{special!r} is not a subword a translation holds: <bos> and <pad> never are, and <eos> only ends one"
            )
        return ids

    def detokenize(self, hypothesis: Hypothesis) -> str:
        return " ".join(self.tgt_tok.decode([hypothesis.tokens])[0].split())

    def translate(self, lines: list[str], beam_size: int | None = None, progress: bool = False) -> list[str]:
        """One output line per input line; an empty (or blank) line gives an empty line. With
        ``decode.mbr``, each line's translation is chosen from its n-best by MBR (nmt/decoding/mbr.py)."""
        if self.decode.mbr:
            return self.translate_mbr(lines, beam_size, progress)
        hypotheses = self.search(lines, beam_size, progress=progress)
        return [" ".join(text.split()) for text in self.tgt_tok.decode([best[0].tokens for best in hypotheses])]

    def translate_mbr(self, lines: list[str], beam_size: int | None = None, progress: bool = False) -> list[str]:
        """Beam search for ``decode.mbr`` candidates per line (a beam at least that wide), then
        each line's candidate with the highest expected utility against the others."""
        count = self.decode.mbr
        found = self.search(lines, max(beam_size or self.decode.beam_size, count), n_best=count, progress=progress)
        utility = utility_function(self.decode.mbr_utility)
        chosen = []
        for hypotheses in found:
            texts = [" ".join(text.split()) for text in self.tgt_tok.decode([h.tokens for h in hypotheses])]
            chosen.append(texts[mbr_choice(texts, [h.log_prob for h in hypotheses], utility)])
        return chosen

    def heatmaps(self, lines: list[str], beam_size: int | None = None) -> list[Heatmap]:
        """Attention of the best translation of each non-blank line (``explain``'s, ready to draw)."""
        explained = self.explain([line for line in lines if line.strip()], beam_size)
        return [
            Heatmap(e.source, best.text, e.source_tokens, best.tokens, torch.tensor(e.attention))
            for e, best in ((e, e.translations[0]) for e in explained)
        ]


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
