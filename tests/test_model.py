"""The translation model: shapes, masking, encoder, decoder state, dropout, ensembles."""

import pytest
import torch

from nmt.data.batching import Example, collate
from nmt.data.tokenizer import BOS_ID
from nmt.decoding.search import beam_search, greedy_search
from nmt.model.ensemble import Ensemble
from nmt.model.rnn.decoder import Memory

from .helpers import best_log_probs, best_tokens, random_sources, small_model


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


@pytest.mark.parametrize("rnn_input", ["packed", "padded"])
def test_bridge_from_both_directions_reads_the_last_forward_and_first_backward_states(rnn_input):
    model = small_model(bridge="both", rnn_input=rnn_input).eval()
    src, lengths = random_sources(4, seed=3)
    memory, state = model.encode(src, lengths)
    enc, half = memory.enc_outputs, memory.enc_outputs.size(-1) // 2
    for row, length in enumerate(lengths.tolist()):
        summary = torch.cat([enc[row, length - 1, :half], enc[row, 0, half:]])  # [→h_S; ←h_1]
        expected = torch.tanh(model.bridge(summary))
        assert torch.allclose(state.hidden[row], expected, atol=1e-6)
        alone = model.encode(src[row : row + 1, :length], lengths[row : row + 1])[1]  # no padding
        assert torch.allclose(alone.hidden[0], state.hidden[row], atol=1e-6)
    assert model.bridge.in_features == 2 * model.config.encoder_hidden


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
    model = small_model(seed=11).eval()
    ensemble = Ensemble([model]).eval()
    src, lengths = random_sources(5, seed=6)
    for search in (lambda m: greedy_search(m, src, lengths, 9), lambda m: beam_search(m, src, lengths, 3, 9)):
        alone, together = search(model), search(ensemble)
        assert best_tokens(alone) == best_tokens(together)
        assert torch.allclose(torch.tensor(best_log_probs(alone)), torch.tensor(best_log_probs(together)), atol=1e-5)


def test_ensemble_averages_member_log_probabilities():
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
    assert len(result) == 3


@pytest.mark.parametrize("output_dim", [16, 24])  # equal to the embeddings, or through a projection
def test_tied_target_embeddings_are_one_tensor_and_the_fast_path_still_equals_the_plain_step(output_dim):
    model = small_model(seed=4, tie_embeddings=True, output_dim=output_dim)
    decoder = model.decoder
    assert decoder.output.weight is decoder.embedding.weight
    assert (output_dim != 16) == isinstance(decoder.project, torch.nn.Linear)
    untied = small_model(seed=4, output_dim=output_dim)
    projection = output_dim * 16 if output_dim != 16 else 0  # (output_dim -> embed_dim)
    count = sum(p.numel() for p in model.parameters())  # a shared tensor counts once
    assert count == sum(p.numel() for p in untied.parameters()) - 20 * output_dim + projection
    batch = collate([Example([5, 6, 7], [8, 9, 10]), Example([5], [11, 12])])
    model.eval()
    memory, state = model.encode(batch.src, batch.src_lengths)
    fast, _ = decoder.teacher_forced(batch.tgt_in, state, memory)
    plain, _, _ = decoder.reference_step(batch.tgt_in[:, 0], state, memory)
    assert torch.allclose(fast[:, 0], plain, atol=1e-5)
    model.train()
    logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
    logits.logsumexp(-1).sum().backward()
    assert decoder.embedding.weight.grad is decoder.output.weight.grad  # one tensor, one gradient
