"""GRU decoders with attention, in the two orders of the papers.

``BahdanauDecoder`` (Bahdanau et al., 2015; also hard attention and Cho et al.'s
fixed-summary baseline): the previous state queries the attention, the context enters
the recurrence::

    c_t = attend(s_{t-1});  s_t = GRU([E y_{t-1}; c_t], s_{t-1});  o_t = tanh(L_o[s_t; c_t; E y_{t-1}])

``LuongDecoder`` (Luong et al., 2015): the recurrence runs first, the new state queries
the attention, and the attentional vector feeds the output (and, with input feeding, the
next step's input)::

    h_t = GRU([E y_{t-1}; h̃_{t-1}], h_{t-1});  c_t = attend(h_t);  h̃_t = tanh(W_c[c_t; h_t])

Both end in p(y_t) = softmax(W_o dropout(o_t)). ``step`` is exactly these equations, one
target position at a time: the plain model.

Training and search run a **fast path** with the same outputs (tested against ``step``):
the embedding half of the GRU's input gates is precomputed (for all steps in training, as a
per-vocabulary table in search: ``nmt/model/fast.py``), the output layer runs once after the
loop, and without input feeding the Luong recurrence, which then does not depend on
attention, runs as one GRU call with attention for all steps as batched matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F
from torch import nn

from nmt.config import ModelConfig
from nmt.model.attention import ATTENTIONS, build_attention
from nmt.model.dropout import Dropout
from nmt.model.fast import InputGateTable, gru_step, run_in_float32, split_input_gates
from nmt.tokenizer import PAD_ID


@dataclass
class Memory:
    """What the decoder reads from the encoder; fixed for the whole sentence."""

    enc_outputs: torch.Tensor  # (B, S, enc_dim): the attention's values
    keys: torch.Tensor  # precomputed by the attention, once per batch
    mask: torch.Tensor  # (B, S) bool, True at real source positions

    def select(self, index: torch.Tensor) -> Memory:
        """Rows ``index`` of every tensor (expanding or reordering beams)."""
        return Memory(*(getattr(self, f.name).index_select(0, index) for f in fields(self)))


@dataclass
class DecoderState:
    hidden: torch.Tensor  # (B, decoder_hidden): s_{t-1} / h_{t-1}
    step: int = 0  # index t of the next step (local windows need it)
    feed: torch.Tensor | None = None  # (B, output_dim): h̃_{t-1}, with input feeding

    def select(self, index: torch.Tensor) -> DecoderState:
        feed = None if self.feed is None else self.feed.index_select(0, index)
        return DecoderState(self.hidden.index_select(0, index), self.step, feed)


class AttentionDecoder(nn.Module):
    """What both orders share: embeddings, attention, the output layer, the decoding loops.

    Subclasses give the plain ``step`` (the paper's equations) and, for the fast path,
    ``gru_weights``, ``loop_step`` (the step body on precomputed input gates), ``recur`` and
    ``teacher_forced``.
    """

    def __init__(self, config: ModelConfig, vocab_size: int, enc_dim: int):
        super().__init__()
        attention = build_attention(config, config.decoder_hidden, enc_dim)  # first: initialisation order
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, config.embed_dim, padding_idx=PAD_ID)
        self.attention = attention
        self.dropout = Dropout(config.dropout)
        # Tied embeddings (Press & Wolf, 2017): W_o = E, reached through a projection when widths differ.
        output_width = config.embed_dim if config.tie_embeddings else config.output_dim
        self.output = nn.Linear(output_width, vocab_size)  # W_o
        self.project = nn.Identity()  # o_t -> the output layer's input
        if output_width != config.output_dim:
            self.project = nn.Linear(config.output_dim, output_width, bias=False)
        if config.tie_embeddings:
            self.output.weight = self.embedding.weight
        self._gate_table = InputGateTable()  # fast path; not part of the state dict

    def share_embedding(self, embedding: nn.Embedding) -> None:
        """Use the encoder's table (one joint vocabulary): one tensor for source and target
        embeddings, and for the output layer too when it is tied."""
        tied = self.output.weight is self.embedding.weight
        self.embedding = embedding
        if tied:
            self.output.weight = embedding.weight

    def init_state(self, hidden: torch.Tensor) -> DecoderState:
        return DecoderState(hidden)

    def attend(self, query: torch.Tensor, memory: Memory, step: int):
        """One step's attention: query (B, Dq) -> context (B, enc_dim), weights (B, S)."""
        context, weights = self.attention(query.unsqueeze(1), memory.keys, memory.enc_outputs, memory.mask, step)
        return context.squeeze(1), weights.squeeze(1)

    def readout(self, features: torch.Tensor) -> torch.Tensor:
        """Logits of the next token: W_o dropout(o_t) (..., output_dim) -> (..., V)."""
        return self.output(self.project(self.dropout(features)))

    def step(self, prev_tokens: torch.Tensor, state: DecoderState, memory: Memory):
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
        return self.step_by_step(tgt_in, state, memory, teacher_forcing)

    def step_by_step(self, tgt_in, state: DecoderState, memory: Memory, teacher_forcing: float):
        """One ``fast_step`` per target position, exactly as search runs it."""
        prev = tgt_in[:, 0]
        step_logits, attn = [], []
        for t in range(tgt_in.size(1)):  # (integer token ids: slicing them costs no gradient)
            logits, state, weights = self.fast_step(prev, state, memory)
            step_logits.append(logits)
            attn.append(weights)
            if t + 1 < tgt_in.size(1):
                prev = tgt_in[:, t + 1]
                if teacher_forcing < 1.0:
                    use_gold = torch.rand(tgt_in.size(0), device=tgt_in.device) < teacher_forcing
                    prev = torch.where(use_gold, prev, logits.argmax(-1))
        return torch.stack(step_logits, 1), torch.stack(attn, 1)

    # ---- fast path: the same outputs as ``step`` (tests/test_fast_path.py) ----

    def gru_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The recurrence's (weight_ih, weight_hh, bias_ih, bias_hh); its input starts with E y_{t-1}."""
        raise NotImplementedError

    def recur(
        self,
        embedded: torch.Tensor,
        token_gates: torch.Tensor,
        other_weight: torch.Tensor,
        state: DecoderState,
        memory: Memory,
    ):
        """One step on precomputed gates: embedded y_{t-1} (B, E), its input gates W_ie E y_{t-1} + b_ih
        (B, 3H) and W_io, the weights of the rest of the GRU input -> (new state, output features
        (B, output_dim), weights (B, S)). Runs ``loop_step``, the body the teacher-forced loops share."""
        raise NotImplementedError

    def teacher_forced(self, tgt_in, state: DecoderState, memory: Memory):
        """Gold previous tokens at every step: (B, T) -> logits (B, T, V), attention (B, T, S)."""
        raise NotImplementedError

    def fast_step(self, prev_tokens: torch.Tensor, state: DecoderState, memory: Memory):
        """``step`` on the fast path (what search runs): the input gates of y_{t-1} come from a
        per-vocabulary table in inference."""
        embedded = self.dropout(self.embedding(prev_tokens))
        state, features, weights = self.recur(embedded, *self.token_gates(prev_tokens, embedded), state, memory)
        return self.readout(features), state, weights

    def token_gates(self, prev_tokens: torch.Tensor, embedded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(W_ie E y + b_ih (B, 3H), W_io): a matmul in training, a table lookup in inference."""
        weight_ih, _, bias_ih, _ = self.gru_weights()
        if self.training or torch.is_grad_enabled():
            return split_input_gates(embedded, weight_ih, bias_ih)
        return self._gate_table.lookup(prev_tokens, self.embedding.weight, weight_ih, bias_ih)

    def train(self, mode: bool = True) -> AttentionDecoder:
        """Also clears the input-gate table (see ``InputGateTable``)."""
        self._gate_table.clear()
        return super().train(mode)


class BahdanauDecoder(AttentionDecoder):
    """c_t = attend(s_{t-1});  s_t = GRU([E y_{t-1}; c_t], s_{t-1});  o_t = tanh(L_o[s_t; c_t; E y_{t-1}])"""

    def __init__(self, config: ModelConfig, vocab_size: int, enc_dim: int):
        super().__init__(config, vocab_size, enc_dim)
        self.rnn = nn.GRUCell(config.embed_dim + enc_dim, config.decoder_hidden)
        self.pre_output = nn.Linear(config.decoder_hidden + enc_dim + config.embed_dim, config.output_dim)  # L_o

    def step(self, prev_tokens, state, memory):
        embedded = self.dropout(self.embedding(prev_tokens))  # E y_{t-1} (B, E)
        context, weights = self.attend(state.hidden, memory, state.step)  # c_t, queried by s_{t-1}
        hidden = run_in_float32(self.rnn, torch.cat([embedded, context], dim=-1), state.hidden)  # s_t
        features = torch.tanh(self.pre_output(torch.cat([hidden, context, embedded], dim=-1)))  # o_t
        return self.readout(features), DecoderState(hidden, state.step + 1), weights

    def gru_weights(self):
        return self.rnn.weight_ih, self.rnn.weight_hh, self.rnn.bias_ih, self.rnn.bias_hh

    def recur(self, embedded, token_gates, other_weight, state, memory):
        hidden, context, weights = self.loop_step(token_gates, state.hidden, other_weight, memory, state.step)
        features = torch.tanh(self.pre_output(torch.cat([hidden, context, embedded], dim=-1)))
        return DecoderState(hidden, state.step + 1), features, weights

    def loop_step(self, step_gates, hidden, context_weight, memory: Memory, t: int):
        """One step's body: attention, then the GRU on [E y_{t-1}; c_t]."""
        context, weights = self.attend(hidden, memory, t)
        gates = step_gates + F.linear(context, context_weight)
        return gru_step(gates, hidden, self.rnn.weight_hh, self.rnn.bias_hh), context, weights

    def teacher_forced(self, tgt_in, state, memory):
        """The recurrence needs attention each step, but the embedding part of the GRU input
        and the output layer do not: both run once over all steps, outside the loop."""
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        embed_gates, context_weight = split_input_gates(embedded, self.rnn.weight_ih, self.rnn.bias_ih)  # (B, T, 3H)
        hidden = state.hidden
        hiddens, contexts, attn = [], [], []
        # unbind once: indexing [:, t] in the loop would zero-fill a (B, T, 3H) gradient every step
        for t, step_gates in enumerate(embed_gates.unbind(1)):
            hidden, context, weights = self.loop_step(step_gates, hidden, context_weight, memory, t)
            hiddens.append(hidden)
            contexts.append(context)
            attn.append(weights)
        features = torch.tanh(
            self.pre_output(torch.cat([torch.stack(hiddens, 1), torch.stack(contexts, 1), embedded], -1))
        )
        return self.readout(features), torch.stack(attn, 1)


class LuongDecoder(AttentionDecoder):
    """h_t = GRU([E y_{t-1}; h̃_{t-1}], h_{t-1});  c_t = attend(h_t);  h̃_t = tanh(W_c[c_t; h_t])
    (h̃_{t-1} only with input feeding)."""

    def __init__(self, config: ModelConfig, vocab_size: int, enc_dim: int):
        super().__init__(config, vocab_size, enc_dim)
        self.input_feeding = config.input_feeding
        self.output_dim = config.output_dim
        rnn_input = config.embed_dim + (config.output_dim if config.input_feeding else 0)
        self.rnn = nn.GRU(rnn_input, config.decoder_hidden, batch_first=True)  # one call over all steps (fast path)
        self.combine = nn.Linear(enc_dim + config.decoder_hidden, config.output_dim, bias=False)  # W_c

    def init_state(self, hidden):
        feed = hidden.new_zeros(hidden.size(0), self.output_dim) if self.input_feeding else None
        return DecoderState(hidden, 0, feed)

    def step(self, prev_tokens, state, memory):
        embedded = self.dropout(self.embedding(prev_tokens))  # E y_{t-1} (B, E)
        rnn_input = embedded if state.feed is None else torch.cat([embedded, state.feed], dim=-1)
        hidden = run_in_float32(torch.gru_cell, rnn_input, state.hidden, *self.gru_weights())  # h_t
        context, weights = self.attend(hidden, memory, state.step)  # c_t, queried by h_t
        attentional = torch.tanh(self.combine(torch.cat([context, hidden], dim=-1)))  # h̃_t
        feed = attentional if self.input_feeding else None
        return self.readout(attentional), DecoderState(hidden, state.step + 1, feed), weights

    def gru_weights(self):
        return self.rnn.weight_ih_l0, self.rnn.weight_hh_l0, self.rnn.bias_ih_l0, self.rnn.bias_hh_l0

    def recur(self, embedded, token_gates, other_weight, state, memory):
        hidden, attentional, weights = self.loop_step(
            token_gates, state.hidden, state.feed, other_weight, memory, state.step
        )
        feed = attentional if self.input_feeding else None
        return replace(state, hidden=hidden, step=state.step + 1, feed=feed), attentional, weights

    def teacher_forced(self, tgt_in, state, memory):
        """Without input feeding, all target positions at once (one GRU call, attention as
        batched matmuls). With it, a loop in which only the fed-back part of the GRU input is
        computed per step."""
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        if self.input_feeding:
            return self._teacher_forced_feeding(embedded, state, memory)
        hiddens, _ = run_in_float32(self.rnn, embedded, state.hidden.unsqueeze(0))  # (B, T, hidden)
        steps = torch.arange(tgt_in.size(1), device=tgt_in.device)
        contexts, weights = self.attention(hiddens, memory.keys, memory.enc_outputs, memory.mask, steps)
        attentional = torch.tanh(self.combine(torch.cat([contexts, hiddens], dim=-1)))  # (B, T, output_dim)
        return self.readout(attentional), weights

    def loop_step(self, step_gates, hidden, feed, feed_weight, memory: Memory, t: int):
        """One step's body: the GRU on [E y_{t-1}; h̃_{t-1}] (without input feeding, ``feed`` is
        None: on E y_{t-1} alone), attention, h̃_t."""
        gates = step_gates if feed is None else step_gates + F.linear(feed, feed_weight)
        hidden = gru_step(gates, hidden, self.rnn.weight_hh_l0, self.rnn.bias_hh_l0)
        context, weights = self.attend(hidden, memory, t)
        return hidden, torch.tanh(self.combine(torch.cat([context, hidden], dim=-1))), weights  # h̃_t

    def _teacher_forced_feeding(self, embedded, state, memory):
        embed_gates, feed_weight = split_input_gates(embedded, self.rnn.weight_ih_l0, self.rnn.bias_ih_l0)
        hidden, feed = state.hidden, state.feed
        attentionals, attn = [], []
        for t, step_gates in enumerate(embed_gates.unbind(1)):  # unbind: see BahdanauDecoder
            hidden, feed, weights = self.loop_step(step_gates, hidden, feed, feed_weight, memory, t)
            attentionals.append(feed)
            attn.append(weights)
        return self.readout(torch.stack(attentionals, 1)), torch.stack(attn, 1)


DECODERS = {"bahdanau": BahdanauDecoder, "luong": LuongDecoder}


def build_decoder(config: ModelConfig, vocab_size: int, enc_dim: int) -> AttentionDecoder:
    """The decoder of the order the attention registry gives ``config.attention``."""
    return DECODERS[ATTENTIONS[config.attention].order](config, vocab_size, enc_dim)
