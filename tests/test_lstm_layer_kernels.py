"""The LSTM layer at batch sizes that take the sequence kernel's 8-row block path
(dyngraph/_kernels.c: AVX2 transposes of the float32 product, gates computed in the output
rows) against the per-step kernel, the NumPy reference path, PyTorch 2.13 and finite
differences.

tests/test_rnn_kernels.py runs the layers at batch <= 4, where every block is a partial
one; here the batch is 8, 11 or 16 (full blocks, and full blocks plus a remainder) and
4H is a multiple of 8 (the transposed fast path) or not (the general path).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import rnn
from tests.test_nn_conv import compare_modules

K = pytest.importorskip("dyngraph._kernels")

pytestmark = pytest.mark.skipif(rnn._K is None, reason="DYNGRAPH_PURE_PYTHON: kernels off")

# layer-level agreement of the kernel and NumPy paths (a few ulp per step, over <= 6 steps)
TOL = {np.float32: dict(rtol=5e-6, atol=5e-6), np.float64: dict(rtol=1e-13, atol=1e-14)}


def _rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _layer_inputs(rng, n, b, h, dtype):
    xw = _rand(rng, (n * b, 4 * h), dtype, 2.0)
    return xw, _rand(rng, (b, h), dtype), _rand(rng, (b, h), dtype), _rand(rng, (4 * h, h), dtype, 0.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b,h", [(8, 6), (11, 8), (16, 5), (16, 2)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("transposed", [True, False])
def test_sequence_equals_a_loop_of_step_kernels(dtype, b, h, reverse, transposed):
    """lstm_sequence (block path where it applies) gives the per-step kernel's bits."""
    rng = np.random.default_rng(b * 100 + h)
    n = 5
    xw, h0, c0, w = _layer_inputs(rng, n, b, h, dtype)
    acts, hs, cs = (np.empty((n * b, 4 * h), dtype), np.empty((n * b, h), dtype),
                    np.empty((n * b, h), dtype))
    hbuf = h0.copy()
    if transposed:   # the float32 layout: (4H, B) product, read through its transpose
        prod = np.empty((4 * h, b), dtype)
        K.lstm_sequence((np.matmul, w, hbuf.T, prod), prod.T, xw, c0, acts, hs, cs, hbuf, reverse)
    else:
        prod = np.empty((b, 4 * h), dtype)
        K.lstm_sequence((np.matmul, hbuf, w.T, prod), prod, xw, c0, acts, hs, cs, hbuf, reverse)
    want = [np.empty_like(acts), np.empty_like(hs), np.empty_like(cs)]
    hp, cp = h0, c0
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        rows = slice(t * b, t * b + b)
        hw = (w @ hp.T).T if transposed else hp @ w.T
        K.lstm_forward(hw, xw[rows], cp, want[0][rows], want[2][rows], want[1][rows])
        hp, cp = want[1][rows], want[2][rows]
    for got, wnt in zip((acts, hs, cs), want, strict=True):
        np.testing.assert_array_equal(got, wnt)
    np.testing.assert_array_equal(hbuf, hp)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b,h", [(8, 6), (11, 8), (16, 5)])
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_kernels_match_numpy_path(dtype, b, h, reverse):
    """Forward outputs and every input gradient: kernel path vs the NumPy reference."""
    rng = np.random.default_rng(7 + b + h)
    n = 6
    xw, h0, c0, w = _layer_inputs(rng, n, b, h, dtype)
    sizes = (b,) * n
    got = rnn._lstm_forward_k(xw, h0, c0, w, None, sizes, reverse)
    want = rnn._lstm_forward(xw, h0, c0, w, None, sizes, reverse)
    for g, wt in zip(got, want, strict=True):
        np.testing.assert_allclose(g, wt, **TOL[dtype])
    grads = [_rand(rng, (n * b, h), dtype), _rand(rng, (b, h), dtype), _rand(rng, (b, h), dtype)]
    gk = rnn._lstm_backward_k(grads, got, xw, h0, c0, w, None, sizes, reverse)
    gn = rnn._lstm_backward(grads, want, xw, h0, c0, w, None, sizes, reverse)
    for k, (g, wt) in enumerate(zip(gk, gn, strict=True)):
        if wt is None:
            assert g is None
            continue
        np.testing.assert_allclose(g, wt, rtol=TOL[dtype]["rtol"] * 10, atol=TOL[dtype]["atol"] * 10,
                                   err_msg=f"gradient {k}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [8, 11, 16])
def test_lstm_module_matches_torch_at_block_batches(dtype, batch):
    """nn.LSTM (input 5, hidden 8: 4H = 32) vs PyTorch: outputs, states, all gradients."""
    rng = np.random.default_rng(batch)
    tmod, dmod = torch.nn.LSTM(5, 8, bidirectional=True), dg.nn.LSTM(5, 8, bidirectional=True)
    x = rng.standard_normal((6, batch, 5))
    h0, c0 = rng.standard_normal((2, batch, 8)), rng.standard_normal((2, batch, 8))
    compare_modules(tmod, dmod, [x, h0, c0], dtype, call=lambda m, x, h, c: m(x, (h, c)))


def test_lstm_layer_block_path_gradcheck():
    """Finite differences (float64) through the kernel path at batch 8, 4H = 8."""
    rng = np.random.default_rng(3)
    n, b, h = 3, 8, 2
    xw = dg.tensor(rng.standard_normal((n * b, 4 * h))).requires_grad_()
    h0 = dg.tensor(rng.standard_normal((b, h))).requires_grad_()
    c0 = dg.tensor(rng.standard_normal((b, h))).requires_grad_()
    w = dg.tensor(rng.standard_normal((4 * h, h)) * 0.5).requires_grad_()

    def f(xw, h0, c0, w):
        hs, hn, cn = rnn.lstm_layer(xw, h0, c0, w, (b,) * n)
        return hs, hn, cn

    assert dg.autograd.gradcheck(f, (xw, h0, c0, w), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_kernel_in_place_and_strided_rows(dtype):
    """lstm_backward reads acts/c/c_prev in place only when that is safe: dgates written over
    acts (same memory), and acts/c/c_prev given as strided views, give the copied path's bits."""
    rng = np.random.default_rng(11)
    b, h = 9, 8
    dh, ghs, dc = _rand(rng, (b, h), dtype), _rand(rng, (b, h), dtype), _rand(rng, (b, h), dtype)
    acts = 1.0 / (1.0 + np.exp(-_rand(rng, (b, 4 * h), dtype)))
    c, cp = _rand(rng, (b, h), dtype), _rand(rng, (b, h), dtype)
    want_dg, want_dc = np.empty((b, 4 * h), dtype), np.empty((b, h), dtype)
    K.lstm_backward(dh, ghs, dc, acts, c, cp, want_dg, want_dc)
    # dgates over acts, dc_prev over dc (the layer's own in-place use)
    a2, dc2 = acts.copy(), dc.copy()
    K.lstm_backward(dh, ghs, dc2, a2, c, cp, a2, dc2)
    np.testing.assert_array_equal(a2, want_dg)
    np.testing.assert_array_equal(dc2, want_dc)
    # strided inputs: every other column of wider arrays, and a broadcast incoming gradient
    wide = np.empty((b, 8 * h), dtype)
    wide[:, ::2] = acts
    cw, cpw = np.empty((b, 2 * h), dtype), np.empty((b, 2 * h), dtype)
    cw[:, ::2], cpw[:, ::2] = c, cp
    dg3, dc3 = np.empty((b, 4 * h), dtype), dc.copy()
    K.lstm_backward(dh, ghs, dc3, wide[:, ::2], cw[:, ::2], cpw[:, ::2], dg3, dc3)
    np.testing.assert_array_equal(dg3, want_dg)
    np.testing.assert_array_equal(dc3, want_dc)
    one = np.broadcast_to(np.asarray(0.5, dtype), (b, h))
    dg4, dc4 = np.empty((b, 4 * h), dtype), dc.copy()
    K.lstm_backward(dh, one, dc4, acts, c, cp, dg4, dc4)
    dg5, dc5 = np.empty((b, 4 * h), dtype), dc.copy()
    K.lstm_backward(dh, np.full((b, h), 0.5, dtype), dc5, acts, c, cp, dg5, dc5)
    np.testing.assert_array_equal(dg4, dg5)
    np.testing.assert_array_equal(dc4, dc5)


# ---------------------------------------------------------------------------------------
# packed float32 per-step products (pack_panels / gemm_packed; ops/rnn.py _packed_steps)
# ---------------------------------------------------------------------------------------

packed = pytest.mark.skipif(not getattr(K, "packed_gemm", False), reason="no AVX2/FMA: packed products off")


@packed
@pytest.mark.parametrize("m", [1, 3, 4, 7, 13])
@pytest.mark.parametrize("n,k", [(16, 1), (32, 5), (48, 64), (16, 300)])
def test_gemm_packed_matches_float64_product(m, n, k):
    rng = np.random.default_rng(m * 1000 + n + k)
    big = rng.standard_normal((2 * m, k + 3)).astype(np.float32)
    a = big[::2, 1:k + 1]                        # strided rows, contiguous columns
    w = rng.standard_normal((n, k)).astype(np.float32)
    bp = np.empty(n * k, np.float32)
    K.pack_panels(w, bp)
    bp_t = np.empty(n * k, np.float32)
    K.pack_panels(np.asfortranarray(w), bp_t)     # the other stride order: same panels
    np.testing.assert_array_equal(bp_t, bp)
    out = np.empty((m, n), np.float32)
    assert K.gemm_packed(a, bp, out=out) is out
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    bound = 4 * k * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(w.T).astype(np.float64))
    assert np.all(np.abs(out - want) <= bound + 1e-30)
    # a row's result does not depend on the rows around it (4-row tiles and single rows agree)
    for i in range(m):
        one = np.empty((1, n), np.float32)
        K.gemm_packed(a[i:i + 1], bp, one)
        np.testing.assert_array_equal(one[0], out[i])


@packed
def test_gemm_packed_checks_its_arguments():
    w = np.ones((16, 4), np.float32)
    bp = np.empty(64, np.float32)
    with pytest.raises(ValueError, match="pack_panels: w has shape \\(12, 4\\)"):
        K.pack_panels(np.ones((12, 4), np.float32), np.empty(48, np.float32))
    with pytest.raises(TypeError, match="pack_panels: w must be a 2-D float32 array"):
        K.pack_panels(w.astype(np.float64), bp)
    with pytest.raises(ValueError, match="pack_panels: out must be float32 with 64 elements"):
        K.pack_panels(w, np.empty(63, np.float32))
    K.pack_panels(w, bp)
    a = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="gemm_packed: out must have shape \\(3, 16\\)"):
        K.gemm_packed(a, bp, np.empty((16, 3), np.float32))
    with pytest.raises(ValueError, match="gemm_packed: a \\(3, 4\\) must have contiguous columns"):
        K.gemm_packed(np.ones((4, 3), np.float32).T, bp, np.empty((3, 16), np.float32))
    with pytest.raises(ValueError, match="gemm_packed: bp"):
        K.gemm_packed(np.ones((3, 5), np.float32), bp, np.empty((3, 16), np.float32))
    with pytest.raises(TypeError, match="gemm_packed\\(a, bp, out\\)"):
        K.gemm_packed(a, bp)


@packed
@pytest.mark.parametrize("b,h", [(4, 16), (5, 16), (11, 4), (8, 32)])
@pytest.mark.parametrize("reverse", [False, True])
def test_packed_layer_matches_float64_reference(b, h, reverse):
    """Layers long enough for the packed products (9 steps): float32 kernel path against the
    float64 NumPy path on the same values, outputs and every input gradient."""
    n = 9
    rng = np.random.default_rng(b * 10 + h)
    xw, h0, c0, w = _layer_inputs(rng, n, b, h, np.float32)
    sizes = (b,) * n
    assert rnn._packed_steps(w, n, b, 4 * h)
    got = rnn._lstm_forward_k(xw, h0, c0, w, None, sizes, reverse)
    up = [a.astype(np.float64) for a in (xw, h0, c0, w)]
    want = rnn._lstm_forward(*up, None, sizes, reverse)
    for g, wt in zip(got, want, strict=True):
        np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5)
    grads = [_rand(rng, (n * b, h), np.float32), _rand(rng, (b, h), np.float32), None]
    gk = rnn._lstm_backward_k(grads, got, xw, h0, c0, w, None, sizes, reverse)
    gn = rnn._lstm_backward([g if g is None else g.astype(np.float64) for g in grads], want, *up,
                            None, sizes, reverse)
    for k, (g, wt) in enumerate(zip(gk, gn, strict=True)):
        if wt is None:
            assert g is None
            continue
        scale = np.abs(wt).max()
        np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5 * scale, err_msg=f"gradient {k}")


@packed
@pytest.mark.parametrize("batch", [4, 6])
def test_packed_lstm_module_matches_torch(batch):
    """nn.LSTM(5, 16), 10 steps, float32 (packed products on both directions) vs PyTorch."""
    rng = np.random.default_rng(batch + 40)
    tmod, dmod = torch.nn.LSTM(5, 16, bidirectional=True), dg.nn.LSTM(5, 16, bidirectional=True)
    x = rng.standard_normal((10, batch, 5))
    h0, c0 = rng.standard_normal((2, batch, 16)), rng.standard_normal((2, batch, 16))
    compare_modules(tmod, dmod, [x, h0, c0], "float32", call=lambda m, x, h, c: m(x, (h, c)))


@packed
@pytest.mark.parametrize("proj", [5, 16])
def test_packed_backward_with_projection_matches_torch(proj):
    """proj_size: the backward's per-step product has the projection's width (16: packed, 5:
    OpenBLAS); 9 steps, batch 4, hidden 32, float32."""
    rng = np.random.default_rng(proj)
    tmod = torch.nn.LSTM(5, 32, proj_size=proj)
    dmod = dg.nn.LSTM(5, 32, proj_size=proj)
    x = rng.standard_normal((9, 4, 5))
    h0, c0 = rng.standard_normal((1, 4, proj)), rng.standard_normal((1, 4, 32))
    compare_modules(tmod, dmod, [x, h0, c0], "float32", call=lambda m, x, h, c: m(x, (h, c)))


@packed
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch", [4, 7])
def test_packed_gru_module_matches_torch(bias, batch):
    """nn.GRU(5, 16), 10 steps, float32: the packed per-step products of gru_sequence and
    the GRU backward (both directions) vs PyTorch, values and gradients."""
    rng = np.random.default_rng(batch + 7 * bias)
    tmod = torch.nn.GRU(5, 16, bias=bias, bidirectional=True)
    dmod = dg.nn.GRU(5, 16, bias=bias, bidirectional=True)
    x, h0 = rng.standard_normal((10, batch, 5)), rng.standard_normal((2, batch, 16))
    assert rnn._packed_steps(dmod.weight_hh_l0._data.astype(np.float32), 10, batch, 48)
    compare_modules(tmod, dmod, [x, h0], "float32")


@packed
@pytest.mark.parametrize("reverse", [False, True])
def test_packed_gru_layer_matches_float64_reference(reverse):
    n, b, h = 9, 5, 16
    rng = np.random.default_rng(21)
    xw = _rand(rng, (n * b, 3 * h), np.float32, 2.0)
    h0, w = _rand(rng, (b, h), np.float32), _rand(rng, (3 * h, h), np.float32, 0.5)
    bh = _rand(rng, (3 * h,), np.float32)
    sizes = (b,) * n
    got = rnn._gru_forward_k(xw, h0, w, bh, sizes, reverse)
    up = [a.astype(np.float64) for a in (xw, h0, w, bh)]
    want = rnn._gru_forward(*up, sizes, reverse)
    for g, wt in zip(got, want, strict=True):
        np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5)
    grads = [_rand(rng, (n * b, h), np.float32), _rand(rng, (b, h), np.float32)]
    gk = rnn._gru_backward_k(grads, got, xw, h0, w, bh, sizes, reverse)
    gn = rnn._gru_backward([g.astype(np.float64) for g in grads], want, *up, sizes, reverse)
    for k, (g, wt) in enumerate(zip(gk, gn, strict=True)):
        np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5 * np.abs(wt).max(), err_msg=f"gradient {k}")
