import torch

from nmt.model.attention import BahdanauAttention, masked_softmax


def make_inputs(dtype=torch.float32):
    torch.manual_seed(0)
    values = torch.randn(3, 5, 6, dtype=dtype)
    query = torch.randn(3, 4, dtype=dtype)
    lengths = torch.tensor([5, 2, 1])
    mask = torch.arange(5).unsqueeze(0) < lengths.unsqueeze(1)
    return query, values, mask


def test_shapes_masking_and_sum():
    attention = BahdanauAttention(query_dim=4, enc_dim=6, attention_dim=7)
    query, values, mask = make_inputs()
    keys = attention.precompute_keys(values)
    context, weights = attention(query, keys, values, mask)
    assert keys.shape == (3, 5, 7) and context.shape == (3, 6) and weights.shape == (3, 5)
    assert torch.all(weights[~mask] == 0.0)  # exactly zero, not merely small
    assert torch.allclose(weights.sum(-1), torch.ones(3))
    assert torch.allclose(weights[2], torch.tensor([1.0, 0, 0, 0, 0]))
    assert torch.allclose(context, torch.einsum("bs,bsd->bd", weights, values))


def test_padding_values_cannot_leak_into_context():
    attention = BahdanauAttention(4, 6, 7)
    query, values, mask = make_inputs()
    context, _ = attention(query, attention.precompute_keys(values), values, mask)
    poisoned = values.masked_fill(~mask.unsqueeze(-1), 1e6)
    context2, _ = attention(query, attention.precompute_keys(poisoned), poisoned, mask)
    assert torch.allclose(context, context2)


def test_masked_softmax_keeps_float64():
    scores = torch.randn(2, 3, dtype=torch.float64)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    weights = masked_softmax(scores, mask)
    assert weights.dtype == torch.float64 and weights[0, 2] == 0 and weights[1, 0] == 1


def test_gradcheck_float64():
    attention = BahdanauAttention(4, 6, 5).double()
    query, values, mask = make_inputs(torch.float64)
    query.requires_grad_(True)
    values.requires_grad_(True)

    def fn(q, v):
        return attention(q, attention.precompute_keys(v), v, mask)

    assert torch.autograd.gradcheck(fn, (query, values), eps=1e-6, atol=1e-5)
