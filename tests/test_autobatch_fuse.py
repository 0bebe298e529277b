"""Fused linears in cell templates (``cells._fuse_linears``): the linears of a cell that read
the same input with different parameters run as ONE linear over the concatenated weights,
a ``split``, and one activation per run of equal activations.  Values and gradients equal
eager and the unfused replay (float64, 1e-12), whatever the gate pattern; what is not a
plain sibling linear stays as it was.
"""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import nn
from dyngraph.autobatch import cells as C

TOL = {"rtol": 1e-12, "atol": 1e-12}


def _names(cell):
    (tmpl,) = [t for t in cell.__autobatch_cell__.values() if isinstance(t, C.Template)]
    return [s[0].name for s in tmpl.steps]


class Gates(nn.Module):
    """Gate patterns: sigmoid / tanh runs, a linear without activation, an output that is
    an activation, a linear read twice, one read by an activation AND something else."""

    def __init__(self, H, bias=True):
        super().__init__()
        self.a, self.b, self.c, self.d, self.e, self.f = (nn.Linear(2 * H, H, bias=bias) for _ in range(6))

    def forward(self, h1, h2):
        x = dg.cat([h1, h2], dim=1)
        i = dg.sigmoid(self.a(x))
        u = dg.tanh(self.b(x))
        o = dg.sigmoid(self.c(x))
        raw = self.d(x)                    # no activation, read twice
        twice = self.e(x)                  # an activation and a product read it
        f = dg.sigmoid(twice)
        g = dg.tanh(self.f(x))             # returned as it is
        c = i * u + f * raw + raw * twice
        return o * dg.tanh(c), c, g


def _data(n, H, seed):
    rng = np.random.default_rng(seed)
    return [(dg.tensor(rng.standard_normal((1, H))), dg.tensor(rng.standard_normal((1, H))))
            for _ in range(n)]


def _run(model, fn, xs, auto):
    model.zero_grad()
    if auto:
        with dg.autobatch():
            outs = [fn(a, b) for a, b in xs]
            loss = dg.stack([(h * h).sum() + c.sum() + (g * 3).sum() for h, c, g in outs]).sum()
            loss.backward()
    else:
        outs = [fn(a, b) for a, b in xs]
        loss = dg.stack([(h * h).sum() + c.sum() + (g * 3).sum() for h, c, g in outs]).sum()
        loss.backward()
    vals = [np.concatenate([o.detach().numpy() for o in out], axis=1) for out in outs]
    return float(loss.item()), vals, [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("n", [1, 2, 7])
def test_fused_gates_equal_eager_and_unfused(bias, n):
    H = 5
    dg.manual_seed(0)
    model = Gates(H, bias).double()
    xs = _data(n, H, n)
    le, ve, ge = _run(model, model, xs, False)
    res = {}
    old = C.FUSE
    try:
        for fuse in (True, False):
            C.FUSE = fuse
            cell = dg.autobatch.cell(model.forward)
            res[fuse] = _run(model, cell, xs, True)
            names = _names(cell)
            if fuse:
                # a..f read x: one linear, split into the sigmoid run (a, c), the tanh run
                # (b, f), d (no activation) and e (read by its sigmoid and a product: that
                # sigmoid stays a step of its own); each run of two is split again
                assert names.count("linear") == 1 and names.count("split") == 3, names
                assert names.count("sigmoid") == 2 and names.count("tanh") == 2, names
            else:
                assert names.count("linear") == 6 and "split" not in names, names
    finally:
        C.FUSE = old
    for lb, vb, gb in res.values():
        assert abs(lb - le) <= 1e-12 * max(1.0, abs(le))
        for a, b in zip(vb, ve, strict=True):
            np.testing.assert_allclose(a, b, **TOL)
        for a, b in zip(gb, ge, strict=True):
            np.testing.assert_allclose(a, b, **TOL)


class NotSiblings(nn.Module):
    """Linears that must NOT be fused: the same weight twice, different inputs, a weight
    that is not a parameter (a computed tensor), different bias presence."""

    def __init__(self, H):
        super().__init__()
        self.w = nn.Linear(H, H)
        self.v = nn.Linear(H, H)
        self.nb = nn.Linear(H, H, bias=False)

    def forward(self, x, y):
        a = dg.sigmoid(self.w(x))
        b = dg.sigmoid(self.w(x))                      # the same weight again
        c = dg.tanh(self.v(y))                         # another input
        d = dg.nn.functional.linear(x, self.v.weight * 2.0)   # a computed weight
        e = self.nb(y)                                 # no bias, another input than v's x
        return a * b + c * d + e


def test_only_sibling_parameter_linears_are_fused():
    H = 4
    dg.manual_seed(1)
    model = NotSiblings(H).double()
    rng = np.random.default_rng(3)
    xs = [(dg.tensor(rng.standard_normal((1, H))), dg.tensor(rng.standard_normal((1, H))))
          for _ in range(4)]
    cell = dg.autobatch.cell(model.forward)
    model.zero_grad()
    eager = [model(a, b) for a, b in xs]
    dg.stack([o.sum() for o in eager]).sum().backward()
    ge = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    with dg.autobatch():
        outs = [cell(a, b) for a, b in xs]
        dg.stack([o.sum() for o in outs]).sum().backward()
    # the two w(x) calls share a weight, v(y) has a bias and nb(y) has none, v.weight * 2
    # is not a parameter -- so no step is fused here
    assert _names(cell).count("linear") == 5
    for a, b in zip(outs, eager, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL)
    for a, b in zip([p.grad.numpy() for p in model.parameters()], ge, strict=True):
        np.testing.assert_allclose(a, b, **TOL)


def test_weights_updated_inside_one_block_are_used_by_the_next_evaluation():
    """The concatenated weights live for one evaluation: after an optimizer step inside
    the same block, the next group uses the new weights (as eager does)."""
    H = 3
    dg.manual_seed(2)
    ma, mb = Gates(H).double(), Gates(H).double()
    mb.load_state_dict(ma.state_dict())
    xs = _data(5, H, 9)
    oa = dg.optim.SGD(ma.parameters(), lr=0.1)
    ob = dg.optim.SGD(mb.parameters(), lr=0.1)
    cell = dg.autobatch.cell(mb.forward)
    losses_a, losses_b = [], []
    for _ in range(3):
        oa.zero_grad()
        la = dg.stack([(h * h).sum() + c.sum() + g.sum() for h, c, g in (ma(a, b) for a, b in xs)]).sum()
        la.backward()
        oa.step()
        losses_a.append(la.item())
    with dg.autobatch():
        for _ in range(3):
            ob.zero_grad()
            lb = dg.stack([(h * h).sum() + c.sum() + g.sum() for h, c, g in (cell(a, b) for a, b in xs)]).sum()
            lb.backward()
            ob.step()
            losses_b.append(lb.item())
    np.testing.assert_allclose(losses_b, losses_a, **TOL)
    for p, q in zip(ma.parameters(), mb.parameters(), strict=True):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), **TOL)


def test_fused_cell_under_no_grad_and_outside_autobatch():
    H = 4
    dg.manual_seed(3)
    model = Gates(H).double()
    cell = dg.autobatch.cell(model.forward)
    xs = _data(3, H, 4)
    with dg.no_grad():
        eager = [model(a, b) for a, b in xs]
        with dg.autobatch():
            outs = [cell(a, b) for a, b in xs]
            vals = [[o.numpy() for o in out] for out in outs]
    assert "split" in _names(cell)
    for out, ref in zip(vals, eager, strict=True):
        for a, b in zip(out, ref, strict=True):
            np.testing.assert_allclose(a, b.numpy(), **TOL)
    # outside autobatch the cell is a plain call
    h, c, g = cell(*xs[0])
    np.testing.assert_allclose(h.detach().numpy(), eager[0][0].numpy(), **TOL)


@pytest.mark.parametrize("shape", [(4,), (1, 4), (2, 3, 4)])
def test_fused_gates_for_inputs_of_any_rank(shape):
    """The split runs along the member's last axis whatever its rank (1-D vectors, rows,
    a stack of rows)."""
    dg.manual_seed(4)
    a, b, c = (nn.Linear(4, 3).double() for _ in range(3))
    params = [p for m in (a, b, c) for p in m.parameters()]

    def f(x):
        return dg.sigmoid(a(x)) * dg.tanh(b(x)) + dg.sigmoid(c(x))

    rng = np.random.default_rng(5)
    xs = [dg.tensor(rng.standard_normal(shape)) for _ in range(3)]
    eager = [f(x) for x in xs]
    dg.stack([(o * o).sum() for o in eager]).sum().backward()
    ge = [p.grad.numpy().copy() for p in params]
    for p in params:
        p.grad = None
    cell = dg.autobatch.cell(f)
    with dg.autobatch():
        outs = [cell(x) for x in xs]
        dg.stack([(o * o).sum() for o in outs]).sum().backward()
    names = _names(cell)
    assert names.count("linear") == 1 and names.count("split") == 2, names
    for o, e in zip(outs, eager, strict=True):
        assert o.shape == e.shape
        np.testing.assert_allclose(o.detach().numpy(), e.detach().numpy(), **TOL)
    for p, g in zip(params, ge, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g, **TOL)
