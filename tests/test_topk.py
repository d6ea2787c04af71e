"""The two-stage top-k of search equals torch.topk."""

import pytest
import torch

from nmt.decoding.topk import best_candidates


@pytest.mark.parametrize("vocab", [7, 20, 97, 4000])  # 97: prime, so the blocks are padded
@pytest.mark.parametrize("group,k", [(1, 1), (1, 4), (3, 6), (5, 10)])
def test_best_candidates_equal_topk(vocab, group, k):
    gen = torch.Generator().manual_seed(vocab * 100 + group * 10 + k)
    logits = torch.randn(4 * group, vocab, generator=gen)
    offsets = torch.randn(4 * group, generator=gen)
    values, ids = best_candidates(logits, offsets, group, k)
    expected_values, expected_ids = (
        (logits + offsets[:, None]).view(4, group * vocab).topk(min(k, group * vocab), dim=-1)
    )
    assert torch.equal(values, expected_values)  # bitwise: the same additions
    assert torch.equal(ids, expected_ids)  # random floats have no ties
    _plain_values, plain_ids = best_candidates(logits, None, group, k)
    assert torch.equal(plain_ids, logits.view(4, group * vocab).topk(min(k, group * vocab), dim=-1).indices)


def test_best_candidates_never_return_a_padded_slot():
    logits = torch.full((2, 97), float("-inf"))  # 97 is prime: the block layout pads it
    logits[:, 3] = 0.0
    _, ids = best_candidates(logits, None, 1, 5)
    assert ids[:, 0].tolist() == [3, 3] and int(ids.max()) < 97
