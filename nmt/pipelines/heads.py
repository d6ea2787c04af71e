"""The attention lab's views of a Transformer (``model.arch: transformer``): every head of every
layer, and one head's scaled dot-product step by step.

Where an RNN has one attention, a Transformer has ``layers × heads`` of each kind: the encoder's
self-attention (source over source), the decoder's causal self-attention (target over the target
so far) and its cross-attention (target over source, the RNN attention's successor). ``Lab``
(nmt/pipelines/lab.py) answers with these for a Transformer (``TransformerInside``):

* ``heads``: for one translation, the weights of every head of every layer of the three kinds;
* ``playback`` of one layer's head: each decoding step with its own numbers — the query q_t,
  the keys k_j, the scores q_t·k_j/√d, their softmax, the context Σ_j α_j v_j — beside the
  equations, as the RNN's playback shows its additive or multiplicative scores.

The numbers are the model's: a forward hook keeps each attention call's inputs as the model makes
it (in the very ``decode_step`` search runs, or the teacher-forced pass, which gives the same
numbers), and ``MultiHeadAttention.explain`` recomputes the call's parts from them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import torch

from nmt.config.schema import ModelConfig
from nmt.data.tokenizer import BOS_ID
from nmt.decoding.search import NEVER_CHOSEN
from nmt.model.transformer.layers import MultiHeadAttention
from nmt.model.transformer.model import Transformer
from nmt.model.transformer.settings import transformer_settings
from nmt.pipelines.lab_views import Edit, Heads, LabInputError, LabParts, LooksInside, Playback, Step, choosable

FORMULA = ["e_tj = q_t · k_j / √d_k", "α_tj = softmax_j(e_tj)", "c_t = Σ_j α_tj v_j"]


@dataclass
class Call:
    """One call of an attention module: which one, and its inputs."""

    name: str  # the module's name in the model: decoder.layers.1.cross_attention
    module: MultiHeadAttention
    args: tuple
    kwargs: dict

    def explain(self) -> dict[str, torch.Tensor]:
        return self.module.explain(*self.args, **self.kwargs)


@contextlib.contextmanager
def attention_inputs(model: Transformer, only: str = "") -> Iterator[list[Call]]:
    """Record every call of the model's attention modules (those whose name holds ``only``)
    during the block, in order."""
    calls: list[Call] = []
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention) and only in name:

            def keep(module, args, kwargs, output, name=name):
                calls.append(Call(name, module, args, kwargs))

            handles.append(module.register_forward_hook(keep, with_kwargs=True))
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def rows(weights: torch.Tensor, queries: int, keys: int, head: int | None = None) -> list[list[list[float]]]:
    """One call's weights (1, heads, T, S) as [head][query][key] lists (``head``: that one only),
    cut to the real positions."""
    kept = weights[0, :, :queries, :keys] if head is None else weights[0, head : head + 1, :queries, :keys]
    return kept.float().cpu().tolist()


@torch.inference_mode()
def all_heads(
    model: Transformer,
    src: torch.Tensor,
    lengths: torch.Tensor,
    target: list[int],
    layer: int | None = None,
    head: int | None = None,
) -> dict:
    """The weights of every attention call of the teacher-forced pass over ``target`` (the ids
    each step emitted), or of ``layer`` (of each kind) and ``head`` alone: ``Heads``' three lists."""
    tgt_in = torch.tensor([[BOS_ID, *target[:-1]]], device=src.device)  # step t is fed what step t-1 emitted
    with attention_inputs(model) as calls:
        model.eval()(src, lengths, tgt_in)
    source, steps = int(lengths[0]), len(target)
    found: dict[str, list] = {"cross": [], "decoder_self": [], "encoder_self": []}
    for call in calls:
        if layer is not None and f".layers.{layer}." not in call.name:
            continue
        weights = call.explain()["weights"]
        if call.name.startswith("encoder."):
            found["encoder_self"].append(rows(weights, source, source, head))
        elif call.name.endswith("cross_attention"):
            found["cross"].append(rows(weights, steps, source, head))
        else:
            found["decoder_self"].append(rows(weights, steps, steps, head))
    return found


@dataclass
class HeadStep:
    """One decoding step of one head, with its own numbers."""

    query: list[float]  # q_t (d)
    scores: list[float]  # q_t · k_j / √d for each source position j
    weights: list[float]  # their softmax
    context: list[float]  # Σ_j α_tj v_j (d): this head's share of the layer's output, before W^O


@torch.inference_mode()
def head_steps(
    model: Transformer, src: torch.Tensor, lengths: torch.Tensor, target: list[int], layer: int, head: int
) -> tuple[list[list[float]], list[HeadStep], list[torch.Tensor]]:
    """Decode ``target`` step by step (``decode_step``, as search does) and keep, at each step,
    the cross-attention of ``layer``'s ``head``: the keys k_j (source × d), each step's parts,
    and each step's logits."""
    model.eval()
    source = int(lengths[0])
    memory, state = model.encode(src, lengths)
    prev = torch.tensor([BOS_ID], device=src.device)
    steps, logits, keys = [], [], []
    for token in target:
        with attention_inputs(model, f"decoder.layers.{layer}.cross_attention") as calls:
            step_logits, state, _ = model.decode_step(prev, state, memory)
        parts = calls[-1].explain()
        keys = parts["keys"][0, head, :source].float().cpu().tolist()
        steps.append(
            HeadStep(
                parts["queries"][0, head, 0].float().cpu().tolist(),
                parts["scores"][0, head, 0, :source].float().cpu().tolist(),
                parts["weights"][0, head, 0, :source].float().cpu().tolist(),
                parts["contexts"][0, head, 0].float().cpu().tolist(),
            )
        )
        logits.append(step_logits[0])
        prev = torch.tensor([token], device=src.device)
    return keys, steps, logits


class TransformerInside(LooksInside):
    """Playback of one head and every head of a Transformer; edit is the RNN's."""

    family = "a Transformer"
    views = ("tree", "playback", "saliency", "heads", "align")

    def playback(
        self, lab: LabParts, text: str, tokens: list[str] | None, top_k: int, layer: int, head: int
    ) -> Playback:
        """Decoder ``layer``'s (−1: the last) ``head``'s cross-attention, step by step."""
        model = cast(Transformer, lab.model())
        layers, heads = model.config.decoder_layers, model.config.heads
        if not (layer == -1 or 0 <= layer < layers):
            raise LabInputError("layer", f"layer must be from 0 to {layers - 1} (or -1, the last), got {layer}")
        if not 0 <= head < heads:
            raise LabInputError("head", f"head must be from 0 to {heads - 1}, got {head}")
        layer %= layers
        src, lengths, source_tokens = lab.source(text)
        target = lab.target_ids(text, tokens)
        keys, parts, logits = head_steps(model, src, lengths, target, layer, head)
        steps = []
        for t, (token, part, step_logits) in enumerate(zip(target, parts, logits)):
            probabilities = step_logits.float().softmax(-1)
            best = choosable(probabilities).topk(min(top_k, probabilities.numel() - len(NEVER_CHOSEN)))
            top = [
                {"token": piece, "probability": p}
                for piece, p in zip(lab.labels(best.indices.tolist()), best.values.tolist())
            ]
            scores: list[float | None] = list(part.scores)
            probability = probabilities[token].item()
            label = lab.labels([token])[0]
            steps.append(Step(t, label, probability, part.query, None, scores, part.weights, part.context, top))
        query_is = (
            f"q_t = W^Q LN(x_t): decoder layer {layer}'s state at step t after its self-attention, "
            f"head {head}'s share ({model.config.embed_dim // heads} of {model.config.embed_dim} dimensions)"
        )
        return Playback(
            source_tokens,
            lab.labels(target),
            "scaled-dot-product",
            "global",
            FORMULA,
            query_is,
            steps,
            layer,
            head,
            layers,
            heads,
            keys,
        )

    def refusal(self, view: str, config: ModelConfig) -> str:
        if view != "edit":
            return super().refusal(view, config)
        heads = transformer_settings(config).heads
        return (
            f"edit replaces one attention's weights, and a Transformer has {config.decoder_layers} x {heads} "
            "cross-attention heads, each one path of several from the source to the output: replacing one "
            "does not make the model attend there, so this view is the RNN's (see heads and playback)"
        )

    def edit(self, lab: LabParts, text: str, step: int, weights: list[float], tokens: list[str] | None) -> Edit:
        raise LabInputError("model", self.refusal("edit", lab.config.model))

    def heads(self, lab: LabParts, text: str, tokens: list[str] | None, layer: int | None, head: int | None) -> Heads:
        """Every head of every layer for ``tokens`` (default: the best translation), or ``layer``'s
        (of each kind) and ``head``'s alone."""
        model = cast(Transformer, lab.model())
        most = max(model.config.encoder_layers, model.config.decoder_layers)
        if layer is not None and not 0 <= layer < most:
            raise LabInputError("layer", f"layer must be from 0 to {most - 1}, got {layer}")
        if head is not None and not 0 <= head < model.config.heads:
            raise LabInputError("head", f"head must be from 0 to {model.config.heads - 1}, got {head}")
        src, lengths, source_tokens = lab.source(text)
        target = lab.target_ids(text, tokens)
        found = all_heads(model, src, lengths, target, layer, head)
        return Heads(source_tokens, lab.labels(target), model.config.heads, **found, layer=layer, head=head)
