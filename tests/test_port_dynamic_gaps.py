"""Regression tests for gaps the dynamic-model port programs (``tests/port/p7x_*``) found,
each checked against torch directly."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph

torch = pytest.importorskip("torch")


def _cell_grads(T, cell, create_graph):
    rng = np.random.default_rng(0)
    xs = T.tensor(rng.standard_normal((3, 2, 3)))
    m = getattr(T.nn, cell)(3, 4).double()
    with T.no_grad():
        for p in m.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
    h = xs.new_zeros(2, 4)
    state = (h, h) if cell == "LSTMCell" else h
    for x in xs:                       # the hidden state of step t feeds step t+1
        state = m(x, state)
    out = state[0] if cell == "LSTMCell" else state
    gs = T.autograd.grad((out ** 2).sum(), list(m.parameters()), create_graph=create_graph)
    second = T.autograd.grad(sum((g ** 2).sum() for g in gs), m.weight_hh) if create_graph else None
    return [g.detach().numpy() for g in gs], None if second is None else second[0].numpy()


@pytest.mark.parametrize("cell", ["RNNCell", "GRUCell", "LSTMCell"])
def test_cells_unrolled_in_python_create_graph_match_torch(cell):
    # The fused cell's higher-order path differentiated w.r.t. the saved h0 itself, so
    # weight_hh also collected the gradient of all earlier steps (counted twice).
    for cg in (False, True):
        (gd, sd), (gt, st) = _cell_grads(dyngraph, cell, cg), _cell_grads(torch, cell, cg)
        for a, b in zip(gd, gt, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
        if cg:
            np.testing.assert_allclose(sd, st, rtol=1e-10, atol=1e-13)


def _lstm_state_grads(T):
    rng = np.random.default_rng(1)
    x = T.tensor(rng.standard_normal((2, 3)))
    cell = T.nn.LSTMCell(3, 4).double()
    with T.no_grad():
        for p in cell.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
    h1, c1 = cell(x)
    c1.retain_grad()
    h2, c2 = cell(x, (h1, c1))
    first = T.autograd.grad((2 * c1).sum() + h1.sum(), c1, retain_graph=True)[0]
    (h2.sum() + c2.pow(2).sum()).backward()
    return first.numpy(), c1.grad.numpy()


def test_lstm_cell_state_gradient_includes_path_through_h():
    # In PyTorch h' = o * tanh(c') is computed from c', so dL/dc' also collects what flows
    # back from h' (measuring gradient flow through the cell state relies on it).
    for a, b in zip(_lstm_state_grads(dyngraph), _lstm_state_grads(torch), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


def test_autograd_variable_legacy_wrapper():
    from dyngraph.autograd import Variable

    x = dyngraph.ones(2, requires_grad=True)
    v = Variable(x * 2)                    # detached from the history, as in PyTorch
    assert not v.requires_grad and v.grad_fn is None and v.tolist() == [2.0, 2.0]
    w = Variable(dyngraph.zeros(3), requires_grad=True)
    assert w.is_leaf and w.requires_grad
    assert isinstance(dyngraph.ones(1), Variable) and not isinstance(np.ones(1), Variable)
    with pytest.raises(TypeError, match="Variable data has to be a tensor"):
        Variable([1.0])


def test_type_accepts_legacy_classes_and_names():
    x = dyngraph.ones(2)
    for arg_d, arg_t in [(dyngraph.DoubleTensor, torch.DoubleTensor), ("torch.LongTensor", "torch.LongTensor"),
                         ("torch.ByteTensor", "torch.ByteTensor"), (dyngraph.int32, torch.int32)]:
        assert str(x.type(arg_d).dtype).split(".")[1] == str(torch.ones(2).type(arg_t).dtype).split(".")[1]
    with pytest.raises(ValueError, match="Tensor.type: invalid type"):
        x.type("torch.NoSuchTensor")


def _layers_second_order(T, mode):
    rng = np.random.default_rng(0)
    m = getattr(T.nn, mode)(3, 4, num_layers=2, bidirectional=True).double()
    with T.no_grad():
        for p in m.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
    h, outs = None, []
    for x in [T.tensor(rng.standard_normal((4, 2, 3))) for _ in range(2)]:
        o, h = m(x, h)                 # the state is carried over without detach()
        outs.append(o)
    ps = list(m.parameters())
    gs = T.autograd.grad(sum(o.pow(2).sum() for o in outs), ps, create_graph=True)
    g2 = T.autograd.grad(sum((g * g).sum() for g in gs), ps[1])[0]
    return [g.detach().numpy() for g in gs] + [g2.numpy()]


@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_layers_with_carried_state_second_order_match_torch(mode):
    for a, b in zip(_layers_second_order(dyngraph, mode), _layers_second_order(torch, mode), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_torchscript_surface_runs_python_directly():
    jit = dyngraph.jit

    @jit.script
    def gate(x, y):
        return x.sigmoid() * y

    class M(jit.ScriptModule):
        k: jit.Final[int]

        def __init__(self):
            super().__init__()
            self.k = 2

        @jit.script_method
        def forward(self, x):
            out = jit.annotate(list, [])
            for _ in range(self.k):
                out += [gate(x, x)]
            return dyngraph.stack(out)

        @jit.ignore(drop=True)
        def helper(self):
            return "kept"

    m = jit.script(M())
    x = dyngraph.tensor([0.5, -1.0], dtype=dyngraph.float64)
    y = m(x)
    t = torch.tensor([0.5, -1.0], dtype=torch.float64)
    np.testing.assert_allclose(y.numpy(), torch.stack([t.sigmoid() * t] * 2).numpy(), rtol=1e-15)
    assert isinstance(m, dyngraph.nn.Module) and m.helper() == "kept"
    assert not jit.is_scripting() and not jit.is_tracing() and jit.unused(gate) is gate
