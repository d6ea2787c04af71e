"""``nmt export --ctranslate2``: a package's model as a CTranslate2 model folder (int8 on any
CPU), built through CTranslate2's spec API by the model's family (``ctranslate2_spec``) and
converted by CTranslate2's own converter, then checked against PyTorch before it is kept: the
log-probabilities CTranslate2 scores a probe translation with must be PyTorch's (float32:
within ``TOLERANCE``; a quantized model: within ``QUANTIZED_TOLERANCE``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from nmt.core.errors import NmtError
from nmt.data.tokenizer import EOS_ID, Tokenizer
from nmt.decoding.forced import forced_steps
from nmt.model.base import TranslationModel
from nmt.model.transformer.ctranslate2_spec import ctranslate2_module
from nmt.runtime.ctranslate2_engine import FOLDER

# what CTranslate2 stores weights as (CTranslate2's own names); int8: 8-bit weights, the speed on a CPU
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")
TOLERANCE = 1e-3  # float32: the largest difference of a probe token's log-probability
QUANTIZED_TOLERANCE = 0.5  # int8 and the others: close, not equal


def export_ctranslate2(
    model: TranslationModel, src_tok: Tokenizer, tgt_tok: Tokenizer, folder: Path, quantization: str
) -> dict:
    """Write ``model`` as a CTranslate2 model into ``folder`` (new) and check it; returns what the
    manifest records of it."""
    if quantization not in QUANTIZATIONS:
        raise NmtError(f"--quantization {quantization!r}: one of {', '.join(QUANTIZATIONS)}.")
    ctranslate2 = ctranslate2_module()
    model = model.float().cpu().eval()
    family = type(model)
    spec = model.ctranslate2_spec(src_tok.pieces(), tgt_tok.pieces())
    if spec is None:
        raise NmtError(
            f"The model ({model.config.arch}: {family.describe(model.config)}) cannot run on CTranslate2, which runs "
            "Transformers (it declined RNN decoders): export it with --onnx for onnxruntime instead."
        )

    class SpecConverter(ctranslate2.converters.Converter):  # type: ignore[name-defined]
        def _load(self) -> Any:
            return spec

    try:
        SpecConverter().convert(str(folder), quantization=None if quantization == "float32" else quantization)
    except (ValueError, RuntimeError) as error:  # the spec's own validation names the variable
        raise NmtError(f"CTranslate2 refused the model: {error}") from None
    check_parity(model, src_tok, tgt_tok, folder, quantization)
    return {"folder": FOLDER, "quantization": quantization, "ctranslate2": ctranslate2.__version__}


def check_parity(model: TranslationModel, src_tok: Tokenizer, tgt_tok: Tokenizer, folder: Path, quantization: str):
    """CTranslate2's log-probabilities of a probe pair's target tokens against PyTorch's."""
    ctranslate2 = ctranslate2_module()
    source = list(range(4, min(src_tok.vocab_size, 11)))  # a few ordinary pieces
    target = list(range(4, min(tgt_tok.vocab_size, 9)))
    translator = ctranslate2.Translator(str(folder), device="cpu", intra_threads=1)
    scored = translator.score_batch([src_tok.id_to_piece(source)], [tgt_tok.id_to_piece(target)])[0]
    src = torch.tensor([[*source, EOS_ID]])
    fed = torch.tensor([[*target, EOS_ID]])  # each token scored given <bos> and the ones before it
    with torch.no_grad():
        log_probs, _, _ = forced_steps(model, src, torch.tensor([src.size(1)]), fed)
    expected = log_probs[0].gather(1, fed[0].unsqueeze(1)).squeeze(1).tolist()
    got = list(scored.log_probs)
    if len(got) != len(expected):
        raise NmtError(f"CTranslate2 scored {len(got)} tokens of a probe where PyTorch scored {len(expected)}.")
    difference = max(abs(a - b) for a, b in zip(got, expected))
    allowed = TOLERANCE if quantization == "float32" else QUANTIZED_TOLERANCE
    if not difference <= allowed:
        raise NmtError(
            f"The model exported to CTranslate2 ({quantization}) differs from PyTorch: a token's log-probability "
            f"by {difference:.2e} (allowed {allowed:.0e}). It cannot be exported faithfully."
        )
