"""``nmt export --hf``: a Transformer trained here as a folder ``transformers`` loads with no
custom code — ``AutoModelForSeq2SeqLM`` gives a ``MarianMTModel``, ``AutoTokenizer`` a
``MarianTokenizer`` — so that ``generate()``, ``Seq2SeqTrainer``, BertViz and the Hub take it
as one of their own.

Marian's layers are post-norm with sines-then-cosines positions from 0: a model of those
settings (``model.norm: post``, ``model.positions: marian``) exports; another is refused naming
them. Ids: Marian's vocabularies end with <pad> (CTranslate2's converter drops that last row),
so the export writes ours shifted by one — <unk> 0, <bos> 1, <eos> 2, the pieces, <pad> last —
and decoding starts from <bos>, as it does here. Both SentencePiece models are copied as they
are: MarianTokenizer maps their pieces through vocab.json (target_vocab.json for the target,
unless one joint vocabulary serves both).
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
from nmt.data.tokenizer import BOS_ID, EOS, EOS_ID, PAD, PAD_ID, UNK, Tokenizer
from nmt.runtime.checkpoint import translation_weights
from nmt.runtime.loading import load_checked_checkpoint, load_run, load_tokenizers
from nmt.runtime.parent import VOCABULARY_TENSORS


def hf_order(size: int) -> list[int]:
    """Our ids in the export's order: ``hf_order(V)[j]`` is our id of Hugging Face id ``j`` (ours
    shifted down by one, <pad> last)."""
    return [*range(1, size), PAD_ID]


def _vocabulary(tokenizer: Tokenizer) -> dict[str, int]:
    pieces = tokenizer.pieces()
    return {pieces[ours]: index for index, ours in enumerate(hf_order(len(pieces)))}


def _reordered(weights: dict[str, torch.Tensor], src_size: int, tgt_size: int) -> dict:
    """``weights`` with every vocabulary tensor's rows in the export's order."""
    sizes = {"src": src_size, "tgt": tgt_size}
    return {
        name: tensor[torch.tensor(hf_order(sizes[VOCABULARY_TENSORS[name]]))] if name in VOCABULARY_TENSORS else tensor
        for name, tensor in weights.items()
    }


def _settings_files(config: Config, layers: dict, src_tok: Tokenizer, tgt_tok: Tokenizer) -> dict[str, dict]:
    """config.json (``layers``: the family's part of it), generation_config.json and
    tokenizer_config.json of the export."""
    joint = config.tokenizer.joint

    def hf_id(ours: int) -> int:
        return hf_order(tgt_tok.vocab_size).index(ours)

    hf_config = {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": src_tok.vocab_size,
        "decoder_vocab_size": tgt_tok.vocab_size,
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


def export_hf(run_dir: Path, out_dir: Path, checkpoint: str = "best") -> Path:
    """Write ``run_dir``'s ``checkpoint`` as a MarianMTModel folder ``out_dir`` (new, or empty)."""
    from safetensors.torch import save_file

    if out_dir.exists() and any(out_dir.iterdir()):
        raise NmtError(f"{out_dir} exists and is not empty: choose a new folder for the Hugging Face model.")
    config = load_run(run_dir)
    family = ARCHITECTURES[config.model.arch]
    problems = family.marian_problems(config.model)
    if problems:
        raise NmtError(
            f"{run_dir} is not a shape MarianMTModel has; it would export with "
            + "; ".join(problems)
            + ". Train one with those settings in its config's model section (docs/tutorials/transformers.md), "
            "or export this one with `nmt export` (a package, ONNX, CTranslate2, Argos)."
        )
    src_tok, tgt_tok = load_tokenizers(config)
    weights = translation_weights(load_checked_checkpoint(config, checkpoint, src_tok, tgt_tok))
    weights = _reordered(weights, src_tok.vocab_size, tgt_tok.vocab_size)
    joint = config.tokenizer.joint
    layers, state = family.marian_export(config.model, weights, joint)
    files = _settings_files(config, layers, src_tok, tgt_tok)
    with staged_folder(out_dir) as staging:
        save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
        as_umask_allows(staging / "model.safetensors")
        for name, settings in files.items():
            write_text_atomic(staging / name, json.dumps(settings, indent=2))
        write_text_atomic(staging / "vocab.json", json.dumps(_vocabulary(src_tok), ensure_ascii=False))
        if not joint:
            write_text_atomic(staging / "target_vocab.json", json.dumps(_vocabulary(tgt_tok), ensure_ascii=False))
        shutil.copyfile(src_tok.path, staging / "source.spm")
        shutil.copyfile(tgt_tok.path, staging / "target.spm")
    return out_dir
