"""The scheduler's gather (``ops/_batching.rows_p``) and the input assembly of groups.

Group inputs are gathered from several earlier groups, in any member order, with rows
taken twice, from small and large source groups; values and gradients must equal eager
(float64, 1e-12).
"""

from __future__ import annotations

import numpy as np

import dyngraph as dg
from dyngraph.autobatch.interpreter import Autobatcher
from dyngraph.ops._batching import rows_backward_p, rows_p
from dyngraph.ops.registry import bind

TOL = {"rtol": 1e-12, "atol": 1e-12}


def test_rows_values_and_gradients_equal_index_select():
    rng = np.random.default_rng(0)
    for index, unique in (([4, 0, 2], True), ([4, 0, 0, 2, 4], False)):
        x = dg.tensor(rng.standard_normal((5, 3)), requires_grad=True)
        i = dg.tensor(index)
        w = dg.tensor(rng.standard_normal((len(index), 3)))
        y = bind(rows_p, (x, i), {"n": 5, "unique": unique})
        (y * w).sum().backward()
        x2 = dg.tensor(x.detach().numpy(), requires_grad=True)
        y2 = dg.index_select(x2, 0, i)
        (y2 * w).sum().backward()
        np.testing.assert_allclose(y.detach().numpy(), y2.detach().numpy(), **TOL)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), **TOL)


def test_rows_second_order():
    x = dg.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    i = dg.tensor([2, 2, 0])
    y = bind(rows_p, (x, i), {"n": 3, "unique": False})
    (g,) = dg.autograd.grad((y ** 3).sum(), [x], create_graph=True)
    (gg,) = dg.autograd.grad(g.sum(), [x])
    # d/dx of sum_rows 3 x_r^2 * count_r = 6 x * count
    count = np.array([1.0, 0.0, 2.0])[:, None]
    np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy() * count, **TOL)
    assert rows_backward_p.batchable is False and rows_p.batchable is False


def _program(W, U, xs, order):
    """Two layers of groups whose members read the outputs of several earlier groups in a
    scrambled order, some outputs twice."""
    a = [dg.tanh(x @ W) for x in xs]                 # one big source group
    b = [dg.sigmoid(x @ U) for x in xs[:3]]           # a small one
    c = [a[i] * b[j] for i, j in order]               # members from both, scrambled, repeated
    d = [dg.tanh(ci @ W) + a[k] for k, ci in enumerate(c)]
    # one group over rows of a large source (cut first) and of a small one, interleaved
    # ... and of a group of one (its result is the member's own value, not a row)
    lone = dg.exp(xs[0] @ W)
    e = [(t * 2.0).sum() for pair in zip(a[7:10], b, strict=True) for t in pair] + [(lone * 2.0).sum()]
    return dg.stack([t.sum() for t in d + c]).sum() + dg.stack(e).sum()


def test_group_inputs_from_several_sources_scrambled_and_repeated():
    rng = np.random.default_rng(1)
    W = dg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    U = dg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    xs = [dg.tensor(rng.standard_normal((1, 4))) for _ in range(80)]
    order = [(int(rng.integers(0, 80)), int(rng.integers(0, 3))) for _ in range(12)] + [(5, 1), (5, 1)]
    loss_e = _program(W, U, xs, order)
    ge = dg.autograd.grad(loss_e, [W, U])
    with dg.autobatch(stats=True) as ab:
        loss = _program(W, U, xs, order)
        gb = dg.autograd.grad(loss, [W, U])
    assert ab.stats.groups < 20
    np.testing.assert_allclose(loss.item(), loss_e.item(), **TOL)
    for a, b in zip(gb, ge, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL)


def _losses(W, V, xs):
    losses = []
    for i, x in enumerate(xs):
        h = x
        for _ in range(i % 5):          # members reach their loss at different depths
            h = dg.tanh(h @ W)
        losses.append((dg.sigmoid(h @ V) * 2.0).sum())
    return dg.stack(losses).sum()


def test_chains_that_only_feed_a_stack_run_late_as_one_group_per_step():
    rng = np.random.default_rng(2)
    W = dg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    V = dg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    xs = [dg.tensor(rng.standard_normal((1, 4))) for _ in range(20)]
    loss_e = _losses(W, V, xs)
    ge = dg.autograd.grad(loss_e, [W, V])
    with dg.autobatch(stats=True) as ab:
        loss = _losses(W, V, xs)
        gb = dg.autograd.grad(loss, [W, V])
    # 4 layers x (matmul, tanh) + the loss chain (matmul, sigmoid, mul, sum) once + stack, sum;
    # run as soon as possible the loss chain would take 5 groups per step
    assert ab.stats.groups <= 14
    np.testing.assert_allclose(loss.item(), loss_e.item(), **TOL)
    for a, b in zip(gb, ge, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL)


def _pairs(xs, pair, comb, comb2):
    hc = [pair(x) for x in xs]
    # the two inputs of comb's group are the two outputs of the same nodes: the gather of
    # c reuses the plan of h; in comb2's group one input mixes h and c of different members
    outs = [comb(h, c) for h, c in hc[:6]]
    outs += [comb2(*((h, c) if i % 2 else (c, h))) for i, (h, c) in enumerate(hc[6:])]
    return dg.stack([o.sum() for o in outs]).sum()


def test_inputs_from_the_same_nodes_share_one_gather_plan(monkeypatch):
    rng = np.random.default_rng(3)
    W = dg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    xs = [dg.tensor(rng.standard_normal((1, 4))) for _ in range(12)]

    def pair(x):
        return dg.tanh(x @ W), dg.sigmoid(x @ W)

    def comb(a, b):
        return a * b + a

    def comb2(a, b):
        return a * b - b

    loss_e = _pairs(xs, pair, comb, comb2)
    (ge,) = dg.autograd.grad(loss_e, [W])
    calls = {"plan": 0, "apply": 0}
    plan, apply = Autobatcher._plan, Autobatcher._apply_plan

    def counted_plan(*a):
        calls["plan"] += 1
        return plan(*a)

    def counted_apply(self, *a):
        calls["apply"] += 1
        return apply(self, *a)

    monkeypatch.setattr(Autobatcher, "_plan", staticmethod(counted_plan))
    monkeypatch.setattr(Autobatcher, "_apply_plan", counted_apply)
    with dg.autobatch():
        cells = [dg.autobatch.cell(f) for f in (pair, comb, comb2)]
        loss = _pairs(xs, *cells)
        (gb,) = dg.autograd.grad(loss, [W])
    assert calls["plan"] < calls["apply"]
    np.testing.assert_allclose(loss.item(), loss_e.item(), **TOL)
    np.testing.assert_allclose(gb.numpy(), ge.numpy(), **TOL)
