"""nn.GRUCell / nn.LSTMCell / nn.RNNCell: the direct path for a checked batched call and the
checked path for everything else give PyTorch's values, gradients and errors.

Weights are copied from the torch cell; values and gradients (input, state, every parameter)
are compared in float32 and float64, eagerly and under ``dg.autobatch``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg

KINDS = ["GRUCell", "LSTMCell", "RNNCell"]


def _pair(kind, n_in=5, hid=4, bias=True, f64=False):
    torch.manual_seed(0)
    tc = getattr(torch.nn, kind)(n_in, hid, bias=bias)
    dc = getattr(dg.nn, kind)(n_in, hid, bias=bias)
    if f64:
        tc, dc = tc.double(), dc.double()
    with dg.no_grad():
        for name, p in tc.named_parameters():
            getattr(dc, name).copy_(dg.tensor(p.detach().numpy()))
    return tc, dc


def _inputs(lib, shape_x, shape_h, kind, f64, rg=True):
    rng = np.random.default_rng(1)
    dt = np.float64 if f64 else np.float32
    x = lib.tensor(rng.standard_normal(shape_x).astype(dt), requires_grad=rg)
    if shape_h is None:
        return x, None, []
    h = lib.tensor(rng.standard_normal(shape_h).astype(dt), requires_grad=rg)
    if kind == "LSTMCell":
        c = lib.tensor(rng.standard_normal(shape_h).astype(dt), requires_grad=rg)
        return x, (h, c), [h, c]
    return x, h, [h]


def _outs(y):
    return list(y) if isinstance(y, tuple) else [y]


def _compare(kind, shape_x, shape_h, bias=True, f64=False, autobatch=False):
    tc, dc = _pair(kind, bias=bias, f64=f64)
    tx, thx, tst = _inputs(torch, shape_x, shape_h, kind, f64)
    dx, dhx, dst = _inputs(dg, shape_x, shape_h, kind, f64)
    ty = _outs(tc(tx, thx))
    sum(((o * (i + 1)).sum() for i, o in enumerate(ty)), torch.zeros(())).backward()
    if autobatch:
        with dg.autobatch():
            dy = _outs(dc(dx, dhx))
            sum(((o * (i + 1)).sum() for i, o in enumerate(dy)), dg.zeros(())).backward()
            # (values read inside the block: a detached output of a fused recurrent primitive
            # made after backward stays pending after the block, also before this path existed)
            dy = [dg.tensor(o.detach().numpy().copy()) for o in dy]
    else:
        dy = _outs(dc(dx, dhx))
        sum(((o * (i + 1)).sum() for i, o in enumerate(dy)), dg.zeros(())).backward()
    tol = dict(rtol=1e-10, atol=1e-12) if f64 else dict(rtol=2e-5, atol=2e-6)
    assert len(ty) == len(dy)
    for a, b in zip(ty, dy, strict=True):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), **tol)
    for a, b in zip([tx, *tst], [dx, *dst], strict=True):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), **tol)
    for name, p in tc.named_parameters():
        np.testing.assert_allclose(getattr(dc, name).grad.numpy(), p.grad.numpy(), **tol)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("f64", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_batched_with_state(kind, f64, bias):
    _compare(kind, (3, 5), (3, 4), bias=bias, f64=f64)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shapes", [((3, 5), None), ((5,), (4,)), ((5,), None), ((1, 5), (1, 4))])
def test_other_call_forms(kind, shapes):
    _compare(kind, *shapes)


@pytest.mark.parametrize("kind", KINDS)
def test_under_autobatch(kind):
    _compare(kind, (3, 5), (3, 4), autobatch=True)


def _raises_like_torch(kind, make):
    """Both libraries raise the same exception type for ``make(lib, cell)``."""
    tc, dc = _pair(kind)
    with pytest.raises(Exception) as te:
        make(torch, tc)
    with pytest.raises(Exception) as de:
        make(dg, dc)
    assert isinstance(de.value, type(te.value)) or isinstance(te.value, type(de.value)), (te.value, de.value)
    return str(de.value)


def _state(lib, kind, shape, dtype=None):
    dt = dtype or lib.float32
    h = lib.zeros(*shape, dtype=dt)
    return (h, lib.zeros(*shape)) if kind == "LSTMCell" else h


@pytest.mark.parametrize("kind", KINDS)
def test_errors(kind):
    msg = _raises_like_torch(kind, lambda lib, c: c(lib.zeros(3, 6), _state(lib, kind, (3, 4))))
    assert "input_size" in msg
    msg = _raises_like_torch(kind, lambda lib, c: c(lib.zeros(3, 5), _state(lib, kind, (2, 4))))
    assert "hidden size" in msg
    msg = _raises_like_torch(kind, lambda lib, c: c(lib.zeros(3, 5), _state(lib, kind, (3, 3))))
    assert "hidden size" in msg
    _raises_like_torch(kind, lambda lib, c: c(lib.zeros(2, 3, 5), None))
    msg = _raises_like_torch(kind, lambda lib, c: c(lib.zeros(3, 5, dtype=lib.float64), _state(lib, kind, (3, 4))))
    assert "dtype" in msg
    _raises_like_torch(kind, lambda lib, c: c(lib.zeros(3, 5), _state(lib, kind, (4,))))


def test_lstm_state_of_another_dtype_is_refused():
    msg = _raises_like_torch("LSTMCell", lambda lib, c: c(lib.zeros(3, 5), _state(lib, "LSTMCell", (3, 4), lib.float64)))
    assert "dtype" in msg


@pytest.mark.parametrize("kind", KINDS)
def test_replaced_weight_of_another_shape_is_refused(kind):
    def make(lib, c):
        rows = c.weight_ih.shape[0]
        c.weight_ih = lib.nn.Parameter(lib.zeros(rows, 6))
        return c(lib.zeros(3, 5), _state(lib, kind, (3, 4)))

    _raises_like_torch(kind, make)


@pytest.mark.parametrize("kind", KINDS)
def test_parameter_state_and_views(kind):
    # a Parameter as the state and a non-contiguous input (other types than a plain Tensor)
    tc, dc = _pair(kind)
    for lib, c in ((torch, tc), (dg, dc)):
        x = lib.tensor(np.arange(30, dtype=np.float32).reshape(5, 6) / 30)[:3, :5]
        h = lib.nn.Parameter(lib.ones(3, 4) * 0.5)
        hx = (h, lib.zeros(3, 4)) if kind == "LSTMCell" else h
        y = _outs(c(x, hx))
        if lib is torch:
            ref = [o.detach().numpy() for o in y]
        else:
            for a, b in zip(ref, y, strict=True):
                np.testing.assert_allclose(b.detach().numpy(), a, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["GRUCell", "LSTMCell"])
def test_chained_steps_on_pending_tensors_under_autobatch(kind):
    # inputs and states that are pending results (not leaves) inside dg.autobatch take the
    # direct path too; the values and gradients equal the eager ones
    dg.manual_seed(0)
    cell = getattr(dg.nn, kind)(5, 4)
    xs = [dg.randn(3, 5) for _ in range(4)]

    def run():
        h, c = dg.zeros(3, 4), dg.zeros(3, 4)
        outs = []
        for x in xs:
            if kind == "LSTMCell":
                h, c = cell(x * 1.5, (h, c))
            else:
                h = cell(x * 1.5, h)
            outs.append(h)
        return dg.stack(outs).sum()

    e = run()
    e.backward()
    grads = [p.grad.numpy().copy() for p in cell.parameters()]
    cell.zero_grad()
    with dg.autobatch():
        a = run()
        a.backward()
        va = float(a)
    assert va == pytest.approx(float(e), rel=1e-6)
    for g, p in zip(grads, cell.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)
