"""The pieces that make decoding fast give the same answers as the plain computation."""

import shutil

import pytest
import torch

from nmt.config import ModelConfig
from nmt.model.encoder import Encoder, reverse_within_lengths
from nmt.model.seq2seq import Seq2Seq
from nmt.search import best_candidates, beam_search

from .helpers import random_sources, small_model


@pytest.mark.parametrize("vocab", [7, 20, 97, 4000])  # 97: prime, so the blocks are padded
@pytest.mark.parametrize("group,k", [(1, 1), (1, 4), (3, 6), (5, 10)])
def test_best_candidates_equal_topk(vocab, group, k):
    gen = torch.Generator().manual_seed(vocab * 100 + group * 10 + k)
    logits = torch.randn(4 * group, vocab, generator=gen)
    offsets = torch.randn(4 * group, generator=gen)
    values, ids = best_candidates(logits, offsets, group, k)
    expected_values, expected_ids = (logits + offsets[:, None]).view(4, group * vocab).topk(min(k, group * vocab), dim=-1)
    assert torch.equal(values, expected_values)  # bitwise: the same additions
    assert torch.equal(ids, expected_ids)  # random floats have no ties
    plain_values, plain_ids = best_candidates(logits, None, group, k)
    assert torch.equal(plain_ids, logits.view(4, group * vocab).topk(min(k, group * vocab), dim=-1).indices)


def test_best_candidates_never_return_a_padded_slot():
    logits = torch.full((2, 97), float("-inf"))  # 97 is prime: the block layout pads it
    logits[:, 3] = 0.0
    _, ids = best_candidates(logits, None, 1, 5)
    assert ids[:, 0].tolist() == [3, 3] and int(ids.max()) < 97


def test_reverse_within_lengths_reverses_real_positions_only():
    index = reverse_within_lengths(torch.tensor([3, 1, 4]), 4)
    assert index.tolist() == [[2, 1, 0, 3], [0, 1, 2, 3], [3, 2, 1, 0]]
    assert torch.equal(index.gather(1, index), torch.arange(4).expand(3, 4))  # its own inverse


@pytest.mark.parametrize("layers", [1, 2])
def test_padded_encoder_equals_packed(layers):
    torch.manual_seed(layers)
    encoder = Encoder(30, 8, 6, layers, dropout=0.0).double()
    src, lengths = random_sources(7, vocab=30, seed=layers)
    outputs, grads = {}, {}
    for mode in ("packed", "padded"):
        encoder.rnn_input = mode
        encoder.zero_grad()
        enc_outputs, backward_final = encoder(src, lengths)
        (enc_outputs.pow(2).sum() + backward_final.sum()).backward()
        outputs[mode] = (enc_outputs, backward_final)
        grads[mode] = [p.grad.clone() for p in encoder.parameters()]
    for ours, reference in zip(outputs["padded"], outputs["packed"]):
        assert torch.allclose(ours, reference, atol=1e-12)
    assert torch.all(outputs["padded"][0][src == 0] == 0)  # zeros at padding
    for ours, reference in zip(grads["padded"], grads["packed"]):
        assert torch.allclose(ours, reference, atol=1e-10)


def test_rnn_input_is_not_part_of_a_checkpoints_identity():
    from nmt.train.checkpoint import _differences

    assert _differences({"rnn_input": "packed", "embed_dim": 8}, {"rnn_input": "padded", "embed_dim": 8}, "model.") == []


@pytest.mark.parametrize("overrides", [{}, {"attention": "luong-general"}, {"attention": "luong-concat", "input_feeding": True}])
def test_token_gate_table_equals_the_matmul_and_follows_weight_changes(overrides):
    torch.manual_seed(0)
    config = ModelConfig(embed_dim=8, encoder_hidden=8, decoder_hidden=8, attention_dim=8, output_dim=8, dropout=0.0,
                         **overrides)  # fmt: skip
    model = Seq2Seq(config, 20, 20).eval()
    src, lengths = random_sources(3)
    prev = torch.tensor([2, 5, 7])

    def step_logits():
        memory, state = model.encode(src, lengths)
        return model.decode_step(prev, state, memory)[0]

    with torch.no_grad():  # grad mode off, eval: the table is used
        tabled = step_logits()
    with torch.enable_grad():  # the plain matmul
        plain = step_logits().detach()
    assert torch.allclose(tabled, plain, atol=1e-6)
    with torch.no_grad():
        model.decoder.embedding.weight.mul_(2.0)  # an in-place update, as an optimizer makes
        tabled = step_logits()
    with torch.enable_grad():
        plain = step_logits().detach()
    assert torch.allclose(tabled, plain, atol=1e-6)


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
            assert alone.tokens[0] == batched.tokens[i]
            assert abs(alone.scores[0] - batched.scores[i]) < 1e-4


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")), reason="torch.compile on the CPU needs a C++ compiler")
@pytest.mark.parametrize("overrides", [{}, {"attention": "luong-concat", "input_feeding": True}])
def test_compiled_decoder_steps_equal_eager(overrides):
    """train.compile: the compiled loop body and search step give the eager results."""
    torch.manual_seed(0)
    config = ModelConfig(embed_dim=8, encoder_hidden=8, decoder_hidden=8, attention_dim=8, output_dim=8, dropout=0.0,
                         **overrides)  # fmt: skip
    eager = Seq2Seq(config, 20, 20)
    compiled = Seq2Seq(config, 20, 20)
    compiled.load_state_dict(eager.state_dict())
    compiled.decoder.compile_steps("default")
    src, lengths = random_sources(4)
    tgt_in = torch.randint(4, 20, (4, 5))
    for model in (eager, compiled):
        logits, _ = model(src, lengths, tgt_in)
        logits.square().mean().backward()
    assert torch.allclose(compiled(src, lengths, tgt_in)[0], eager(src, lengths, tgt_in)[0], atol=1e-5)
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), compiled.parameters()):
        assert torch.allclose(p_eager.grad, p_compiled.grad, atol=1e-5), name
    eager.eval(), compiled.eval()
    assert beam_search(compiled, src, lengths, 3, 6).tokens == beam_search(eager, src, lengths, 3, 6).tokens


def test_token_gate_table_is_rebuilt_after_training_steps_with_a_fused_optimizer():
    """Fused Adam updates weights in place without bumping their version counters; the
    train()/eval() switch around the steps must still give search the new weights' gates."""
    from nmt.train.loop import make_adam

    model = small_model(seed=2).eval()
    src, lengths = random_sources(3)
    prev = torch.tensor([2, 5, 7])
    with torch.no_grad():
        memory, state = model.encode(src, lengths)
        model.decode_step(prev, state, memory)  # builds the table
    model.train()
    optimizer = make_adam(list(model.parameters()), 0.1)
    for _ in range(3):
        optimizer.zero_grad()
        logits, _ = model(src, lengths, torch.randint(4, 20, (3, 4)))
        logits.logsumexp(-1).mean().backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        memory, state = model.encode(src, lengths)
        tabled = model.decode_step(prev, state, memory)[0]
    with torch.enable_grad():
        plain = model.decode_step(prev, state, memory)[0].detach()
    assert torch.allclose(tabled, plain, atol=1e-5)
