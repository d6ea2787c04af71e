"""``nmt align``: word alignments out of a model's attention, and from a statistical aligner
(eflomal) to hold them against.

A model's alignment of a sentence pair is read from its attention under forced decoding (the
target fed as given, as aligners read pairs): the weights are summed over each word's subwords
on both sides and each target word is linked to the source word it attends to most
(``nmt.data.alignments.word_links``). Which step's attention stands for a target word is a
choice: the step that produces it, or the step where it is the decoder's input (Chen et al.
2020's "Shift-Att", which they found better for a Transformer); ``step`` chooses, "produced" by
default: on eng-mar's test pairs against eflomal it agreed far better, for the RNN and for a
Transformer alike (docs/alignment.md). A family with
heads aligns from one decoder layer, its heads averaged (``--layer``, ``--heads``; default its
``aligning_layer``, and of a model trained with ``train.guided_alignment``, the head it guided).

The reference aligner is eflomal (Östling & Tiedemann 2016), run both ways over the pairs (and
the run's training pairs, which give it the statistics a few hundred pairs lack) and
symmetrised by grow-diag-final-and: a silver reference, not a gold one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nmt import install_hint
from nmt.config.paths import prepared_paths, run_paths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import write_lines_atomic
from nmt.data.alignments import (
    WORD_START,
    Links,
    agreement,
    check_links_fit,
    eflomal_alignments,
    eflomal_installed,
    kept_eflomal_alignments,
    word_links,
    word_weights,
)
from nmt.data.pairs import normalize_text
from nmt.data.references import ReferenceSet
from nmt.data.tokenizer import EOS
from nmt.decoding.alignment import attention_alignments, default_heads, forced_attention, piece_words
from nmt.model.base import TranslationModel
from nmt.pipelines.lab_views import Alignment
from nmt.pipelines.translate import Translator


def aligning_model(translator: Translator) -> TranslationModel:
    """The one PyTorch model whose attention is read."""
    model = translator.model
    if not isinstance(model, TranslationModel):
        raise NmtError(
            "Alignments read one PyTorch model's attention: load a run or a package with --engine torch, "
            "one checkpoint (not an ensemble)."
        )
    return model


def model_alignments(
    translator: Translator,
    sources: Sequence[str],
    targets: Sequence[list[int]],
    layer: int | None = None,
    heads: list[int] | None = None,
    step: str = "produced",
) -> list[Links]:
    """Each pair's links from the model's attention: ``sources`` as text, ``targets`` as target
    subword ids (``target_ids`` of text; a translation's own tokens)."""
    model = aligning_model(translator)
    if heads is None and layer is None:
        heads = default_heads(model, bool(translator.loaded.config.train.guided_alignment))
    tokenizers = (translator.src_tok, translator.tgt_tok)
    src_ids = translator.source_ids(list(sources))
    return attention_alignments(model, tokenizers, src_ids, list(targets), translator.device, layer, heads, step)


def gold_agreement(
    gold: list[Links],
    sources: list[str],
    targets: list[str] | None,
    written: list[str],
    found: list[Links],
    where: str,
) -> str:
    """``nmt align --reference``'s line: the links ``found`` against a gold file's, each gold link
    checked to name words its pair has (the targets, or the translations ``written``)."""
    aligned = targets if targets is not None else [line.split(" ||| ")[0] for line in written]
    check_links_fit(gold, sources, aligned, where)
    return agreement(gold, found).describe()


def refuse_attention_choices(layer: int | None, heads: str, step: str) -> None:
    """--layer, --heads and --step choose the model's attention: refused with the reference aligner,
    which reads none (they were ignored silently)."""
    given = [("--layer", layer is not None), ("--heads", bool(heads.strip())), ("--step", step != "produced")]
    ignored = [name for name, chosen in given if chosen]
    if ignored:
        raise NmtError(f"{', '.join(ignored)} choose the model's attention; --aligner eflomal reads none: drop them.")


def parse_heads(text: str) -> list[int] | None:
    """``--heads 0,2``: the heads to average (None: the default), refused by name if not numbers."""
    if not text.strip():
        return None
    try:
        chosen = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise NmtError(f"--heads {text!r}: give head numbers from 0, separated by commas (e.g. 0,2).") from None
    if any(head < 0 for head in chosen):
        raise NmtError(f"--heads {text!r}: head numbers count from 0.")
    return chosen or None


ALIGNERS = ("model", "eflomal")  # nmt align --aligner: the model's attention, or the reference aligner


def align_pairs(
    aligner: str,
    sources: list[str],
    targets: list[str] | None,
    translator: Callable[[], Translator],
    training: Callable[[], tuple[list[str], list[str]]],
    layer: int | None = None,
    heads: str = "",
    step: str = "produced",
) -> tuple[list[str], list[Links]]:
    """``nmt align``: each pair's Pharaoh line and links, by ``aligner``: the model's attention
    (``translator()`` opens the model; without ``targets``, "translation ||| links" of its own
    translations) or eflomal over the given pairs and ``training()``'s. Every choice is checked
    before a model loads or eflomal runs."""
    if aligner not in ALIGNERS:
        raise NmtError(f"--aligner {aligner!r}: model or eflomal.")
    if aligner == "eflomal":
        refuse_attention_choices(layer, heads, step)
        if targets is None:
            raise NmtError("--aligner eflomal aligns given pairs: give --tgt.")
        found = eflomal_alignments(sources, targets, training())
        return [links.pharaoh() for links in found], found
    chosen = parse_heads(heads)
    return model_lines(translator(), sources, targets, layer, chosen, step)


def model_lines(
    translator: Translator,
    sources: list[str],
    targets: list[str] | None,
    layer: int | None = None,
    heads: list[int] | None = None,
    step: str = "produced",
) -> tuple[list[str], list[Links]]:
    """``nmt align``'s lines and links: each pair's Pharaoh line, or without ``targets`` the
    model's translation and the links of it, "translation ||| links"."""
    hypotheses = [found[0] for found in translator.search(sources)] if targets is None else None
    ids = target_ids(translator, targets) if targets is not None else [h.tokens for h in hypotheses or []]
    links = model_alignments(translator, sources, ids, layer, heads, step)
    written = [found.pharaoh() for found in links]
    if hypotheses is not None:
        written = [f"{translator.detokenize(h)} ||| {line}" for h, line in zip(hypotheses, written)]
    return written, links


def target_ids(translator: Translator, targets: Sequence[str]) -> list[list[int]]:
    """Target text as the model reads it."""
    return translator.tgt_tok.encode([normalize_text(line) for line in targets])


def alignment_agreement(translator: Translator, test_set: ReferenceSet, name: str, training: tuple[list, list]) -> dict:
    """The model's alignments of every (source, reference) pair of ``test_set`` against eflomal's
    (computed beside the ``training`` pairs once, then read from the run's eval folder); both
    written to <run_dir>/eval/. What ``nmt evaluate --align`` reports."""
    sources = [s for s, refs in zip(test_set.sources, test_set.references) for _ in refs]
    targets = [ref for refs in test_set.references for ref in refs]
    run = run_paths(translator.loaded.config)
    kept = run.eval_alignments(name, "eflomal")
    run.writable(kept, run.eval_alignments(name, "model"))
    reference = kept_eflomal_alignments(kept, sources, targets, training)
    found = model_alignments(translator, sources, target_ids(translator, targets))
    write_lines_atomic(run.eval_alignments(name, "model"), [links.pharaoh() for links in found])
    return {"reference": "eflomal, grow-diag-final-and", "step": "produced", **agreement(reference, found).to_dict()}


def sentence_alignment(translator: Translator, text: str, target: list[int], training: tuple[list, list]) -> Alignment:
    """The lab's alignment view of one translation (``target``: its subword ids): the model's word
    attention and links, and eflomal's beside the ``training`` pairs where there are some and eflomal
    is installed, with the agreement, and each head's for a family with heads."""
    model = aligning_model(translator)
    src_ids = translator.source_ids([text])[0]
    source_pieces = [*translator.src_tok.id_to_piece(src_ids), EOS]
    target_pieces = translator.tgt_tok.id_to_piece(target)
    source_words, target_words = piece_words(source_pieces), piece_words(target_pieces)
    shown = default_heads(model, bool(translator.loaded.config.train.guided_alignment))
    attention = forced_attention(model, [src_ids], [target], translator.device, heads=shown)[0][: len(target)]
    weights = word_weights(attention, source_words, target_words)
    links = word_links(attention, source_words, target_words)
    source_text, target_text = _spelled(source_pieces, source_words), _spelled(target_pieces, target_words)
    reference, note = _sentence_reference(" ".join(source_text), " ".join(target_text), training)
    found = agreement([reference], [links]).to_dict() if reference is not None else None
    heads = None
    grid = type(model).head_grid(model.config)
    if reference is not None and grid is not None:
        layers, per_layer = grid
        heads = [
            [
                agreement([reference], model_alignments(translator, [text], [target], layer, [head])).aer
                for head in range(per_layer)
            ]
            for layer in range(layers)
        ]
    pairs = [[i, j] for i, j in sorted(links.sure)]
    return Alignment(
        source_text,
        target_text,
        (weights / np.maximum(weights.sum(1, keepdims=True), 1e-9)).tolist(),
        pairs,
        None if reference is None else [[i, j] for i, j in sorted(reference.sure)],
        note,
        found,
        heads,
        links.pharaoh(),
        None if reference is None else reference.pharaoh(),
    )


def _spelled(pieces: list[str], words: list[int | None]) -> list[str]:
    """Each word's text, its pieces joined (the word mark dropped)."""
    spelled: list[str] = []
    for piece, word in zip(pieces, words):
        if word is None:
            continue
        if word == len(spelled):
            spelled.append("")
        spelled[word] += piece.replace(WORD_START, "")
    return spelled


def _sentence_reference(source: str, target: str, training: tuple[list, list]) -> tuple[Links | None, str]:
    """eflomal's links of one pair beside the training pairs, or None and why."""
    if not training[0]:
        return None, "no reference: this model has no training pairs beside it to run eflomal over (serve a run)"
    if not eflomal_installed():
        return None, f"no reference: eflomal is not installed ({install_hint('align', 'eflomal')})"
    return eflomal_alignments([source], [target], training)[0], "eflomal beside the training pairs, grow-diag-final-and"


def training_pairs(config: Config) -> tuple[list[str], list[str]]:
    """A run's prepared training pairs, for eflomal's statistics (none for a package: it has none)."""
    paths = prepared_paths(config)
    files = paths.text("train", "src"), paths.text("train", "tgt")
    if not all(path.is_file() for path in files):
        return [], []
    source, target = (path.read_text(encoding="utf-8").splitlines() for path in files)
    return source, target
