"""The tokenizer of an M2M100 export: a ``tokenizer.json`` (the ``tokenizers`` library's) that
``AutoTokenizer`` loads as a ``PreTrainedTokenizerFast`` with no custom code, cutting text as
this toolkit's SentencePiece model does — its normalisation, its dummy prefix, its unigram or BPE
pieces, its byte fallback — with the pieces in the export's id order, the source's language code
(if any) in front and <eos> after, as the models here read a source.

M2M100Tokenizer itself cannot serve: it appends fairseq's hundred language codes past the
vocabulary, so only a model trained with those codes would load it. Beside the tokenizer the
export writes the SentencePiece model with its pieces in the same order
(``sentencepiece.bpe.model``, where M2M100 and NLLB keep theirs): ``nmt init --from-hf`` reads
the export back through it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nmt.core.errors import NmtError
from nmt.data.tokenizer import sentencepiece_model


def reordered_sentencepiece(path: Path, order: list[int]) -> Any:
    """The SentencePiece model ``path`` (a ModelProto) with its pieces in ``order`` (``order[j]``:
    the id of the piece that becomes id ``j``; a piece left out of ``order`` is dropped) and its
    special ids to match."""
    model = sentencepiece_model(path)
    if model.trainer_spec.model_type not in (model.trainer_spec.UNIGRAM, model.trainer_spec.BPE):
        raise NmtError(
            f"{path}: only unigram and BPE SentencePiece models become a transformers tokenizer "
            "(tokenizer.model_type: unigram or bpe)."
        )
    pieces = [model.pieces[index] for index in order]
    position = {ours: index for index, ours in enumerate(order)}
    spec = model.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = (
        position.get(ours, -1) for ours in (spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id)
    )
    del model.pieces[:]
    model.pieces.extend(pieces)
    return model


def fast_tokenizer(model: Any, codes: list[str], prefix: str, suffix: str) -> Any:
    """A ``tokenizers.Tokenizer`` cutting text as SentencePiece ``model`` (a ModelProto) does;
    its control pieces, <unk> and ``codes`` (language codes) never cut or written as text;
    ``prefix`` (a language code, or "") before and ``suffix`` after every sequence."""
    try:
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
        from tokenizers.models import BPE as BPEModel
        from tokenizers.models import Unigram
    except ImportError:
        raise NmtError(
            "An M2M100 export writes its tokenizer with the tokenizers library: pip install 'nmt-kit[hf]'."
        ) from None

    spec, normalizer, piece_type = model.trainer_spec, model.normalizer_spec, model.SentencePiece
    if spec.model_type == spec.UNIGRAM:
        tokenizer = Tokenizer(
            Unigram([(p.piece, p.score) for p in model.pieces], unk_id=spec.unk_id, byte_fallback=spec.byte_fallback)
        )
    else:  # BPE: each piece made by the merges of its halves, ranked by the piece's score as SentencePiece ranks them
        normal = {p.piece: (p.score, i) for i, p in enumerate(model.pieces) if p.type == piece_type.NORMAL}
        ranked = sorted(
            (-score, index, piece[:cut], piece[cut:])
            for piece, (score, index) in normal.items()
            for cut in range(1, len(piece))
            if piece[:cut] in normal and piece[cut:] in normal
        )
        vocab = {p.piece: i for i, p in enumerate(model.pieces)}
        merges = [(left, right) for *_, left, right in ranked]
        unk = model.pieces[spec.unk_id].piece
        tokenizer = Tokenizer(BPEModel(vocab, merges, unk_token=unk, fuse_unk=True, byte_fallback=spec.byte_fallback))
    charsmap = normalizer.precompiled_charsmap  # SentencePiece's normalisation rule (nmt_nfkc), compiled
    steps: list[Any] = [normalizers.Precompiled(charsmap)] if charsmap else []
    if normalizer.remove_extra_whitespaces:  # only spaces, as SentencePiece's
        steps += [normalizers.Replace(Regex(r"\A +| +\z"), ""), normalizers.Replace(Regex(" {2,}"), " ")]
    if normalizer.escape_whitespaces:
        steps.append(normalizers.Replace(" ", "▁"))
    if normalizer.add_dummy_prefix:  # "▁" before the text, in normalisation as SentencePiece's
        steps.append(normalizers.Prepend("▁"))
    tokenizer.normalizer = normalizers.Sequence(steps)
    splits: list[Any] = []
    whole = [p.piece for p in model.pieces if p.type == piece_type.USER_DEFINED]  # SentencePiece never cuts these
    if whole:
        pattern = "|".join(re.escape(piece) for piece in sorted(whole, key=len, reverse=True))
        splits.append(pre_tokenizers.Split(Regex(pattern), behavior="isolated"))
    if splits:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(splits)
    pieces_to_text: list[Any] = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if normalizer.add_dummy_prefix:
        pieces_to_text.append(decoders.Strip(content=" ", left=1))
    tokenizer.decoder = decoders.Sequence(pieces_to_text)
    control = [p.piece for p in model.pieces if p.type in (piece_type.UNKNOWN, piece_type.CONTROL)]
    tokenizer.add_special_tokens([AddedToken(piece, special=True, normalized=False) for piece in control + codes])
    ids = {piece: tokenizer.token_to_id(piece) for piece in (prefix, suffix) if piece}
    single = [piece for piece in (prefix, "$A", suffix) if piece]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=single, pair=[*single, "$B", suffix], special_tokens=list(ids.items())
    )
    return tokenizer
