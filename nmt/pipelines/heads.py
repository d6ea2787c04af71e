"""The attention lab's views of a Transformer (``model.arch: transformer``): every head of every
layer, and one head's scaled dot-product step by step.

Where an RNN has one attention, a Transformer has ``layers × heads`` of each kind: the encoder's
self-attention (source over source), the decoder's causal self-attention (target over the target
so far) and its cross-attention (target over source, the RNN attention's successor). ``Lab``
(nmt/pipelines/lab.py) answers with these for a Transformer:

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

import torch

from nmt.data.tokenizer import BOS_ID
from nmt.model.transformer import MultiHeadAttention, Transformer

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


@dataclass
class Heads:
    """Every head of every layer for one translation: [layer][head][query position][key position]."""

    source_tokens: list[str]
    tokens: list[str]  # the target subwords, <eos> last where the translation ended
    heads: int
    cross: list  # decoder layer -> head -> target step -> source position
    decoder_self: list  # decoder layer -> head -> target step -> target step (causal: later ones are 0)
    encoder_self: list  # encoder layer -> head -> source position -> source position
    layer: int | None = None  # asked for one layer (of each kind): the lists hold it alone
    head: int | None = None  # asked for one head: each layer's list holds it alone

    def to_json(self) -> dict:
        return self.__dict__


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
