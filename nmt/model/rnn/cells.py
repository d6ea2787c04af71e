"""Recurrent cells: what the encoder and both decoder orders run, written once for any cell.

A cell class is PyTorch's recurrent module (``nn.GRU``, ``nn.LSTM``: its parameters, their
initialisation, cuDNN's whole-sequence call and weight flattening) plus what the decoders
need one step at a time. It owns:

* **the state type**: one layer's state is ``h`` (B, H) for a GRU, ``(h, c)`` for an LSTM;
  a stack's state is a tuple of them, bottom layer first (``StackState``). Every cell's state
  starts with ``h``, the part the attention and the output read (``output``);
* **the weight split**: layer 0's input is [E y_{t-1}; rest]; ``split_input`` returns the
  input projection of the embedding part for all steps at once, and the weights for the rest;
* **the one-step kernel** on a precomputed input projection (``advance_layer``: the fast path)
  and the plain step on the whole input (``advance_reference``: ``torch.gru_cell`` and the like,
  the equations as the papers write them);
* **the whole-sequence call** (``sequence``, cuDNN on a GPU) and one direction of one layer
  (``run_direction``, for the padded encoder; cuDNN knows the cell by the module's ``mode``).

``CELLS`` is the registry: ``model.rnn``'s allowed values are its keys. Adding a cell is one
class here (docs/explanation/architecture.md, "Adding a cell"); recurrences run in float32 under autocast.
"""

from __future__ import annotations

from typing import ClassVar, cast

import torch
import torch.nn.functional as F
from torch import nn

from nmt.core.registry import CELLS
from nmt.model.fast import run_in_float32, split_input_gates

LayerState = torch.Tensor | tuple[torch.Tensor, ...]  # one layer: h, or (h, c)
StackState = tuple[LayerState, ...]  # a stack, bottom layer first


def layer_parts(state: LayerState) -> tuple[torch.Tensor, ...]:
    """One layer's state as a tuple, h first: (h,) or (h, c)."""
    return (state,) if isinstance(state, torch.Tensor) else tuple(state)


def layer_state(parts: tuple[torch.Tensor, ...]) -> LayerState:
    """The inverse of ``layer_parts``: h alone, or the tuple (h, c)."""
    return parts[0] if len(parts) == 1 else tuple(parts)


def select_rows(stack: StackState, index: torch.Tensor) -> StackState:
    """Rows ``index`` of every tensor of a stack's state (expanding or reordering beams)."""
    return tuple(layer_state(tuple(part.index_select(0, index) for part in layer_parts(layer))) for layer in stack)


class RecurrentStack:
    """What a cell adds to its ``nn.RNNBase`` module (mixed in before it). Subclasses give
    ``gates``, ``state_parts``, ``reference_cell``, ``kernel`` and ``sequence_op``."""

    gates: ClassVar[int]  # blocks of H rows in weight_ih / weight_hh
    state_parts: ClassVar[int] = 1  # tensors per layer state: 1 (h) or 2 (h, c)

    # the module's own attributes, from nn.RNNBase
    mode: str  # GRU, LSTM, RNN_TANH: the name cuDNN knows the cell by
    hidden_size: int
    num_layers: int
    dropout: float
    training: bool

    @staticmethod
    def reference_cell(inputs: torch.Tensor, state: LayerState, *weights: torch.Tensor) -> LayerState:
        """One step of one layer on its whole input: torch.gru_cell and the like."""
        raise NotImplementedError

    @staticmethod
    def kernel(input_gates: torch.Tensor, weight_hh: torch.Tensor, bias_hh: torch.Tensor, *state) -> LayerState:
        """One step of one layer on input_gates (B, gates·H) = W_ih x + b_ih."""
        raise NotImplementedError

    @staticmethod
    def sequence_op(inputs, initial, weights, training: bool, dropout: float):
        """torch.gru and the like over (B, T, in) batch first -> (outputs, final states...)."""
        raise NotImplementedError

    # ---- the state ----

    @staticmethod
    def output(state: LayerState) -> torch.Tensor:
        """h (B, H) of one layer's state."""
        return layer_parts(state)[0]

    def initial_state(self, bridged: torch.Tensor) -> StackState:
        """The bridge's output (B, layers · state_parts · H) -> the stack's first state: each
        layer's h through tanh (s_0 = tanh(W_s ←h_1)); an LSTM's memory cell c unsquashed."""
        chunks = bridged.chunk(self.num_layers * self.state_parts, dim=-1)
        layers = [chunks[i : i + self.state_parts] for i in range(0, len(chunks), self.state_parts)]
        return tuple(layer_state((torch.tanh(parts[0]), *parts[1:])) for parts in layers)

    def _as_hx(self, stack: StackState):
        """A stack's state as the module's call takes it: (layers, B, H), or a tuple of those."""
        if self.state_parts == 1:
            return torch.stack(cast(tuple[torch.Tensor, ...], stack), 0)  # one tensor per layer: h
        return tuple(torch.stack(parts, 0) for parts in zip(*stack))

    def _from_hx(self, hx) -> StackState:
        if self.state_parts == 1:
            return tuple(hx.unbind(0))
        return tuple(zip(*(part.unbind(0) for part in hx)))

    # ---- weights ----

    def layer_weights(self, layer: int, suffix: str = "") -> list[torch.Tensor]:
        """[weight_ih, weight_hh, bias_ih, bias_hh] of ``layer`` (``suffix`` "_reverse": its backward direction)."""
        return [getattr(self, f"{name}_l{layer}{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]

    def split_input(self, embedded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer 0's input is [embedded; rest]: (W_ie embedded + b_ih for every step (B, T, gates·H),
        W_ir, the weights for the rest, applied inside the loop by ``rest_gates``). Float32
        under autocast, like every input projection of the recurrence."""
        weight_ih, _, bias_ih, _ = self.layer_weights(0)
        return run_in_float32(split_input_gates, embedded, weight_ih, bias_ih)

    @staticmethod
    def rest_gates(rest: torch.Tensor, rest_weight: torch.Tensor) -> torch.Tensor:
        """W_ir · rest (B, gates·H): the rest of layer 0's input projection (float32 under autocast)."""
        return run_in_float32(F.linear, rest, rest_weight)

    # ---- one step, a whole sequence ----

    def between_layers(self, hidden: torch.Tensor) -> torch.Tensor:
        """The module's dropout between stacked layers (training only), as its sequence call applies it."""
        return F.dropout(hidden, self.dropout, self.training) if self.dropout else hidden

    def advance_reference(self, inputs: torch.Tensor, stack: StackState) -> StackState:
        """The plain model: each layer's cell on its whole input (B, in) -> the stack's new state."""
        new: list[LayerState] = []
        for layer, state in enumerate(stack):
            if layer > 0:
                inputs = self.between_layers(self.output(new[-1]))
            new.append(run_in_float32(self.reference_cell, inputs, layer_parts(state), *self.layer_weights(layer)))
        return tuple(new)

    def advance_layer(self, input_gates: torch.Tensor, state: LayerState, layer: int) -> LayerState:
        """One layer's kernel on precomputed input gates, in float32 under autocast."""
        _, weight_hh, _, bias_hh = self.layer_weights(layer)
        return run_in_float32(self.kernel, input_gates, weight_hh, bias_hh, *layer_parts(state))

    def advance(self, input_gates: torch.Tensor, stack: StackState) -> StackState:
        """The fast path: layer 0 on its given input gates (B, gates·H), the layers above on the
        output below -> the stack's new state."""
        new = [self.advance_layer(input_gates, stack[0], 0)]
        for layer in range(1, len(stack)):
            weight_ih, _, bias_ih, _ = self.layer_weights(layer)
            below = self.between_layers(self.output(new[-1]))
            gates = run_in_float32(F.linear, below, weight_ih, bias_ih)
            new.append(self.advance_layer(gates, stack[layer], layer))
        return tuple(new)

    def sequence(self, inputs: torch.Tensor, stack: StackState) -> tuple[torch.Tensor, StackState]:
        """All steps at once (the module's call: cuDNN on a GPU): inputs (B, T, in) and the
        stack's state -> the top layer's outputs (B, T, H) and the final state. Float32 under autocast."""
        outputs, hx = run_in_float32(self, inputs, self._as_hx(stack))
        return outputs, self._from_hx(hx)

    def final_output(self, final) -> torch.Tensor:
        """h_n (layers · directions, B, H) of what the module's call returns as its final state."""
        return layer_parts(final)[0]

    def run_direction(self, inputs: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
        """One direction of one layer over (B, S, in), from a zero state -> outputs (B, S, H)."""
        zeros = inputs.new_zeros(1, inputs.size(0), self.hidden_size)
        initial = zeros if self.state_parts == 1 else (zeros,) * self.state_parts
        return self.sequence_op(inputs, initial, self.layer_weights(layer, suffix), self.training, 0.0)[0]


class GRU(RecurrentStack, nn.GRU):
    """Cho et al. (2014): r = σ(W_r x + U_r h), z = σ(W_z x + U_z h), n = tanh(W_n x + r ⊙ U_n h),
    h' = (1 − z) ⊙ n + z ⊙ h (PyTorch's gate order r, z, n and bias placement)."""

    gates = 3

    @staticmethod
    def reference_cell(inputs, state, *weights):
        return torch.gru_cell(inputs, state[0], *weights)

    @staticmethod
    def kernel(input_gates, weight_hh, bias_hh, hidden):
        hidden_gates = torch.addmm(bias_hh, hidden, weight_hh.t())  # (B, 3H)
        in_r, in_z, in_n = input_gates.chunk(3, dim=-1)
        hid_r, hid_z, hid_n = hidden_gates.chunk(3, dim=-1)
        reset = (in_r + hid_r).sigmoid_()  # in place on fresh sums: fewer tensors written per step
        update = (in_z + hid_z).sigmoid_()
        candidate = torch.addcmul(in_n, reset, hid_n).tanh_()
        return torch.lerp(candidate, hidden, update)  # (1 - z) * n + z * h

    @staticmethod
    def sequence_op(inputs, initial, weights, training, dropout):
        return torch.gru(inputs, initial, weights, True, 1, dropout, training, False, True)


class LSTM(RecurrentStack, nn.LSTM):
    """Hochreiter & Schmidhuber (1997), with a forget gate: i, f, o = σ(W x + U h), g = tanh(W_g x + U_g h),
    c' = f ⊙ c + i ⊙ g, h' = o ⊙ tanh(c') (PyTorch's gate order i, f, g, o). State (h, c)."""

    gates = 4
    state_parts = 2

    @staticmethod
    def reference_cell(inputs, state, *weights):
        return torch.lstm_cell(inputs, state, *weights)

    @staticmethod
    def kernel(input_gates, weight_hh, bias_hh, hidden, memory):
        gates = input_gates + torch.addmm(bias_hh, hidden, weight_hh.t())  # (B, 4H)
        in_gate, forget, candidate, out_gate = gates.chunk(4, dim=-1)
        memory = torch.addcmul(forget.sigmoid() * memory, in_gate.sigmoid(), candidate.tanh())  # c'
        return out_gate.sigmoid() * memory.tanh(), memory

    @staticmethod
    def sequence_op(inputs, initial, weights, training, dropout):
        return torch.lstm(inputs, initial, weights, True, 1, dropout, training, False, True)


CELLS.register("gru", GRU)  # model.rnn's values, in this order
CELLS.register("lstm", LSTM)


def build_cell(name: str, input_size: int, hidden_size: int, layers: int, dropout: float, bidirectional=False):
    """The cell ``model.rnn`` names, batch first; ``dropout`` between stacked layers only."""
    return CELLS[name](
        input_size,
        hidden_size,
        num_layers=layers,
        batch_first=True,
        bidirectional=bidirectional,
        dropout=dropout if layers > 1 else 0.0,
    )
