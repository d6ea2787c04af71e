"""Attention decoders in the two orders of the papers, written once for any recurrent cell.

``BahdanauDecoder`` (Bahdanau et al., 2015; also hard attention and Cho et al.'s
fixed-summary baseline): the previous state queries the attention, the context enters
the recurrence::

    c_t = attend(s_{t-1});  s_t = RNN([E y_{t-1}; c_t], s_{t-1});  o_t = tanh(L_o[s_t; c_t; E y_{t-1}])

``LuongDecoder`` (Luong et al., 2015): the recurrence runs first, the new state queries
the attention, and the attentional vector feeds the output (and, with input feeding, the
next step's input)::

    h_t = RNN([E y_{t-1}; h̃_{t-1}], h_{t-1});  c_t = attend(h_t);  h̃_t = tanh(W_c[c_t; h_t])

Both end in p(y_t) = softmax(W_o dropout(o_t)). RNN is the cell ``model.rnn`` names (a GRU,
or an LSTM whose state is (h, c): ``nmt/model/rnn/cells.py``), ``model.decoder_layers`` of it
stacked; s_t and h_t are its top layer's h, the state the attention reads. ``reference_step`` is exactly
these equations, one target position at a time: the plain model.

Training and search run **one fast path** with the same outputs (tested against ``reference_step``):
``step_body`` is each order's step body on precomputed input gates — the embedding half of
the cell's input projection, for all steps in training and from a per-vocabulary table in
search (``nmt/model/fast.py``) — and ``AttentionDecoder`` runs it in the teacher-forced loop
and in search alike, with the output layer once after the loop. Without input feeding the
Luong recurrence does not depend on attention: it runs as one whole-sequence call, with
attention for all steps as batched matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nmt.core.registry import ATTENTIONS
from nmt.data.tokenizer import PAD_ID
from nmt.model.dropout import Dropout
from nmt.model.fast import InputGateTable
from nmt.model.rnn.attention import build_attention
from nmt.model.rnn.cells import StackState, build_cell, layer_parts, select_rows
from nmt.model.rnn.settings import RnnConfig


@dataclass
class Memory:
    """What the decoder reads from the encoder; fixed for the whole sentence."""

    enc_outputs: torch.Tensor  # (B, S, enc_dim): the attention's values
    keys: torch.Tensor  # precomputed by the attention, once per batch
    mask: torch.Tensor  # (B, S) bool, True at real source positions
    src_embedded: torch.Tensor | None = None  # (B, S, E): the source embeddings, for model.lexical

    def select(self, index: torch.Tensor) -> Memory:
        """Rows ``index`` of every tensor (expanding or reordering beams)."""
        src_embedded = None if self.src_embedded is None else self.src_embedded.index_select(0, index)
        return Memory(
            self.enc_outputs.index_select(0, index),
            self.keys.index_select(0, index),
            self.mask.index_select(0, index),
            src_embedded,
        )


@dataclass
class DecoderState:
    stack: StackState  # the cell stack's state after step t-1, bottom layer first: h, or (h, c) per layer
    position: int | torch.Tensor = 0  # t of the next step (local windows need it); a tensor (1,) in the ONNX graph
    feed: torch.Tensor | None = None  # (B, output_dim): h̃_{t-1}, with input feeding

    @property
    def hidden(self) -> torch.Tensor:
        """s_{t-1} / h_{t-1} (B, decoder_hidden): the top layer's h."""
        return layer_parts(self.stack[-1])[0]

    def select(self, index: torch.Tensor) -> DecoderState:
        feed = None if self.feed is None else self.feed.index_select(0, index)
        return DecoderState(select_rows(self.stack, index), self.position, feed)


StepOutput = tuple[torch.Tensor, ...]  # what one step hands to ``features``: Bahdanau (s_t, c_t), Luong (h̃_t,)


class AttentionDecoder(nn.Module):
    """What both orders share: embeddings, the cell stack, attention, the output layer, and
    the fast path's loops (teacher-forced training and search run the same ``step_body``).

    Subclasses give the plain ``reference_step`` (the paper's equations), the fast ``step_body`` and
    ``features`` (the output features o_t from what the steps returned).
    """

    input_feeding = False  # Luong's h̃_{t-1} fed into the next step (LuongDecoder sets it)

    def __init__(self, config: RnnConfig, vocab_size: int, enc_dim: int, rnn_input: int):
        super().__init__()
        attention = build_attention(config, config.decoder_hidden, enc_dim)  # first: initialisation order
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, config.embed_dim, padding_idx=PAD_ID)
        self.attention = attention
        self.dropout = Dropout(config.dropout)
        # Tied embeddings (Press & Wolf, 2017): W_o = E, reached through a projection when widths differ.
        output_width = config.embed_dim if config.tie_embeddings else config.output_dim
        self.output = nn.Linear(output_width, vocab_size)  # W_o
        self.project: nn.Module = nn.Identity()  # o_t -> the output layer's input
        if output_width != config.output_dim:
            self.project = nn.Linear(config.output_dim, output_width, bias=False)
        if config.tie_embeddings:
            self.output.weight = self.embedding.weight
        # the recurrence; its input starts with E y_{t-1} (rnn_input wide in all)
        self.rnn = build_cell(config.rnn, rnn_input, config.decoder_hidden, config.decoder_layers, config.dropout)
        self.lexical: LexicalModel | None = LexicalModel(config.embed_dim, vocab_size) if config.lexical else None
        self._gate_table = InputGateTable()  # fast path; not part of the state dict

    def share_embedding(self, embedding: nn.Embedding) -> None:
        """Use the encoder's table (one joint vocabulary): one tensor for source and target
        embeddings, and for the output layer too when it is tied."""
        tied = self.output.weight is self.embedding.weight
        self.embedding = embedding
        if tied:
            self.output.weight = embedding.weight

    def init_state(self, bridged: torch.Tensor) -> DecoderState:
        """The first state from the bridge's output (B, layers · state parts · decoder_hidden)."""
        return DecoderState(self.rnn.initial_state(bridged))

    def attend(self, query: torch.Tensor, memory: Memory, step: int):
        """One step's attention: query (B, Dq) -> context (B, enc_dim), weights (B, S)."""
        context, weights = self.attention(query.unsqueeze(1), memory.keys, memory.enc_outputs, memory.mask, step)
        return context.squeeze(1), weights.squeeze(1)

    def readout(self, features: torch.Tensor, weights: torch.Tensor, memory: Memory) -> torch.Tensor:
        """Logits of the next token: W_o dropout(o_t) (..., output_dim) -> (..., V); with the
        lexical model, plus its term from the attention ``weights`` (..., S) over the source."""
        logits = self.output(self.project(self.dropout(features)))
        if self.lexical is None:
            return logits
        assert memory.src_embedded is not None, "model.lexical reads the source embeddings"
        return logits + self.lexical(weights, memory.src_embedded, self.dropout)

    def reference_step(self, prev_tokens: torch.Tensor, state: DecoderState, memory: Memory):
        """The plain model, one target position: prev_tokens (B,) -> logits (B, V), new state,
        attention weights (B, S)."""
        raise NotImplementedError

    def forward(self, tgt_in, state: DecoderState, memory: Memory, teacher_forcing: float = 1.0):
        """Decoding of tgt_in (B, T) -> logits (B, T, V), attention (B, T, S).

        With ``teacher_forcing`` < 1, each step feeds the model's own previous prediction
        instead of the gold token with probability 1 - teacher_forcing.
        """
        if teacher_forcing >= 1.0:
            return self.teacher_forced(tgt_in, state, memory)
        return self.scheduled_sampling(tgt_in, state, memory, teacher_forcing)

    def scheduled_sampling(self, tgt_in, state: DecoderState, memory: Memory, teacher_forcing: float):
        """One ``step`` per target position, exactly as search runs it."""
        prev = tgt_in[:, 0]
        step_logits, attn = [], []
        for t in range(tgt_in.size(1)):  # (integer token ids: slicing them costs no gradient)
            logits, state, weights = self.step(prev, state, memory)
            step_logits.append(logits)
            attn.append(weights)
            if t + 1 < tgt_in.size(1):
                prev = tgt_in[:, t + 1]
                if teacher_forcing < 1.0:
                    use_gold = torch.rand(tgt_in.size(0), device=tgt_in.device) < teacher_forcing
                    prev = torch.where(use_gold, prev, logits.argmax(-1))
        return torch.stack(step_logits, 1), torch.stack(attn, 1)

    # ---- the fast path: the same outputs as ``reference_step`` (tests/test_fast_path.py) ----

    def step_body(self, input_gates, rest_weight, stack: StackState, feed, memory: Memory, t: int | torch.Tensor):
        """One step on precomputed gates: input_gates (B, gates·H) = W_ie E y_{t-1} + b_ih, W_ir
        the weights of the rest of the cell's input, the stack's state, h̃_{t-1} (or None) ->
        (new stack state, the step's outputs for ``features``, attention weights (B, S)).
        The body of the teacher-forced loop and of search alike (``train.compile`` compiles it)."""
        raise NotImplementedError

    def features(self, outputs: StepOutput, embedded: torch.Tensor) -> torch.Tensor:
        """o_t (..., output_dim) from ``step_body``'s outputs and E y_{t-1} (..., E), for one
        step or stacked over all steps."""
        raise NotImplementedError

    def teacher_forced(self, tgt_in, state: DecoderState, memory: Memory):
        """Gold previous tokens at every step: (B, T) -> logits (B, T, V), attention (B, T, S).
        The embedding part of the cell's input and the output layer need no recurrence: both
        run once over all steps, outside the loop."""
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        input_gates, rest_weight = self.rnn.split_input(embedded)  # (B, T, gates·H)
        stack, feed = state.stack, state.feed
        outputs, attn = [], []
        # unbind once: indexing [:, t] in the loop would zero-fill a (B, T, gates·H) gradient every step
        for t, step_gates in enumerate(input_gates.unbind(1)):
            stack, output, weights = self.step_body(step_gates, rest_weight, stack, feed, memory, t)
            feed = output[0] if self.input_feeding else None
            outputs.append(output)
            attn.append(weights)
        stacked = tuple(torch.stack(parts, 1) for parts in zip(*outputs))  # each (B, T, ...)
        weights = torch.stack(attn, 1)  # (B, T, S)
        return self.readout(self.features(stacked, embedded), weights, memory), weights

    def step(self, prev_tokens: torch.Tensor, state: DecoderState, memory: Memory):
        """``reference_step`` on the fast path (what search runs): the input gates of y_{t-1} come from a
        per-vocabulary table in inference."""
        embedded = self.dropout(self.embedding(prev_tokens))
        input_gates, rest_weight = self.token_gates(prev_tokens, embedded)
        stack, output, weights = self.step_body(
            input_gates, rest_weight, state.stack, state.feed, memory, state.position
        )
        feed = output[0] if self.input_feeding else None
        logits = self.readout(self.features(output, embedded), weights, memory)
        return logits, DecoderState(stack, state.position + 1, feed), weights

    def token_gates(self, prev_tokens: torch.Tensor, embedded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(W_ie E y + b_ih (B, gates·H), W_ir): a matmul in training, a table lookup in inference."""
        if self.training or torch.is_grad_enabled():
            return self.rnn.split_input(embedded)
        weight_ih, _, bias_ih, _ = self.rnn.layer_weights(0)
        return self._gate_table.lookup(prev_tokens, self.embedding.weight, weight_ih, bias_ih)

    def train(self, mode: bool = True) -> AttentionDecoder:
        """Also clears the input-gate table (see ``InputGateTable``)."""
        self._gate_table.clear()
        return super().train(mode)


class BahdanauDecoder(AttentionDecoder):
    """c_t = attend(s_{t-1});  s_t = RNN([E y_{t-1}; c_t], s_{t-1});  o_t = tanh(L_o[s_t; c_t; E y_{t-1}])"""

    def __init__(self, config: RnnConfig, vocab_size: int, enc_dim: int):
        super().__init__(config, vocab_size, enc_dim, rnn_input=config.embed_dim + enc_dim)
        self.pre_output = nn.Linear(config.decoder_hidden + enc_dim + config.embed_dim, config.output_dim)  # L_o

    def reference_step(self, prev_tokens, state, memory):
        embedded = self.dropout(self.embedding(prev_tokens))  # E y_{t-1} (B, E)
        context, weights = self.attend(state.hidden, memory, state.position)  # c_t, queried by s_{t-1}
        stack = self.rnn.advance_reference(torch.cat([embedded, context], dim=-1), state.stack)
        hidden = self.rnn.output(stack[-1])  # s_t
        features = torch.tanh(self.pre_output(torch.cat([hidden, context, embedded], dim=-1)))  # o_t
        return self.readout(features, weights, memory), DecoderState(stack, state.position + 1), weights

    def step_body(self, input_gates, rest_weight, stack, feed, memory, t):
        """Attention queried by s_{t-1}, then the stack on [E y_{t-1}; c_t]."""
        context, weights = self.attend(self.rnn.output(stack[-1]), memory, t)
        stack = self.rnn.advance(input_gates + self.rnn.rest_gates(context, rest_weight), stack)
        return stack, (self.rnn.output(stack[-1]), context), weights

    def features(self, outputs, embedded):
        hidden, context = outputs
        return torch.tanh(self.pre_output(torch.cat([hidden, context, embedded], dim=-1)))


class LuongDecoder(AttentionDecoder):
    """h_t = RNN([E y_{t-1}; h̃_{t-1}], h_{t-1});  c_t = attend(h_t);  h̃_t = tanh(W_c[c_t; h_t])
    (h̃_{t-1} only with input feeding)."""

    def __init__(self, config: RnnConfig, vocab_size: int, enc_dim: int):
        rnn_input = config.embed_dim + (config.output_dim if config.input_feeding else 0)
        super().__init__(config, vocab_size, enc_dim, rnn_input)
        self.input_feeding = config.input_feeding
        self.output_dim = config.output_dim
        self.combine = nn.Linear(enc_dim + config.decoder_hidden, config.output_dim, bias=False)  # W_c

    def init_state(self, bridged):
        state = super().init_state(bridged)
        state.feed = bridged.new_zeros(bridged.size(0), self.output_dim) if self.input_feeding else None
        return state

    def reference_step(self, prev_tokens, state, memory):
        embedded = self.dropout(self.embedding(prev_tokens))  # E y_{t-1} (B, E)
        rnn_input = embedded if state.feed is None else torch.cat([embedded, state.feed], dim=-1)
        stack = self.rnn.advance_reference(rnn_input, state.stack)
        hidden = self.rnn.output(stack[-1])  # h_t
        context, weights = self.attend(hidden, memory, state.position)  # c_t, queried by h_t
        attentional = torch.tanh(self.combine(torch.cat([context, hidden], dim=-1)))  # h̃_t
        feed = attentional if self.input_feeding else None
        return self.readout(attentional, weights, memory), DecoderState(stack, state.position + 1, feed), weights

    def step_body(self, input_gates, rest_weight, stack, feed, memory, t):
        """The stack on [E y_{t-1}; h̃_{t-1}] (without input feeding ``feed`` is None: on
        E y_{t-1} alone), attention queried by h_t, h̃_t."""
        gates = input_gates if feed is None else input_gates + self.rnn.rest_gates(feed, rest_weight)
        stack = self.rnn.advance(gates, stack)
        hidden = self.rnn.output(stack[-1])
        context, weights = self.attend(hidden, memory, t)
        return stack, (torch.tanh(self.combine(torch.cat([context, hidden], dim=-1))),), weights  # h̃_t

    def features(self, outputs, embedded):
        return outputs[0]  # h̃_t

    def teacher_forced(self, tgt_in, state, memory):
        """Without input feeding the recurrence does not depend on attention: all target
        positions at once (one whole-sequence call, attention as batched matmuls)."""
        if self.input_feeding:
            return super().teacher_forced(tgt_in, state, memory)
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        hiddens, _ = self.rnn.sequence(embedded, state.stack)  # (B, T, hidden)
        steps = torch.arange(tgt_in.size(1), device=tgt_in.device)
        contexts, weights = self.attention(hiddens, memory.keys, memory.enc_outputs, memory.mask, steps)
        attentional = torch.tanh(self.combine(torch.cat([contexts, hiddens], dim=-1)))  # (B, T, output_dim)
        return self.readout(attentional, weights, memory), weights


class LexicalModel(nn.Module):
    """Nguyen & Chiang (2018), "Improving lexical choice in NMT": the source embeddings under
    the step's attention, f_t = tanh(sum_j a_tj E x_j), through a residual layer,
    h_t = tanh(W f_t) + f_t, add W_l h_t + b_l to the logits: a direct path from source words to
    target words that a small corpus learns faster than the recurrence. W_l and b_l start at
    zero, so a model gains the term without changing its function (a parent's child starts as
    the parent)."""

    def __init__(self, embed_dim: int, vocab_size: int):
        super().__init__()
        self.hidden = nn.Linear(embed_dim, embed_dim, bias=False)  # W
        self.output = nn.Linear(embed_dim, vocab_size)  # W_l, b_l
        nn.init.zeros_(self.output.weight)
        nn.init.zeros_(self.output.bias)

    def forward(self, weights: torch.Tensor, src_embedded: torch.Tensor, dropout: nn.Module) -> torch.Tensor:
        """weights (B, S) or (B, T, S), src_embedded (B, S, E) -> the logits' term (B, V) or (B, T, V)."""
        if weights.dim() == 2:  # one step
            summary = torch.bmm(weights.unsqueeze(1), src_embedded).squeeze(1)  # (B, E)
        else:
            summary = torch.bmm(weights, src_embedded)  # (B, T, E)
        lexical = torch.tanh(summary)
        return self.output(dropout(torch.tanh(self.hidden(lexical)) + lexical))


DECODERS = {"attend-then-recur": BahdanauDecoder, "recur-then-attend": LuongDecoder}


def build_decoder(config: RnnConfig, vocab_size: int, enc_dim: int) -> AttentionDecoder:
    """The decoder of the order the attention registry gives ``config.attention``."""
    return DECODERS[ATTENTIONS[config.attention].order](config, vocab_size, enc_dim)
