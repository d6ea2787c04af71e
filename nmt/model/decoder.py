"""GRU decoder with attention, in Bahdanau et al.'s (2015) order.

One step t, given y_{t-1}, the previous state s_{t-1} and the encoder memory:

    c_t   = attention(query=s_{t-1}, keys=U h, values=h)          (eq. 5-6)
    s_t   = GRU([E y_{t-1}; c_t], s_{t-1})                          (eq. 4)
    o_t   = tanh(L_o [s_t; c_t; E y_{t-1}])                         (output layer, A.2.2)
    p(y_t) = softmax(W_o dropout(o_t))

The output layer does not feed back into the recurrence, so during teacher forcing it is
applied to all steps at once after the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn

from nmt.model.attention import Attention
from nmt.tokenizer import PAD_ID


@dataclass
class Memory:
    """What the decoder reads from the encoder; fixed for the whole sentence."""

    enc_outputs: torch.Tensor  # (B, S, enc_dim): the attention's values
    keys: torch.Tensor  # precomputed by the attention, once per batch
    mask: torch.Tensor  # (B, S) bool, True at real source positions

    def select(self, index: torch.Tensor) -> "Memory":
        """Rows ``index`` of every tensor (expanding or reordering beams)."""
        return Memory(*(getattr(self, f.name).index_select(0, index) for f in fields(self)))


@dataclass
class DecoderState:
    hidden: torch.Tensor  # (B, decoder_hidden): s_{t-1}

    def select(self, index: torch.Tensor) -> "DecoderState":
        return DecoderState(self.hidden.index_select(0, index))


class AttentionDecoder(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden: int,
        enc_dim: int,
        attention: Attention,
        output_dim: int,
        dropout: float,
    ):
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.attention = attention
        self.rnn = nn.GRUCell(embed_dim + enc_dim, hidden)
        self.pre_output = nn.Linear(hidden + enc_dim + embed_dim, output_dim)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(output_dim, vocab_size)

    def logits(self, hidden: torch.Tensor, context: torch.Tensor, embedded: torch.Tensor) -> torch.Tensor:
        """(..., hidden), (..., enc_dim), (..., embed) -> (..., vocab). Works on one step or all."""
        pre = torch.tanh(self.pre_output(torch.cat([hidden, context, embedded], dim=-1)))
        return self.output(self.dropout(pre))

    def recur(
        self, embedded: torch.Tensor, state: DecoderState, memory: Memory
    ) -> tuple[DecoderState, torch.Tensor, torch.Tensor]:
        """One recurrence: embedded y_{t-1} (B, E) -> new state, context (B, enc_dim), weights (B, S)."""
        context, weights = self.attention(state.hidden, memory.keys, memory.enc_outputs, memory.mask)
        hidden = self.rnn(torch.cat([embedded, context], dim=-1), state.hidden)
        return DecoderState(hidden), context, weights

    def step(self, prev_tokens: torch.Tensor, state: DecoderState, memory: Memory):
        """Search interface: prev_tokens (B,) -> logits (B, V), new state, attention weights (B, S)."""
        embedded = self.dropout(self.embedding(prev_tokens))
        state, context, weights = self.recur(embedded, state, memory)
        return self.logits(state.hidden, context, embedded), state, weights

    def forward(
        self, tgt_in: torch.Tensor, state: DecoderState, memory: Memory, teacher_forcing: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced decoding of tgt_in (B, T) -> logits (B, T, V), attention (B, T, S).

        With ``teacher_forcing`` < 1, each step feeds the model's own previous prediction
        instead of the gold token with probability 1 - teacher_forcing.
        """
        if teacher_forcing < 1.0:
            return self._forward_sampled(tgt_in, state, memory, teacher_forcing)
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        hiddens, contexts, attn = [], [], []
        for t in range(tgt_in.size(1)):
            state, context, weights = self.recur(embedded[:, t], state, memory)
            hiddens.append(state.hidden)
            contexts.append(context)
            attn.append(weights)
        logits = self.logits(torch.stack(hiddens, 1), torch.stack(contexts, 1), embedded)  # (B, T, V)
        return logits, torch.stack(attn, 1)

    def _forward_sampled(self, tgt_in, state, memory, teacher_forcing):
        prev = tgt_in[:, 0]
        step_logits, attn = [], []
        for t in range(tgt_in.size(1)):
            logits, state, weights = self.step(prev, state, memory)
            step_logits.append(logits)
            attn.append(weights)
            if t + 1 < tgt_in.size(1):
                use_gold = torch.rand(tgt_in.size(0), device=tgt_in.device) < teacher_forcing
                prev = torch.where(use_gold, tgt_in[:, t + 1], logits.argmax(-1))
        return torch.stack(step_logits, 1), torch.stack(attn, 1)
