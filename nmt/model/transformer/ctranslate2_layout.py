"""What a Transformer's CTranslate2 model holds, as nmt/model/transformer/ctranslate2_spec.py
writes it: each variable's name and shape, and the integer settings of ``model.bin``. A folder
read back (nmt/runtime/ctranslate2_files.py) is held to it before CTranslate2 loads it."""

from __future__ import annotations

from nmt.model.transformer.ctranslate2_spec import ACTIVATIONS, POSITION_ROWS
from nmt.model.transformer.settings import TransformerConfig


def expected_shapes(m: TransformerConfig, src_size: int, tgt_size: int) -> dict[str, tuple[int, ...]]:
    """The float variables a Transformer of settings ``m`` exports (nmt/model/transformer/ctranslate2_spec.py),
    each weight matrix by name; a quantized weight adds its ``weight_scale`` (one per row)."""
    width, inner = m.embed_dim, m.ff_dim
    shapes: dict[str, tuple[int, ...]] = {}

    def norm(scope: str) -> None:
        shapes[f"{scope}/gamma"] = shapes[f"{scope}/beta"] = (width,)

    def linear(scope: str, rows: int, columns: int) -> None:
        shapes[f"{scope}/weight"], shapes[f"{scope}/bias"] = (rows, columns), (rows,)

    def feed_forward(scope: str) -> None:
        norm(f"{scope}/layer_norm")
        linear(f"{scope}/linear_0", inner, width)
        linear(f"{scope}/linear_1", width, inner)

    def self_attention(scope: str) -> None:  # the queries, keys and values fused in one projection
        norm(f"{scope}/self_attention/layer_norm")
        linear(f"{scope}/self_attention/linear_0", 3 * width, width)
        linear(f"{scope}/self_attention/linear_1", width, width)

    shapes["encoder/embeddings_0/weight"] = (src_size, width)
    shapes["decoder/embeddings/weight"] = (tgt_size, width)
    shapes["encoder/position_encodings/encodings"] = (POSITION_ROWS, width)
    shapes["decoder/position_encodings/encodings"] = (POSITION_ROWS, width)
    for layer in range(m.encoder_layers):
        self_attention(f"encoder/layer_{layer}")
        feed_forward(f"encoder/layer_{layer}/ffn")
    for layer in range(m.decoder_layers):
        scope = f"decoder/layer_{layer}"
        self_attention(scope)
        norm(f"{scope}/attention/layer_norm")
        linear(f"{scope}/attention/linear_0", width, width)
        linear(f"{scope}/attention/linear_1", 2 * width, width)
        linear(f"{scope}/attention/linear_2", width, width)
        feed_forward(f"{scope}/ffn")
    if m.norm == "pre":
        norm("encoder/layer_norm")
        norm("decoder/layer_norm")
    linear("decoder/projection", tgt_size, width)
    return shapes


def expected_settings(m: TransformerConfig) -> dict[str, int]:
    """The integer settings ``model.bin`` holds for settings ``m``, as the export writes them:
    what CTranslate2's loader indexes and divides by, and what changes the network it builds."""
    heads = m.heads
    both = {
        "num_heads": heads,
        "pre_norm": int(m.norm == "pre"),
        "activation": ACTIVATIONS[m.activation],
        "scale_embeddings": int(m.scale_embeddings),
    }
    settings = {f"{stack}/{key}": value for stack in ("encoder", "decoder") for key, value in both.items()}
    settings.update({"encoder/embeddings_merge": 0, "encoder/multi_query_attention": 0})
    settings.update({f"decoder/{key}": 0 for key in ("alibi", "alibi_use_positive_positions", "scale_alibi")})
    settings.update(
        {"decoder/alignment_layer": -1, "decoder/alignment_heads": heads, "decoder/start_from_zero_embedding": 0}
    )
    return settings
