import pytest
import torch

from nmt.data.batching import collate, Example
from nmt.model.decoder import Memory
from nmt.search import beam_search, greedy_search
from nmt.tokenizer import BOS_ID, EOS_ID, PAD_ID

from .helpers import random_sources, small_model


def test_forward_shapes_and_attention_masking():
    model = small_model().eval()
    batch = collate([Example([5, 6, 7, 8], [9, 10]), Example([5], [11, 12, 13])])
    logits, attn = model(batch.src, batch.src_lengths, batch.tgt_in)
    assert logits.shape == (2, 4, 20) and attn.shape == (2, 4, 5)
    assert torch.all(attn[1, :, 2:] == 0.0)  # sentence 2 has 2 real positions (id + <eos>)
    assert torch.allclose(attn.sum(-1), torch.ones(2, 4))


def test_encoder_outputs_zero_at_padding_and_independent_of_it():
    model = small_model().eval()
    src, lengths = random_sources(4)
    memory, state = model.encode(src, lengths)
    assert torch.all(memory.enc_outputs[~memory.mask] == 0)
    # The same sentence alone (no padding) encodes to the same states.
    alone, alone_len = src[:1, : lengths[0]], lengths[:1]
    memory1, state1 = model.encode(alone, alone_len)
    assert torch.allclose(memory1.enc_outputs[0], memory.enc_outputs[0, : lengths[0]], atol=1e-6)
    assert torch.allclose(state1.hidden[0], state.hidden[0], atol=1e-6)


def test_memory_select_reorders_rows():
    model = small_model().eval()
    src, lengths = random_sources(3)
    memory, _ = model.encode(src, lengths)
    picked = memory.select(torch.tensor([2, 0, 0]))
    assert isinstance(picked, Memory)
    assert torch.equal(picked.enc_outputs[0], memory.enc_outputs[2]) and torch.equal(picked.mask[1], memory.mask[0])


def test_teacher_forcing_below_one_runs_and_shapes_match():
    model = small_model(dropout=0.1).train()
    batch = collate([Example([5, 6], [7, 8, 9]), Example([5], [10])])
    logits, attn = model(batch.src, batch.src_lengths, batch.tgt_in, teacher_forcing=0.5)
    assert logits.shape == (2, 4, 20) and attn.shape == (2, 4, 3)
    logits.sum().backward()
    assert model.encoder.embedding.weight.grad is not None


def test_beam_one_equals_greedy():
    model = small_model(seed=3).eval()
    src, lengths = random_sources(6, seed=1)
    greedy = greedy_search(model, src, lengths, max_len=12)
    beam = beam_search(model, src, lengths, beam_size=1, max_len=12)
    assert greedy.tokens == beam.tokens
    assert torch.allclose(torch.tensor(greedy.scores), torch.tensor(beam.scores), atol=1e-4)


def sequence_log_prob(model, src_row, length, tokens) -> float:
    """Re-score a hypothesis with teacher forcing: sum of log p(token) + log p(<eos>)."""
    src = src_row[:length].unsqueeze(0)
    tgt_in = torch.tensor([[BOS_ID] + tokens])
    tgt_out = torch.tensor([tokens + [EOS_ID]])
    logits, _ = model(src, torch.tensor([length]), tgt_in)
    log_probs = torch.log_softmax(logits, -1)
    return log_probs.gather(-1, tgt_out.unsqueeze(-1)).sum().item()


def test_beam_scores_equal_rescored_log_probs_and_beat_greedy():
    model = small_model(seed=5).eval()
    src, lengths = random_sources(5, seed=2)
    beam = beam_search(model, src, lengths, beam_size=4, max_len=10, length_penalty=0.0)
    greedy = greedy_search(model, src, lengths, max_len=10)
    for i in range(5):
        tokens = beam.tokens[i]
        if len(tokens) < 10:  # finished with <eos>: its score includes <eos>
            rescored = sequence_log_prob(model, src[i], int(lengths[i]), tokens)
            assert abs(rescored - beam.scores[i]) < 1e-3
        if len(greedy.tokens[i]) < 10 and len(tokens) < 10:
            assert beam.scores[i] >= greedy.scores[i] - 1e-4  # alpha=0: raw log-prob ranking
    assert all(PAD_ID not in t and EOS_ID not in t for t in beam.tokens)


def test_batched_beam_equals_one_by_one():
    model = small_model(seed=7).eval()
    src, lengths = random_sources(4, seed=3)
    batched = beam_search(model, src, lengths, beam_size=3, max_len=9)
    for i in range(4):
        single = beam_search(model, src[i : i + 1, : lengths[i]], lengths[i : i + 1], beam_size=3, max_len=9)
        assert single.tokens[0] == batched.tokens[i]


VARIANT_CONFIGS = [
    dict(attention="bahdanau"),
    dict(attention="luong-dot", decoder_hidden=32),
    dict(attention="luong-general"),
    dict(attention="luong-concat"),
    dict(attention="luong-general", input_feeding=True),
    dict(attention="luong-general", attention_window="local-m", window_width=2),
    dict(attention="luong-dot", decoder_hidden=32, attention_window="local-p", window_width=2),
    dict(attention="bahdanau", attention_window="local-p", window_width=2),
    dict(attention="hard"),
    dict(attention="none"),
]


def variant_model(seed=0, **overrides):
    from nmt.config import ModelConfig, check_model_combination
    from nmt.model.seq2seq import Seq2Seq

    torch.manual_seed(seed)
    sizes = dict(embed_dim=16, encoder_hidden=16, decoder_hidden=16, attention_dim=16, output_dim=16, dropout=0.0)
    config = ModelConfig(**{**sizes, **overrides})
    check_model_combination(config)
    return Seq2Seq(config, 20, 20).eval()


@pytest.mark.parametrize("overrides", VARIANT_CONFIGS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_fast_teacher_forced_path_equals_step_by_step(overrides):
    model = variant_model(**overrides)
    batch = collate([Example([5, 6, 7, 8, 9], [9, 10, 11, 12]), Example([5], [11, 12, 13, 14, 15, 16])])
    memory, state = model.encode(batch.src, batch.src_lengths)
    fast_logits, fast_attn = model.decoder.teacher_forced(batch.tgt_in, state, memory)
    ref_logits, ref_attn = model.decoder.step_by_step(batch.tgt_in, state, memory, 1.0)
    assert torch.allclose(fast_logits, ref_logits, atol=1e-5)
    assert torch.allclose(fast_attn, ref_attn, atol=1e-6)
    real = batch.src != PAD_ID
    assert torch.all(fast_attn.masked_select(~real.unsqueeze(1).expand_as(fast_attn)) == 0)


@pytest.mark.parametrize("overrides", VARIANT_CONFIGS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_every_variant_beam_one_equals_greedy_and_ignores_padding(overrides):
    model = variant_model(seed=3, **overrides)
    src, lengths = random_sources(5, seed=4)
    greedy = greedy_search(model, src, lengths, max_len=8)
    assert beam_search(model, src, lengths, beam_size=1, max_len=8).tokens == greedy.tokens
    alone = greedy_search(model, src[:1, : lengths[0]], lengths[:1], max_len=8)
    assert alone.tokens[0] == greedy.tokens[0]  # padding in the batch changes nothing


def test_dropout_zeroes_about_p_keeps_the_mean_and_is_identity_in_eval():
    from nmt.model.dropout import Dropout

    torch.manual_seed(0)
    layer = Dropout(0.3)
    x = torch.ones(200, 500)
    out = layer(x)
    zero_fraction = (out == 0).float().mean().item()
    assert abs(zero_fraction - 0.3) < 0.01
    assert abs(out.mean().item() - 1.0) < 0.02
    assert torch.allclose(out[out != 0], torch.full_like(out[out != 0], 1 / 0.7))
    assert torch.equal(layer.eval()(x), x)


def test_ensemble_of_one_model_equals_that_model():
    from nmt.ensemble import Ensemble

    model = small_model(seed=11).eval()
    ensemble = Ensemble([model]).eval()
    src, lengths = random_sources(5, seed=6)
    for search in (lambda m: greedy_search(m, src, lengths, 9), lambda m: beam_search(m, src, lengths, 3, 9)):
        alone, together = search(model), search(ensemble)
        assert alone.tokens == together.tokens
        assert torch.allclose(torch.tensor(alone.scores), torch.tensor(together.scores), atol=1e-5)


def test_ensemble_averages_member_log_probabilities():
    from nmt.ensemble import Ensemble

    a, b = small_model(seed=1).eval(), small_model(seed=2).eval()
    ensemble = Ensemble([a, b]).eval()
    src, lengths = random_sources(3, seed=7)
    memory, state = ensemble.encode(src, lengths)
    prev = torch.full((3,), BOS_ID)
    log_probs, new_state, weights = ensemble.decode_step(prev, state, memory)
    expected = []
    for member in (a, b):
        m, s = member.encode(src, lengths)
        logits, _, _ = member.decode_step(prev, s, m)
        expected.append(torch.log_softmax(logits, -1))
    assert torch.allclose(log_probs, (expected[0] + expected[1]) / 2, atol=1e-6)
    assert len(new_state.parts) == 2 and torch.allclose(weights.sum(-1), torch.ones(3))
    result = beam_search(ensemble, src, lengths, beam_size=2, max_len=6)
    assert len(result.tokens) == 3
