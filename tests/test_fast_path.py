"""The fast path gives the plain model's answers, for every cell: the cells' gate kernels and
stacked steps, the input-gate table, the padded encoder, the teacher-forced loops and compiled
step bodies."""

import shutil

import pytest
import torch

from nmt.core.registry import CELLS
from nmt.data.batching import Example, collate
from nmt.data.tokenizer import PAD_ID
from nmt.decoding.search import beam_search
from nmt.model.fast import reverse_within_lengths
from nmt.model.rnn.cells import build_cell, layer_parts
from nmt.model.rnn.encoder import Encoder
from nmt.model.rnn.model import Seq2Seq

from .helpers import (
    CELL_VARIANT_CONFIGS,
    best_tokens,
    model_config,
    model_settings,
    random_sources,
    small_model,
    variant_id,
)


def random_cells(cell, batch: int, seed: int):
    """A random state for ``cell``'s stack (float64): h, or (h, c), per layer."""
    generator = torch.Generator().manual_seed(seed)

    def part():
        return torch.randn(batch, cell.hidden_size, generator=generator, dtype=torch.float64, requires_grad=True)

    return tuple(
        part() if cell.state_parts == 1 else tuple(part() for _ in range(cell.state_parts))
        for _ in range(cell.num_layers)
    )


def flat(cells) -> list[torch.Tensor]:
    return [t for layer in cells for t in layer_parts(layer)]


@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("name", sorted(CELLS))
def test_the_stack_advanced_on_split_input_equals_the_reference_outputs_and_gradients(name, layers):
    """The kernel on precomputed input gates (embedding half split off) against torch's own
    cell on the whole input, in float64: every state part of every layer, and the gradients
    of the inputs, the state and every weight."""
    torch.manual_seed(0)
    cell = build_cell(name, 7 + 5, 6, layers, dropout=0.0).double()
    embedded = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    rest = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    cells = random_cells(cell, 4, seed=1)
    input_gates, rest_weight = cell.split_input(embedded)
    assert input_gates.shape == (4, cell.gates * 6)
    fast = cell.advance(input_gates + rest @ rest_weight.T, cells)
    plain = cell.advance_reference(torch.cat([embedded, rest], -1), cells)
    assert len(fast) == len(plain) == layers
    for ours, reference in zip(flat(fast), flat(plain)):
        assert torch.allclose(ours, reference, atol=1e-12)
    inputs = [embedded, rest, *flat(cells), *cell.parameters()]
    loss_fast = sum(t.sin().sum() for t in flat(fast))
    loss_plain = sum(t.sin().sum() for t in flat(plain))
    for ours, reference in zip(torch.autograd.grad(loss_fast, inputs), torch.autograd.grad(loss_plain, inputs)):
        assert torch.allclose(ours, reference, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_the_whole_sequence_call_equals_one_step_at_a_time(name):
    torch.manual_seed(0)
    cell = build_cell(name, 5, 4, 2, dropout=0.0).double()
    inputs = torch.randn(3, 6, 5, dtype=torch.float64)
    cells = random_cells(cell, 3, seed=2)
    outputs, final = cell.sequence(inputs, cells)
    stepped = cells
    for t in range(6):
        stepped = cell.advance_reference(inputs[:, t], stepped)
        assert torch.allclose(outputs[:, t], cell.output(stepped[-1]), atol=1e-12)
    for ours, reference in zip(flat(final), flat(stepped)):
        assert torch.allclose(ours, reference, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_initial_state_has_the_cells_type_from_the_bridge(name):
    cell = build_cell(name, 5, 4, 3, dropout=0.0)
    bridged = torch.randn(2, 3 * cell.state_parts * 4) * 5
    cells = cell.initial_state(bridged)
    assert len(cells) == 3
    for layer in cells:
        parts = layer_parts(layer)
        assert len(parts) == cell.state_parts and all(p.shape == (2, 4) for p in parts)
        assert parts[0].abs().max() <= 1  # h through tanh
    if cell.state_parts == 2:  # an LSTM's memory cell is not squashed
        assert max(layer[1].abs().max() for layer in cells) > 1


def plain_decode(decoder, tgt_in, state, memory):
    """The plain model: one ``step`` (the paper's equations) per target position."""
    step_logits, attn = [], []
    for t in range(tgt_in.size(1)):
        logits, state, weights = decoder.reference_step(tgt_in[:, t], state, memory)
        step_logits.append(logits)
        attn.append(weights)
    return torch.stack(step_logits, 1), torch.stack(attn, 1)


TWO_SENTENCES = [Example([5, 6, 7, 8, 9], [9, 10, 11, 12]), Example([5], [11, 12, 13, 14, 15, 16])]


@pytest.mark.parametrize("overrides", CELL_VARIANT_CONFIGS, ids=variant_id)
def test_fast_teacher_forced_paths_equal_the_plain_step(overrides):
    model = small_model(**overrides).eval()
    batch = collate(TWO_SENTENCES)
    memory, state = model.encode(batch.src, batch.src_lengths)
    ref_logits, ref_attn = plain_decode(model.decoder, batch.tgt_in, state, memory)
    for fast_logits, fast_attn in (
        model.decoder.teacher_forced(batch.tgt_in, state, memory),
        model.decoder.scheduled_sampling(batch.tgt_in, state, memory, 1.0),
    ):
        assert torch.allclose(fast_logits, ref_logits, atol=1e-5)
        assert torch.allclose(fast_attn, ref_attn, atol=1e-6)
        real = batch.src != PAD_ID
        assert torch.all(fast_attn.masked_select(~real.unsqueeze(1).expand_as(fast_attn)) == 0)


@pytest.mark.parametrize("overrides", CELL_VARIANT_CONFIGS, ids=variant_id)
def test_search_step_with_the_gate_table_equals_the_plain_step_in_float64(overrides):
    model = small_model(seed=1, **overrides).double().eval()
    src, lengths = random_sources(4, seed=2)
    memory, state = model.encode(src, lengths)
    plain_state = fast_state = state
    prev = torch.tensor([2, 5, 7, 9])
    with torch.no_grad():  # inference: the fast step looks its input gates up in the table
        for _ in range(3):
            plain, plain_state, plain_weights = model.decoder.reference_step(prev, plain_state, memory)
            fast, fast_state, fast_weights = model.decoder.step(prev, fast_state, memory)
            assert torch.allclose(plain, fast, atol=1e-12) and torch.allclose(plain_weights, fast_weights, atol=1e-12)
            for ours, reference in zip(flat(fast_state.stack), flat(plain_state.stack)):
                assert torch.allclose(ours, reference, atol=1e-12)
            prev = plain.argmax(-1)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(attention="luong-concat", input_feeding=True),
        dict(attention="luong-concat", input_feeding=True, rnn="lstm", decoder_layers=2),
        dict(attention="bahdanau", rnn="lstm"),
        dict(attention="luong-general", rnn="lstm", decoder_layers=2),
        dict(attention="bahdanau", decoder_layers=2),
    ],
    ids=variant_id,
)
def test_plain_and_fast_gradients_agree(overrides):
    model = small_model(seed=3, **overrides).double()
    batch = collate(TWO_SENTENCES)
    grads = []
    for decode in (plain_decode, lambda d, *a: d.teacher_forced(*a)):
        model.zero_grad()
        memory, state = model.encode(batch.src, batch.src_lengths)
        logits, _ = decode(model.decoder, batch.tgt_in, state, memory)
        logits.logsumexp(-1).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for plain, fast in zip(*grads):
        assert torch.allclose(plain, fast, atol=1e-10)


def test_reverse_within_lengths_reverses_real_positions_only():
    index = reverse_within_lengths(torch.tensor([3, 1, 4]), 4)
    assert index.tolist() == [[2, 1, 0, 3], [0, 1, 2, 3], [3, 2, 1, 0]]
    assert torch.equal(index.gather(1, index), torch.arange(4).expand(3, 4))  # its own inverse


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("rnn", sorted(CELLS))
def test_padded_encoder_equals_packed(layers, rnn):
    torch.manual_seed(layers)
    encoder = Encoder(model_config(8, encoder_hidden=6, encoder_layers=layers, rnn=rnn), 30).double()
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
    from nmt.runtime.checkpoint import model_differences

    packed, padded = {"rnn_input": "packed", "embed_dim": 8}, model_settings(rnn_input="padded", embed_dim=8)
    assert model_differences(packed, padded, "model.") == []
    assert model_differences({**packed, "embed_dim": 16}, padded, "model.") == [
        "model.embed_dim: checkpoint has 16, config has 8"
    ]


@pytest.mark.parametrize(
    "overrides", [{}, {"attention": "luong-general"}, {"attention": "luong-concat", "input_feeding": True}]
)
def test_token_gate_table_equals_the_matmul_and_follows_weight_changes(overrides):
    torch.manual_seed(0)
    config = model_settings(
        embed_dim=8, encoder_hidden=8, decoder_hidden=8, attention_dim=8, output_dim=8, dropout=0.0, **overrides
    )
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


@pytest.mark.slow
@pytest.mark.skipif(
    not (shutil.which("g++") or shutil.which("c++")), reason="torch.compile on the CPU needs a C++ compiler"
)
def test_compiled_decoder_steps_equal_eager():
    """train.compile: the compiled loop body and search step give the eager results, on the GPU
    recipe's decoder (a GRU, luong-concat, input feeding). Inductor's compilation is the cost
    (most of a minute a model on a 2-core CPU): one model here; that the step body is one graph
    for the LSTM's stacked layers and a local window too is tests/test_platforms.py's (no inductor)."""
    overrides = {"attention": "luong-concat", "input_feeding": True}
    torch.manual_seed(0)
    config = model_settings(
        embed_dim=8, encoder_hidden=8, decoder_hidden=8, attention_dim=8, output_dim=8, dropout=0.0, **overrides
    )
    eager = Seq2Seq(config, 20, 20)
    compiled = Seq2Seq(config, 20, 20)
    compiled.load_state_dict(eager.state_dict())
    compiled.compile_steps("default")
    src, lengths = random_sources(4)
    tgt_in = torch.randint(4, 20, (4, 5))
    for model in (eager, compiled):
        logits, _ = model(src, lengths, tgt_in)
        logits.square().mean().backward()
    assert torch.allclose(compiled(src, lengths, tgt_in)[0], eager(src, lengths, tgt_in)[0], atol=1e-5)
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), compiled.parameters()):
        assert torch.allclose(p_eager.grad, p_compiled.grad, atol=1e-5), name
    eager.eval(), compiled.eval()
    assert best_tokens(beam_search(compiled, src, lengths, 3, 6)) == best_tokens(beam_search(eager, src, lengths, 3, 6))


def test_token_gate_table_is_rebuilt_after_training_steps_with_a_fused_optimizer():
    """Fused Adam updates weights in place without bumping their version counters; the
    train()/eval() switch around the steps must still give search the new weights' gates."""
    from nmt.training.optim import make_adam

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
