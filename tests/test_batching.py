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


def test_a_batch_padded_to_its_bucket_trains_as_the_batch_itself():
    """The rows and positions added for a CUDA graph's shape (train.compile: reduce-overhead on a
    GPU) change neither the loss nor any gradient, in both decoder orders and the Transformer."""
    from nmt.data.batching import padded_to_bucket
    from nmt.model.base import build_model
    from nmt.training.step import token_loss

    from .helpers import model_config

    rng = random.Random(3)
    examples = [
        Example([rng.randrange(4, 20) for _ in range(rng.randint(1, 6))], [rng.randrange(4, 20) for _ in range(3)])
        for _ in range(5)
    ]
    batch = collate(examples)
    padded = padded_to_bucket(batch, 8, 8, 8)
    assert padded.src.shape == (8, 8) and padded.tgt_in.shape == padded.tgt_out.shape == (8, 8)
    assert padded_to_bucket(batch, 8, 8).tgt_in.shape == (8, batch.tgt_in.size(1))
    assert padded.num_tgt_tokens == batch.num_tgt_tokens and padded.src_lengths.tolist()[5:] == [1, 1, 1]
    assert padded_to_bucket(padded, 8, 8, 8) is padded  # a batch of a bucket's shape stays as it is
    configs = [
        model_config(attention="bahdanau"),
        model_config(attention="luong-general", input_feeding=True),
        model_config(arch="transformer", heads=2, ff_dim=32, encoder_layers=2, decoder_layers=2, attention_dropout=0.0),
    ]
    for config in configs:
        torch.manual_seed(0)
        model = build_model(config, 20, 20)
        gradients = []
        for each in (batch, padded):
            model.zero_grad()
            logits, _ = model(each.src, each.src_lengths, each.tgt_in)
            loss = token_loss(logits, each.tgt_out)
            loss.backward()
            gradients.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
        (alone, alone_grads), (bucketed, bucketed_grads) = gradients
        torch.testing.assert_close(bucketed, alone, rtol=1e-5, atol=1e-5)
        for name, grad in alone_grads.items():
            torch.testing.assert_close(bucketed_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
