"""Splitting a large group's outputs by the group that reads them (``Autobatcher._split``,
``ops/_batching.split_rows_p`` / ``merge_rows_p``): each reader's gradient is the size of
its piece.  Values and gradients equal eager (float64, 1e-12), with repeated rows, a
source read by many consumers, unused rows and second order.
"""

from __future__ import annotations

import numpy as np

import dyngraph as dg
from dyngraph.ops._batching import merge_rows_p, split_rows_p
from dyngraph.ops.registry import bind

TOL = {"rtol": 1e-12, "atol": 1e-12}


def test_split_and_merge_values_gradients_and_second_order():
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(5, 3))
    x = dg.tensor(xv, requires_grad=True)
    idx = (np.array([4, 0]), np.array([1, 2, 3]))
    a, b = bind(split_rows_p, (x,), {"idx": idx, "n": 5})
    np.testing.assert_allclose(a.detach().numpy(), xv[[4, 0]], **TOL)
    np.testing.assert_allclose(b.detach().numpy(), xv[[1, 2, 3]], **TOL)
    loss = (a * a).sum() * 3 + (b ** 3).sum()
    (g,) = dg.autograd.grad(loss, [x], create_graph=True)
    first = np.where(np.isin(np.arange(5), [0, 4])[:, None], 6 * xv, 3 * xv ** 2)
    np.testing.assert_allclose(g.detach().numpy(), first, **TOL)
    (gg,) = dg.autograd.grad(g.sum(), [x])
    second = np.where(np.isin(np.arange(5), [0, 4])[:, None], 6.0, 6 * xv)
    np.testing.assert_allclose(gg.numpy(), second, **TOL)
    # a piece that gets no gradient (an unused row set) contributes zeros
    (g1,) = dg.autograd.grad((b ** 2).sum(), [x])
    np.testing.assert_allclose(g1.numpy(), np.where(np.isin(np.arange(5), [1, 2, 3])[:, None],
                                                    2 * xv, 0.0), **TOL)
    m = merge_rows_p.impl(np.ones((2, 3)), np.zeros((3, 3)), idx=idx, n=5)
    np.testing.assert_allclose(m[:, 0], [1, 0, 0, 0, 1])
    assert split_rows_p.batchable is False and merge_rows_p.batchable is False


def _program(xs, zs, W, U, V):
    """40 leaves in one group (split: its rows are read by groups at four depths), each
    leaf read by a reader whose depth depends on the member; some rows read twice by one
    op, some read by several consumers, some never read."""
    leaves = [dg.tanh(x @ W) for x in xs]
    total = None
    for i, h in enumerate(leaves):
        if i % 7 == 6:
            continue                                  # unused row of the leaf group
        r = zs[i]
        for _ in range(i % 4 + 1):                    # reader depth 2..5 by member
            r = dg.tanh(r @ U)
        y = r * h
        if i % 5 == 0:
            y = y + h * h                             # the same row twice in one op
        if i % 3 == 0:
            y = y + dg.sigmoid(h @ V)                 # a second (and third) consumer
        t = (y * y).sum() + y.sum()
        total = t if total is None else total + t
    return total


def _data(dtype=np.float64):
    rng = np.random.default_rng(1)
    xs = [dg.tensor(rng.normal(size=(1, 6)), dtype=dg.float64, requires_grad=True) for _ in range(40)]
    zs = [dg.tensor(rng.normal(size=(1, 6)), dtype=dg.float64) for _ in range(40)]
    W, U, V = (dg.tensor(rng.normal(size=(6, 6)) * 0.5, dtype=dg.float64, requires_grad=True)
               for _ in range(3))
    return xs, zs, W, U, V


def test_split_group_gradients_equal_eager():
    xs, zs, W, U, V = _data()
    params = [W, U, V, *(x for i, x in enumerate(xs) if i % 7 != 6)]   # the rest: unused
    want = _program(xs, zs, W, U, V)
    want_g = dg.autograd.grad(want, params)
    with dg.autobatch(stats=True) as ab:
        got = _program(xs, zs, W, U, V)
        got_g = dg.autograd.grad(got, params)
        val = got.item()
    assert ab.stats.splits >= 1, ab.stats      # the path under test ran
    np.testing.assert_allclose(val, want.item(), **TOL)
    for a, b in zip(got_g, want_g, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL)


def test_split_group_backward_and_second_order_equal_eager():
    xs, zs, W, U, V = _data()
    want = _program(xs, zs, W, U, V)
    (gw,) = dg.autograd.grad(want, [W], create_graph=True, retain_graph=True)
    want2 = dg.autograd.grad((gw * gw).sum(), [U, xs[3]], retain_graph=True)
    want.backward()
    want_w = W.grad.numpy().copy()
    for p in (W, U, V, *xs):
        p.grad = None
    with dg.autobatch(stats=True) as ab:
        got = _program(xs, zs, W, U, V)
        (gw,) = dg.autograd.grad(got, [W], create_graph=True, retain_graph=True)
        got2 = dg.autograd.grad((gw * gw).sum(), [U, xs[3]], retain_graph=True)
        got.backward()
    assert ab.stats.splits >= 1, ab.stats
    np.testing.assert_allclose(W.grad.numpy(), want_w, **TOL)
    for a, b in zip(got2, want2, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL)


def test_no_split_below_the_size_or_with_one_reader():
    xs, zs, W, U, V = _data()
    with dg.autobatch(stats=True) as ab:
        leaves = [dg.tanh(x @ W) for x in xs]            # one reader group: no split
        total = dg.stack([(h @ U).sum() for h in leaves]).sum()
        total.item()
    assert ab.stats.splits == 0
