"""Tiny random Hugging Face translation models built offline, as ``transformers``' own tests
build theirs: a config, random weights, and tokenizers from small SentencePiece models trained
here on synthetic sentences. Nothing is downloaded."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from .helpers import synthetic_pairs

EOS_BIAS, EMBEDDING_STD = 0.0, 1.0
MARIAN_SPECIALS = ["</s>", "<unk>"]  # ids 0 and 1, as OPUS-MT's vocab.json has them; <pad> is the last
# both tiny models' layers: 2 + 2, 16 wide, 4 heads, a feed-forward width of 32
LAYERS = dict(
    d_model=16,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=32,
    decoder_ffn_dim=32,
    max_position_embeddings=128,
)


def _sharpened(model) -> None:
    """Weights far from the initialisation: distinct, sharp predictions."""
    for name, parameter in model.named_parameters():
        parameter.normal_(1.0 if name.endswith("layer_norm.weight") else 0.0, 0.3 if parameter.dim() > 1 else 0.1)


def _spm(sentences: list[str], path: Path, size: int) -> list[str]:
    """A unigram SentencePiece model as OPUS-MT's are (no byte fallback, <unk> 0, <s> 1, </s> 2),
    and its pieces in id order."""
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=buffer,
        vocab_size=size,
        model_type="unigram",
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
    )
    path.write_bytes(buffer.getvalue())
    processor = spm.SentencePieceProcessor(model_file=str(path))
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def tiny_marian(folder: Path, shared: bool = True, seed: int = 0) -> Path:
    """A MarianMTModel folder: 2+2 post-norm layers 16 wide, swish, shared (one vocab.json for
    both sides, one embedding table) or separate vocabularies, and its tokenizer's files."""
    transformers = pytest.importorskip("transformers")
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    pairs = synthetic_pairs()
    source = _spm([p[0] for p in pairs], folder / "source.spm", 60)
    target = _spm([p[1] for p in pairs], folder / "target.spm", 60)

    def vocabulary(pieces: list[str]) -> dict[str, int]:
        """OPUS-MT's order; filled past this toolkit's least vocabulary (300) with pieces the
        SentencePiece models never produce (a joint vocabulary holds the other side's, too)."""
        pieces = [p for p in pieces if p not in ("<unk>", "<s>", "</s>")]
        pieces += [f"▁unused{i}" for i in range(320 - len(pieces))]
        ordered = MARIAN_SPECIALS + pieces + ["<pad>"]
        return {piece: index for index, piece in enumerate(dict.fromkeys(ordered))}

    if shared:
        vocab = vocabulary(source + target)
        (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        sizes = {"vocab_size": len(vocab), "decoder_vocab_size": len(vocab)}
        pad = start = vocab["<pad>"]
    else:
        vocab, target_vocab = vocabulary(source), vocabulary(target)
        (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        (folder / "target_vocab.json").write_text(json.dumps(target_vocab), encoding="utf-8")
        sizes = {"vocab_size": len(vocab), "decoder_vocab_size": len(target_vocab)}
        pad, start = vocab["<pad>"], target_vocab["<pad>"]  # decoding starts from the target's <pad>
    config = transformers.MarianConfig(
        **sizes,
        **LAYERS,
        activation_function="swish",
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=start,
        forced_eos_token_id=0,
        scale_embedding=True,
        share_encoder_decoder_embeddings=shared,
        dropout=0.0,
    )
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        _sharpened(model)
        model.final_logits_bias.normal_(0, 1.0)
        model.final_logits_bias[0, 0] = EOS_BIAS
        for table in (model.model.encoder.embed_tokens.weight, model.model.decoder.embed_tokens.weight):
            table.normal_(0, EMBEDDING_STD)  # (tied: the output layer's too) sharp, context-dependent predictions
        # <pad> (the last row) zeros, as in OPUS-MT (converted from Marian: its decoder starts from zeros)
        model.model.encoder.embed_tokens.weight[-1].zero_()
        model.model.decoder.embed_tokens.weight[-1].zero_()
    model.save_pretrained(folder)
    tokenizer = transformers.MarianTokenizer(
        str(folder / "source.spm"),
        str(folder / "target.spm"),
        str(folder / "vocab.json"),
        target_vocab_file=None if shared else str(folder / "target_vocab.json"),
        separate_vocabs=not shared,
    )
    tokenizer.save_pretrained(folder)
    return folder


def tiny_m2m100(folder: Path, seed: int = 0, tokenizer_class: str = "M2M100Tokenizer") -> Path:
    """An M2M100ForConditionalGeneration folder (NLLB-200's class): 2+2 pre-norm layers 16 wide,
    ReLU, one BPE vocabulary for both sides (fairseq's order: <s> <pad> </s> <unk>, the pieces,
    then the language codes), and its tokenizer's files: M2M100Tokenizer's (vocab.json, its 100
    codes __en__ ... and 8 made-up words appended) or NllbTokenizer's (tokenizer.json, from the
    SentencePiece model with NLLB's 202 codes eng_Latn ...)."""
    transformers = pytest.importorskip("transformers")
    import sentencepiece as spm
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    pairs = synthetic_pairs()
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([p[0] for p in pairs] + [p[1] for p in pairs]),
        model_writer=buffer,
        vocab_size=120,
        model_type="bpe",
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
    )
    (folder / "sentencepiece.bpe.model").write_bytes(buffer.getvalue())
    processor = spm.SentencePieceProcessor(model_file=str(folder / "sentencepiece.bpe.model"))
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    pieces = [p for p in pieces if p not in ("<unk>", "<s>", "</s>")]
    pieces += [f"▁unused{i}" for i in range(200 - len(pieces))]
    vocab = {piece: index for index, piece in enumerate(dict.fromkeys(["<s>", "<pad>", "</s>", "<unk>", *pieces]))}
    if tokenizer_class == "NllbTokenizer":
        from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

        (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "NllbTokenizer"}', encoding="utf-8")
        tokenizer = transformers.NllbTokenizer.from_pretrained(
            folder, extra_special_tokens=FAIRSEQ_LANGUAGE_CODES, src_lang="eng_Latn", tgt_lang="mar_Deva"
        )
        rows, first_code = len(tokenizer), processor.get_piece_size() + 1  # NLLB's ids: the model's, shifted by one
    else:
        (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        tokenizer = transformers.M2M100Tokenizer(
            str(folder / "vocab.json"), str(folder / "sentencepiece.bpe.model"), src_lang="en", tgt_lang="mr"
        )
        rows, first_code = len(vocab) + 108, len(vocab)  # the language codes and made-up words after vocab.json's
    config = transformers.M2M100Config(
        vocab_size=rows,
        **LAYERS,
        activation_function="relu",
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        scale_embedding=True,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    torch.manual_seed(seed)
    model = transformers.M2M100ForConditionalGeneration(config).eval()
    with torch.no_grad():
        _sharpened(model)
        model.model.shared.weight.normal_(0, EMBEDDING_STD)  # the encoder's, decoder's and output's table
        model.model.shared.weight[1].zero_()  # <pad>, fairseq's padding row
        model.model.shared.weight[first_code:].mul_(0.1)  # the codes: read, rarely written
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def imported(root: Path, kind: str) -> tuple[Path, Path, str | None]:
    """A tiny folder of ``kind`` (marian-shared, marian-separate: one vocabulary or two; m2m100,
    nllb: the class with M2M100's or NLLB's tokenizer) under ``root``, its import as a run (en ->
    mr), and the target's language code, if the model has codes."""
    from nmt.pipelines.huggingface_import import import_hf

    if kind in ("m2m100", "nllb"):
        tokenizer_class = "NllbTokenizer" if kind == "nllb" else "M2M100Tokenizer"
        folder = tiny_m2m100(root / f"{kind}-tiny", tokenizer_class=tokenizer_class)
        import_hf(str(folder), root / "run", "en", "mr", log=lambda message: None)
        return folder, root / "run", "mar_Deva" if kind == "nllb" else "__mr__"
    folder = tiny_marian(root / "opus-mt-en-mr", shared=kind == "marian-shared")
    import_hf(str(folder), root / "run", "", "", log=lambda message: None)  # the languages from the OPUS-MT name
    return folder, root / "run", None
