"""The compiled gate kernels (dyngraph/_kernels.c) against the NumPy reference path
(dyngraph/ops/rnn.py) and PyTorch 2.13, their input checks, and the pure-Python switch.

The kernels do each step's pointwise math in the arrays' precision with the NumPy path's
order of operations; only exp and tanh are their own, so the two paths agree to a few ulp
per step (the tolerances below allow for a few ulp compounded over the steps).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import rnn
from tests.test_nn_conv import compare_modules

K = pytest.importorskip("dyngraph._kernels")

pytestmark = pytest.mark.skipif(rnn._K is None, reason="DYNGRAPH_PURE_PYTHON: kernels off")

DTYPES = [np.float32, np.float64]
# layer-level agreement of the two paths (a few ulp per step, over <= 7 steps)
TOL = {np.float32: dict(rtol=2e-6, atol=2e-6), np.float64: dict(rtol=1e-13, atol=1e-14)}


def _ulps(got, want):
    """|got - want| in units of got's dtype spacing at want (want in float64)."""
    w = want.astype(got.dtype)
    sp = np.spacing(np.abs(w)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / sp


# ---------------------------------------------------------------------------------------
# the scalar math
# ---------------------------------------------------------------------------------------

def _points():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(4000) * s for s in (1e-30, 1e-6, 1e-3, 0.1, 0.5, 1, 3, 10, 60)]
    edges = [0.0, -0.0, 0.5, -0.5, 0.4999, 0.5001, 1 / 64, 9.0, 20.0, -20.0, 30.0]
    return np.concatenate([*xs, np.linspace(-12, 12, 4001), edges])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid"])
def test_scalar_math_within_a_few_ulp(name, dtype):
    x = _points()
    if name == "exp":
        x = np.clip(x, -80, 80)
    x = x.astype(dtype)
    ref = {"exp": math.exp, "tanh": math.tanh, "sigmoid": lambda v: 1 / (1 + math.exp(-v))}[name]
    want = np.array([ref(float(v)) for v in x])
    out = np.empty_like(x)[None]
    K.unary(name, x[None], out)
    normal = np.abs(want) >= np.finfo(dtype).smallest_normal   # float32 sigmoid flushes subnormals
    err = _ulps(out[0][normal], want[normal])
    assert err.max() <= (4.0 if dtype == np.float64 else 3.0), (name, x[normal][np.argmax(err)])
    # exact values where they must be
    special = np.array([[0.0, -0.0, np.inf, -np.inf, np.nan]], dtype)
    got = np.empty_like(special)
    K.unary(name, special, got)
    want_special = {"exp": [1, 1, np.inf, 0, np.nan], "tanh": [0, -0.0, 1, -1, np.nan],
                    "sigmoid": [0.5, 0.5, 1, 0, np.nan]}[name]
    np.testing.assert_array_equal(got[0], np.array(want_special, dtype))
    if name == "tanh":
        assert np.signbit(got[0, 1])


# ---------------------------------------------------------------------------------------
# layer kernels vs the NumPy reference path
# ---------------------------------------------------------------------------------------

BATCHES = [(1,) * 5, (3,) * 4, (4, 3, 3, 1)]


def _rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_sizes", BATCHES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("proj", [False, True])
def test_lstm_kernel_path_equals_numpy_path(dtype, batch_sizes, reverse, proj):
    rng = np.random.default_rng(len(batch_sizes) + 7 * reverse + 31 * proj)
    hsz, psz, b = 6, 4, batch_sizes[0]
    osz = psz if proj else hsz
    s = sum(batch_sizes)
    args = (_rand(rng, (s, 4 * hsz), dtype, 3), _rand(rng, (b, osz), dtype),
            _rand(rng, (b, hsz), dtype), _rand(rng, (4 * hsz, osz), dtype, 0.5),
            _rand(rng, (psz, hsz), dtype) if proj else None)
    want = rnn._lstm_forward(*args, batch_sizes, reverse)
    got = rnn._lstm_forward_k(*args, batch_sizes, reverse)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == dtype
        np.testing.assert_allclose(g, w, **TOL[dtype])
    grads = [_rand(rng, (s, osz), dtype), _rand(rng, (b, osz), dtype), _rand(rng, (b, hsz), dtype)]
    for gs in (grads, [grads[0], None, None], [None, grads[1], None]):
        want_g = rnn._lstm_backward(gs, want, *args, batch_sizes, reverse)
        got_g = rnn._lstm_backward_k(gs, want, *args, batch_sizes, reverse)
        for g, w in zip(got_g, want_g, strict=True):
            if w is None:
                assert g is None
                continue
            np.testing.assert_allclose(g, w, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_sizes", BATCHES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_gru_kernel_path_equals_numpy_path(dtype, batch_sizes, reverse, bias):
    rng = np.random.default_rng(len(batch_sizes) + 7 * reverse + 31 * bias)
    hsz, b = 5, batch_sizes[0]
    s = sum(batch_sizes)
    args = (_rand(rng, (s, 3 * hsz), dtype, 2), _rand(rng, (b, hsz), dtype),
            _rand(rng, (3 * hsz, hsz), dtype, 0.5), _rand(rng, (3 * hsz,), dtype) if bias else None)
    want = rnn._gru_forward(*args, batch_sizes, reverse)
    got = rnn._gru_forward_k(*args, batch_sizes, reverse)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == dtype
        np.testing.assert_allclose(g, w, **TOL[dtype])
    grads = [_rand(rng, (s, hsz), dtype), _rand(rng, (b, hsz), dtype)]
    for gs in (grads, [grads[0], None], [None, grads[1]]):
        want_g = rnn._gru_backward(gs, want, *args, batch_sizes, reverse)
        got_g = rnn._gru_backward_k(gs, want, *args, batch_sizes, reverse)
        for g, w in zip(got_g, want_g, strict=True):
            if w is None:
                assert g is None
                continue
            np.testing.assert_allclose(g, w, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_sizes", BATCHES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_kernel_path_equals_numpy_path(dtype, batch_sizes, reverse, nonlinearity):
    rng = np.random.default_rng(len(batch_sizes) + 7 * reverse)
    hsz, b = 5, batch_sizes[0]
    s = sum(batch_sizes)
    args = (_rand(rng, (s, hsz), dtype, 2), _rand(rng, (b, hsz), dtype),
            _rand(rng, (hsz, hsz), dtype, 0.5))
    want = rnn._rnn_forward(*args, batch_sizes, reverse, nonlinearity)
    got = rnn._rnn_forward_k(*args, batch_sizes, reverse, nonlinearity)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **TOL[dtype])
    grads = [_rand(rng, (s, hsz), dtype), _rand(rng, (b, hsz), dtype)]
    want_g = rnn._rnn_backward(grads, want, *args, batch_sizes, reverse, nonlinearity)
    got_g = rnn._rnn_backward_k(grads, want, *args, batch_sizes, reverse, nonlinearity)
    for g, w in zip(got_g, want_g, strict=True):
        np.testing.assert_allclose(g, w, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstm_cell_node_kernels_equal_numpy_rules(dtype, monkeypatch):
    """The two LSTMCell nodes and their four rules, kernels vs NumPy (one step: a few ulp)."""
    rng = np.random.default_rng(3)
    h = 7
    gates = _rand(rng, (3, 4 * h), dtype, 4)
    c = _rand(rng, (3, h), dtype)
    gr = _rand(rng, (3, h), dtype)
    gr_bc = np.broadcast_to(np.asarray(1.5, dtype), (3, h))   # a sum()'s gradient: stride 0
    results = []
    for kernels in (rnn._K, None):
        monkeypatch.setattr(rnn, "_K", kernels)
        res = [rnn.lstm_cell_state_p.impl(gates, c), rnn.lstm_cell_hidden_p.impl(gates, c)]
        for prim in (rnn.lstm_cell_state_p, rnn.lstm_cell_hidden_p):
            for rule in prim.vjp_rules:
                res += [rule(gr, None, gates, c), rule(gr_bc, None, gates, c)]
        results.append(res)
    # 1 - tanh(g)^2 for a saturated g cancels: an ulp of tanh is an absolute ~1e-7 there
    tol = dict(rtol=4e-7, atol=5e-7) if dtype == np.float32 else dict(rtol=2e-15, atol=1e-15)
    for got, want in zip(*results, strict=True):
        assert type(got) is np.ndarray and got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **tol)
        np.testing.assert_array_equal(got == 0, want == 0)    # the untouched gate quarters


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_sequence_equals_a_loop_of_steps(dtype, reverse):
    """The one-call layer (equal steps, no projection) is the per-step kernel in a C loop."""
    rng = np.random.default_rng(6)
    n, b, h = 4, 2, 5
    xw, c0 = _rand(rng, (n * b, 4 * h), dtype, 2), _rand(rng, (b, h), dtype)
    h0, w = _rand(rng, (b, h), dtype), _rand(rng, (4 * h, h), dtype, 0.5)
    acts, hs, cs = np.empty((n * b, 4 * h), dtype), np.empty((n * b, h), dtype), np.empty((n * b, h), dtype)
    hbuf, prod = h0.copy(), np.empty((4 * h, b), dtype)
    K.lstm_sequence((np.matmul, w, hbuf.T, prod), prod.T, xw, c0, acts, hs, cs, hbuf, reverse)
    want = [np.empty_like(acts), np.empty_like(hs), np.empty_like(cs)]
    hp, cp = h0, c0
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        rows = slice(t * b, t * b + b)
        K.lstm_forward((w @ hp.T).T, xw[rows], cp, want[0][rows], want[2][rows], want[1][rows])
        hp, cp = want[1][rows], want[2][rows]
    for g, wnt in zip((acts, hs, cs), want, strict=True):
        np.testing.assert_array_equal(g, wnt)
    np.testing.assert_array_equal(hbuf, hp)
    with pytest.raises(ValueError, match="lstm_sequence: 8 rows are not whole steps of 3 rows"):
        K.lstm_sequence((np.matmul, w, hbuf.T, prod), np.zeros((3, 4 * h), dtype), xw,
                        np.zeros((3, h), dtype), acts, hs, cs, np.zeros((3, h), dtype), reverse)
    with pytest.raises(TypeError, match="lstm_sequence: mm must be a tuple"):
        K.lstm_sequence((w, hbuf.T, prod), prod.T, xw, c0, acts, hs, cs, hbuf, reverse)
    with pytest.raises(ValueError, match="matmul"):    # the product's own error comes through
        K.lstm_sequence((np.matmul, w, hbuf, prod), prod.T, xw, c0, acts, hs, cs, hbuf, reverse)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_gru_sequence_equals_a_loop_of_steps(dtype, reverse, bias):
    rng = np.random.default_rng(7)
    n, b, h = 4, 2, 5
    xw, h0 = _rand(rng, (n * b, 3 * h), dtype, 2), _rand(rng, (b, h), dtype)
    w, bh = _rand(rng, (3 * h, h), dtype, 0.5), _rand(rng, (3 * h,), dtype) if bias else None
    acts, hwn, hs = np.empty((n * b, 3 * h), dtype), np.empty((n * b, h), dtype), np.empty((n * b, h), dtype)
    hbuf, prod = h0.copy(), np.empty((b, 3 * h), dtype)
    K.gru_sequence((np.matmul, hbuf, w.T, prod), prod, xw, bh, acts, hwn, hs, hbuf, reverse)
    want = [np.empty_like(acts), np.empty_like(hwn), np.empty_like(hs)]
    hp = h0
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        rows = slice(t * b, t * b + b)
        K.gru_forward(hp @ w.T, xw[rows], bh, hp, want[0][rows], want[1][rows], want[2][rows])
        hp = want[2][rows]
    for g, wnt in zip((acts, hwn, hs), want, strict=True):
        np.testing.assert_array_equal(g, wnt)
    np.testing.assert_array_equal(hbuf, hp)
    with pytest.raises(TypeError, match="gru_sequence: mm must be a tuple"):
        K.gru_sequence(None, prod, xw, bh, acts, hwn, hs, hbuf, reverse)
    with pytest.raises(ValueError, match=r"gru_sequence: hwn must have shape \(8, 5\)"):
        K.gru_sequence((np.matmul, hbuf, w.T, prod), prod, xw, bh, acts, hwn[:4], hs, hbuf, reverse)


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_inputs(dtype):
    """Inputs may be transposed, column slices or broadcast; outputs are written in place."""
    rng = np.random.default_rng(4)
    b, h = 3, 4
    hw_t = _rand(rng, (4 * h, b), dtype)           # a (W @ h.T) product, read transposed
    xw = _rand(rng, (b, 8 * h), dtype)[:, ::2]     # every other column
    cp = np.broadcast_to(_rand(rng, (1, h), dtype), (b, h))
    outs = [np.empty((b, 4 * h), dtype), np.empty((b, h), dtype), np.empty((b, h), dtype)]
    K.lstm_forward(hw_t.T, xw, cp, *outs)
    want = [np.empty_like(o) for o in outs]
    K.lstm_forward(np.ascontiguousarray(hw_t.T), np.ascontiguousarray(xw), np.ascontiguousarray(cp), *want)
    for g, w in zip(outs, want, strict=True):
        np.testing.assert_array_equal(g, w)
    # an output over its own input (the float64 product is written into acts, then activated)
    pre = np.ascontiguousarray(hw_t.T) + np.ascontiguousarray(xw)
    acts = pre.copy()
    c2, h2 = np.empty((b, h), dtype), np.empty((b, h), dtype)
    K.lstm_forward(acts, None, cp, acts, c2, h2)
    np.testing.assert_array_equal(acts, outs[0])
    np.testing.assert_array_equal(h2, outs[2])


@pytest.mark.parametrize("dtype", DTYPES)
def test_gru_bias_as_a_vector_or_rows(dtype):
    """gru_forward takes b_hh as a (3H,) vector (every row) or as (B, 3H) rows: the same."""
    rng = np.random.default_rng(8)
    b, h = 3, 4
    hw, xw, hp = _rand(rng, (b, 3 * h), dtype), _rand(rng, (b, 3 * h), dtype), _rand(rng, (b, h), dtype)
    bias = _rand(rng, (3 * h,), dtype)
    outs = [[np.empty((b, 3 * h), dtype), np.empty((b, h), dtype), np.empty((b, h), dtype)] for _ in range(3)]
    K.gru_forward(hw, xw, bias, hp, *outs[0])
    K.gru_forward(hw, xw, np.tile(bias, (b, 1)), hp, *outs[1])
    K.gru_forward(hw + bias, xw, None, hp, *outs[2])
    for got in outs[1:]:
        for g, w in zip(got, outs[0], strict=True):
            np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match="gru_forward: bias must be 2-D"):
        K.gru_forward(hw, xw, bias[:-1], hp, *outs[0])
    with pytest.raises(ValueError, match="gru_forward: acts must be 2-D"):   # outputs stay 2-D
        K.gru_forward(hw[:1], xw[:1], bias, hp[:1], outs[0][0][0], outs[0][1][:1], outs[0][2][:1])


# ---------------------------------------------------------------------------------------
# whole modules vs PyTorch 2.13, on the kernel path and on the NumPy path
# ---------------------------------------------------------------------------------------

@pytest.fixture(params=["kernels", "numpy"])
def path(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(rnn, "_K", None)
    return request.param


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


MODULES = [
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(batch_first=True, proj_size=3)),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("GRU", dict(bias=False)),
    ("RNN", dict(nonlinearity="relu", bidirectional=True)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind,kw", MODULES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(MODULES)])
def test_modules_match_torch(kind, kw, dtype, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch: LSTM with projections and oneDNN
        tmod = getattr(torch.nn, kind)(3, 6, **kw)
        dmod = getattr(dg.nn, kind)(3, 6, **kw)
        n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        x = _x(4, 5, 3) if kw.get("batch_first") else _x(5, 4, 3)
        out = kw.get("proj_size", 6)
        states = [_x(n, 4, out, seed=1)] + ([_x(n, 4, 6, seed=2)] if kind == "LSTM" else [])
        call = (lambda m, x, h, c: m(x, (h, c))) if kind == "LSTM" else (lambda m, x, h: m(x, h))
        compare_modules(tmod, dmod, [x, *states], dtype, call=call)


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cells_match_torch(kind, dtype, path):
    tmod, dmod = getattr(torch.nn, kind)(3, 6), getattr(dg.nn, kind)(3, 6)
    if kind == "LSTMCell":
        compare_modules(tmod, dmod, [_x(4, 3), _x(4, 6, seed=1), _x(4, 6, seed=2)], dtype,
                        call=lambda m, x, h, c: m(x, (h, c)))
    else:
        compare_modules(tmod, dmod, [_x(4, 3), _x(4, 6, seed=1)], dtype)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_packed_sequences_match_torch(kind, dtype, path):
    """Packed input (batch_sizes 3, 3, 2, 1, 1), bidirectional, values and gradients."""
    tdt, ddt = getattr(torch, dtype), getattr(dg, dtype)
    tmod = getattr(torch.nn, kind)(3, 5, bidirectional=True).to(tdt)
    dmod = getattr(dg.nn, kind)(3, 5, bidirectional=True).to(ddt)
    dmod.load_state_dict({k: dg.tensor(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()})
    lengths = [5, 2, 4]
    seqs = [_x(n, 3, seed=i).astype(dtype) for i, n in enumerate(lengths)]
    tx = [torch.tensor(s, requires_grad=True) for s in seqs]
    dx = [dg.tensor(s).requires_grad_() for s in seqs]
    tout, _ = tmod(torch.nn.utils.rnn.pack_sequence(tx, enforce_sorted=False))
    dout, _ = dmod(dg.nn.utils.rnn.pack_sequence(dx, enforce_sorted=False))
    np.testing.assert_array_equal(dout.batch_sizes.numpy(), tout.batch_sizes.numpy())
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dout.data.detach().numpy(), tout.data.detach().numpy(), **tol)
    w = _x(*tout.data.shape, seed=9).astype(dtype)
    (tout.data * torch.tensor(w)).sum().backward()
    (dout.data * dg.tensor(w)).sum().backward()
    for a, b in zip(dx, tx, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)
    for (name, p), q in zip(dmod.named_parameters(), tmod.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), **tol, err_msg=name)


def test_second_order_and_compile_on_the_kernel_path():
    """create_graph re-runs the layer as primitives (exact second derivatives); dg.compile
    runs the same fused primitive."""
    tmod, dmod = torch.nn.LSTM(2, 3).double(), dg.nn.LSTM(2, 3).double()
    dmod.load_state_dict({k: dg.tensor(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()})
    x = _x(4, 1, 2)
    xt, xd = torch.tensor(x, requires_grad=True), dg.tensor(x).requires_grad_()
    (gt,) = torch.autograd.grad((tmod(xt)[0] ** 2).sum(), [xt], create_graph=True)
    (gd,) = dg.autograd.grad((dmod(xd)[0] ** 2).sum(), [xd], create_graph=True)
    np.testing.assert_allclose(gd.detach().numpy(), gt.detach().numpy(), rtol=1e-10, atol=1e-12)
    (ggt,) = torch.autograd.grad(gt.sum(), [xt])
    (ggd,) = dg.autograd.grad(gd.sum(), [xd])
    np.testing.assert_allclose(ggd.numpy(), ggt.numpy(), rtol=1e-9, atol=1e-11)
    compiled = dg.compile(lambda v: dmod(v)[0])
    np.testing.assert_allclose(compiled(dg.tensor(x)).detach().numpy(), tmod(torch.tensor(x))[0].detach().numpy(),
                               rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------
# which path runs
# ---------------------------------------------------------------------------------------

def _boom(*args, **kwargs):
    raise AssertionError("this path must not run")


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_empty_batch(kind):
    """A batch of 0 rows gives empty outputs and gradients on the kernel path, as in PyTorch."""
    tmod, dmod = getattr(torch.nn, kind)(3, 4), getattr(dg.nn, kind)(3, 4)
    dmod.load_state_dict({k: dg.tensor(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()})
    x = np.zeros((5, 0, 3), np.float32)
    yt, yd = tmod(torch.tensor(x))[0], dmod(dg.tensor(x).requires_grad_())[0]
    assert tuple(yd.shape) == tuple(yt.shape) == (5, 0, 4)
    yd.sum().backward()
    assert all(p.grad is None or not np.any(p.grad.numpy()) for p in dmod.parameters())


def test_layers_take_the_kernel_path_when_built(monkeypatch):
    for name in ("_lstm_forward", "_lstm_backward", "_gru_forward", "_gru_backward",
                 "_rnn_forward", "_rnn_backward"):
        monkeypatch.setattr(rnn, name, _boom)
    x = dg.randn(4, 2, 3, requires_grad=True)
    for mod in (dg.nn.LSTM(3, 4), dg.nn.GRU(3, 4), dg.nn.RNN(3, 4), dg.nn.GRUCell(3, 4)):
        y = mod(x if not isinstance(mod, dg.nn.GRUCell) else x[0])
        (y[0] if isinstance(y, tuple) else y).sum().backward()


def test_numpy_path_when_kernels_are_off(monkeypatch):
    monkeypatch.setattr(rnn, "_K", None)
    for name in ("_lstm_forward_k", "_lstm_backward_k", "_gru_forward_k", "_gru_backward_k",
                 "_rnn_forward_k", "_rnn_backward_k"):
        monkeypatch.setattr(rnn, name, _boom)
    x = dg.randn(4, 2, 3, requires_grad=True)
    for mod in (dg.nn.LSTM(3, 4), dg.nn.GRU(3, 4), dg.nn.RNN(3, 4)):
        mod(x)[0].sum().backward()
    h, c = dg.nn.LSTMCell(3, 4)(x[0])
    (h.sum() + c.sum()).backward()


def test_pure_python_env_switches_the_kernels_off():
    code = "import dyngraph.ops.rnn as r; print(r._K is None)"
    env = {**os.environ, "DYNGRAPH_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "True"


# ---------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------

def _lstm_args(b=2, h=3, dtype=np.float32):
    z = lambda *s: np.zeros(s, dtype)
    return [z(b, 4 * h), z(b, 4 * h), z(b, h), z(b, 4 * h), z(b, h), z(b, h)]


def test_bad_inputs_raise_clear_errors():
    a = _lstm_args()
    K.lstm_forward(*a)                                   # the well-formed call
    with pytest.raises(TypeError, match=r"lstm_forward\(hw, xw, c_prev, acts, c, h\) takes 6"):
        K.lstm_forward(*a[:5])
    bad = list(a)
    bad[2] = np.zeros((2, 3), np.int64)
    with pytest.raises(TypeError, match="lstm_forward: c_prev must be float32 or float64"):
        K.lstm_forward(*bad)
    bad[2] = np.zeros((2, 3), np.float64)
    with pytest.raises(TypeError, match="lstm_forward: c_prev is float64 but the other arrays are float32"):
        K.lstm_forward(*bad)
    bad[2] = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"lstm_forward: c_prev must have shape \(2, 3\), got \(2, 4\)"):
        K.lstm_forward(*bad)
    bad[2] = [[0.0] * 3] * 2
    with pytest.raises(TypeError, match="lstm_forward: c_prev must be a float32 or float64 array, got list"):
        K.lstm_forward(*bad)
    bad = list(a)
    bad[4] = np.zeros((3, 2), np.float32).T            # an output that is not C-contiguous
    with pytest.raises(ValueError, match="lstm_forward: c must be a writable, C-contiguous"):
        K.lstm_forward(*bad)
    ro = np.zeros((2, 3), np.float32)
    ro.flags.writeable = False
    bad[4] = ro
    with pytest.raises(ValueError, match="lstm_forward: c must be a writable, C-contiguous"):
        K.lstm_forward(*bad)
    bad = list(a)
    bad[3] = np.zeros((2, 10), np.float32)
    with pytest.raises(ValueError, match="lstm_forward: acts has 10 columns, not a multiple of 4"):
        K.lstm_forward(*bad)
    bad[3] = np.zeros(12, np.float32)
    with pytest.raises(ValueError, match="lstm_forward: acts must be 2-D"):
        K.lstm_forward(*bad)
    with pytest.raises(TypeError, match="lstm_forward: hw must be a float32 or float64 array, got NoneType"):
        K.lstm_forward(None, *a[1:])
    with pytest.raises(ValueError, match="unary: name must be"):
        K.unary("log", a[0], a[1])
    with pytest.raises(ValueError, match=r"gru_backward: dhz must have shape \(2, 3\)"):
        z = lambda *s: np.zeros(s)
        K.gru_backward(z(2, 3), None, z(2, 9), z(2, 3), z(2, 3), z(2, 9), z(2, 9), z(2, 4))
