import random

import torch

from nmt.data.batching import Example, bucketed_batches, collate, padding_fraction, sorted_batches
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


def test_bucketed_batches_cover_every_index_once():
    rng = random.Random(0)
    lengths = [rng.randint(1, 40) for _ in range(1003)]
    batches = bucketed_batches(lengths, batch_size=32, seed=3)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert all(len(b) <= 32 for b in batches)
    assert bucketed_batches(lengths, 32, seed=3) == batches
    assert bucketed_batches(lengths, 32, seed=4) != batches


def test_bucketing_reduces_padding():
    rng = random.Random(1)
    lengths = [rng.randint(1, 40) for _ in range(2000)]
    shuffled = list(range(2000))
    rng.shuffle(shuffled)
    naive = [shuffled[i : i + 32] for i in range(0, 2000, 32)]
    bucketed = bucketed_batches(lengths, 32, seed=0)
    assert padding_fraction(bucketed, lengths) < 0.1 < padding_fraction(naive, lengths)


def test_sorted_batches_longest_first():
    batches = sorted_batches([3, 9, 1, 5], batch_size=2)
    assert batches == [[1, 3], [0, 2]]


def test_collate_adds_bos_eos_and_pads():
    batch = collate([Example([5, 6, 7], [8]), Example([9], [10, 11])])
    assert batch.src.tolist() == [[5, 6, 7, EOS_ID], [9, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.src_lengths.tolist() == [4, 2]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, PAD_ID], [BOS_ID, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, EOS_ID, PAD_ID], [10, 11, EOS_ID]]
    assert batch.num_tgt_tokens == 5
    assert batch.src.dtype == torch.long


def test_token_budget_caps_padded_size_and_keeps_every_index():
    rng = random.Random(2)
    lengths = [rng.randint(1, 60) for _ in range(3000)]
    batches = bucketed_batches(lengths, batch_size=500, seed=1, batch_tokens=600)
    assert sorted(i for b in batches for i in b) == list(range(3000))
    assert all(len(b) * max(lengths[i] for i in b) <= 600 for b in batches)
    assert max(len(b) for b in batches) > 64  # short sentences get large batches
    assert padding_fraction(batches, lengths) < 0.1


def test_token_budget_never_drops_a_sentence_longer_than_the_budget():
    batches = sorted_batches([5, 300, 7], batch_size=10, batch_tokens=100)
    assert sorted(i for b in batches for i in b) == [0, 1, 2] and [1] in batches
