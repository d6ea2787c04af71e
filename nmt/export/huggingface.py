"""``nmt export --hf``: a Transformer trained here as a folder ``transformers`` loads with no
custom code — ``AutoModelForSeq2SeqLM`` gives a ``MarianMTModel`` or an
``M2M100ForConditionalGeneration``, ``AutoTokenizer`` its tokenizer — so that ``generate()``,
``Seq2SeqTrainer``, BertViz and the Hub take it as one of their own.

Marian's layers are post-norm with sines-then-cosines positions from 0 (``model.norm: post``,
``model.positions: marian``); M2M100's (NLLB-200's) are pre-norm with fairseq's positions
(``model.norm: pre``, ``model.positions: fairseq``), one vocabulary for both sides
(``tokenizer.joint``) and an output layer without a bias (``model.output_bias: false``). A model of
neither shape is refused naming the settings of each.

Ids, Marian: its vocabularies end with <pad> (CTranslate2's converter drops that last row), so
the export writes ours shifted by one — <unk> 0, <bos> 1, <eos> 2, the pieces, <pad> last — and
decoding starts from <bos>, as it does here. <pad> has one id for both sides (MarianTokenizer
reads it from the source's vocabulary, MarianMTModel pads both embeddings with it), so the smaller
of two separate vocabularies is filled up to the larger's size before its <pad> with pieces no
text is cut into (``<filler:N>``: zero rows, never predicted; an import leaves them out). Both
SentencePiece models are copied as they are: MarianTokenizer maps their pieces through vocab.json
(target_vocab.json for the target, unless one joint vocabulary serves both).

Ids, M2M100: fairseq's order, <bos> 0, <pad> 1 (its positions count from 2), <eos> 2, <unk> 3,
then the pieces; the tokenizer is a tokenizer.json (nmt/export/huggingface_tokenizer.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import as_umask_allows, staged_folder, write_text_atomic
from nmt.core.registry import ARCHITECTURES
from nmt.data.tokenizer import BOS_ID, EOS, EOS_ID, PAD, PAD_ID, UNK, UNK_ID, Tokenizer
from nmt.export.huggingface_tokenizer import fast_tokenizer, reordered_sentencepiece
from nmt.model.transformer.huggingface import FILLER, NEVER, OUTPUT_BIAS, filler_piece
from nmt.runtime.checkpoint import translation_weights
from nmt.runtime.loading import load_checked_checkpoint, load_run, load_tokenizers
from nmt.runtime.parent import VOCABULARY_TENSORS


def hf_order(size: int, filled_to: int = 0) -> list[int]:
    """Our ids in the export's order: ``hf_order(V)[j]`` is our id of Hugging Face id ``j`` (ours
    shifted down by one, <pad> last); ``filled_to``: FILLER ids before <pad> up to that size."""
    return [*range(1, size), *[FILLER] * (filled_to - size), PAD_ID]


def m2m100_order(size: int, without_bos: bool = False) -> list[int]:
    """Our ids in an M2M100 export's order (fairseq's specials first, then the pieces);
    ``without_bos``: our <bos> left out, its place taken by the first piece."""
    if without_bos:
        return [4, PAD_ID, EOS_ID, UNK_ID, *range(5, size)]
    return [BOS_ID, PAD_ID, EOS_ID, UNK_ID, *range(4, size)]


def _vocabulary(tokenizer: Tokenizer, order: list[int]) -> dict[str, int]:
    pieces = tokenizer.pieces()
    fillers = (filler_piece(number) for number in range(len(order)))
    return {(pieces[ours] if ours != FILLER else next(fillers)): index for index, ours in enumerate(order)}


def _reordered(weights: dict[str, torch.Tensor], orders: dict[str, list[int]]) -> dict:
    """``weights`` with every vocabulary tensor's rows in the export's order (``orders`` by side):
    a FILLER's row zeros, and its output bias NEVER (no text holds it, no search writes it)."""
    reordered = {}
    for name, tensor in weights.items():
        if name not in VOCABULARY_TENSORS:
            reordered[name] = tensor
            continue
        order = torch.tensor(orders[VOCABULARY_TENSORS[name]])
        filler = torch.full_like(tensor[:1], NEVER if name == "decoder.output.bias" else 0.0)
        reordered[name] = torch.cat([tensor, filler])[torch.where(order == FILLER, tensor.size(0), order)]
    return reordered


def _marian_files(config: Config, layers: dict, target_order: list[int]) -> dict[str, dict]:
    """config.json (``layers``: the family's part of it), generation_config.json and
    tokenizer_config.json of a Marian export (both vocabularies of ``target_order``'s size)."""
    joint = config.tokenizer.joint

    def hf_id(ours: int) -> int:
        return target_order.index(ours)

    hf_config = {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": len(target_order),
        "decoder_vocab_size": len(target_order),
        **layers,
        "share_encoder_decoder_embeddings": joint,
        "pad_token_id": hf_id(PAD_ID),
        "eos_token_id": hf_id(EOS_ID),
        "decoder_start_token_id": hf_id(BOS_ID),
        "forced_eos_token_id": None,  # here a translation at its length limit ends unfinished
        "is_encoder_decoder": True,
    }
    decode = config.decode
    generation = {  # how this toolkit decodes: <pad> and <bos> never written, lp = length ** alpha
        "decoder_start_token_id": hf_id(BOS_ID),
        "eos_token_id": hf_id(EOS_ID),
        "pad_token_id": hf_id(PAD_ID),
        "bad_words_ids": [[hf_id(PAD_ID)], [hf_id(BOS_ID)]],
        "num_beams": decode.beam_size,
        "length_penalty": decode.length_penalty,
        "max_length": layers["max_position_embeddings"] // 2,
    }
    tokenizer_config = {
        "tokenizer_class": "MarianTokenizer",
        "source_lang": config.data.src_lang,
        "target_lang": config.data.tgt_lang,
        "unk_token": UNK,  # every vocabulary here spells its specials so (nmt/data/tokenizer.py)
        "eos_token": EOS,
        "pad_token": PAD,
        "separate_vocabs": not joint,
        "model_max_length": layers["max_position_embeddings"] // 2,
    }
    return {
        "config.json": hf_config,
        "generation_config.json": generation,
        "tokenizer_config.json": tokenizer_config,
    }


def _language_codes(config: Config) -> list[str]:
    """The run's language codes (tokenizer.src_code, tgt_code), those it has."""
    return [code for code in (config.tokenizer.src_code, config.tokenizer.tgt_code) if code]


def _m2m100_files(config: Config, layers: dict, order: list[int], start: int, tok: Tokenizer) -> dict[str, dict]:
    """config.json (``layers``: the family's part of it), generation_config.json and
    tokenizer_config.json of an M2M100 export whose ids are ``order`` (our id of each), decoding
    from our id ``start``."""
    pieces = tok.pieces()
    codes = _language_codes(config)
    ids = {"pad_token_id": order.index(PAD_ID), "bos_token_id": 0, "eos_token_id": order.index(EOS_ID)}
    hf_config = {
        "architectures": ["M2M100ForConditionalGeneration"],
        "model_type": "m2m_100",
        "vocab_size": len(order),
        **layers,
        **ids,
        "decoder_start_token_id": order.index(start),
        "forced_eos_token_id": None,  # here a translation at its length limit ends unfinished
        "is_encoder_decoder": True,
    }
    decode = config.decode
    never = [PAD_ID] + ([BOS_ID] if BOS_ID in order else [])  # never written here
    generation = {
        **ids,
        "decoder_start_token_id": order.index(start),
        "bad_words_ids": [[order.index(ours)] for ours in never],
        "num_beams": decode.beam_size,
        "length_penalty": decode.length_penalty,
        "max_length": layers["max_position_embeddings"] // 2,
    }
    if config.tokenizer.tgt_code:  # the target's language code first, as here
        generation["forced_bos_token_id"] = order.index(tok.piece_ids([config.tokenizer.tgt_code])[0])
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": pieces[order[0]],
        "eos_token": EOS,
        "unk_token": UNK,
        "pad_token": PAD,
        "additional_special_tokens": codes,
        "extra_special_tokens": codes,
        "clean_up_tokenization_spaces": False,
        "model_max_length": layers["max_position_embeddings"] // 2,
    }
    return {
        "config.json": hf_config,
        "generation_config.json": generation,
        "tokenizer_config.json": tokenizer_config,
    }


def _vocabulary_problems(config: Config) -> list[str]:
    """What of a run's vocabularies keeps it out of M2M100ForConditionalGeneration."""
    if config.tokenizer.joint:
        return []
    return ["tokenizer.joint: true (M2M100 reads one vocabulary for both sides)"]


def _bias_holds_out_bos_alone(weights: dict[str, torch.Tensor]) -> bool:
    """Whether the output layer's bias is zero but for <bos>'s (an import's from M2M100 or NLLB,
    or its child's that froze it): M2M100's class, with no bias, computes the same logits."""
    bias = weights.get("decoder.output.bias")
    return bias is None or not bool(bias[torch.arange(bias.numel()) != BOS_ID].any())


def _bos_held_out(weights: dict[str, torch.Tensor]) -> bool:
    """Whether our <bos> is a copy of <eos> that is never predicted: an import from M2M100 or
    NLLB, whose decoding starts from </s> (the export leaves <bos> out and starts from </s>)."""
    bias = weights.get("decoder.output.bias")
    if bias is None or bias[BOS_ID] > NEVER:
        return False
    tables = (weights["decoder.embedding.weight"], weights["decoder.output.weight"])
    return all(torch.equal(table[BOS_ID], table[EOS_ID]) for table in tables)


def _write_marian(staging: Path, config: Config, weights: dict, src_tok: Tokenizer, tgt_tok: Tokenizer) -> None:
    joint = config.tokenizer.joint
    size = max(src_tok.vocab_size, tgt_tok.vocab_size)  # <pad> last at one id: the smaller side filled
    orders = {"src": hf_order(src_tok.vocab_size, size), "tgt": hf_order(tgt_tok.vocab_size, size)}
    if tgt_tok.vocab_size < size and "decoder.output.bias" not in weights:  # a bias that holds fillers out
        weights = {**weights, "decoder.output.bias": torch.zeros(tgt_tok.vocab_size)}
    family = ARCHITECTURES[config.model.arch]
    layers, state = family.hf_export("marian", config.model, _reordered(weights, orders), joint)
    _save_weights(staging, state)
    for name, settings in _marian_files(config, layers, orders["tgt"]).items():
        write_text_atomic(staging / name, json.dumps(settings, indent=2))
    vocab = _vocabulary(src_tok, orders["src"])
    write_text_atomic(staging / "vocab.json", json.dumps(vocab, ensure_ascii=False))
    if not joint:
        vocab = _vocabulary(tgt_tok, orders["tgt"])
        write_text_atomic(staging / "target_vocab.json", json.dumps(vocab, ensure_ascii=False))
    shutil.copyfile(src_tok.path, staging / "source.spm")
    shutil.copyfile(tgt_tok.path, staging / "target.spm")


def _write_m2m100(staging: Path, config: Config, weights: dict, tok: Tokenizer, _: Tokenizer) -> None:
    without_bos = _bos_held_out(weights)
    order = m2m100_order(tok.vocab_size, without_bos)
    family = ARCHITECTURES[config.model.arch]
    layers, state = family.hf_export("m2m_100", config.model, _reordered(weights, {"src": order, "tgt": order}), True)
    _save_weights(staging, state)
    start = EOS_ID if without_bos else BOS_ID
    for name, settings in _m2m100_files(config, layers, order, start, tok).items():
        write_text_atomic(staging / name, json.dumps(settings, indent=2))
    model = reordered_sentencepiece(tok.path, order)
    (staging / "sentencepiece.bpe.model").write_bytes(model.SerializeToString())
    fast = fast_tokenizer(model, _language_codes(config), config.tokenizer.src_code, EOS)
    write_text_atomic(staging / "tokenizer.json", fast.to_str())


def _save_weights(staging: Path, state: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
    as_umask_allows(staging / "model.safetensors")


WRITERS = {"marian": _write_marian, "m2m_100": _write_m2m100}
CLASSES = {"marian": "MarianMTModel", "m2m_100": "M2M100ForConditionalGeneration"}


def export_hf(run_dir: Path, out_dir: Path, checkpoint: str = "best") -> Path:
    """Write ``run_dir``'s ``checkpoint`` as a MarianMTModel folder (a post-norm model) or an
    M2M100ForConditionalGeneration folder (a pre-norm one) ``out_dir`` (new, or empty)."""
    if out_dir.exists() and any(out_dir.iterdir()):
        raise NmtError(f"{out_dir} exists and is not empty: choose a new folder for the Hugging Face model.")
    config = load_run(run_dir)
    problems = ARCHITECTURES[config.model.arch].hf_problems(config.model)
    problems["m2m_100"] = problems["m2m_100"] + _vocabulary_problems(config)
    but_bias = [problem for problem in problems["m2m_100"] if problem != OUTPUT_BIAS]
    if problems["marian"] and but_bias:  # refused before any weight is read
        _refuse(run_dir, problems)
    src_tok, tgt_tok = load_tokenizers(config)
    weights = translation_weights(load_checked_checkpoint(config, checkpoint, src_tok, tgt_tok))
    kind = "marian" if not problems["marian"] else "m2m_100"
    if kind == "m2m_100" and not _bias_holds_out_bos_alone(weights):
        _refuse(run_dir, problems)
    with staged_folder(out_dir) as staging:
        WRITERS[kind](staging, config, weights, src_tok, tgt_tok)
    return out_dir


def _refuse(run_dir: Path, problems: dict[str, list[str]]) -> None:
    shapes = "; ".join(f"as {CLASSES[kind]}, {', '.join(found)}" for kind, found in problems.items())
    raise NmtError(
        f"{run_dir} is a shape neither MarianMTModel nor M2M100ForConditionalGeneration has; it would export "
        f"{shapes}. Train one with those settings (docs/tutorials/transformers.md), or export this one with "
        "`nmt export` (a package, ONNX, CTranslate2, Argos)."
    )
