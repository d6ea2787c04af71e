"""The Transformer's weights as Hugging Face ``transformers`` names them, both ways: Marian's
(``MarianMTModel``, OPUS-MT) — post-norm, swish, sines-then-cosines from position 0, a final
logits bias — and M2M100's (``M2M100ForConditionalGeneration``, NLLB-200's class too) — pre-norm
with a last norm atop each stack, ReLU, fairseq's sinusoids from position 2, one table for both
sides and the output. What maps where (``transformers``' names on the right)::

    encoder.embedding, decoder.embedding      model.shared (one table) or model.{encoder,decoder}.embed_tokens
    self_attention.query                      self_attn.q_proj
    self_attention.key_value [W^K; W^V]       self_attn.k_proj, v_proj (weights stacked)
    self_attention.value_bias                 self_attn.v_proj.bias
    (no key bias)                             self_attn.k_proj.bias: dropped in, zeros out
    self_attention.out                        self_attn.out_proj
    self_norm, cross_norm, ff_norm            self_attn_layer_norm, encoder_attn_layer_norm, final_layer_norm
    cross_attention                           encoder_attn
    feed_forward.inner, outer                 fc1, fc2
    decoder.output.weight, bias               lm_head.weight, final_logits_bias (M2M100: none, zeros)
    encoder.norm, decoder.norm                encoder.layer_norm, decoder.layer_norm (pre-norm only)

A key's bias adds q·b_K to every score of a query's row alike, which the softmax cancels: this
family's attention has none, and dropping it on the way in changes no output.

Rows of the vocabulary tensors follow this toolkit's ids: ``rows[i]`` is the Hugging Face id of
our id ``i`` (nmt/pipelines/huggingface_import.py builds that map from the tokenizer's files).
"""

from __future__ import annotations

from typing import Any

import torch

from nmt.core.errors import NmtError
from nmt.data.tokenizer import BOS_ID
from nmt.model.transformer.settings import TransformerConfig

# what an imported <bos> row adds to its logit when the model had no such token (Marian starts
# decoding from <pad>): far below any real logit, so its probability is 0 in float32 and float16
NEVER = -1e4
# a Marian export's filler: a row that fills the smaller of two separate vocabularies up to the
# larger's size (<pad> last at one id for both; nmt/export/huggingface.py), named so that no text
# is cut into it and an import leaves it out
FILLER = -1  # its place in an export's order of our ids
FILLER_PREFIX = "<filler:"  # then its number and ">"


def filler_piece(number: int) -> str:
    return f"{FILLER_PREFIX}{number}>"


def is_filler(piece: str) -> bool:
    return piece.startswith(FILLER_PREFIX) and piece.endswith(">") and piece[len(FILLER_PREFIX) : -1].isdigit()


ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}  # transformers' -> ours
MAX_POSITIONS = 1024  # position rows an export writes: more than decoding reaches (decode.max_input_len)
LAYER_NORMS = {
    "self_norm": "self_attn_layer_norm",
    "cross_norm": "encoder_attn_layer_norm",
    "ff_norm": "final_layer_norm",
}
ATTENTIONS = {"self_attention": "self_attn", "cross_attention": "encoder_attn"}


def marian_settings(hf: dict) -> dict[str, Any]:
    """Our model section for a ``MarianConfig`` (its config.json as a dict)."""
    return {
        "arch": "transformer",
        "embed_dim": hf["d_model"],
        "encoder_layers": hf["encoder_layers"],
        "decoder_layers": hf["decoder_layers"],
        "heads": hf["encoder_attention_heads"],
        "ff_dim": hf["encoder_ffn_dim"],
        "activation": ACTIVATIONS[hf.get("activation_function", "gelu")],
        "dropout": float(hf.get("dropout", 0.1)),
        "attention_dropout": float(hf.get("attention_dropout", 0.0)),
        "activation_dropout": float(hf.get("activation_dropout", 0.0)),
        "norm": "post",
        "positions": "marian",
        "scale_embeddings": bool(hf.get("scale_embedding", False)),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)),
    }


def m2m100_settings(hf: dict) -> dict[str, Any]:
    """Our model section for an ``M2M100Config`` (M2M100's, NLLB-200's)."""
    return {
        **marian_settings(hf),
        "activation": ACTIVATIONS[hf.get("activation_function", "relu")],
        "norm": "pre",
        "positions": "fairseq",
        "scale_embeddings": bool(hf.get("scale_embedding", True)),
    }


def m2m100_problems(hf: dict) -> list[str]:
    """What of an M2M100Config this family cannot hold, each with the setting that says so."""
    problems = [problem for problem in marian_problems(hf) if "pre-norm" not in problem]
    if hf.get("pad_token_id", 1) != 1:
        problems.append(f"pad_token_id {hf.get('pad_token_id')} (fairseq's positions here count from pad 1 + 1)")
    return problems


def marian_problems(hf: dict) -> list[str]:
    """What of a MarianConfig this family cannot hold, each with the setting that says so."""
    problems = []
    if hf.get("encoder_attention_heads") != hf.get("decoder_attention_heads"):
        problems.append("encoder_attention_heads differs from decoder_attention_heads (one model.heads here)")
    if hf.get("encoder_ffn_dim") != hf.get("decoder_ffn_dim"):
        problems.append("encoder_ffn_dim differs from decoder_ffn_dim (one model.ff_dim here)")
    if hf.get("activation_function", "gelu") not in ACTIVATIONS:
        problems.append(
            f"activation_function {hf.get('activation_function')!r} (this family: {', '.join(ACTIVATIONS)})"
        )
    if hf.get("normalize_before") or hf.get("add_final_layer_norm"):
        problems.append("pre-norm layers (normalize_before / add_final_layer_norm: not Marian's)")
    return problems


def _rows(table: torch.Tensor, rows: list[int], bos_start: int | None) -> torch.Tensor:
    """``table``'s rows in our id order; our <bos> takes the row decoding starts from."""
    picked = table[torch.tensor(rows)].clone()
    if bos_start is not None:
        picked[BOS_ID] = table[bos_start]
    return picked


def layer_names(prefix: str) -> dict[str, str]:
    """Each tensor of layer ``prefix`` (e.g. ``decoder.layers.0``) that maps one to one: our name
    -> transformers' (without ``model.``). The fused [W^K; W^V] and the keys' bias are apart."""
    names: dict[str, str] = {}
    for norm, their_norm in LAYER_NORMS.items():
        names |= {f"{prefix}.{norm}.{kind}": f"{prefix}.{their_norm}.{kind}" for kind in ("weight", "bias")}
    for attention, their_attention in ATTENTIONS.items():
        theirs = f"{prefix}.{their_attention}"
        names |= {f"{prefix}.{attention}.query.{kind}": f"{theirs}.q_proj.{kind}" for kind in ("weight", "bias")}
        names |= {f"{prefix}.{attention}.out.{kind}": f"{theirs}.out_proj.{kind}" for kind in ("weight", "bias")}
        names[f"{prefix}.{attention}.value_bias"] = f"{theirs}.v_proj.bias"
    for mine, theirs in (("inner", "fc1"), ("outer", "fc2")):
        names |= {f"{prefix}.feed_forward.{mine}.{kind}": f"{prefix}.{theirs}.{kind}" for kind in ("weight", "bias")}
    return names


def weights_from_hf(
    state: dict[str, torch.Tensor],
    hf: dict,
    src_rows: list[int],
    tgt_rows: list[int],
    start: int,
    start_is_new: bool,
) -> dict[str, torch.Tensor]:
    """Our Transformer's weights from a MarianMTModel's or an M2M100ForConditionalGeneration's
    ``state`` (its names, ``model.`` prefix or not). ``start``: the target id decoding starts
    from, our <bos>; ``start_is_new``: the model has no token of its own for it (Marian's <pad>,
    M2M100's </s>), so our <bos> row is never predicted."""
    state = {name.removeprefix("model."): tensor.float() for name, tensor in state.items()}
    shared = state.get("shared.weight")
    source_table = state.get("encoder.embed_tokens.weight", shared)
    target_table = state.get("decoder.embed_tokens.weight", shared)
    if source_table is None or target_table is None:
        raise NmtError("The weights hold no embedding table (model.shared or model.*.embed_tokens).")
    ours: dict[str, torch.Tensor] = {
        "encoder.embedding.weight": _rows(source_table, src_rows, None),
        "decoder.embedding.weight": _rows(target_table, tgt_rows, start),
    }
    output = state.get("lm_head.weight", target_table)
    ours["decoder.output.weight"] = _rows(output, tgt_rows, start)
    if "final_logits_bias" in state or start_is_new:  # Marian's bias, or one that holds out a new <bos>
        bias = state.get("final_logits_bias", torch.zeros(1, output.size(0)))[0]
        ours["decoder.output.bias"] = _rows(bias[:, None], tgt_rows, start)[:, 0]
    if start_is_new:
        ours["decoder.output.bias"][BOS_ID] = NEVER
    for stack, count in (("encoder", hf["encoder_layers"]), ("decoder", hf["decoder_layers"])):
        for kind in ("weight", "bias"):  # a pre-norm stack's last norm (M2M100's; Marian has none)
            if f"{stack}.layer_norm.{kind}" in state:
                ours[f"{stack}.norm.{kind}"] = state[f"{stack}.layer_norm.{kind}"]
        for layer in range(count):
            prefix = f"{stack}.layers.{layer}"
            ours |= {mine: state[theirs] for mine, theirs in layer_names(prefix).items() if theirs in state}
            for attention, their_attention in ATTENTIONS.items():
                keys, values = (state.get(f"{prefix}.{their_attention}.{part}_proj.weight") for part in "kv")
                if keys is not None and values is not None:  # [W^K; W^V], one product here
                    ours[f"{prefix}.{attention}.key_value.weight"] = torch.cat([keys, values])
    return ours


def weights_to_hf(
    weights: dict[str, torch.Tensor], encoder_layers: int, decoder_layers: int
) -> dict[str, torch.Tensor]:
    """The layers, both embedding tables and the output layer of our Transformer's ``weights`` as
    ``transformers`` names them in MarianMTModel and M2M100ForConditionalGeneration alike (one
    tensor per name; ids as ours: the export writes the vocabularies in our order)."""
    theirs: dict[str, torch.Tensor] = {
        "model.encoder.embed_tokens.weight": weights["encoder.embedding.weight"],
        "model.decoder.embed_tokens.weight": weights["decoder.embedding.weight"],
        "lm_head.weight": weights["decoder.output.weight"],
    }
    for stack, count in (("encoder", encoder_layers), ("decoder", decoder_layers)):
        for layer in range(count):
            prefix = f"{stack}.layers.{layer}"
            theirs |= {f"model.{name}": weights[mine] for mine, name in layer_names(prefix).items() if mine in weights}
            for attention, their_attention in ATTENTIONS.items():
                if f"{prefix}.{attention}.key_value.weight" not in weights:
                    continue  # an encoder layer has no cross-attention
                width = weights[f"{prefix}.{attention}.value_bias"].numel()
                keys, values = weights[f"{prefix}.{attention}.key_value.weight"].split(width)
                name = f"model.{prefix}.{their_attention}"
                theirs[f"{name}.k_proj.weight"], theirs[f"{name}.v_proj.weight"] = keys, values
                theirs[f"{name}.k_proj.bias"] = torch.zeros(width)  # the softmax cancels a key's bias
    return {name: tensor.detach().float().contiguous().clone() for name, tensor in theirs.items()}


def exportable_as_marian(m: TransformerConfig) -> list[str]:
    """What keeps settings ``m`` out of MarianMTModel, each as the setting that would let it in."""
    problems = []
    if m.norm != "post":
        problems.append(f"model.norm: post (this one is {m.norm}-norm; Marian normalises after each block)")
    if m.positions != "marian":
        problems.append(f"model.positions: marian (this one's are {m.positions})")
    return problems


OUTPUT_BIAS = (
    "model.output_bias: false (M2M100's output layer has none; fine-tuning a model imported from M2M100 or NLLB, "
    "train.freeze: [output_bias] keeps its bias as the import left it)"
)


def exportable_as_m2m100(m: TransformerConfig) -> list[str]:
    """What keeps settings ``m`` out of M2M100ForConditionalGeneration, each as the setting that
    would let it in (its one vocabulary is the export's to check)."""
    problems = []
    if m.norm != "pre":
        problems.append(f"model.norm: pre (this one is {m.norm}-norm; M2M100 normalises before each block)")
    if m.positions != "fairseq":
        problems.append(f"model.positions: fairseq (this one's are {m.positions})")
    if m.output_bias:  # the export lets one in that holds out <bos> alone, as an import's does
        problems.append(OUTPUT_BIAS)
    return problems


def marian_config(m: TransformerConfig) -> dict[str, Any]:
    """The layers' part of a MarianConfig (config.json) for settings ``m``; M2M100Config's too,
    which names them alike."""
    return {
        "d_model": m.embed_dim,
        "encoder_layers": m.encoder_layers,
        "decoder_layers": m.decoder_layers,
        "encoder_attention_heads": m.heads,
        "decoder_attention_heads": m.heads,
        "encoder_ffn_dim": m.ff_dim,
        "decoder_ffn_dim": m.ff_dim,
        "activation_function": m.activation,  # transformers' names for relu, swish and gelu are ours
        "dropout": m.dropout,
        "attention_dropout": m.attention_dropout,
        "activation_dropout": m.activation_dropout,
        "max_position_embeddings": MAX_POSITIONS,
        "scale_embedding": m.scale_embeddings,
        "tie_word_embeddings": m.tie_embeddings,
    }


def marian_state(m: TransformerConfig, weights: dict[str, torch.Tensor], joint: bool) -> dict[str, torch.Tensor]:
    """A MarianMTModel's state for settings ``m`` and ``weights`` (ids as the caller ordered
    them): the layers, the position tables Marian's formula writes, one shared table too where the
    vocabulary is ``joint``, no lm_head where it is tied."""
    from nmt.model.transformer.layers import Positions

    state = weights_to_hf(weights, m.encoder_layers, m.decoder_layers)
    bias = weights.get("decoder.output.bias")  # none: model.output_bias false
    state["final_logits_bias"] = (bias if bias is not None else torch.zeros(state["lm_head.weight"].size(0)))[None, :]
    table = Positions(m)(0, MAX_POSITIONS, torch.device("cpu"))  # (rows, width)
    state["model.encoder.embed_positions.weight"] = table.clone()
    state["model.decoder.embed_positions.weight"] = table.clone()
    if joint:  # one table: Marian's model.shared, written under each stack's name too: transformers
        # ties them to model.shared only where the output layer is tied as well (tie_word_embeddings)
        state["model.shared.weight"] = state["model.encoder.embed_tokens.weight"].clone()
    if m.tie_embeddings:
        del state["lm_head.weight"]
    return state


def m2m100_config(m: TransformerConfig) -> dict[str, Any]:
    """The layers' part of an M2M100Config (config.json) for settings ``m``."""
    return {**marian_config(m), "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0}


def m2m100_state(m: TransformerConfig, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An M2M100ForConditionalGeneration's state for settings ``m`` and ``weights`` (one joint
    vocabulary, ids as the caller ordered them): one table for both sides (``model.shared``), each
    stack's last norm, no output bias (the caller checked it holds none that counts) and no
    positions (M2M100 computes its own at load time, as fairseq's formula here does)."""
    state = weights_to_hf(weights, m.encoder_layers, m.decoder_layers)
    # one table, written under each stack's name too: transformers ties them to model.shared only
    # where the output layer is tied as well (tie_word_embeddings)
    state["model.shared.weight"] = state["model.encoder.embed_tokens.weight"].clone()
    for stack in ("encoder", "decoder"):
        for kind in ("weight", "bias"):
            state[f"model.{stack}.layer_norm.{kind}"] = weights[f"{stack}.norm.{kind}"].detach().float().clone()
    if m.tie_embeddings:
        del state["lm_head.weight"]
    return state
