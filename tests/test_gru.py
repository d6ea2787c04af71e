import torch
from torch import nn

from nmt.model.gru import gru_step, split_input_gates


def test_gru_step_on_split_input_equals_gru_cell():
    torch.manual_seed(0)
    cell = nn.GRUCell(7 + 5, 6)
    embedded, other, hidden = torch.randn(4, 3, 7), torch.randn(4, 5), torch.randn(4, 6)
    embed_gates, other_weight = split_input_gates(embedded, cell.weight_ih, cell.bias_ih)
    assert embed_gates.shape == (4, 3, 18)
    for t in range(3):
        ours = gru_step(embed_gates[:, t] + other @ other_weight.T, hidden, cell.weight_hh, cell.bias_hh)
        assert torch.allclose(ours, cell(torch.cat([embedded[:, t], other], -1), hidden), atol=1e-6)


def test_gru_step_gradients_equal_gru_cell():
    torch.manual_seed(1)
    cell = nn.GRUCell(5, 4).double()
    inputs, hidden = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    ours = gru_step(torch.nn.functional.linear(inputs, cell.weight_ih, cell.bias_ih), hidden, cell.weight_hh, cell.bias_hh)
    (grad_ours,) = torch.autograd.grad(ours.pow(2).sum(), hidden)
    (grad_ref,) = torch.autograd.grad(cell(inputs, hidden).pow(2).sum(), hidden)
    assert torch.allclose(grad_ours, grad_ref, atol=1e-12)
