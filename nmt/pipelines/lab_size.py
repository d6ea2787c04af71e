"""How big a lab view's answer will be, known before any work is done.

Each of the attention lab's views answers with lists of numbers whose count follows from the
sentence's subwords (S), the translation's (T), the beam, the model's widths and the layers and
heads asked for: the heads view of a Transformer grows as layers × heads × (T² + T·S + S²). A
request is sized here from its text's subwords and its given tokens before any work (without
tokens, at least one subword), again once search has made its translation, before the view's own
work, and the answer actually made is measured before it is sent: whichever is first to pass the
server's bound refuses it with what to narrow.
"""

from __future__ import annotations

from dataclasses import dataclass

from nmt.config.schema import Config
from nmt.core.registry import ARCHITECTURES

NUMBER_BYTES = 10  # a number in a lab answer's JSON, as sent (6 significant digits and a separator)
STEP_BYTES = 120  # what a step or a tree node carries besides its numbers (labels, keys, flags)


@dataclass(frozen=True)
class LabSize:
    """A view's answer, before it is made: its numbers, and what narrows it (field, how)."""

    numbers: int
    parts: int  # steps or nodes
    narrow: tuple[tuple[str, str], ...]

    @property
    def bytes(self) -> int:
        return self.numbers * NUMBER_BYTES + self.parts * STEP_BYTES


def lab_size(
    view: str,
    config: Config,
    source: int,
    target: int,
    beam: int = 1,
    top_k: int = 5,
    layer: int | None = None,
    head: int | None = None,
) -> LabSize:
    """The answer of ``view`` for ``source`` subwords (<eos> included) and ``target`` of the
    translation looked at (for the tree: the steps searched)."""
    model, s, t = config.model, source, target
    family = ARCHITECTURES[model.arch]
    layer_heads = (family.head_grid(model) or (model.decoder_layers, 1))[1]  # one attention: one "head"
    fewer_tokens = ("tokens", "send the subwords of a shorter translation, or a shorter text")
    if view == "heads":
        layers = (model.encoder_layers, model.decoder_layers) if layer is None else (1, 1)
        heads = layer_heads if head is None else 1
        numbers = heads * (layers[0] * s * s + layers[1] * (t * t + t * s))
        narrow = (("layer", "ask for one layer"), ("head", "and one head"), fewer_tokens)
        return LabSize(numbers, 0, narrow)
    if view == "tree":
        nodes = 1 + t * 2 * beam  # each step keeps and prunes up to twice the beam
        return LabSize(nodes * (s + 4), nodes, (("beam_size", "a smaller beam_size"), ("text", "a shorter text")))
    if view == "playback":
        numbers = family.playback_numbers(model, s, t, top_k)  # the family's own layout
        return LabSize(numbers, t, (fewer_tokens, ("top_k", "a smaller top_k")))
    if view == "align":  # a word matrix (at most the subwords'), the links, and a figure per head
        return LabSize(t * s + 4 * (t + s) + model.decoder_layers * layer_heads, t, (fewer_tokens,))
    if view == "edit":
        return LabSize(2 * s + 2 * t, 2, (fewer_tokens,))
    return LabSize(2 * s, 1, (("text", "a shorter text"),))  # saliency
