"""Bidirectional recurrent encoder (Bahdanau et al., 2015, section 3.2), of any cell
(``model.rnn``: GRU or LSTM, ``nmt/model/rnn/cells.py``).

Two ways to run the same weights, with the same outputs (``model.rnn_input``):

* ``packed``: ``pack_padded_sequence`` -> one bidirectional call of the cell's module -> unpack.
  Each direction sees only the real tokens of every sentence.
* ``padded``: ``fast.padded_birnn``, one call per direction over the padded batch. Which is
  faster depends on the device (docs/benchmarks.md); on a CPU a training step is as fast
  either way, so ``packed``, the default, stays.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.data.tokenizer import PAD_ID
from nmt.model.dropout import Dropout
from nmt.model.fast import padded_birnn, run_in_float32
from nmt.model.rnn.cells import build_cell
from nmt.model.rnn.settings import RnnConfig


class Encoder(nn.Module):
    """Embeddings -> dropout -> bidirectional RNN -> dropout (``model.encoder_output_dropout``). Outputs
    h_j = [→h_j; ←h_j] for every source position."""

    def __init__(self, config: RnnConfig, vocab_size: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embed_dim, padding_idx=PAD_ID)
        self.dropout = Dropout(config.dropout)
        # On the RNN's outputs: the attention's keys and values (and bridge: both's forward state);
        # the backward final state goes to the bridge as it is.
        self.output_dropout = Dropout(config.encoder_output_dropout)
        self.rnn = build_cell(
            config.rnn,
            config.embed_dim,
            config.encoder_hidden,
            config.encoder_layers,
            config.dropout,
            bidirectional=True,
        )
        self.output_dim = 2 * config.encoder_hidden
        self.rnn_input = config.rnn_input  # auto | packed | padded: how the RNN is run, not what it computes
        self.stacked_dropout = config.encoder_layers > 1 and config.dropout > 0

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S), src_lengths (B,) on CPU -> enc_outputs (B, S, 2H) (zeros at padding),
        backward_final (B, H): the backward RNN's state at position 1 of the top layer."""
        embedded = self.dropout(self.embedding(src))  # (B, S, E)
        device_lengths = src.ne(PAD_ID).sum(1)  # (B,) on src's device: no copy of src_lengths to a GPU, no sync
        enc_outputs, backward_final = run_in_float32(self.recur, embedded, src_lengths, device_lengths)
        return self.output_dropout(enc_outputs), backward_final  # dropout keeps padding at zero

    def recur(
        self, embedded: torch.Tensor, src_lengths: torch.Tensor, device_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The bidirectional RNN over embedded (B, S, E) -> (B, S, 2H), ←h_1 (B, H); the lengths
        (B,) on the CPU (packing reads them there) and on embedded's device."""
        if encoder_input(self.rnn_input, embedded.device, self.stacked_dropout) == "padded":
            return padded_birnn(self.rnn, embedded, device_lengths)
        # Packing wants sentences longest first. pack_padded_sequence(enforce_sorted=False) would
        # sort on the CPU and copy the order to the GPU (a host sync every step); the same stable
        # sort of the same lengths, on each side, gives the same order with no copy.
        order = torch.sort(device_lengths, descending=True, stable=True).indices  # (B,) on the device
        sorted_lengths = torch.sort(src_lengths.cpu(), descending=True, stable=True).values
        packed = pack_padded_sequence(embedded.index_select(0, order), sorted_lengths, batch_first=True)
        packed_out, final = self.rnn(packed)  # final: h_n (layers * 2, B, H), with an LSTM's c_n
        enc_outputs, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=embedded.size(1))
        restore = torch.argsort(order)  # back to the batch's order
        return enc_outputs.index_select(0, restore), self.rnn.final_output(final)[-1].index_select(0, restore)


def encoder_input(rnn_input: str, device: torch.device, stacked_dropout: bool = False) -> str:
    """``model.rnn_input`` on ``device``. auto runs the padded encoder on Apple's MPS, where
    packed sequences have open upstream faults (GRU outputs NaN, LSTM crashes), and on a CUDA
    GPU when dropout falls between stacked layers: cuDNN's multi-layer call draws that dropout
    from a state of its own that no checkpoint can carry, so a resume would not be exact (the
    padded encoder calls one layer at a time and draws it from PyTorch's generator). Packed
    elsewhere."""
    if rnn_input == "auto":
        padded = device.type == "mps" or (device.type == "cuda" and stacked_dropout)
        return "padded" if padded else "packed"
    return rnn_input
