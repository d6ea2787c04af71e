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
