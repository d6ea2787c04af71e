"""Integration: a tiny attention model really learns to reverse short sequences on CPU."""

import random
import time

import torch

from nmt.config import TrainConfig
from nmt.data.batching import Example, collate
from nmt.search import greedy_search
from nmt.train.loop import train_step

from .helpers import small_model

VOCAB = 14  # 4 specials + 10 symbols


def reverse_examples(n: int, seed: int) -> list[Example]:
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        seq = [rng.randrange(4, VOCAB) for _ in range(rng.randint(3, 7))]
        examples.append(Example(seq, seq[::-1]))
    return examples


def test_tiny_model_learns_to_reverse():
    torch.set_num_threads(1)
    start = time.perf_counter()
    model = small_model(vocab=VOCAB, dim=64, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    cfg = TrainConfig(clip_grad_norm=1.0)
    train = reverse_examples(4000, seed=1)
    rng = random.Random(0)
    for _ in range(700):
        batch = collate(rng.sample(train, 64))
        model.train()
        train_step(model, batch, optimizer, cfg, batch.num_tgt_tokens)
    test = reverse_examples(300, seed=2)
    batch = collate(test)
    model.eval()
    result = greedy_search(model, batch.src, batch.src_lengths, max_len=10)
    exact = sum(hyp == ex.tgt_ids for hyp, ex in zip(result.tokens, test)) / len(test)
    assert exact > 0.95, f"exact match {exact:.3f}"
    assert time.perf_counter() - start < 60
