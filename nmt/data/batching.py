"""Turning token ids into padded batches.

Training batches come from length buckets: indices are shuffled, cut into pools of
``pool_batches`` batches, sorted by length inside each pool and cut into batches (by a
sentence count and, optionally, a budget of padded tokens), and the batches are shuffled.
Sentences of similar length share a batch, so little is padding.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Example:
    src_ids: list[int]  # subword ids, without <eos>
    tgt_ids: list[int]
    # guided alignment: (n, 2) rows of (target subword, source subword) a reference aligner links
    links: np.ndarray | None = None


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids + <eos>, padded with <pad>
    src_lengths: torch.Tensor  # (B,) on CPU, as pack_padded_sequence wants
    tgt_in: torch.Tensor  # (B, T) <bos> + target ids, padded
    tgt_out: torch.Tensor  # (B, T) target ids + <eos>, padded
    # guided alignment: (B, T, S) where each target position's reference attention lies (rows sum
    # to 1 where the position has links, 0 elsewhere); None without links
    guide: torch.Tensor | None = None

    @property
    def num_tgt_tokens(self) -> int:
        return int((self.tgt_out != PAD_ID).sum())

    def to(self, device: torch.device) -> Batch:
        """On ``device`` (lengths stay on the CPU). From pinned memory the copies are asynchronous."""
        copy = lambda t: t.to(device, non_blocking=t.is_pinned())  # noqa: E731
        guide = None if self.guide is None else copy(self.guide)
        return Batch(copy(self.src), self.src_lengths, copy(self.tgt_in), copy(self.tgt_out), guide)

    def pin_memory(self) -> Batch:
        """Page-locked copies, so the copy to the GPU can overlap computation (DataLoader calls this)."""
        guide = None if self.guide is None else self.guide.pin_memory()
        src, tgt_in, tgt_out = (t.pin_memory() for t in (self.src, self.tgt_in, self.tgt_out))
        return Batch(src, self.src_lengths, tgt_in, tgt_out, guide)


def round_up(value: int, step: int) -> int:
    """The smallest multiple of ``step`` that is >= ``value``."""
    return -(-value // step) * step


def padded_to_bucket(batch: Batch, row_step: int, length_step: int, target_step: int = 1) -> Batch:
    """``batch`` grown to a bucket's shape: rows to a multiple of ``row_step``, source positions to
    a multiple of ``length_step``, target positions to one of ``target_step`` (what a CUDA graph
    captured for one shape can replay: see ``nmt.model.fast.GRAPH_BUCKET``). An added row is a
    source of one <eos> and a target of nothing to predict (``tgt_out`` all <pad>): it adds no
    loss and no gradient, and the real rows compute what they compute alone
    (tests/test_batching.py). An RNN's target length sets how many steps run, not the shapes a
    step sees: it keeps ``target_step`` 1; a Transformer's layers see every target position."""
    rows, length = batch.src.shape
    new_rows, new_length = round_up(rows, row_step), round_up(length, length_step)
    target = round_up(batch.tgt_in.size(1), target_step)
    if (new_rows, new_length, target) == (rows, length, batch.tgt_in.size(1)):
        return batch
    src = batch.src.new_full((new_rows, new_length), PAD_ID)
    src[:rows, :length] = batch.src
    src[rows:, 0] = EOS_ID
    src_lengths = torch.cat([batch.src_lengths, batch.src_lengths.new_ones(new_rows - rows)])
    tgt_in = batch.tgt_in.new_full((new_rows, target), PAD_ID)
    tgt_in[:rows, : batch.tgt_in.size(1)] = batch.tgt_in
    tgt_in[rows:, 0] = BOS_ID
    tgt_out = batch.tgt_out.new_full((new_rows, target), PAD_ID)
    tgt_out[:rows, : batch.tgt_out.size(1)] = batch.tgt_out
    guide = None
    if batch.guide is not None:
        guide = batch.guide.new_zeros(new_rows, target, new_length)
        guide[:rows, : batch.guide.size(1), :length] = batch.guide
    return Batch(src, src_lengths, tgt_in, tgt_out, guide)


def pad_sequences(sequences: list[list[int]]) -> torch.Tensor:
    """(B, max_len) LongTensor, right-padded with <pad>."""
    width = max(len(s) for s in sequences)
    # padded as lists and made into one tensor: a tensor per row cost 7x more, and on a GPU at
    # 8,000-token batches collation is what the training step waits for
    return torch.tensor([seq + [PAD_ID] * (width - len(seq)) for seq in sequences], dtype=torch.long)


def source_tensor(src_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Source ids + <eos>, padded: (B, S) ids and (B,) lengths."""
    with_eos = [ids + [EOS_ID] for ids in src_ids]
    return pad_sequences(with_eos), torch.tensor([len(s) for s in with_eos], dtype=torch.long)


def collate(examples: list[Example]) -> Batch:
    src, src_lengths = source_tensor([ex.src_ids for ex in examples])
    tgt_in = pad_sequences([[BOS_ID] + ex.tgt_ids for ex in examples])
    tgt_out = pad_sequences([ex.tgt_ids + [EOS_ID] for ex in examples])
    guide = None if all(ex.links is None for ex in examples) else guide_tensor(examples, tgt_out.shape, src.size(1))
    return Batch(src, src_lengths, tgt_in, tgt_out, guide)


def guide_tensor(examples: list[Example], target_shape: torch.Size, source_width: int) -> torch.Tensor:
    """(B, T, S): for each target position with links, the reference attention spread evenly over
    the source subwords it links to (positions without links, <eos> included, are all zero)."""
    guide = torch.zeros(*target_shape, source_width)
    for row, example in enumerate(examples):
        if example.links is not None and len(example.links):
            links = torch.from_numpy(example.links).long()
            guide[row, links[:, 0], links[:, 1]] = 1.0
    return guide / guide.sum(-1, keepdim=True).clamp(min=1.0)


def _cut(indices: list[int], lengths: list[int], max_sentences: int, max_tokens: int) -> list[list[int]]:
    """Cut length-sorted ``indices`` into batches of at most ``max_sentences`` sentences and,
    when ``max_tokens`` > 0, at most ``max_tokens`` padded tokens (sentences x longest)."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in indices:
        longest_if_added = max(longest, lengths[index])
        too_many = max_sentences and len(current) >= max_sentences
        too_big = max_tokens and current and (len(current) + 1) * longest_if_added > max_tokens
        if too_many or too_big:
            batches.append(current)
            current, longest_if_added = [], lengths[index]
        current.append(index)
        longest = longest_if_added
    if current:
        batches.append(current)
    return batches


def bucketed_batches(
    lengths: list[int],
    batch_size: int,
    seed: int,
    shuffle: bool = True,
    pool_batches: int = 50,
    batch_tokens: int = 0,
) -> list[list[int]]:
    """Index batches of sentences of similar length: at most ``batch_size`` sentences and,
    with ``batch_tokens`` > 0, at most that many padded tokens each. Every index appears in
    exactly one batch. Deterministic for a given ``seed``.
    """
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    pool = batch_size * pool_batches
    batches: list[list[int]] = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda i: lengths[i])
        batches.extend(_cut(chunk, lengths, batch_size, batch_tokens))
    if shuffle:
        rng.shuffle(batches)
    return batches


def sorted_batches(lengths: list[int], batch_size: int, batch_tokens: int = 0) -> list[list[int]]:
    """Index batches for inference: sorted by length (longest first), no shuffling; at most
    ``batch_size`` sentences and, with ``batch_tokens`` > 0, that many padded tokens each."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return _cut(order, lengths, batch_size, batch_tokens)


def padding_fraction(batches: list[list[int]], lengths: list[int]) -> float:
    """Share of padded positions in the given batches."""
    total = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    real = sum(lengths[i] for b in batches for i in b)
    return 1.0 - real / total if total else 0.0
