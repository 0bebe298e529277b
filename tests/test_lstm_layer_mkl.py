"""The LSTM layer's per-step products and weight gradients through MKL (dyngraph/ops/rnn.py
``_mkl_steps``; ``ops/_gemm.matmul_into``, ``pack_operand``/``matmul_packed`` and the
``sgemm_pack*`` entries of dyngraph/_kernels.c), against float64 products, the float64 NumPy
reference path and PyTorch 2.13.

They run where ``DYNGRAPH_BLAS`` names libmkl_rt or ``pip install mkl`` put it in the
environment (``tests/test_gemm_backend.py`` has the same rule), as one-thread runs do; the
batch sizes are from ``_MKL_FWD_ROWS`` (16) up, where the layer takes these products.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import _gemm, rnn
from tests.test_nn_conv import compare_modules

K = _gemm._K
LIB = _gemm.find_library() if os.environ.get("DYNGRAPH_BLAS", "").lower() != "numpy" else None
pytestmark = pytest.mark.skipif(K is None or rnn._K is None or LIB is None,
                                reason="no compiled kernels or no MKL library in this environment")


@pytest.fixture
def single_thread(monkeypatch):
    """Products as in a one-thread run (the only runs that use MKL), restored afterwards; on
    AMD processors too, where the layer leaves its per-step products to the packed kernel
    (``rnn._mkl_steps``), so that these paths are tested on every machine."""
    before = _gemm._single_thread
    _gemm.set_single_thread(True)
    assert _gemm.library() is not None, "the library was found but did not open"
    monkeypatch.setattr(_gemm, "_amd", False)
    yield
    _gemm._single_thread, _gemm._active = before, None


@pytest.fixture
def spy(monkeypatch):
    """Counts of the MKL product calls the layer makes."""
    calls = {"into": 0, "packed": 0, "mm2d": 0, "pack": 0}
    into, packed, mm2d, pack = _gemm.matmul_into, _gemm.matmul_packed, _gemm.matmul2d, _gemm.pack_operand

    def c_pack(b, m):
        pb = pack(b, m)
        calls["pack"] += pb is not None
        return pb

    def c_into(a, b, out):
        calls["into"] += 1
        return into(a, b, out)

    def c_packed(a, pb, out, beta=0.0):
        calls["packed"] += 1
        return packed(a, pb, out, beta)

    def c_mm2d(a, b):
        calls["mm2d"] += 1
        return mm2d(a, b)

    monkeypatch.setattr(_gemm, "matmul_into", c_into)
    monkeypatch.setattr(_gemm, "matmul_packed", c_packed)
    monkeypatch.setattr(_gemm, "matmul2d", c_mm2d)
    monkeypatch.setattr(_gemm, "pack_operand", c_pack)
    return calls


def _packs():
    return K.sgemm_pack_size(4, 8, 3) > 0


# ---------------------------------------------------------------------------
# the packed products themselves
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("m,k,n", [(32, 256, 1024), (16, 64, 16), (5, 7, 9)])
@pytest.mark.parametrize("transposed", [False, True])
def test_packed_product_matches_float64(single_thread, m, k, n, transposed):
    if not _packs():
        pytest.skip("this CBLAS library has no packed products")
    rng = np.random.default_rng(m + k + n)
    b = rng.standard_normal((n, k)).astype(np.float32).T if transposed else \
        rng.standard_normal((k, n)).astype(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float32)
    pb = _gemm.pack_operand(b, m)
    assert pb is not None
    want = a.astype(np.float64) @ b.astype(np.float64)
    out = np.full((m, n), np.nan, np.float32)
    assert _gemm.matmul_packed(a, pb, out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    acc = np.ones((m, n), np.float32)
    _gemm.matmul_packed(a, pb, acc, 1.0)   # beta = 1: accumulates
    np.testing.assert_allclose(acc, want + 1.0, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    # a transposed view of a is read as it is
    at = np.ascontiguousarray(a.T).T
    out2 = np.empty((m, n), np.float32)
    _gemm.matmul_packed(at, pb, out2)
    np.testing.assert_allclose(out2, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))


def test_packed_product_checks_shapes_and_buffers(single_thread):
    if not _packs():
        pytest.skip("this CBLAS library has no packed products")
    pb = _gemm.pack_operand(np.ones((7, 9), np.float32), 5)
    with pytest.raises(ValueError, match="packed for \\(5, 7\\) @ \\(7, 9\\)"):
        _gemm.matmul_packed(np.ones((4, 7), np.float32), pb, np.empty((4, 9), np.float32))
    with pytest.raises(ValueError, match="packed for"):
        _gemm.matmul_packed(np.ones((5, 7), np.float32), pb, np.empty((5, 8), np.float32))
    with pytest.raises(ValueError, match="not a packed operand"):
        _gemm.matmul_packed(np.ones((5, 7), np.float32), np.zeros(pb.size, np.uint8),
                            np.empty((5, 9), np.float32))
    with pytest.raises(TypeError, match="float32"):
        _gemm.matmul_packed(np.ones((5, 7)), pb, np.empty((5, 9)))
    with pytest.raises(ValueError, match="needs"):
        K.sgemm_pack(np.ones((7, 9), np.float32), 5, np.empty(16, np.uint8))
    assert K.sgemm_pack_size(0, 9, 7) == 0
    assert _gemm.pack_operand(np.ones((7, 9)), 5) is None   # float64: not packed


def test_matmul_into_writes_out(single_thread):
    rng = np.random.default_rng(3)
    a, w = rng.standard_normal((16, 24)).astype(np.float32), rng.standard_normal((40, 24)).astype(np.float32)
    out = np.empty((16, 40), np.float32)
    assert _gemm.matmul_into(a, w.T, out=out) is out
    np.testing.assert_allclose(out, a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-5)
    # a layout CBLAS cannot take (a strided column view): NumPy's matmul instead
    big = rng.standard_normal((16, 48)).astype(np.float32)
    np.testing.assert_array_equal(_gemm.matmul_into(big[:, ::2], w.T, out=out), np.matmul(big[:, ::2], w.T))


# ---------------------------------------------------------------------------
# the layer on the MKL path
# ---------------------------------------------------------------------------

def _layer_inputs(rng, n, b, h):
    f = np.float32
    return ((rng.standard_normal((n * b, 4 * h)) * 2).astype(f), rng.standard_normal((b, h)).astype(f),
            rng.standard_normal((b, h)).astype(f), (rng.standard_normal((4 * h, h)) * 0.5).astype(f))


@pytest.mark.parametrize("b,h", [(16, 16), (32, 8), (17, 24)])
@pytest.mark.parametrize("reverse", [False, True])
def test_mkl_layer_matches_float64_reference(single_thread, spy, b, h, reverse):
    """9 equal steps: outputs and every input gradient of the float32 kernel path with MKL
    products against the float64 NumPy path on the same values."""
    n = 9
    rng = np.random.default_rng(b * 10 + h + reverse)
    xw, h0, c0, w = _layer_inputs(rng, n, b, h)
    sizes = (b,) * n
    assert rnn._mkl_steps(w, b, True) and rnn._mkl_steps(w, b, False)
    got = rnn._lstm_forward_k(xw, h0, c0, w, None, sizes, reverse)
    # every step's product through MKL: inside the kernel from W_hh^T packed once, or a call
    assert spy["pack"] == 1 if _packs() else spy["into"] == n
    up = [a.astype(np.float64) for a in (xw, h0, c0, w)]
    want = rnn._lstm_forward(*up, None, sizes, reverse)
    for g, wt in zip(got, want, strict=True):
        np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5)
    grads = [rng.standard_normal((n * b, h)).astype(np.float32), rng.standard_normal((b, h)).astype(np.float32),
             None]
    before = spy["into"]
    gk = rnn._lstm_backward_k(grads, got, xw, h0, c0, w, None, sizes, reverse)
    assert spy["into"] - before == n and spy["mm2d"] == 2   # dgates @ W_hh per step; dW_hh
    gn = rnn._lstm_backward([g if g is None else g.astype(np.float64) for g in grads], want, *up,
                            None, sizes, reverse)
    for k, (g, wt) in enumerate(zip(gk, gn, strict=True)):
        if wt is None:
            assert g is None
            continue
        np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5 * np.abs(wt).max(), err_msg=f"gradient {k}")


def test_mkl_layer_ragged_steps_match_float64_reference(single_thread, spy):
    """A packed sequence (batch sizes 20, 20, 18, 16, 9, 3): the per-step loop, MKL products
    from 16 rows, the others NumPy's."""
    sizes = (20, 20, 18, 16, 9, 3)
    h = 16
    rng = np.random.default_rng(7)
    xw = (rng.standard_normal((sum(sizes), 4 * h)) * 2).astype(np.float32)
    h0, c0 = rng.standard_normal((20, h)).astype(np.float32), rng.standard_normal((20, h)).astype(np.float32)
    w = (rng.standard_normal((4 * h, h)) * 0.5).astype(np.float32)
    for reverse in (False, True):
        spy["into"] = 0
        got = rnn._lstm_forward_k(xw, h0, c0, w, None, sizes, reverse)
        assert spy["into"] == 4
        up = [a.astype(np.float64) for a in (xw, h0, c0, w)]
        want = rnn._lstm_forward(*up, None, sizes, reverse)
        for g, wt in zip(got, want, strict=True):
            np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5)
        gh = rng.standard_normal((sum(sizes), h)).astype(np.float32)
        gk = rnn._lstm_backward_k([gh, None, None], got, xw, h0, c0, w, None, sizes, reverse)
        gn = rnn._lstm_backward([gh.astype(np.float64), None, None], want, *up, None, sizes, reverse)
        for k, (g, wt) in enumerate(zip(gk, gn, strict=True)):
            if wt is not None:
                np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5 * np.abs(wt).max(), err_msg=f"gradient {k}")


@pytest.mark.parametrize("kw", [dict(), dict(bidirectional=True, num_layers=2), dict(proj_size=12)])
def test_mkl_lstm_module_matches_torch(single_thread, spy, kw):
    """nn.LSTM(7, 32), 10 steps, batch 16, float32, MKL products, vs PyTorch."""
    rng = np.random.default_rng(len(kw))
    tmod, dmod = torch.nn.LSTM(7, 32, **kw), dg.nn.LSTM(7, 32, **kw)
    d = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    x = rng.standard_normal((10, 16, 7))
    h0 = rng.standard_normal((d * layers, 16, kw.get("proj_size", 32)))
    c0 = rng.standard_normal((d * layers, 16, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch: projections are not supported with oneDNN
        compare_modules(tmod, dmod, [x, h0, c0], "float32", call=lambda m, x, h, c: m(x, (h, c)))
    # the backward's steps: a call each; the forward's: inside lstm_sequence from W_hh^T packed
    # once, or a call each (with projections: the per-step loop; no packing)
    if _packs() and not kw.get("proj_size"):
        assert (spy["pack"], spy["into"]) == (d * layers, 10 * d * layers)
    else:
        assert (spy["pack"], spy["into"]) == (0, 20 * d * layers)


def test_not_taken_without_mkl():
    """Multi-thread runs (or DYNGRAPH_BLAS=numpy) keep the packed kernel / NumPy products."""
    before = _gemm._single_thread
    try:
        _gemm.set_single_thread(False)
        assert not rnn._mkl_steps(np.ones((64, 16), np.float32), 32, True)
        assert _gemm.pack_operand(np.ones((16, 64), np.float32), 32) is None
    finally:
        _gemm._single_thread, _gemm._active = before, None


def test_sequence_kernel_with_packed_weight(single_thread):
    """lstm_sequence with mm = (packed W_hh^T,): MKL writes each product into acts; the same
    values as the per-step kernel over MKL products through a buffer, and its argument checks."""
    if not _packs():
        pytest.skip("this CBLAS library has no packed products")
    n, b, h = 6, 16, 8
    rng = np.random.default_rng(11)
    xw, h0, c0, w = _layer_inputs(rng, n, b, h)
    pb = _gemm.pack_operand(w.T, b)

    def outs():
        return (np.empty((n * b, 4 * h), np.float32), np.empty((n * b, h), np.float32),
                np.empty((n * b, h), np.float32))

    for reverse in (False, True):
        acts, hs, cs = outs()
        hbuf = h0.copy()
        K.lstm_sequence((pb,), None, xw, c0, acts, hs, cs, hbuf, reverse)
        acts2, hs2, cs2 = outs()
        hbuf2, p2 = h0.copy(), np.empty((b, 4 * h), np.float32)
        K.lstm_sequence((_gemm.matmul_packed, hbuf2, pb, p2), p2, xw, c0, acts2, hs2, cs2, hbuf2, reverse)
        for got, want in ((acts, acts2), (hs, hs2), (cs, cs2), (hbuf, hbuf2)):
            np.testing.assert_array_equal(got, want)
        ref = rnn._lstm_forward(*(a.astype(np.float64) for a in (xw, h0, c0, w)), None, (b,) * n, reverse)
        np.testing.assert_allclose(hs, ref[0], rtol=1e-4, atol=2e-5)
    acts, hs, cs = outs()
    with pytest.raises(ValueError, match="hw must be None"):
        K.lstm_sequence((pb,), np.empty((b, 4 * h), np.float32), xw, c0, acts, hs, cs, h0.copy(), False)
    with pytest.raises(ValueError, match="packed operand is not one of"):
        K.lstm_sequence((_gemm.pack_operand(w.T, b - 1),), None, xw, c0, acts, hs, cs, h0.copy(), False)
    with pytest.raises(ValueError, match="hbuf must be a writable, C-contiguous"):
        K.lstm_sequence((pb,), None, xw, c0, acts, hs, cs, np.asfortranarray(h0), False)


@pytest.mark.parametrize("kw", [dict(), dict(bias=False), dict(bidirectional=True)])
def test_mkl_gru_module_matches_torch(single_thread, spy, kw):
    """nn.GRU(7, 32), 10 steps, batch 16, float32: per-step products through MKL (forward from
    W_hh^T packed once, backward dh += dhw @ W_hh as one beta = 1 product), vs PyTorch."""
    rng = np.random.default_rng(20 + len(kw))
    tmod, dmod = torch.nn.GRU(7, 32, **kw), dg.nn.GRU(7, 32, **kw)
    d = 2 if kw.get("bidirectional") else 1
    x, h0 = rng.standard_normal((10, 16, 7)), rng.standard_normal((d, 16, 32))
    compare_modules(tmod, dmod, [x, h0], "float32", call=lambda m, x, h: m(x, h))
    if _packs():
        assert spy["pack"] == 2 * d and spy["packed"] == 20 * d   # forward and backward steps
    else:
        assert spy["into"] == 20 * d
    assert spy["mm2d"] == d   # dW_hh


def test_mkl_gru_ragged_steps_match_float64_reference(single_thread, spy):
    """A packed GRU sequence (batch sizes 20, 20, 17, 16, 4): MKL products from 16 rows."""
    sizes = (20, 20, 17, 16, 4)
    h = 16
    rng = np.random.default_rng(9)
    xw = rng.standard_normal((sum(sizes), 3 * h)).astype(np.float32)
    h0 = rng.standard_normal((20, h)).astype(np.float32)
    w = (rng.standard_normal((3 * h, h)) * 0.5).astype(np.float32)
    bh = rng.standard_normal(3 * h).astype(np.float32)
    for reverse in (False, True):
        got = rnn._gru_forward_k(xw, h0, w, bh, sizes, reverse)
        up = [a.astype(np.float64) for a in (xw, h0, w, bh)]
        want = rnn._gru_forward(*up, sizes, reverse)
        for g, wt in zip(got, want, strict=True):
            np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5)
        gh = rng.standard_normal((sum(sizes), h)).astype(np.float32)
        spy["into"] = 0
        gk = rnn._gru_backward_k([gh, None], got, xw, h0, w, bh, sizes, reverse)
        assert spy["into"] == 5   # every step (5 steps: too few to pack W_hh)
        gn = rnn._gru_backward([gh.astype(np.float64), None], want, *up, sizes, reverse)
        for k, (g, wt) in enumerate(zip(gk, gn, strict=True)):
            np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-5 * np.abs(wt).max(), err_msg=f"gradient {k}")


@pytest.mark.parametrize("mod", ["LSTM", "GRU"])
def test_amd_rule_takes_the_packed_kernel_and_matches_torch(single_thread, spy, monkeypatch, mod):
    """On AMD processors (``_gemm._amd``) the per-step products leave MKL for the packed
    kernel (``_K.gemm_packed``: no MKL per-step call), and the layer still gives PyTorch's
    values and gradients."""
    monkeypatch.setattr(_gemm, "_amd", True)
    w = np.ones((64, 32), np.float32)
    assert not rnn._mkl_steps(w, 32, True) and not rnn._mkl_steps(w, 32, False)
    rng = np.random.default_rng(33)
    tmod, dmod = getattr(torch.nn, mod)(8, 32), getattr(dg.nn, mod)(8, 32)
    x = rng.standard_normal((12, 16, 8))
    compare_modules(tmod, dmod, [x], "float32", call=lambda m, x: m(x)[0])
    assert spy["into"] == 0 and spy["packed"] == 0
