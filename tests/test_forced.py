"""Forced decoding scores what search found exactly as search scored it."""

import pytest
import torch

from nmt.config.schema import DecodeConfig
from nmt.data.batching import source_tensor
from nmt.decoding.forced import forced_log_probs, score_pairs
from nmt.decoding.search import PrefixedModel, beam_search, greedy_search

from .helpers import random_sources, small_model


@pytest.mark.parametrize("overrides", [{}, {"attention": "luong-concat", "input_feeding": True}])
def test_forced_log_probs_equal_search_own_token_log_probs(overrides):
    model = small_model(seed=2, **overrides).eval()
    src, lengths = random_sources(5, seed=4)
    for found in (greedy_search(model, src, lengths, max_len=12), beam_search(model, src, lengths, 3, max_len=12)):
        best = [hypotheses[0] for hypotheses in found]
        forced = forced_log_probs(model, src, lengths, [h.tokens for h in best])
        for hypothesis, log_probs in zip(best, forced):
            assert len(log_probs) == len(hypothesis.tokens) + 1  # <eos> scored too
            n = len(hypothesis.token_logprobs)  # a hypothesis cut at max_len has no <eos> score
            assert log_probs[:n] == pytest.approx(hypothesis.token_logprobs, abs=1e-5)


def test_score_pairs_keeps_the_order_batches_by_length_and_sums_log_probs():
    model = small_model(seed=3).eval()
    src, lengths = random_sources(7, seed=5)
    sources = [src[i, : lengths[i] - 1].tolist() for i in range(7)]  # without <eos>
    gen = torch.Generator().manual_seed(1)
    targets = [
        torch.randint(4, 20, (int(n),), generator=gen).tolist() for n in torch.randint(0, 9, (7,), generator=gen)
    ]
    one_batch = score_pairs(model, sources, targets, DecodeConfig(batch_size=64), torch.device("cpu"))
    small_batches = score_pairs(model, sources, targets, DecodeConfig(batch_size=2), torch.device("cpu"))
    for alone, (source, target) in zip(one_batch, zip(sources, targets)):
        expected = forced_log_probs(model, *source_tensor([source]), [target])[0]
        assert alone.tokens == target and alone.token_logprobs == pytest.approx(expected, abs=1e-5)
        assert alone.score == pytest.approx(sum(expected), abs=1e-5) and alone.score < 0
    assert [h.score for h in one_batch] == pytest.approx([h.score for h in small_batches], abs=1e-5)


@pytest.mark.parametrize("prefix", [[5], [5, 6, 7]])
@pytest.mark.parametrize("overrides", [{}, {"attention": "luong-concat", "input_feeding": True}])
def test_search_after_a_prefix_continues_from_the_whole_prefix(overrides, prefix):
    """A continuation scores what forced decoding of prefix + continuation gives (the prefix's
    every token read, <bos> first: an earlier version skipped the one before the last)."""
    model = small_model(seed=3, **overrides).eval()
    src, lengths = random_sources(2, seed=1)
    for found in (
        greedy_search(PrefixedModel(model, prefix), src, lengths, max_len=4),
        beam_search(PrefixedModel(model, prefix), src, lengths, 2, max_len=4),
    ):
        continuations = [hypotheses[0].tokens for hypotheses in found]
        forced = forced_log_probs(model, src, lengths, [prefix + tokens for tokens in continuations])
        for hypotheses, log_probs in zip(found, forced):
            n = len(hypotheses[0].token_logprobs)
            assert log_probs[len(prefix) : len(prefix) + n] == pytest.approx(hypotheses[0].token_logprobs, abs=1e-5)
