"""The fast path: the same computations as the plain model, arranged to run faster.

Every piece here has an equivalence test against the plain computation it replaces
(``tests/test_fast_path.py``); docs/benchmarks.md has what each one buys.

* **Precomputed input gates.** A decoder cell's input is [E y_{t-1}; other_t]; the embedding
  half of its input gates, W_ie E y_{t-1} + b_ih, does not depend on the recurrence.
  Teacher-forced loops compute it for all steps in one matrix product (``split_input_gates``);
  search looks it up in a per-vocabulary table (``InputGateTable``). Each step then adds only
  W_io other_t and runs the cell's gate math (``RecurrentStack.advance_layer``, nmt/model/rnn/cells.py).
* **Padded bidirectional encoder** (``model.rnn_input: padded``): one cuDNN call per
  direction over the padded batch, each sentence reversed within its length, instead of
  packed sequences.
* **Compiled step bodies** (``train.compile``): ``torch.compile`` of the decoder's per-step body.
  With ``reduce-overhead`` on a CUDA GPU the compiled body is replayed as a CUDA graph, one
  launch for the step's kernels; a graph holds one shape, so training pads each batch to a
  bucket of ``GRAPH_BUCKET`` (rows, source positions): a few dozen shapes, each captured once.
  Search runs the body eagerly then (``graphed_in_training_only``). A Transformer's layers are
  compiled the same way (``compiled_for_training``).

Under mixed precision the recurrences stay in float32 (``run_in_float32``).
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn.functional as F


def run_in_float32(function, *args):
    """``function(*args)`` with autocast off and floating-point tensors in float32, where
    autocast is on: a recurrent state must not be rounded to 16 bits at every step, and
    cuDNN's autocast runs an RNN in fp16 whatever dtype was asked for. A plain call otherwise."""
    device_type = _first_tensor(args).device.type
    if not torch.is_autocast_enabled(device_type):
        return function(*args)
    with torch.autocast(device_type, enabled=False):
        return function(*[a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args])


def _first_tensor(args: tuple) -> torch.Tensor:
    # a plain loop, not a generator: torch.compile traces it without breaking the graph
    for arg in args:
        if isinstance(arg, torch.Tensor):
            return arg
    raise TypeError("run_in_float32 needs a tensor argument")


def split_input_gates(
    embedded: torch.Tensor, weight_ih: torch.Tensor, bias_ih: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cell input = [embedded; other]: returns (W_ie · embedded + b_ih for every step (B, T, gates·H),
    W_io, the weights to apply to ``other`` inside the loop)."""
    embed_dim = embedded.size(-1)
    return F.linear(embedded, weight_ih[:, :embed_dim], bias_ih), weight_ih[:, embed_dim:]


class InputGateTable:
    """W_ie E v + b_ih for every vocabulary entry v, computed once: search looks a step's
    input gates up instead of multiplying. Rebuilt whenever the weights are replaced or
    edited in place; the owner clears it on every ``train()`` / ``eval()`` switch, because
    fused optimizers update weights in place without bumping their version counters."""

    def __init__(self):
        self._identity: tuple | None = None
        self._table: torch.Tensor | None = None  # (V, gates·H)
        self._other_weight: torch.Tensor | None = None  # W_io

    def clear(self) -> None:
        self._identity = self._table = self._other_weight = None

    def lookup(self, tokens: torch.Tensor, embedding: torch.Tensor, weight_ih: torch.Tensor, bias_ih: torch.Tensor):
        """tokens (B,) -> (their input gates (B, gates·H), W_io)."""
        weights = (embedding, weight_ih, bias_ih)
        identity = tuple((w.data_ptr(), w.device, w.dtype, w._version) for w in weights)
        if self._identity != identity:
            self._table, self._other_weight = split_input_gates(embedding, weight_ih, bias_ih)
            self._identity = identity
        assert self._table is not None  # set just above
        return self._table.index_select(0, tokens), self._other_weight


def reverse_within_lengths(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B, width) gather index that reverses each row's first ``lengths[b]`` positions and
    leaves the padding where it is. Its own inverse."""
    positions = torch.arange(width, device=lengths.device).unsqueeze(0)  # (1, S)
    last = lengths.unsqueeze(1) - 1  # (B, 1)
    return torch.where(positions <= last, last - positions, positions)  # (B, S)


def padded_birnn(rnn, embedded: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``rnn`` (a bidirectional, batch-first ``RecurrentStack``) over padded (B, S, E) without
    packing -> outputs (B, S, 2H) with zeros at padding, and ←h_1 (B, H) of the top layer. The
    backward direction reads every sentence reversed within its length, so it too starts at the
    last real token. No packing, and cuDNN may use its persistent kernels, which it never does
    for packed input."""
    width = embedded.size(1)
    flatten_per_direction(rnn)
    reverse = reverse_within_lengths(lengths, width).unsqueeze(-1)  # (B, S, 1)
    mask = (torch.arange(width, device=embedded.device).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
    layer_input = embedded
    for layer in range(rnn.num_layers):
        if layer > 0:  # the module's dropout between layers
            layer_input = F.dropout(layer_input, rnn.dropout, rnn.training)
        forward_out = rnn.run_direction(layer_input, layer, "")  # (B, S, H)
        reversed_input = layer_input.gather(1, reverse.expand_as(layer_input))
        backward_out = rnn.run_direction(reversed_input, layer, "_reverse")
        backward_out = backward_out.gather(1, reverse.expand_as(backward_out))  # back to source order
        layer_input = torch.cat([forward_out, backward_out], dim=-1) * mask  # (B, S, 2H), zeros at padding
    return layer_input, layer_input[:, 0, rnn.hidden_size :]  # ←h_1 is the backward output at position 1


def flatten_per_direction(rnn) -> None:
    """On a CUDA GPU, give each direction of each layer of ``rnn`` (a bidirectional
    ``RecurrentStack``) its own contiguous cuDNN weight buffer, as a one-layer unidirectional
    module has it: ``padded_birnn`` calls cuDNN one direction at a time, and weights in the
    middle of the module's one bidirectional buffer would be copied (with a warning) on every
    call. A no-op elsewhere, and once done (the module flattens its own layout again when
    moved, so this checks every call, cheaply)."""
    if not (rnn.weight_ih_l0.is_cuda and torch._use_cudnn_rnn_flatten_weight()):
        return
    if rnn.weight_ih_l0_reverse.storage_offset() == 0:  # already one buffer per direction
        return
    mode = torch.backends.cudnn.rnn.get_cudnn_mode(rnn.mode)
    with torch.no_grad():
        for layer in range(rnn.num_layers):
            input_size = rnn.input_size if layer == 0 else 2 * rnn.hidden_size
            for suffix in ("", "_reverse"):
                weights = rnn.layer_weights(layer, suffix)
                # re-points these parameters into a fresh buffer (the tensors and their identity stay)
                torch._cudnn_rnn_flatten_weight(weights, 4, input_size, mode, rnn.hidden_size, 0, 1, True, False)


# train.compile: reduce-overhead on a GPU: batches padded to multiples of (rows, source positions),
# so that CUDA graphs are captured for a bounded set of shapes (nmt.data.batching.padded_to_bucket)
GRAPH_BUCKET = (64, 8)


def graph_bucket(whole_target: bool) -> tuple[int, int, int]:
    """``padded_to_bucket``'s steps for a model family: rows and source positions by GRAPH_BUCKET,
    and target positions too for a family whose layers see every one (``whole_target``: the
    Transformer; an RNN's target length only sets how many steps run)."""
    rows, positions = GRAPH_BUCKET
    return rows, positions, positions if whole_target else 1


def graphed_in_training_only(compiled, eager, mode: str):
    """``compiled``, except that under ``reduce-overhead`` calls without gradients (validation's
    search, each step fed the last one's outputs) run ``eager``: CUDA graphs treat every such
    call as a new iteration and overwrite the outputs the search still holds (on an H200:
    "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run")."""
    if mode != "reduce-overhead":
        return compiled

    def body(*args, **kwargs):
        return (compiled if torch.is_grad_enabled() else eager)(*args, **kwargs)

    return body


def compiled_for_training(function, mode: str, backend: str = "inductor", allow_rnn: bool = False):
    """``torch.compile`` of ``function`` as ``train.compile`` asks, for either family: shapes
    dynamic (no recompilation per sentence length), and under ``reduce-overhead`` CUDA graphs in
    training only (``graphed_in_training_only``). ``allow_rnn``: the function uses a recurrent
    cell (see ``compile_step_body``)."""
    if os.environ.get("ATEN_CPU_CAPABILITY") == "default":
        # ATen held to its scalar kernels ships no vector headers: the CPU code inductor
        # generates must not use them either (it fails to compile otherwise)
        import torch._inductor.config as inductor

        inductor.cpp.simdlen = 1
    compiled = torch.compile(function, mode=mode if backend == "inductor" else None, dynamic=True, backend=backend)
    if not allow_rnn:
        return graphed_in_training_only(compiled, function, mode)

    def with_rnn(*args):
        with torch._dynamo.config.patch(allow_rnn=True):
            return compiled(*args)

    return graphed_in_training_only(with_rnn, function, mode)


def compile_step_body(decoder: Any, mode: str, backend: str = "inductor") -> None:
    """``torch.compile`` the decoder's ``step_body``, the per-step body of its teacher-forced
    loop and of search, as one graph (the step number dynamic too). Dynamo will not trace
    through an nn.GRU / nn.LSTM by default and breaks the step into pieces around every use of
    the cell; the step only reads the cell's weights and calls its one-step kernel (never the
    module's own forward), which traces into one graph: ``allow_rnn``."""
    decoder.step_body = compiled_for_training(decoder.step_body, mode, backend, allow_rnn=True)
