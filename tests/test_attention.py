"""Every attention mechanism and window: shapes, masking, normalisation, gradients."""

import pytest
import torch

from nmt.core.registry import ATTENTIONS
from nmt.model.rnn.attention import FixedSummary, HardAttention, build_attention, masked_softmax
from nmt.model.rnn.settings import RnnConfig

from .helpers import model_settings

DIM = 6  # query and encoder width (equal, so luong-dot applies)
SOFT = [
    ("bahdanau", "global"),
    ("luong-dot", "global"),
    ("luong-general", "global"),
    ("luong-concat", "global"),
    ("bahdanau", "local-m"),
    ("bahdanau", "local-p"),
    ("luong-general", "local-m"),
    ("luong-general", "local-p"),
    ("luong-dot", "local-p"),
]
HARD = [("hard", "global"), ("hard", "local-p")]


def make_inputs(dtype=torch.float32, steps_n=4, seed=0):
    torch.manual_seed(seed)
    lengths = torch.tensor([9, 4, 1])
    values = torch.randn(3, 9, DIM, dtype=dtype)
    query = torch.randn(3, steps_n, DIM, dtype=dtype)
    mask = torch.arange(9).unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)
    steps = torch.arange(steps_n) + 2  # decoder steps 2..5
    return query, values, mask, steps


def build(name, window, half_width=2, dtype=torch.float32):
    torch.manual_seed(1)
    config = model_settings(attention=name, attention_window=window, window_width=half_width, attention_dim=5)
    return build_attention(config, DIM, DIM).to(dtype)


def run(attention, query, values, mask, steps):
    keys = attention.precompute_keys(values, mask)
    return attention(query, keys, values, mask, steps)


@pytest.mark.parametrize("name, window", SOFT + HARD)
def test_shapes_padding_and_normalisation(name, window):
    attention = build(name, window)
    query, values, mask, steps = make_inputs()
    for training in (True, False):
        attention.train(training)
        context, weights = run(attention, query, values, mask, steps)
        assert context.shape == (3, 4, DIM) and weights.shape == (3, 4, 9)
        assert torch.all(weights.masked_select(~mask.unsqueeze(1).expand_as(weights)) == 0.0)  # exactly zero
        assert torch.allclose(weights.sum(-1), torch.ones(3, 4))
        assert torch.allclose(context, torch.bmm(weights, values), atol=1e-6)
        if name == "hard":
            assert torch.all((weights == 0) | (weights == 1))  # one-hot


def test_single_position_sentence_gets_all_weight():
    for name, window in SOFT + HARD:
        _, weights = run(build(name, window), *make_inputs())
        assert torch.all(weights[2, :, 0] == 1.0), (name, window)


@pytest.mark.parametrize("name", ["bahdanau", "luong-general", "hard"])
def test_local_m_window_is_centred_on_the_step(name):
    half_width = 2
    attention = build(name, "local-m", half_width).eval()
    query, values, mask, steps = make_inputs()
    _, weights = run(attention, query, values, mask, steps)
    positions = torch.arange(9)
    for b, length in enumerate(mask.sum(1).tolist()):
        for t, step in enumerate(steps.tolist()):
            centre = min(step, length - 1)  # p_t = t, clipped to the sentence
            outside = (positions - centre).abs() > half_width
            assert torch.all(weights[b, t][outside] == 0.0)
            assert weights[b, t][~outside & mask[b]].sum().item() == pytest.approx(1.0, abs=1e-6)


def test_local_p_window_follows_predicted_position():
    half_width = 1
    attention = build("luong-general", "local-p", half_width)
    query, values, mask, steps = make_inputs()
    centres = attention.window.centres(query, mask.sum(1), steps)  # (B, T)
    assert torch.all(centres >= 0) and torch.all(centres <= (mask.sum(1) - 1).unsqueeze(1))
    _, weights = run(attention, query, values, mask, steps)
    distance = (torch.arange(9) - centres.unsqueeze(-1)).abs()
    assert torch.all(weights[distance > half_width] == 0.0)


def test_hard_attention_picks_argmax_at_inference_and_passes_gradients_in_training():
    attention = build("hard", "global")
    query, values, mask, steps = make_inputs()
    attention.eval()
    _, weights = run(attention, query, values, mask, steps)
    keys = attention.precompute_keys(values, mask)
    scores = attention.score(query, keys).masked_fill(~mask.unsqueeze(1), float("-inf"))
    assert torch.equal(weights.argmax(-1), scores.argmax(-1))
    attention.train()
    query.requires_grad_(True)
    context, _ = run(attention, query, values, mask, steps)
    context.sum().backward()
    assert query.grad is not None and query.grad.abs().sum() > 0  # straight-through gradient
    assert isinstance(attention, HardAttention)


def test_none_reads_a_fixed_summary():
    attention = build("none", "global")
    assert isinstance(attention, FixedSummary)
    query, values, mask, steps = make_inputs()
    context, weights = run(attention, query, values, mask, steps)
    assert torch.all(weights == 0)
    half = DIM // 2
    expected = torch.cat([values[1, 3, :half], values[1, 0, half:]])  # sentence 2 has 4 positions
    assert torch.equal(context[1, 0], expected) and torch.equal(context[1, 3], expected)


def test_masked_softmax_keeps_float64():
    scores = torch.randn(2, 3, dtype=torch.float64)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    weights = masked_softmax(scores, mask)
    assert weights.dtype == torch.float64 and weights[0, 2] == 0 and weights[1, 0] == 1


@pytest.mark.parametrize("name, window", SOFT)
def test_gradcheck_float64(name, window):
    attention = build(name, window, dtype=torch.float64)
    query, values, mask, steps = make_inputs(torch.float64, steps_n=2)
    query.requires_grad_(True)
    values.requires_grad_(True)

    def fn(q, v):
        return run(attention, q, v, mask, steps)

    assert torch.autograd.gradcheck(fn, (query, values), eps=1e-6, atol=1e-5)


def test_the_registry_is_what_the_config_allows_and_names_each_decoder_order():
    import typing

    annotated = typing.get_type_hints(RnnConfig, include_extras=True)["attention"]
    assert annotated.__metadata__[0] is ATTENTIONS  # read when a config is validated
    assert {name for name, kind in ATTENTIONS.items() if kind.order == "recur-then-attend"} == {
        "luong-dot",
        "luong-general",
        "luong-concat",
    }
    assert all(kind.order in ("attend-then-recur", "recur-then-attend") for kind in ATTENTIONS.values())
