"""A third engine: a package's CTranslate2 model (``nmt export --ctranslate2``), which searches
whole sentences itself (``SearchesItself``) in C++, int8 where the model was exported so.

What this toolkit's decoding settings become in CTranslate2's ``translate_batch``:

    decode.beam_size, n-best            beam_size, num_hypotheses
    decode.length_penalty (power)       length_penalty (log p / length^α)
    decode.coverage_penalty             coverage_penalty (Wu et al.)
    decode.max_len_ratio, offset        max_decoding_length, per group of equal limits
    <pad>, <bos> never chosen           suppress_sequences
    attention (the page's heatmap)      return_attention: the last layer's heads averaged
    decode.no_repeat_span               kept by searching again: CTranslate2 has no such rule (its
                                        no_repeat_ngram_size bans any n-gram seen before, another
                                        rule), so a sentence whose output repeats a span back to
                                        back is searched again by the package's PyTorch model

What it does not do is refused by name (``unsupported``): the GNMT length form, MBR, ensembles
(one package), and everything that feeds the decoder a given target (forced scoring, prefixes,
the lab's next-token alternatives): run those on torch or onnx.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nmt.config.paths import PackagePaths
from nmt.config.schema import Config, DecodeConfig
from nmt.core.errors import NmtError
from nmt.core.progress import progress_bar
from nmt.core.registry import ENGINES
from nmt.data.tokenizer import BOS, EOS, PAD, Tokenizer
from nmt.decoding.rules import Ranking, max_output_lengths, repeats_a_span
from nmt.decoding.search import Hypothesis, SearchModel, search_sentences
from nmt.model.transformer.ctranslate2_spec import ctranslate2_module
from nmt.runtime.ctranslate2_files import check_model_file
from nmt.runtime.loading import Engine, LoadedModel, load_package, package_parts
from nmt.runtime.package_files import check_folder

FOLDER = "ctranslate2"  # the CTranslate2 model's folder inside a package
STEPS_REFUSED = (
    "CTranslate2 searches whole sentences: forced scoring, prefixes and the lab's next-token alternatives feed the "
    "decoder a given target, which runs on --engine torch or onnx."
)


def unsupported(decode: DecodeConfig) -> str | None:
    """The first decoding setting CTranslate2 cannot honour, said with what to do instead."""
    if decode.length_form != "power":
        return f"decode.length_form {decode.length_form!r} (CTranslate2's length penalty is length^α: use power)"
    if decode.mbr:
        return "decode.mbr (MBR chooses among n-best lists on --engine torch or onnx)"
    if decode.strategy not in ("auto", "greedy", "beam"):
        return f"decode.strategy {decode.strategy!r} (a plugin's search runs on --engine torch or onnx)"
    return None


class CTranslate2Model:
    """A package's CTranslate2 model as something that searches whole sentences (CPU)."""

    def __init__(
        self,
        folder: Path,
        config: Config,
        tokenizers: tuple[Tokenizer, Tokenizer],
        parameters: int = 0,
        pytorch: Callable[[], SearchModel] | None = None,
    ):
        ctranslate2 = ctranslate2_module()
        self.config = config.model  # what a torch model's config is: its settings
        self.parameter_count = parameters
        self.src_tok, self.tgt_tok = tokenizers
        self.threads, self.translator = fastest_translator(ctranslate2, folder, self.src_tok, torch.get_num_threads())
        self._load_pytorch = pytorch  # the package's own model, loaded the first time the no-repeat rule needs it
        self._pytorch: SearchModel | None = None
        self.searched_again = 0  # sentences the no-repeat rule sent to PyTorch, since loading

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[Any, Any]:
        raise NmtError(STEPS_REFUSED)

    def decode_step(self, prev_tokens: torch.Tensor, state: Any, memory: Any) -> tuple[torch.Tensor, Any, torch.Tensor]:
        raise NmtError(STEPS_REFUSED)

    def searches_itself(
        self,
        sentence_ids: list[list[int]],
        decode: DecodeConfig,
        n_best: int = 1,
        with_attention: bool = False,
        progress: bool = False,
        token_scores: bool = False,
    ) -> list[list[Hypothesis]]:
        """Subword ids of many sentences -> the ``n_best`` hypotheses of each, in their order; each
        token's log-probability scored by CTranslate2 where it is shown (``token_scores``, the
        page's attention, n-best lists), else left out (``translate`` writes text only)."""
        refused = unsupported(decode)
        if refused is not None:
            raise NmtError(f"--engine ctranslate2 cannot apply {refused}.")
        sentences = [self.src_tok.id_to_piece(ids) for ids in sentence_ids]  # CTranslate2 reads pieces
        results: list[list[Hypothesis]] = [[Hypothesis([], [], 0.0)] for _ in sentences]
        groups: dict[int, list[int]] = defaultdict(list)  # output limit -> sentences (each keeps its own)
        limits = max_output_lengths([len(s) + 1 for s in sentences], decode.max_len_ratio, decode.max_len_offset)
        for row, (pieces, limit) in enumerate(zip(sentences, limits)):
            if pieces:
                groups[limit].append(row)
        bar = progress_bar(sum(len(rows) for rows in groups.values()), "translate", "sent", progress)
        start = self.tgt_tok.id_to_piece(self.tgt_tok.code_ids)  # the target's language code, if any: given
        for limit, rows in sorted(groups.items()):
            found = self.translator.translate_batch(
                [sentences[r] for r in rows],
                target_prefix=[start] * len(rows) if start else None,
                max_batch_size=decode.batch_size,
                beam_size=decode.beam_size,
                num_hypotheses=n_best,
                length_penalty=decode.length_penalty,
                coverage_penalty=decode.coverage_penalty,
                max_decoding_length=limit,
                min_decoding_length=0,  # an empty translation may end at once, as in this toolkit's search
                suppress_sequences=[[PAD], [BOS]],
                return_end_token=True,
                return_scores=True,
                return_attention=with_attention,
            )
            for row, result in zip(rows, found):
                results[row] = self._hypotheses(result, with_attention)
            bar.update(len(rows))
        bar.close()
        again = self._keep_the_no_repeat_rule(sentence_ids, results, decode, n_best, with_attention)
        if token_scores or with_attention or n_best > 1:  # what the page and n-best lists show of each token
            self._score_tokens(sentences, results, Ranking.of(decode), skip=again)
        return results

    def _keep_the_no_repeat_rule(
        self,
        sentence_ids: list[list[int]],
        results: list[list[Hypothesis]],
        decode: DecodeConfig,
        n_best: int,
        with_attention: bool,
    ) -> set[int]:
        """The rows whose hypotheses repeat a span back to back, replaced by the PyTorch model's
        search under ``decode.no_repeat_span`` (what --engine torch gives them). On eng-mar's test
        split at beam 5, 54 of 1,111 sentences with int8 (docs/portable.md)."""
        span = decode.no_repeat_span
        if not span:
            return set()
        rows = [r for r, found in enumerate(results) if any(repeats_a_span(h.tokens, span) for h in found)]
        if not rows:
            return set()
        if self._pytorch is None:
            if self._load_pytorch is None:
                raise NmtError(
                    f"--engine ctranslate2 keeps decode.no_repeat_span {span} by searching again on the package's "
                    "PyTorch model, which this one was made without: --set decode.no_repeat_span=0, or --engine torch."
                )
            self._pytorch = self._load_pytorch()
        redone = search_sentences(
            self._pytorch, [sentence_ids[r] for r in rows], decode, torch.device("cpu"), n_best, with_attention
        )
        for row, found in zip(rows, redone):
            results[row] = found
        self.searched_again += len(rows)
        return set(rows)

    def _hypotheses(self, result: Any, with_attention: bool) -> list[Hypothesis]:
        hypotheses = []
        for index, pieces in enumerate(result.hypotheses):
            ended = bool(pieces) and pieces[-1] == EOS
            tokens = self.tgt_tok.piece_ids(pieces[:-1] if ended else pieces)
            steps = len(tokens) + ended
            attention = _with_eos_column(torch.tensor(result.attention[index])[:steps]) if with_attention else None
            # per-token log-probabilities are filled by ``_score_tokens`` wherever they are shown
            # (``token_scores``); a search that only writes text keeps the total on its last step
            logprobs = [0.0] * (steps - 1) + [result.scores[index]] if steps else []
            hypotheses.append(Hypothesis(tokens, logprobs, result.scores[index], attention))
        return hypotheses

    def _score_tokens(
        self, sentences: list[list[str]], results: list[list[Hypothesis]], ranking: Ranking, skip: set[int]
    ) -> None:
        """Each hypothesis's per-token log-probabilities, scored by CTranslate2 (<eos> included where
        it ended), and its score ranked from them as this toolkit's search ranks (CTranslate2's own
        renormalises over the tokens it may choose: <pad> and <bos> are suppressed). The rows in
        ``skip`` were searched by PyTorch, which scored them."""
        pairs = [(row, h) for row, found in enumerate(results) for h in found if sentences[row] and row not in skip]
        if not pairs:
            return
        targets = [self.tgt_tok.id_to_piece(h.tokens) for _, h in pairs]
        scored = self.translator.score_batch([sentences[row] for row, _ in pairs], targets)
        for (_, hypothesis), result in zip(pairs, scored):
            logprobs = list(result.log_probs)
            hypothesis.token_logprobs = logprobs if hypothesis.ended else logprobs[: len(hypothesis.tokens)]
            covered = hypothesis.attention is not None and ranking.coverage_penalty
            penalty = ranking.coverage(hypothesis.attention.sum(0)) if covered else 0.0  # type: ignore[union-attr]
            hypothesis.score = ranking.score(hypothesis.log_prob, len(hypothesis.token_logprobs), penalty)
        for found in results:
            found.sort(key=lambda h: h.score, reverse=True)


def fastest_translator(ctranslate2: Any, folder: Path, src_tok: Tokenizer, most: int) -> tuple[int, Any]:
    """CTranslate2's translator at the thread count that decodes a probe fastest: 1 or ``most``
    (PyTorch's count: ``--threads N``, or the cores). Measured, because more is not always faster:
    on a 2-core AMD EPYC, CTranslate2's int8 kernels ran beam 5 at 2 threads 24x slower than at one
    (docs/portable.md)."""
    counts = sorted({1, max(1, most)})
    probe = [src_tok.id_to_piece(list(range(4 + i, min(src_tok.vocab_size, 14 + i)))) for i in range(8)]
    timed = []
    for count in counts:
        translator = ctranslate2.Translator(str(folder), device="cpu", intra_threads=count, inter_threads=1)
        if len(counts) == 1:
            return count, translator
        for _ in range(2):  # the second pass is timed: the first warms the kernels up
            started = time.perf_counter()
            translator.translate_batch(probe, beam_size=4, max_decoding_length=16, max_batch_size=1)
            seconds = time.perf_counter() - started
        timed.append((seconds, count, translator))
    _, count, translator = min(timed, key=lambda entry: (entry[0], entry[1]))
    return count, translator


def _with_eos_column(attention: torch.Tensor) -> torch.Tensor:
    """CTranslate2's attention over the source's pieces (steps, S) with the <eos> it added (and
    leaves out of what it returns) put back: (steps, S + 1), each row summing to 1 as a softmax does."""
    if attention.numel() == 0:
        return attention.reshape(0, attention.size(-1) + 1 if attention.dim() == 2 else 1)
    return torch.cat([attention, (1.0 - attention.sum(-1, keepdim=True)).clamp(min=0.0)], dim=-1)


def load_ctranslate2_package(model_dirs: list[Path], device: torch.device) -> LoadedModel:
    """One package's CTranslate2 model, on the CPU whatever ``device`` says."""
    config, src_tok, tgt_tok, manifest = package_parts(model_dirs[0])
    folder = model_dirs[0] / FOLDER
    if not folder.is_symlink() and not (folder / "model.bin").is_file():
        raise NmtError(
            f"{model_dirs[0]} has no CTranslate2 model ({FOLDER}/model.bin missing): make it with "
            f"`nmt export RUN {model_dirs[0]} --ctranslate2`."
        )
    # CTranslate2's C++ loader trusts its files (an edited byte can abort the process): every file is
    # the one exported, and what model.bin declares is what the package's config describes
    check_folder(model_dirs[0], manifest, FOLDER, "CTranslate2's C++ loader")
    check_model_file(folder, config, src_tok, tgt_tok)
    parameters = manifest.get("parameters", 0)
    weights = PackagePaths(model_dirs[0]).weights
    pytorch = (lambda: load_package(model_dirs[0])[1]) if weights.is_file() else None
    model = CTranslate2Model(folder, config, (src_tok, tgt_tok), parameters, pytorch)
    return LoadedModel(config, model, src_tok, tgt_tok, torch.device("cpu"), manifest.get("parent"))


ENGINES.register(
    "ctranslate2", Engine(load_ctranslate2_package, describe="a package's CTranslate2 model (int8 on any CPU)")
)
