"""Starting from a model you already have (``init_from``): continued training on more data of
the same pair, fine-tuning to a domain, and transfer to a pair that shares a side or a script.

``init_from: PARENT`` (or ``--init-from PARENT`` on ``nmt prepare`` and ``nmt train``) names a
run directory (its best checkpoint) or a model package (``nmt export``); ``load_parent`` reads
either, through the loaders translation uses.

* **prepare**: a side whose language is the parent's on that side takes the parent's
  SentencePiece model as it is, so its embeddings carry over whole. A side in another language
  gets, by measurement on the training sample (``tokenizer.parent_vocab: auto``), whichever of
  the parent's model and a new one cuts its sentences into fewer pieces; SentencePiece's byte
  fallback lets the parent's cover any text, but a model of another language cuts it finely.
* **train**: a new model of the child's config, whose architecture must be the parent's; every
  tensor is copied from the parent, and the vocabulary's (embeddings, output layer) row by row:
  a piece both vocabularies hold takes the parent's row, a new piece the mean of the rows of
  the parent's pieces its text is cut into. The optimizer, the schedule, the step count and the
  best score start fresh (the parent's dev BLEU is not the child's). ``train.freeze`` keeps
  parts of the model as the parent left them. Two differences are allowed, each added so that
  the child starts as exactly the parent's function: a child may add input feeding to a Luong
  parent without it (the fast decoder suits a large corpus, feeding a small one:
  docs/transfer.md), the decoder's first input weights gaining columns for h̃_{t-1} that start
  at zero; and it may add the lexical model (``model.lexical``), whose output starts at zero.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt.config.paths import PackagePaths, PreparedPaths, RunPaths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import sha256_file
from nmt.core.registry import ARCHITECTURES
from nmt.data.tokenizer import Tokenizer, extend_sentencepiece, train_sentencepiece
from nmt.model.base import TranslationModel
from nmt.runtime.checkpoint import model_differences, translation_weights, upgrade_weight_names
from nmt.runtime.loading import load_checked_checkpoint, load_package, load_run, load_tokenizers, read_manifest

# The model's tensors indexed by vocabulary entry, and the side whose vocabulary that is.
VOCABULARY_TENSORS = {
    "encoder.embedding.weight": "src",
    "decoder.embedding.weight": "tgt",
    "decoder.output.weight": "tgt",
    "decoder.output.bias": "tgt",
}

NEW_PIECES_FACTOR = 1.1  # auto: the parent's tokenizer is kept unless it cuts >10 % more pieces than a new one


@dataclass
class Parent:
    path: Path
    config: Config
    weights: dict[str, torch.Tensor]
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    sha256: str  # of the weights' file
    test_bleu: float | None  # its own test BLEU, where it was evaluated

    def tokenizer(self, side: str) -> Tokenizer:
        return self.src_tok if side == "src" else self.tgt_tok

    def lang(self, side: str) -> str:
        return self.config.data.src_lang if side == "src" else self.config.data.tgt_lang

    @property
    def lineage(self) -> dict:
        """What a child's checkpoint, model card and /api/models say of its parent."""
        data = self.config.data
        return {
            "name": self.path.resolve().name,  # the name, not this machine's path: it travels in packages
            "pair": f"{data.src_lang}-{data.tgt_lang}",
            "sha256": self.sha256,
            "test_bleu": self.test_bleu,
        }


def load_parent(path: str | Path) -> Parent:
    """A run directory (its best checkpoint) or a model package, as a parent; a clear error for
    anything else, or for damaged files."""
    path = Path(path)
    if PackagePaths(path).manifest.is_file():
        package = PackagePaths(path)
        config, model, src_tok, tgt_tok = load_package(path)  # a damaged file is a clear NmtError
        scores = read_manifest(package).get("test_scores")
        scores = scores if isinstance(scores, dict) else {}
        return Parent(
            path, config, model.state_dict(), src_tok, tgt_tok, sha256_file(package.weights), scores.get("bleu")
        )
    run = RunPaths(path)
    if run.config.is_file() and run.checkpoint("best").is_file():
        config = load_run(path)
        src_tok, tgt_tok = load_tokenizers(config)
        payload = load_checked_checkpoint(config, str(run.checkpoint("best")), src_tok, tgt_tok)
        weights = upgrade_weight_names(translation_weights(payload))
        report = run.eval_report("test")
        test_bleu = json.loads(report.read_text(encoding="utf-8"))["bleu"] if report.is_file() else None
        return Parent(path, config, weights, src_tok, tgt_tok, sha256_file(run.checkpoint("best")), test_bleu)
    members = sorted(path.glob("member-*/checkpoints/best.pt"))
    if members:  # train.members: the run folder holds the members, each a run of its own
        raise NmtError(
            f"init_from: {path} is an ensemble of {len(members)} members (train.members); a parent is one model: "
            f"start from one of them, e.g. {members[0].parents[1]}."
        )
    raise NmtError(
        f"init_from: {path} is neither a run directory (config.yaml and checkpoints/best.pt) nor a model "
        "package (manifest.json, from `nmt export`)."
    )


def architecture_differences(parent: Config, config: Config) -> list[str]:
    """Each model setting of ``config`` that would not hold ``parent``'s weights (a switch of its
    family's ``addable`` turned on over a parent without it is not one)."""
    parent_model, child_model = parent.model.keys(), config.model.keys()
    for key in ARCHITECTURES[config.model.arch].addable:
        if key in parent_model:
            parent_model[key] = parent_model[key] or child_model[key]
    problems = model_differences(parent_model, config.model, "model.")
    if config.tokenizer.joint != parent.tokenizer.joint:
        problems.append(f"tokenizer.joint: parent has {parent.tokenizer.joint}, config has {config.tokenizer.joint}")
    return [problem.replace("checkpoint has", "parent has") for problem in problems]


def check_architecture(parent: Parent, config: Config) -> None:
    """Refuse a child whose model settings would not hold the parent's weights, naming each."""
    problems = architecture_differences(parent.config, config)
    if problems:
        raise NmtError(
            f"The parent {parent.path} has another architecture than the config:\n  "
            + "\n  ".join(problems)
            + "\nCopy the parent's model section (its config.yaml) into the config."
        )


# ---- prepare: the child's tokenizers ----


def child_tokenizers(
    config: Config, paths: PreparedPaths, parent: Parent, sample: list, log: Callable[[str], object]
) -> None:
    """Write the child's SentencePiece models into ``paths``: the parent's for a side in the
    parent's language, and for another language the parent's or a new one (tokenizer.parent_vocab)."""
    tok = config.tokenizer
    if tok.joint:
        same = {config.data.src_lang, config.data.tgt_lang} == {parent.lang("src"), parent.lang("tgt")}
        sentences = [p.src for p in sample] + [p.tgt for p in sample]
        _side_tokenizer(paths.spm("src"), parent.src_tok, same, sentences, tok.src_vocab_size, config, "joint", log)
        return
    for side, vocab_size in (("src", tok.src_vocab_size), ("tgt", tok.tgt_vocab_size)):
        lang = config.data.src_lang if side == "src" else config.data.tgt_lang
        sentences = [p.src if side == "src" else p.tgt for p in sample]
        same = lang == parent.lang(side)
        _side_tokenizer(paths.spm(side), parent.tokenizer(side), same, sentences, vocab_size, config, lang, log)


def related_child_tokenizers(
    config: Config, paths: PreparedPaths, parent: Parent, sample: list, tags: list[str], log: Callable[[str], object]
) -> bool:
    """A child of several targets (data.related) that keeps its parent's vocabularies, extended:
    the source the parent's with the target tags appended (every English piece keeps its id, so
    the encoder's embeddings carry over whole), the target the parent's with the pieces of a new
    model of this pair's target appended (the related target, the parent's own language, is cut
    as the parent cut it; this pair's target gets pieces of its own). False where the parent
    does not fit that shape (another source or target language, or one joint vocabulary): the
    caller then trains new tokenizers on the balanced sample."""
    data = config.data
    if config.tokenizer.joint or parent.lang("src") != data.src_lang or parent.lang("tgt") not in data.related:
        return False
    added = extend_sentencepiece(parent.src_tok, paths.spm("src"), tags)
    log(f"src: the parent's SentencePiece model ({parent.src_tok.vocab_size:,} pieces) with {added} target tags.")
    own = paths.spm("tgt").with_suffix(".own")
    tok = config.tokenizer
    train_sentencepiece([p.tgt for p in sample], own, tok.tgt_vocab_size, tok.model_type, tok.character_coverage)
    try:
        added = extend_sentencepiece(parent.tgt_tok, paths.spm("tgt"), pieces_of=Tokenizer(own))
    finally:
        own.unlink(missing_ok=True)
    log(
        f"tgt: the parent's {parent.lang('tgt')} SentencePiece model ({parent.tgt_tok.vocab_size:,} pieces) with "
        f"{added:,} pieces of a new {data.tgt_lang} one appended (each starts from the parent's pieces it is made of)."
    )
    return True


def _side_tokenizer(
    target: Path,
    inherited: Tokenizer,
    same_language: bool,
    sentences: list[str],
    vocab_size: int,
    config: Config,
    label: str,
    log: Callable[[str], object],
) -> None:
    choice = config.tokenizer.parent_vocab
    if same_language and choice != "new":
        shutil.copyfile(inherited.path, target)
        log(f"{label}: the parent's SentencePiece model ({inherited.vocab_size:,} pieces), embeddings reused whole.")
        return
    tok = config.tokenizer
    train_sentencepiece(sentences, target, vocab_size, tok.model_type, tok.character_coverage)
    if choice == "new" or not sentences:
        log(f"{label}: a new SentencePiece model (tokenizer.parent_vocab: new).")
        return
    new_pieces = _pieces_per_sentence(Tokenizer(target), sentences)
    parent_pieces = _pieces_per_sentence(inherited, sentences)
    keep_parent = choice == "parent" or parent_pieces <= NEW_PIECES_FACTOR * new_pieces
    measured = (
        f"the parent's SentencePiece model cuts the training text into {parent_pieces:.1f} pieces a sentence, "
        f"a new one into {new_pieces:.1f}"
    )
    if keep_parent:
        shutil.copyfile(inherited.path, target)
        log(f"{label}: {measured}: the parent's is kept, its embeddings reused whole.")
    else:
        shared = len(shared_pieces(Tokenizer(target), inherited)[0])
        log(
            f"{label}: {measured}: the new one ({shared:,} of its pieces are the parent's; the others start "
            "from the parent's pieces they are made of)."
        )


def _pieces_per_sentence(tokenizer: Tokenizer, sentences: list[str]) -> float:
    return sum(len(ids) for ids in tokenizer.encode(sentences)) / max(1, len(sentences))


# ---- train: the child's first weights ----


def composed_pieces(child: Tokenizer, parent: Tokenizer, skip: set[int]) -> dict[int, list[int]]:
    """For each child piece not in ``skip`` (the shared ones), the parent's pieces its text is
    cut into: a new piece of a related language (Hindi's "हूँ") is often a few of the parent's
    (Marathi's "ह", "ूँ"), whose embeddings' mean is a better start than noise. Specials and
    byte pieces are left out."""
    word_start = parent.processor.piece_to_id("▁")
    composed = {}
    for child_id in range(child.vocab_size):
        piece = child.processor.id_to_piece(child_id)
        if child_id in skip or child.processor.is_control(child_id) or child.processor.is_byte(child_id):
            continue
        ids = parent.encode([piece.replace("▁", " ")])[0]
        if not piece.startswith("▁") and ids and ids[0] == word_start:
            ids = ids[1:]  # SentencePiece starts every text with a word boundary; this piece has none
        if ids and not any(parent.processor.is_unknown(i) for i in ids):
            composed[child_id] = ids
    return composed


def shared_pieces(child: Tokenizer, parent: Tokenizer) -> tuple[list[int], list[int]]:
    """(child ids, parent ids) of the pieces both vocabularies hold, specials included."""
    child_ids, parent_ids = [], []
    for child_id in range(child.vocab_size):
        piece = child.processor.id_to_piece(child_id)
        parent_id = parent.processor.piece_to_id(piece)
        if parent.processor.id_to_piece(parent_id) == piece:
            child_ids.append(child_id)
            parent_ids.append(parent_id)
    return child_ids, parent_ids


@torch.no_grad()
def inherit_weights(model: TranslationModel, parent: Parent, tokenizers: tuple[Tokenizer, Tokenizer]) -> str:
    """Copy the parent's weights into ``model`` (the vocabulary's row by shared piece; a weight the
    child grew over its parent, the family's ``grow_from``); what was copied, in words."""
    sides = dict(zip(("src", "tgt"), tokenizers))
    copied, grown = {}, {}
    for name, tensor in model.state_dict().items():
        source = parent.weights.get(name)
        added = model.grow_from(name, source, tensor)
        if added is not None:
            grown[added[0]] = added[1]
            continue
        if source is None or (name not in VOCABULARY_TENSORS and source.shape != tensor.shape):
            raise NmtError(f"The parent {parent.path} has no tensor {name} of shape {tuple(tensor.shape)}.")
        side = VOCABULARY_TENSORS.get(name)
        if side is None:
            tensor.copy_(source)
            continue
        child_tok, parent_tok = sides[side], parent.tokenizer(side)
        if child_tok.sha256 == parent_tok.sha256:
            tensor.copy_(source)
            copied[side] = f"{side} vocabulary the parent's ({child_tok.vocab_size:,} pieces)"
            continue
        child_ids, parent_ids = shared_pieces(child_tok, parent_tok)
        tensor[child_ids] = source[parent_ids].to(tensor.dtype)
        composed = composed_pieces(child_tok, parent_tok, set(child_ids))
        for child_id, parts in composed.items():
            tensor[child_id] = source[parts].mean(0).to(tensor.dtype)
        copied[side] = (
            f"{side} vocabulary new: {len(child_ids):,} of its {child_tok.vocab_size:,} pieces the parent's, "
            f"{len(composed):,} more the mean of the parent's pieces they are made of"
        )
    said = [copied[side] for side in ("src", "tgt") if side in copied]
    return "; ".join(said + [grown[key] for key in sorted(grown)])


def freeze(model: TranslationModel, parts: list[str]) -> int:
    """Keep ``parts`` (train.freeze: names of the family's ``freezable``) as they are: no gradient,
    so no update. The number of parameters frozen."""
    prefixes = tuple(prefix for part in parts for prefix in model.freezable[part])
    frozen = 0
    for name, parameter in model.named_parameters():
        if name.startswith(prefixes):
            parameter.requires_grad_(False)
            frozen += parameter.numel()
    return frozen
