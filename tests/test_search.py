"""Greedy and beam search: agreement, batching, n-best lists, scores, per-token log-probs,
attention rows, and the sentence-level driver."""

import math
import random

import pytest
import torch

from nmt.config.schema import DecodeConfig
from nmt.core.errors import NmtError
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from nmt.decoding.rules import Ranking, block_repeats, repeats_a_span
from nmt.decoding.search import beam_search, greedy_search, search_sentences

from .helpers import VARIANT_CONFIGS, best_log_probs, best_tokens, random_sources, small_model, variant_id


def teacher_forced(model, src_row, length, tokens, ended=True):
    """(log p of each token (and of <eos> if ``ended``), attention rows (T, S)) by rescoring."""
    src = src_row[:length].unsqueeze(0)
    tgt_in = torch.tensor([[BOS_ID] + tokens])[:, : len(tokens) + int(ended)]
    tgt_out = torch.tensor([tokens + [EOS_ID]])[:, : len(tokens) + int(ended)]
    with torch.no_grad():
        logits, attention = model(src, torch.tensor([length]), tgt_in)
    log_probs = torch.log_softmax(logits, -1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    return log_probs[0], attention[0]


def test_beam_one_equals_greedy():
    model = small_model(seed=3).eval()
    src, lengths = random_sources(6, seed=1)
    greedy = greedy_search(model, src, lengths, max_len=12)
    beam = beam_search(model, src, lengths, beam_size=1, max_len=12)
    assert best_tokens(greedy) == best_tokens(beam)
    assert torch.allclose(torch.tensor(best_log_probs(greedy)), torch.tensor(best_log_probs(beam)), atol=1e-4)


def test_beam_scores_equal_rescored_log_probs_and_beat_greedy():
    model = small_model(seed=5).eval()
    src, lengths = random_sources(5, seed=2)
    beam = beam_search(model, src, lengths, beam_size=4, max_len=10, ranking=Ranking(length_penalty=0.0))
    greedy = greedy_search(model, src, lengths, max_len=10)
    for i in range(5):
        best = beam[i][0]
        if best.ended:  # its score includes <eos>
            rescored, _ = teacher_forced(model, src[i], int(lengths[i]), best.tokens)
            assert abs(rescored.sum().item() - best.log_prob) < 1e-3
            assert abs(best.score - best.log_prob) < 1e-4  # alpha = 0: the score is the log-probability
        if greedy[i][0].ended and best.ended:
            assert best.log_prob >= greedy[i][0].log_prob - 1e-4
    assert all(PAD_ID not in t and EOS_ID not in t for t in best_tokens(beam))


RANKINGS = [Ranking(0.0), Ranking(1.0), Ranking(0.6), Ranking(1.0, "gnmt"), Ranking(0.6, "gnmt", 0.4)]


@pytest.mark.parametrize("ranking", RANKINGS, ids=str)
def test_n_best_lists_are_sorted_and_scores_follow_their_formula(ranking):
    model = small_model(seed=9).eval()
    src, lengths = random_sources(6, seed=8)
    found = beam_search(model, src, lengths, 5, 10, ranking, n_best=3, with_attention=True)
    for i, hypotheses in enumerate(found):
        assert len(hypotheses) == 3
        scores = [h.score for h in hypotheses]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hypotheses}) == 3  # three different translations
        for h in hypotheses:
            assert len(h.token_logprobs) == len(h.tokens) + int(h.ended)
            length = len(h.token_logprobs)
            base = length if ranking.length_form == "power" else (5 + length) / 6
            lp = base**ranking.length_penalty
            cp = ranking.coverage_penalty * h.attention.sum(0).clamp(1e-6, 1.0).log().sum().item()
            assert h.score == pytest.approx(sum(h.token_logprobs) / lp + cp, abs=1e-4)
            rescored, _ = teacher_forced(model, src[i], int(lengths[i]), h.tokens, h.ended)
            assert torch.allclose(torch.tensor(h.token_logprobs), rescored, atol=1e-4)  # each token's own log-prob
    # Asking for three keeps each sentence searching until three ended: a superset of what the
    # single search set aside, so its best can only score as well or better.
    single = beam_search(model, src, lengths, 5, 10, ranking)
    assert all(many[0].score >= one[0].score - 1e-6 for many, one in zip(found, single))


def test_coverage_penalty_equals_its_formula_on_a_hand_made_attention_matrix():
    attention = torch.tensor(
        [[0.7, 0.2, 0.1, 0.0], [0.6, 0.1, 0.3, 0.0], [0.1, 0.1, 0.8, 0.0]]
    )  # 3 steps x 4 positions
    sums = attention.sum(0)  # 1.4, 0.4, 1.2, 0.0: the first and third capped at 1, the last floored at 1e-6
    expected = 0.5 * (math.log(1.0) + math.log(0.4) + math.log(1.0) + math.log(1e-6))
    assert Ranking(coverage_penalty=0.5).coverage(sums) == pytest.approx(expected, rel=1e-6)
    assert Ranking(1.0, "gnmt").length_norm(7) == pytest.approx(2.0)  # (5 + 7) / 6
    assert Ranking(0.5).score(-6.0, 4) == pytest.approx(-3.0)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_attention_rows_are_the_hypothesis_own_and_sum_to_one(beam_size):
    model = small_model(seed=4).eval()
    src, lengths = random_sources(5, seed=6)
    found = (
        greedy_search(model, src, lengths, 9, with_attention=True)
        if beam_size == 1
        else beam_search(model, src, lengths, beam_size, 9, n_best=2, with_attention=True)
    )
    for i, hypotheses in enumerate(found):
        for h in hypotheses:
            assert h.attention.shape == (len(h.token_logprobs), int(lengths[i]))  # <eos> rows and columns included
            assert torch.allclose(h.attention.sum(-1), torch.ones(len(h.token_logprobs)), atol=1e-5)
            _, expected = teacher_forced(model, src[i], int(lengths[i]), h.tokens, h.ended)
            assert torch.allclose(h.attention, expected, atol=1e-5)
    assert greedy_search(model, src, lengths, 9)[0][0].attention is None  # only when asked for


def test_batched_beam_equals_one_by_one():
    model = small_model(seed=7).eval()
    src, lengths = random_sources(4, seed=3)
    batched = beam_search(model, src, lengths, beam_size=3, max_len=9)
    for i in range(4):
        single = beam_search(model, src[i : i + 1, : lengths[i]], lengths[i : i + 1], beam_size=3, max_len=9)
        assert best_tokens(single)[0] == best_tokens(batched)[i]


@pytest.mark.parametrize("overrides", VARIANT_CONFIGS, ids=variant_id)
def test_every_variant_beam_one_equals_greedy_and_ignores_padding(overrides):
    model = small_model(seed=3, **overrides).eval()
    src, lengths = random_sources(5, seed=4)
    greedy = greedy_search(model, src, lengths, max_len=8)
    assert best_tokens(beam_search(model, src, lengths, beam_size=1, max_len=8)) == best_tokens(greedy)
    alone = greedy_search(model, src[:1, : lengths[0]], lengths[:1], max_len=8)
    assert best_tokens(alone)[0] == best_tokens(greedy)[0]  # padding in the batch changes nothing


def test_beam_search_results_do_not_depend_on_the_decoding_batch():
    """The first step runs once per sentence and sentences leave the batch as they finish:
    decoding a batch equals decoding each sentence alone, for several beam sizes."""
    model = small_model(seed=5).eval()
    with torch.no_grad():
        model.decoder.output.bias[3] += 1.5  # make <eos> likely: sentences finish at different steps
    src, lengths = random_sources(8, seed=4)
    for beam in (2, 5):
        batched = beam_search(model, src, lengths, beam_size=beam, max_len=10)
        for i in range(8):
            alone = beam_search(model, src[i : i + 1, : lengths[i]], lengths[i : i + 1], beam_size=beam, max_len=10)
            assert best_tokens(alone)[0] == best_tokens(batched)[i]
            assert abs(best_log_probs(alone)[0] - best_log_probs(batched)[i]) < 1e-4


def test_search_sentences_keeps_order_and_gives_empty_input_an_empty_hypothesis():
    model = small_model(seed=2)
    src, lengths = random_sources(6, seed=5)
    sentences = [row[: n - 1].tolist() for row, n in zip(src, lengths)]  # without the <eos> source_tensor adds
    decode = DecodeConfig(beam_size=3, batch_size=64, max_len_ratio=1.0, max_len_offset=4)
    cpu = torch.device("cpu")
    found = search_sentences(model, [*sentences[:2], [], *sentences[2:]], decode, cpu)
    assert found[2][0].tokens == [] and found[2][0].token_logprobs == []
    backwards = search_sentences(model, sentences[::-1], decode, cpu)  # batched by length, then put back in order
    assert best_tokens([*found[:2], *found[3:]]) == best_tokens(backwards[::-1])
    assert model.training  # the model's mode is put back
    with pytest.raises(NmtError, match="n_best must be between 1 and the beam size"):
        search_sentences(model, sentences, decode, cpu, n_best=4)


def repeats_back_to_back(tokens: list[int], max_span: int) -> bool:
    """Whether some span of up to ``max_span`` tokens is followed by itself."""
    return any(
        tokens[i : i + span] == tokens[i + span : i + 2 * span]
        for span in range(1, max_span + 1)
        for i in range(len(tokens) - 2 * span + 1)
    )


def test_repeats_a_span_finds_what_the_guard_keeps_out():
    assert repeats_a_span([5, 6, 5, 6], 2) and not repeats_a_span([5, 6, 5, 6], 1)
    assert repeats_a_span([7, 5, 5], 1) and not repeats_a_span([5, 6, 5], 3) and not repeats_a_span([], 2)
    draws = random.Random(0)
    for _ in range(500):  # against this file's own reading of the rule
        tokens = [draws.randint(4, 6) for _ in range(draws.randint(0, 9))]
        for span in (1, 2, 3):
            assert repeats_a_span(tokens, span) == repeats_back_to_back(tokens, span), (tokens, span)


def test_block_repeats_forbids_exactly_the_tokens_that_complete_a_repeat():
    history = torch.tensor([[5, 6, 5], [5, 6, 7], [8, 8, 9]])
    logits = torch.zeros(3, 12)
    block_repeats(logits, history, max_span=2)
    banned = [sorted((row == float("-inf")).nonzero().flatten().tolist()) for row in logits]
    # row 0: 5 again repeats "5"; 6 would make "5 6 5 6". Row 1: only 7. Row 2: only 9 ("8 9 8 9" needs two more).
    assert banned == [[5, 6], [7], [9]]


@pytest.mark.parametrize("span", [1, 2, 3])
def test_no_output_repeats_a_span_back_to_back_with_the_guard(span):
    model = small_model(seed=12, vocab=8).eval()  # 4 real tokens
    with torch.no_grad():
        model.decoder.output.bias[EOS_ID] -= 5.0  # long outputs
        model.decoder.output.bias[5] += 3.0  # that like token 5: "5 5 5 ..."
    src, lengths = random_sources(12, vocab=8, seed=3)
    unguarded = best_tokens(greedy_search(model, src, lengths, 16))
    assert any(repeats_back_to_back(t, span) for t in unguarded)  # the model does stutter
    for found in (
        greedy_search(model, src, lengths, 16, no_repeat_span=span),
        beam_search(model, src, lengths, 4, 16, n_best=3, no_repeat_span=span),
    ):
        for i, hypotheses in enumerate(found):
            for h in hypotheses:
                assert not repeats_back_to_back(h.tokens, span), h.tokens
                rescored, _ = teacher_forced(model, src[i], int(lengths[i]), h.tokens, h.ended)
                assert torch.allclose(torch.tensor(h.token_logprobs), rescored, atol=1e-4)  # the model's own log-probs
