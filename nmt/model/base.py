"""What every model family (``model.arch``: the ``ARCHITECTURES`` registry) is: a
``TranslationModel``, and ``build_model``, the one way to make one from a config.

Training calls ``forward``; search calls ``encode`` and ``decode_step`` (the ``SearchModel``
protocol of ``nmt.decoding.search``), whose memory and state are the family's own types, each
with a ``select`` of rows. So the trainer, search, ensembles, packages and transfer work on any
family: the RNN (nmt/model/rnn/model.py), the Transformer (nmt/model/transformer/), a plugin's.

The registry's entry is the family's class, and the class carries the family's facts: what the
config's checks, the training log, the model card, the lab, ONNX export and ``nmt tune`` read,
never a family's name (as an ``AttentionKind`` does for an attention). A plugin family that sets
none of them still trains, translates and packages; what it does not declare (heads, ONNX graphs,
a tune space) is refused by its name where it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from nmt.config.schema import Config, ModelConfig
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES


@dataclass(frozen=True)
class OnnxGraphs:
    """A model family's two graphs of flat, named tensors (nmt/model/graphs.py), as its entry gives
    them (``onnx_graphs``): what export traces and names, and what an engine feeds back step by step."""

    memory_names: Callable[[ModelConfig], list[str]]  # the flat memory's names
    state_names: Callable[[ModelConfig], list[str]]  # the flat decoder state's names
    modules: Callable[[Any], tuple[nn.Module, nn.Module]]  # (encoder graph, decoder-step graph)
    # decoder steps run before the step is traced: a cache that grows is traced at a length above zero
    steps_before_tracing: int = 0
    extra_outputs: tuple[str, ...] = ()  # the step's outputs after the next state ("heads")
    # the dynamic axes by name; None: found by comparing the probe's tensors with the source's length
    axes: Callable[[list[str]], dict[str, dict[int, str]]] | None = None


class TranslationModel(nn.Module):
    """An encoder-decoder of one family. Its weights' names start ``encoder.embedding.`` and
    ``decoder.embedding.`` / ``decoder.output.`` for the vocabulary-indexed tensors (what transfer
    maps row by row), ``encoder.`` and ``decoder.`` for the rest (what ``train.freeze`` names)."""

    config: ModelConfig
    # the target ids search feeds after <bos> before it chooses any (the target's language code,
    # tokenizer.tgt_code: nmt.runtime.loading.new_model sets it; nmt.decoding.search.target_start reads it)
    target_start: tuple[int, ...] = ()
    tgt_vocab_size: int  # the output layer's size

    # ---- the family's facts ----
    # the family's settings: ModelConfig's shared keys, and a subclass's own (the model section of
    # its configs; another family's keys are not read, and the training log names those set)
    settings: ClassVar[type[ModelConfig]] = ModelConfig
    title: ClassVar[str] = "translation model"  # the model card's title: "Transformer translation model"
    # ``every_head(src, tgt_in)``: each head of each layer, for the lab's heads view and the timeline
    has_heads: ClassVar[bool] = False
    recurrent: ClassVar[bool] = False  # its steps are recurrences (kept in float32 under mixed precision)
    # its layers see every target position at once, so a graphed step pads the target length too
    whole_target: ClassVar[bool] = False
    # the decoder layer whose cross-attention word alignments read by default (None: its one attention)
    aligning_layer: ClassVar[int | None] = None
    # of a family with heads: the head of that layer train.guided_alignment guides (None: its one attention)
    guided_head: ClassVar[int | None] = None
    # the attention lab's view into it (playback, edit, heads): "module:Class" of a LooksInside
    # (nmt/pipelines/lab_views.py), imported by name as a registry's entries are; "": the lab's
    # tree and saliency only (they read what every model has)
    lab_view: ClassVar[str] = ""
    # what train.freeze may name of it: each part by the prefixes of its weights' names
    freezable: ClassVar[dict[str, tuple[str, ...]]] = {
        "src_embeddings": ("encoder.embedding.",),
        "tgt_embeddings": ("decoder.embedding.",),
        "embeddings": ("encoder.embedding.", "decoder.embedding."),
        "encoder": ("encoder.",),
        "decoder": ("decoder.",),
    }
    # model switches (keys of its settings) a child may turn on over a parent without them, its
    # new weights made by ``grow_from`` so that it starts as the parent's function (nmt/runtime/parent.py)
    addable: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def describe(cls, config: ModelConfig) -> str:
        """The model's layout in one line (the model card, a refused export)."""
        return f"{cls.__name__} (model.arch: {config.arch})"

    @classmethod
    def summary(cls, config: ModelConfig) -> str:
        """The model in a few words, for the page's model list."""
        return f"model.arch {config.arch}"

    @classmethod
    def shows_attention(cls, config: ModelConfig) -> bool:
        """Whether the model's attention has weights over the source to draw (heatmaps, TensorBoard)."""
        return True

    @classmethod
    def served_settings(cls, config: ModelConfig) -> dict:
        """The settings ``/api/models`` shows of a model of this family (its layers; a family adds its own)."""
        return {"layers": [config.encoder_layers, config.decoder_layers]}  # encoder, decoder

    @classmethod
    def head_grid(cls, config: ModelConfig) -> tuple[int, int] | None:
        """Where ``has_heads``: (decoder layers, heads a layer), the grid of cross-attention heads."""
        return None

    @classmethod
    def check_model(cls, model: ModelConfig) -> None:
        """Refuse (``NmtError``) model settings that each make sense alone but not together."""

    @classmethod
    def check_training(cls, config: Config) -> None:
        """Refuse (``NmtError``) training settings this family has no use for."""

    def training_notes(self, config: Config, device: torch.device) -> list[str]:
        """Lines for the training log about this model on ``device``: a choice made for it, or a
        setting that is allowed but unwise for its family."""
        return []

    @classmethod
    def tune_space(cls) -> dict[str, dict] | None:
        """``nmt tune``'s default search space for this family (None: a space must be given)."""
        return None

    @classmethod
    def playback_numbers(cls, model: ModelConfig, source: int, target: int, top_k: int) -> int:
        """About how many numbers the lab's playback of a ``target``-token translation of a
        ``source``-token sentence holds (its answer is sized before it is made)."""
        return target * (3 * source + 2 * top_k + model.embed_dim)

    @classmethod
    def onnx_graphs(cls) -> OnnxGraphs | None:
        """The family's encoder and decoder-step graphs for ONNX export and engines (None: not exported)."""
        return None

    def ctranslate2_spec(self, src_pieces: list[str], tgt_pieces: list[str]) -> Any | None:
        """The model as a CTranslate2 spec (``ctranslate2.specs``) over these vocabularies' pieces,
        for ``nmt export --ctranslate2``; None: CTranslate2 cannot run this family (it runs
        Transformers; it declined RNN decoders, CTranslate2 #796)."""
        return None

    @classmethod
    def ctranslate2_layout(
        cls, config: ModelConfig, src_size: int, tgt_size: int
    ) -> tuple[dict[str, tuple[int, ...]], dict[str, int]] | None:
        """What ``ctranslate2_spec`` writes for a model of ``config`` over vocabularies of these
        sizes: each float variable's shape by name, and the integer settings of ``model.bin``
        (what a CTranslate2 folder is held to before it loads); None: no CTranslate2 model."""
        return None

    @classmethod
    def hf_problems(cls, config: ModelConfig) -> dict[str, list[str]]:
        """For each ``transformers`` class ``nmt export --hf`` writes, by its model_type (marian:
        MarianMTModel, m2m_100: M2M100ForConditionalGeneration): what keeps a model of ``config``
        out of it, each as the setting that would let it in; [] where it exports."""
        refused = [f"model.arch: transformer (both classes are Transformers; this model is {config.arch})"]
        return {"marian": refused, "m2m_100": refused}

    @classmethod
    def hf_export(
        cls, kind: str, config: ModelConfig, weights: dict[str, torch.Tensor], joint: bool
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """The layers' part of class ``kind``'s config.json and its state for a model of ``config``
        with ``weights`` (called only where ``hf_problems`` found none for ``kind``)."""
        raise NotImplementedError(cls.hf_problems(config)[kind])

    def grow_from(self, name: str, parent_weight: torch.Tensor | None, weight: torch.Tensor) -> tuple[str, str] | None:
        """Where a switch of ``addable`` is on in this model and off in its parent: fill ``weight``
        (this model's tensor ``name``; the parent's, if it has one, ``parent_weight``) so that the
        model starts as the parent's function, and name what was added (a key, words); None: the
        weight is the parent's, copied as it is."""
        return None

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[Any, Any]:
        """src (B, S), src_lengths (B,) on the CPU -> (memory, the decoder's first state)."""
        raise NotImplementedError

    def decode_step(self, prev_tokens: torch.Tensor, state: Any, memory: Any) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """prev_tokens (B,) -> logits (B, V) float32, the new state, attention weights (B, S)."""
        raise NotImplementedError

    def every_head(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Where ``has_heads``: the cross-attention of every head of every decoder layer along one
        translation, src (1, S), tgt_in (1, T) -> (layers, heads, T, S)."""
        raise NotImplementedError(f"{type(self).__name__} has no heads (has_heads is False)")

    def cross_attention(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        layer: int | None = None,
        heads: list[int] | None = None,
    ) -> torch.Tensor:
        """Teacher-forced, in eval mode and without gradients: the attention over the source at
        each target step, src (B, S), tgt_in (B, T) <bos> and the target -> (B, T, S) float32, what
        word alignments read. ``layer`` and ``heads`` choose among a family's heads."""
        if layer is not None or heads is not None:
            raise NmtError(f"{type(self).__name__} has one attention: a layer and heads are a Transformer's.")
        _, attention = self(src, src_lengths, tgt_in)
        if attention is None:
            raise NmtError(f"{type(self).__name__} gives no attention weights to align with.")
        return attention.float()

    def guided_forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor, teacher_forcing: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training's pass under ``train.guided_alignment``: the logits (B, T, V) and the attention
        the reference links supervise (B, T, S), with its gradient. By default the family's one
        attention, what ``forward`` returns."""
        logits, attention = self(src, src_lengths, tgt_in, teacher_forcing)
        if attention is None:
            raise NmtError(f"{type(self).__name__} gives no attention weights for train.guided_alignment to guide.")
        return logits, attention

    def compile_steps(self, mode: str, backend: str = "inductor") -> None:
        """``train.compile``: compile what runs most often."""
        raise NotImplementedError


def build_model(
    config: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocabulary: bool = False
) -> TranslationModel:
    """A new model of the family ``config.arch`` names, freshly initialised."""
    return ARCHITECTURES[config.arch](config, src_vocab_size, tgt_vocab_size, joint_vocabulary)


def count_parameters(model: nn.Module) -> int:
    """The weights training updates."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
