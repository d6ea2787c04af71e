"""The Transformer as a model family (``model.arch: transformer``): its registry entry, the
facts the rest of the toolkit reads of it, and training's and search's calls into its network
(nmt/model/transformer/layers.py)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from nmt.config.schema import Config, ModelConfig
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import OnnxGraphs, TranslationModel
from nmt.model.fast import compiled_for_training
from nmt.model.transformer.graphs import TRANSFORMER_GRAPHS
from nmt.model.transformer.layers import TransformerDecoder, TransformerEncoder, TransformerMemory, TransformerState
from nmt.model.transformer.settings import TransformerConfig, transformer_settings

# nmt tune's default space for the Transformer: the small-data levers of Araabi & Monz (2020) and
# van Biljon et al. (2020) — depth, width, heads, dropout, vocabulary — and the warm-up it needs.
TRANSFORMER_SPACE: dict[str, dict] = {
    "model.width": {"choices": [128, 256, 384]},
    "model.encoder_layers": {"choices": [2, 3, 4, 6]},
    "model.decoder_layers": {"choices": [2, 3, 4, 6]},
    "model.heads": {"choices": [2, 4, 8]},
    "model.ff_dim": {"choices": [512, 1024, 2048]},
    "model.dropout": {"low": 0.1, "high": 0.5},
    "model.attention_dropout": {"low": 0.0, "high": 0.3},
    "tokenizer.src_vocab_size": {"choices": [1000, 2000, 4000]},
    "tokenizer.tgt_vocab_size": {"choices": [1000, 2000, 4000]},
    "train.learning_rate": {"low": 0.0003, "high": 0.003, "log": True},
    "train.lr_warmup": {"choices": [200, 500, 1000, 2000]},
    "train.label_smoothing": {"low": 0.0, "high": 0.3},
    "train.batch_size": {"choices": [32, 64, 128]},
}


@ARCHITECTURES.register("transformer")
class Transformer(TranslationModel):
    """Encoder and decoder of ``model.encoder_layers`` and ``model.decoder_layers`` layers
    (pre- or post-norm), ``model.embed_dim`` wide, through the same protocols as the RNN (``Seq2Seq``):
    ``forward`` for training, ``encode`` / ``decode_step`` for search."""

    settings = TransformerConfig
    config: TransformerConfig
    title = "Transformer translation model"
    has_heads = True
    whole_target = True
    aligning_layer = -2  # the penultimate (Garg et al. 2019; a 1-layer decoder: its only layer)
    guided_head = 0  # Garg et al. supervise one head of that layer: the first
    lab_view = "nmt.pipelines.heads:TransformerInside"
    # the output layer's bias kept as the parent left it: a child of an import from M2M100, whose
    # bias holds out <bos> only, stays exportable to M2M100's class (which has no bias)
    freezable: ClassVar[dict[str, tuple[str, ...]]] = {
        **TranslationModel.freezable,
        "output_bias": ("decoder.output.bias",),
    }

    @classmethod
    def served_settings(cls, given: ModelConfig) -> dict:
        config = transformer_settings(given)
        return {**super().served_settings(given), "heads": config.heads}

    @classmethod
    def head_grid(cls, given: ModelConfig) -> tuple[int, int] | None:
        config = transformer_settings(given)
        return config.decoder_layers, config.heads

    @classmethod
    def describe(cls, given: ModelConfig) -> str:
        m = transformer_settings(given)
        activation = "" if m.activation == "relu" else f" ({m.activation})"
        unscaled = "" if m.scale_embeddings else ", unscaled embeddings"
        return (
            f"{m.norm}-norm Transformer, {m.encoder_layers} encoder and {m.decoder_layers} decoder layer(s), width "
            f"{m.embed_dim}, {m.heads} heads, feed-forward {m.ff_dim}{activation}, {m.positions} positions{unscaled}"
        )

    @classmethod
    def check_training(cls, config: Config) -> None:
        train = config.train
        if train.teacher_forcing < 1.0:
            raise NmtError(
                "Config key 'train.teacher_forcing': a Transformer trains all target positions at once, from the "
                "gold tokens; scheduled sampling (teacher_forcing < 1) is the RNN's. Leave it at 1."
            )
        others = sorted(set(train.freeze) - set(cls.freezable))
        if others:
            raise NmtError(
                f"Config key 'train.freeze': {', '.join(others)} are parts of the RNN; a Transformer's are "
                f"{', '.join(list(cls.freezable)[:-1])} and {list(cls.freezable)[-1]}."
            )

    @classmethod
    def summary(cls, given: ModelConfig) -> str:
        config = transformer_settings(given)
        return f"Transformer {config.encoder_layers}+{config.decoder_layers} layers, {config.heads} heads"

    @classmethod
    def check_model(cls, given: ModelConfig) -> None:
        model = transformer_settings(given)
        if model.embed_dim % model.heads:
            raise NmtError(
                f"model.heads={model.heads} splits model.embed_dim ({model.embed_dim}) among the heads: "
                f"embed_dim must divide by it (e.g. heads: {max(h for h in (1, 2, 4, 8) if model.embed_dim % h == 0)})."
            )

    def training_notes(self, config: Config, device: torch.device) -> list[str]:
        if config.train.lr_warmup:
            return []
        return [
            "A Transformer with no train.lr_warmup: its first full-size steps can derail attention; "
            "configs/eng-mar-transformer.yaml warms up over its first steps."
        ]

    @classmethod
    def tune_space(cls) -> dict[str, dict]:
        return dict(TRANSFORMER_SPACE)

    @classmethod
    def playback_numbers(cls, given: ModelConfig, source: int, target: int, top_k: int) -> int:
        model = transformer_settings(given)
        width = model.embed_dim // max(1, model.heads)
        return target * (2 * width + 2 * source + 2 * top_k) + source * width

    @classmethod
    def onnx_graphs(cls) -> OnnxGraphs:
        return TRANSFORMER_GRAPHS

    def __init__(
        self, config: TransformerConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocabulary: bool = False
    ):
        super().__init__()
        self.config = config
        self.tgt_vocab_size = tgt_vocab_size
        self.encoder = TransformerEncoder(config, src_vocab_size)
        self.decoder = TransformerDecoder(config, tgt_vocab_size)
        if joint_vocabulary and src_vocab_size == tgt_vocab_size:  # tokenizer.joint: one table for both sides
            self.decoder.share_embedding(self.encoder.embedding)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[TransformerMemory, TransformerState]:
        """src (B, S) -> the decoder's memory and an empty cache (the lengths are in the padding)."""
        mask = src.ne(PAD_ID)  # (B, S): the real tokens, <eos> included
        memory = self.decoder.memory(self.encoder(src, mask), mask)
        return memory, self.decoder.initial_state(memory)

    def decode_step(
        self, prev_tokens: torch.Tensor, state: TransformerState, memory: TransformerMemory
    ) -> tuple[torch.Tensor, TransformerState, torch.Tensor]:
        """prev_tokens (B,) -> logits (B, V) float32, the longer cache, the shown attention (B, S):
        the last layer's heads averaged."""
        logits, state, weights = self.decoder.step(prev_tokens, state, memory)
        return logits.float(), state, weights[-1].mean(1).float()

    def cross_attention(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        layer: int | None = None,
        heads: list[int] | None = None,
    ) -> torch.Tensor:
        """Decoder ``layer``'s cross-attention (default ``aligning_layer``; negative counts from the
        last), ``heads`` averaged (default: every head): (B, T, S)."""
        layers, count = self.config.decoder_layers, self.config.heads
        if layer is None:
            layer = self.default_layer()
        if not -layers <= layer < layers:
            raise NmtError(f"layer must be from {-layers} to {layers - 1} (this decoder has {layers}), got {layer}.")
        picked = list(range(count)) if heads is None else heads
        if not picked or any(not 0 <= h < count for h in picked):
            raise NmtError(f"heads must be from 0 to {count - 1} (this model has {count}), got {heads}.")
        memory, _ = self.encode(src, src_lengths)
        weights = self.decoder.cross_weights(tgt_in, memory)[layer]  # (B, heads, T, S)
        return weights[:, picked].mean(1).float()

    @torch.no_grad()
    def every_head(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """The cross-attention of every head of every decoder layer along one translation: src
        (1, S), tgt_in (1, T) <bos> and the tokens -> (layers, heads, T, S), step by step with the
        cache as search decodes (the training timeline records it per epoch)."""
        memory, state = self.encode(src, torch.tensor([src.size(1)]))
        steps = []
        for t in range(tgt_in.size(1)):
            _, state, weights = self.decoder.step(tgt_in[:, t], state, memory, every_layer=True)
            steps.append(torch.stack(weights)[:, 0])  # (layers, heads, S)
        return torch.stack(steps, dim=2).float()  # (layers, heads, T, S)

    def forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor, teacher_forcing: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher-forced pass: logits (B, T, V), and the shown attention (B, T, S) in eval mode
        (in training nobody reads it, and the fused kernels do not make it). All target positions
        at once: ``teacher_forcing`` < 1 (scheduled sampling) is refused by the config."""
        mask = src.ne(PAD_ID)  # (B, S)
        memory = self.decoder.memory(self.encoder(src, mask), mask)
        logits, weights = self.decoder(tgt_in, memory, weights_of=None if self.training else -1)
        return logits, None if weights is None else weights.mean(1)

    def guided_forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor, teacher_forcing: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Garg et al. (2019): one head of the aligning layer (``guided_head``) is the one guided; the
        others attend as they will. -> logits (B, T, V), that head's weights (B, T, S)."""
        mask = src.ne(PAD_ID)  # (B, S)
        memory = self.decoder.memory(self.encoder(src, mask), mask)
        logits, weights = self.decoder(tgt_in, memory, weights_of=self.default_layer())
        assert weights is not None
        return logits, weights[:, self.guided_head]

    def default_layer(self) -> int:
        """``aligning_layer``, or a one-layer decoder's only layer."""
        layers = self.config.decoder_layers
        return self.aligning_layer if -layers <= self.aligning_layer < layers else 0

    @classmethod
    def ctranslate2_layout(
        cls, given: ModelConfig, src_size: int, tgt_size: int
    ) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
        from nmt.model.transformer.ctranslate2_layout import expected_settings, expected_shapes

        config = transformer_settings(given)
        return expected_shapes(config, src_size, tgt_size), expected_settings(config)

    @classmethod
    def hf_problems(cls, given: ModelConfig) -> dict[str, list[str]]:
        from nmt.model.transformer.huggingface import exportable_as_m2m100, exportable_as_marian

        config = transformer_settings(given)
        return {"marian": exportable_as_marian(config), "m2m_100": exportable_as_m2m100(config)}

    @classmethod
    def hf_export(
        cls, kind: str, given: ModelConfig, weights: dict[str, torch.Tensor], joint: bool
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        from nmt.model.transformer.huggingface import m2m100_config, m2m100_state, marian_config, marian_state

        config = transformer_settings(given)
        if kind == "marian":
            return marian_config(config), marian_state(config, weights, joint)
        return m2m100_config(config), m2m100_state(config, weights)

    def ctranslate2_spec(self, src_pieces: list[str], tgt_pieces: list[str]) -> Any:
        from nmt.model.transformer.ctranslate2_spec import transformer_spec

        return transformer_spec(self, src_pieces, tgt_pieces)

    def compile_steps(self, mode: str, backend: str = "inductor") -> None:
        """``train.compile``: compile each layer (shapes dynamic: no recompilation per length);
        under ``reduce-overhead``, search runs the layers eagerly (``compiled_for_training``)."""
        for layer in [*self.encoder.layers, *self.decoder.layers]:
            layer.forward = compiled_for_training(layer.forward, mode, backend)
