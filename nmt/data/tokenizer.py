"""SentencePiece subword models: training, loading, encoding, decoding.

The special ids live here and nowhere else. Every model is trained with byte fallback, so
no input (any script, emoji, control character) ever maps to ``<unk>``.
"""

from __future__ import annotations

import importlib
import io
import re
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import sentencepiece as spm

from nmt.core.errors import NmtError, relative_to_here
from nmt.core.fileio import iter_lines, save_atomic, sha256_file

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
REPLACEMENT = "\ufffd"  # what SentencePiece decodes an incomplete byte sequence to


def target_tag(lang: str) -> str:
    """The source-side symbol that asks a model of several targets for ``lang``: ``<2hi>`` (Johnson
    et al., 2017); one piece of the source vocabulary (a SentencePiece user-defined symbol)."""
    return f"<2{lang}>"


def tagged(texts: list[str], lang: str | None) -> list[str]:
    """Source sentences led by ``lang``'s tag; as they are when ``lang`` is None (one target)."""
    return texts if lang is None else [f"{target_tag(lang)} {text}" for text in texts]


TOO_FEW_PIECES = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")


def train_sentencepiece(
    sentences: list[str],
    model_path: str | Path,
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    symbols: Sequence[str] = (),
    key: str = "the vocabulary size",
) -> None:
    """Train a SentencePiece model on ``sentences`` and write ``model_path`` atomically;
    ``symbols`` are pieces of their own, never cut (target tags). ``key`` names the config key
    of ``vocab_size``, for the message when the text's characters need more pieces."""
    buffer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=buffer,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            byte_fallback=True,
            hard_vocab_limit=False,  # small corpora get fewer pieces instead of an error
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            pad_piece=PAD,
            unk_piece=UNK,
            bos_piece=BOS,
            eos_piece=EOS,
            num_threads=2,
            minloglevel=2,
            user_defined_symbols=list(symbols),  # none: the same model as without the option
        )
    except RuntimeError as exc:
        needs = TOO_FEW_PIECES.search(str(exc))
        if needs:  # a character SentencePiece keeps whole needs a piece of its own, and specials need theirs
            raise NmtError(
                f"{key} is {vocab_size}, but the training text has {needs.group(2)} distinct characters (with the "
                f"special pieces) that need a piece each: raise {key} above {needs.group(2)}, or lower "
                "tokenizer.character_coverage (rare characters then become bytes)."
            ) from None
        raise NmtError(f"SentencePiece training for {model_path} failed: {exc}") from None
    save_atomic(model_path, lambda tmp: tmp.write_bytes(buffer.getvalue()))


def sentencepiece_model(path: str | Path) -> Any:
    """The SentencePiece model file ``path`` as its ModelProto (pieces, trainer and normaliser
    specs), to be rewritten; its piece types are ``ModelProto.SentencePiece``'s."""
    model_pb2 = importlib.import_module("sentencepiece.sentencepiece_model_pb2")  # the model file's schema
    model = model_pb2.ModelProto()
    model.ParseFromString(Path(path).read_bytes())
    return model


def extend_sentencepiece(
    base: Tokenizer, model_path: str | Path, symbols: Sequence[str] = (), pieces_of: Tokenizer | None = None
) -> int:
    """Write ``base``'s model with pieces appended, every piece of ``base`` keeping its id (so
    a parent's embedding rows stay where they are): ``symbols`` as pieces of their own, never
    cut (target tags), then each normal piece of ``pieces_of`` that ``base`` lacks, with its
    score (a unigram model's log-probability: the Viterbi cut of ``pieces_of``'s language then
    takes its own pieces where they beat ``base``'s). The number of pieces added."""
    model = sentencepiece_model(base.path)
    piece_type = model.SentencePiece
    have = {piece.piece for piece in model.pieces}
    added = 0
    for symbol in symbols:
        if symbol not in have:
            model.pieces.add(piece=symbol, score=0.0, type=piece_type.USER_DEFINED)
            have.add(symbol)
            added += 1
    if pieces_of is not None:
        for piece in sentencepiece_model(pieces_of.path).pieces:
            if piece.type == piece_type.NORMAL and piece.piece not in have:
                model.pieces.add(piece=piece.piece, score=piece.score, type=piece.type)
                have.add(piece.piece)
                added += 1
    save_atomic(model_path, lambda tmp: tmp.write_bytes(model.SerializeToString()))
    return added


def sentencepiece_with_pieces(
    base: str | Path, pieces: Sequence[str], model_path: str | Path, whole: Sequence[str] = ()
) -> list[str]:
    """Write ``base``'s model (another toolkit's) with exactly ``pieces`` in that order, this
    toolkit's four specials first (``pieces[:4]`` is PAD, UNK, BOS, EOS): a model that cuts text
    as ``base`` does, into ids a model imported row by row reads. A piece ``base`` cuts text into
    keeps its score and type; one it never produces (the other side's, in one joint vocabulary)
    is UNUSED, never produced here either; ``whole`` are pieces never cut (OPUS-MT's ``>>hin<<``).
    Returns the pieces of ``base`` left out (text that needs one becomes another cut)."""
    if list(pieces[:4]) != [PAD, UNK, BOS, EOS]:
        raise ValueError(f"the first pieces must be {PAD}, {UNK}, {BOS}, {EOS}")
    model = sentencepiece_model(base)
    piece_type = model.SentencePiece
    known = {piece.piece: piece for piece in model.pieces}
    rebuilt = []
    for index, piece in enumerate(pieces):
        own = known.get(piece)
        if index < 4:
            kind = piece_type.UNKNOWN if piece == UNK else piece_type.CONTROL
            rebuilt.append((piece, 0.0, kind))
        elif piece in whole:
            rebuilt.append((piece, 0.0, piece_type.USER_DEFINED))
        elif own is not None and own.type in (piece_type.NORMAL, piece_type.USER_DEFINED, piece_type.BYTE):
            rebuilt.append((piece, own.score, own.type))
        else:
            rebuilt.append((piece, 0.0, piece_type.UNUSED))
    listed = set(pieces)
    left_out = [p.piece for p in model.pieces if p.type == piece_type.NORMAL and p.piece not in listed]
    del model.pieces[:]
    for piece, score, kind in rebuilt:
        model.pieces.add(piece=piece, score=score, type=kind)
    spec = model.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID
    spec.pad_piece, spec.unk_piece, spec.bos_piece, spec.eos_piece = PAD, UNK, BOS, EOS
    spec.byte_fallback = spec.byte_fallback and all(f"<0x{b:02X}>" in listed for b in range(256))
    save_atomic(model_path, lambda tmp: tmp.write_bytes(model.SerializeToString()))
    return left_out


def encoded_lines(
    tokenizer: Tokenizer, path: str | Path, bar=None, chunk: int = 10_000, tag: str | None = None
) -> Iterator[list[int]]:
    """The ids of every line of a text file, encoded a chunk of lines at a time (``bar``: a
    progress bar moved by the lines encoded; ``tag``: each line led by that target's tag)."""
    lines = iter_lines(path)
    while block := list(islice(lines, chunk)):
        yield from tokenizer.encode(tagged(block, tag))
        if bar is not None:
            bar.update(len(block))


class Tokenizer:
    """One language's SentencePiece model. ``code``: a piece every sequence of this side begins
    with (a language code: ``tokenizer.src_code``, ``tokenizer.tgt_code``), put in front by
    ``encode`` and ``sample`` and left out of the text by ``decode``."""

    def __init__(self, model_path: str | Path, code: str = "", key: str = "tokenizer.src_code"):
        self.path = Path(model_path)
        if not self.path.is_file():
            relative = relative_to_here(self.path)  # a relative path: where it was looked for, and why there
            hint = ""
            if not self.path.parent.is_dir():  # no prepared data there at all: never prepared, or another folder
                hint = (
                    " No prepared data there: if this run was never prepared, `nmt prepare --config CONFIG` prepares "
                    "it (`nmt train` prepares it itself)."
                )
            elif not relative:
                hint = " Run `nmt prepare` first, if this run was never prepared."
            raise NmtError(f"SentencePiece model not found: {self.path}{relative}.{hint}")
        try:
            self.processor = spm.SentencePieceProcessor(model_file=str(self.path))
        except (RuntimeError, OSError) as error:
            raise NmtError(f"{self.path} is not a SentencePiece model ({error}).") from None
        self.sha256 = sha256_file(self.path)
        self.code_ids: list[int] = []  # [the code's id], or none
        if code:
            try:
                self.code_ids = self.piece_ids([code])
            except KeyError:
                raise NmtError(f"{key}: {code!r} is not a piece of {self.path} (a language code it holds).") from None

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, texts: list[str]) -> list[list[int]]:
        return [self.code_ids + ids for ids in self.processor.encode(texts, out_type=int)]

    def sample(self, texts: list[str], alpha: float, seed: int) -> list[list[int]]:
        """A random segmentation of each text (training only): unigram sampling with smoothing
        ``alpha`` (Kudo, 2018), or BPE-dropout with dropout ``alpha`` for BPE models (Provilkov
        et al., 2020). Seeded, and on one thread, so the same seed gives the same segmentations."""
        spm.set_random_generator_seed(seed)
        found = self.processor.encode(
            texts, out_type=int, enable_sampling=True, alpha=alpha, nbest_size=-1, num_threads=1
        )
        return [self.code_ids + ids for ids in found]

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Text of each id list. Byte pieces (byte_fallback) that do not make a whole UTF-8 character
        — a model may end a translation in the middle of one — are dropped, where SentencePiece would
        write U+FFFD ("�") into the output."""
        if self.code_ids:  # the language code a translation starts with (or repeats) is no part of its text
            ids = [[i for i in row if i not in self.code_ids] for row in ids]
        return [text.replace(REPLACEMENT, "") for text in self.processor.decode(ids)]

    def id_to_piece(self, ids: list[int]) -> list[str]:
        return [self.processor.id_to_piece(i) for i in ids]

    def pieces(self) -> list[str]:
        """Every piece of the vocabulary, in id order."""
        return self.id_to_piece(list(range(self.vocab_size)))

    def piece_ids(self, pieces: list[str]) -> list[int]:
        """The ids of ``pieces`` as ``id_to_piece`` spells them; an unknown piece raises KeyError."""
        ids = [self.processor.piece_to_id(piece) for piece in pieces]
        for piece, piece_id in zip(pieces, ids):
            if self.processor.id_to_piece(piece_id) != piece:
                raise KeyError(piece)
        return ids

    def labels(self, ids: list[int], with_eos: bool = True) -> list[str]:
        """One label per position a model sees or emits: the pieces, then ``<eos>``."""
        return self.id_to_piece(ids) + ([EOS] if with_eos else [])
