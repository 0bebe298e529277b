"""Constant arguments of cells (``autobatch.lazy.Consts``): a small numeric tensor argument
that needs no gradient (a per-node label) is copied when the call is recorded, and a group
takes its members' values with one gather.  Values and gradients equal eager (float64,
1e-12) through the C recording and the Python reference, with members whose argument is
pending or does not fit, groups of one, many calls (the buffer grows), and in-place writes
after the call (the recorded value is the one eager used).
"""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import nn
from dyngraph.autobatch import cells as C
from dyngraph.autobatch import interpreter as I
from dyngraph.autobatch.lazy import Consts

TOL = {"rtol": 1e-12, "atol": 1e-12}
F = nn.functional


@pytest.fixture(params=["native", "python"])
def path(request):
    if request.param == "native" and I._NATIVE is None:
        pytest.skip("dyngraph._autobatch not built")
    was = I.use_native(request.param == "native")
    yield request.param
    I.use_native(was)


class Loss(nn.Module):
    def __init__(self, H=6, K=4):
        super().__init__()
        self.out = nn.Linear(H, K)
        self.out.weight._data = self.out.weight._data.astype(np.float64)
        self.out.bias._data = self.out.bias._data.astype(np.float64)
        self.cell = dg.autobatch.cell(self.node_loss)

    def node_loss(self, h, y, w):
        # y: an int label (1,); w: a float weight (2,) used elementwise
        return F.cross_entropy(self.out(h), y) * (w[0] + 2.0 * w[1])


def _inputs(n, seed, H=6):
    rng = np.random.default_rng(seed)
    hs = [dg.tensor(rng.standard_normal((1, H)), requires_grad=True) for _ in range(n)]
    ys = rng.integers(0, 4, size=n).tolist()
    ws = rng.standard_normal((n, 2)).tolist()
    # (w0, w1) as a non-C-contiguous view, made outside any block (a real constant)
    strided = [dg.tensor([[w[0], 0.0], [w[1], 0.0]], dtype=dg.float64).T[0] for w in ws]
    return hs, ys, ws, strided


def _loss(model, fn, hs, ys, ws, strided, pending_every=0, strided_every=0, write=False):
    losses = []
    for i, (h, y, w) in enumerate(zip(hs, ys, ws, strict=True)):
        yt = dg.tensor([y])
        if pending_every and i % pending_every == 1:
            yt = yt + 0                              # pending under autobatch: stays an input
        wt = dg.tensor(w, dtype=dg.float64)
        if strided_every and i % strided_every == 2:
            wt = strided[i]                           # not C-contiguous: kept as it is
        losses.append(fn(dg.tanh(h * 1.5), yt, wt))
        if write:
            yt.zero_()                                # after the call: eager used the old value
            wt.mul_(0.0)
    return dg.stack(losses).sum()


@pytest.mark.parametrize("kw", [{}, {"pending_every": 3}, {"strided_every": 4}, {"write": True}],
                         ids=["plain", "some-pending", "some-strided", "written-after"])
@pytest.mark.parametrize("n", [1, 5, 150])
def test_values_and_gradients_equal_eager(path, kw, n):
    model = Loss()
    data = _inputs(n, seed=n)
    # eager refuses backward after the in-place write (the label is saved): its gradients
    # are those without the write, its value the one computed before it
    ve, ge, we = _run(model, data, False, **{k: v for k, v in kw.items() if k != "write"})
    if kw.get("write"):
        ve = _loss(model, model.node_loss, *data, write=True).item()
    va, ga, wa = _run(model, data, True, **kw)
    assert abs(va - ve) < 1e-12 * max(1.0, abs(ve))
    for a, b in zip(ga, ge, strict=True):
        np.testing.assert_allclose(a, b, **TOL)
    np.testing.assert_allclose(wa, we, **TOL)


def _run(model, data, auto, **kw):
    hs, ys, ws, strided = data
    model.zero_grad()
    for h in hs:
        h.grad = None
    if auto:
        with dg.autobatch():
            loss = _loss(model, model.cell, hs, ys, ws, strided, **kw)
            loss.backward()
            v = loss.item()
    else:
        loss = _loss(model, model.node_loss, hs, ys, ws, strided, **kw)
        loss.backward()
        v = loss.item()
    return v, [h.grad.numpy().copy() for h in hs], model.out.weight.grad.numpy().copy()


def test_constants_are_copied_into_consts(path):
    model = Loss()
    hs, ys, ws, _ = _inputs(70, seed=3)
    with dg.autobatch():
        losses = [model.cell(dg.tanh(h * 1.0), dg.tensor([y]), dg.tensor(w, dtype=dg.float64))
                  for h, y, w in zip(hs, ys, ws, strict=True)]
        interp = losses[0]._data.node.interp
        (tmpl,) = [t for t in model.cell.__autobatch_cell__.values() if isinstance(t, C.Template)]
        assert tmpl.consts == (1, 2)
        ar = interp.arenas[tmpl]
        assert [type(c) for c in ar] == [Consts, Consts]
        nodes = [t._data.node for t in losses]
        assert all(n.args[1] is ar[0] and n.args[2] is ar[1] for n in nodes)
        assert ar[0].n == ar[1].n == 70 and ar[0].cap >= 70     # grown past its first 64 rows
        seqs = np.array([n.seq for n in nodes], np.int64)
        np.testing.assert_array_equal(ar[0].take(seqs)[:, 0], ys)
        np.testing.assert_array_equal(ar[1].take(seqs[::-1]), np.array(ws)[::-1])
        dg.stack(losses).sum().item()


def test_consts_take_checks_membership():
    c = Consts((2,), np.dtype(np.float64), cap=2)
    for s in (4, 7, 9):
        c.put(np.array([s, -s], np.float64), s)
    assert c.cap == 4 and c.n == 3
    np.testing.assert_array_equal(c.take(np.array([7, 9])), [[7, -7], [9, -9]])
    np.testing.assert_array_equal(c.take(np.array([9, 4])), [[9, -9], [4, -4]])
    with pytest.raises(RuntimeError, match="not recorded"):
        c.take(np.array([5]))
    with pytest.raises(RuntimeError, match="not recorded"):
        c.take(np.array([10]))
    assert not c.fits(np.zeros(3)) and not c.fits(np.zeros((2, 2))[:, 0]) and c.fits(np.zeros(2))
