"""The LSTM layer at batch 1-3, float32: per-step products inside the sequence kernels
(dyngraph/_kernels.c: ``lstm_sequence`` with ``mm = (W_hh,)``, ``lstm_backward_sequence``;
ops/rnn.py ``_row_products``), against the float64 NumPy reference path, the float32 NumPy
path, PyTorch 2.13 and the kernels' own argument checks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import rnn
from tests.test_nn_conv import compare_modules

K = pytest.importorskip("dyngraph._kernels")

pytestmark = pytest.mark.skipif(not rnn._ROWS, reason="kernels off, or no AVX2/FMA: row products off")


def _inputs(rng, n, b, h):
    f = np.float32
    return ((rng.standard_normal((n * b, 4 * h)) * 2).astype(f), rng.standard_normal((b, h)).astype(f),
            rng.standard_normal((b, h)).astype(f), (rng.standard_normal((4 * h, h)) * 0.3).astype(f))


def _bound(n_terms, a, b):
    """|error| bound of float32 sums of n_terms products (|a| @ |b|, float64)."""
    return 2 * n_terms * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))


@pytest.mark.parametrize("b", [1, 2, 3])
@pytest.mark.parametrize("h", [8, 24, 128, 136])
@pytest.mark.parametrize("reverse", [False, True])
def test_row_products_layer_matches_float64_reference(b, h, reverse):
    """Forward and every input gradient of the row-product path against the float64 NumPy
    path on the same float32 values, and against the float32 NumPy path (the reference)."""
    n = 7
    rng = np.random.default_rng(b * 1000 + h * 2 + reverse)
    xw, h0, c0, w = _inputs(rng, n, b, h)
    sizes = (b,) * n
    assert rnn._row_products(w, b)
    calls = []
    real = K.lstm_backward_sequence

    got = rnn._lstm_forward_k(xw, h0, c0, w, None, sizes, reverse)
    up = [a.astype(np.float64) for a in (xw, h0, c0, w)]
    want = rnn._lstm_forward(*up, None, sizes, reverse)
    ref32 = rnn._lstm_forward(xw, h0, c0, w, None, sizes, reverse)
    for g, wt, r in zip(got, want, ref32, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, wt, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    grads = [rng.standard_normal((n * b, h)).astype(np.float32), rng.standard_normal((b, h)).astype(np.float32),
             rng.standard_normal((b, h)).astype(np.float32)]

    def spy(*args):
        calls.append(args)
        return real(*args)

    try:
        K.lstm_backward_sequence = spy
        gk = rnn._lstm_backward_k(grads, got, xw, h0, c0, w, None, sizes, reverse)
    finally:
        K.lstm_backward_sequence = real
    assert len(calls) == 1
    gn = rnn._lstm_backward([g.astype(np.float64) for g in grads], want, *up, None, sizes, reverse)
    for k, (g, wt) in enumerate(zip(gk, gn, strict=True)):
        if wt is None:
            assert g is None
            continue
        assert g.dtype == np.float32
        scale = np.abs(wt).max()
        np.testing.assert_allclose(g, wt, rtol=1e-4, atol=2e-6 * scale, err_msg=f"gradient {k}")


def test_row_products_are_per_row_and_within_float32_rounding():
    """The one-row products: each row's result depends on that row alone (a batch of 3 gives
    each sequence's bits run alone), and the step's product is within float32 sum rounding."""
    rng = np.random.default_rng(7)
    n, h = 6, 40
    xw, h0, c0, w = _inputs(rng, n, 3, h)
    sizes = (3,) * n
    hs, hn, cn, acts, cs = rnn._lstm_forward_k(xw, h0, c0, w, None, sizes, False)
    for r in range(3):
        one = rnn._lstm_forward_k(xw[r::3], h0[r:r + 1], c0[r:r + 1], w, None, (1,) * n, False)
        np.testing.assert_array_equal(one[0], hs[r::3])
        np.testing.assert_array_equal(one[3], acts[r::3])
    # step 0's i gate: sigmoid(xw + h0 @ W^T), the product within its float32 rounding bound
    # (sigmoid's slope is <= 1/4), the sum and the sigmoid within a few ulp
    exact = xw[:3, :h].astype(np.float64) + h0.astype(np.float64) @ w[:h].T.astype(np.float64)
    want = 1.0 / (1.0 + np.exp(-exact))
    slack = 0.25 * (_bound(h, h0, w[:h].T) + 2 * np.finfo(np.float32).eps * np.abs(exact))
    assert np.all(np.abs(acts[:3, :h] - want) <= slack + 8 * np.finfo(np.float32).eps)


@pytest.mark.parametrize("length", [1, 2, 5, 17])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_module_batch1_matches_torch(length, bidirectional):
    """nn.LSTM(16, 32) on a (len, 1, 16) float32 input, as the bilstm_tagger / rnnlm rows
    run it (row products on every direction), with given initial states: outputs, input
    and state gradients, parameter gradients vs PyTorch."""
    rng = np.random.default_rng(length * 10 + bidirectional)
    d = 2 if bidirectional else 1
    tmod = torch.nn.LSTM(16, 32, bidirectional=bidirectional)
    dmod = dg.nn.LSTM(16, 32, bidirectional=bidirectional)
    x = rng.standard_normal((length, 1, 16))
    h0, c0 = rng.standard_normal((d, 1, 32)), rng.standard_normal((d, 1, 32))
    compare_modules(tmod, dmod, [x, h0, c0], "float32", call=lambda m, x, h, c: m(x, (h, c)))


@pytest.mark.parametrize("batch", [2, 3])
def test_lstm_module_small_batch_default_state_matches_torch(batch):
    rng = np.random.default_rng(batch)
    tmod, dmod = torch.nn.LSTM(8, 16, bidirectional=True), dg.nn.LSTM(8, 16, bidirectional=True)
    compare_modules(tmod, dmod, [rng.standard_normal((9, batch, 8))], "float32")


def test_lstm_unbatched_input_matches_torch():
    """A 2-D (len, features) input: one sequence, the batch-1 path."""
    rng = np.random.default_rng(3)
    tmod, dmod = torch.nn.LSTM(8, 24, num_layers=2, bidirectional=True), dg.nn.LSTM(8, 24, num_layers=2, bidirectional=True)
    compare_modules(tmod, dmod, [rng.standard_normal((11, 8))], "float32")


def test_uniform_dw_small_batches_equal_the_shifted_products():
    """dW_hh over equal steps of < 8 rows (one GEMM over a copy of the previous states)
    against dgates^T @ the explicitly shifted states, in float64."""
    rng = np.random.default_rng(5)
    for b0 in (1, 3, 8):
        n, h = 6, 4
        dg_ = rng.standard_normal((n * b0, 4 * h))
        hs = rng.standard_normal((n * b0, h))
        h0 = rng.standard_normal((b0, h))
        for reverse in (False, True):
            prev = np.concatenate([hs[b0:], h0]) if reverse else np.concatenate([h0, hs[:-b0]])
            got = rnn._uniform_dw(dg_, hs, h0, b0, np.float64, reverse)
            np.testing.assert_allclose(got, dg_.T @ prev, rtol=1e-13, atol=1e-13)


def test_row_product_path_is_taken_only_where_it_applies():
    w = np.zeros((32, 8), np.float32)
    assert rnn._row_products(w, 1) and rnn._row_products(w, 3)
    assert not rnn._row_products(w, 4)                                  # the 4-row tile's range
    assert not rnn._row_products(w, 0)
    assert not rnn._row_products(w.astype(np.float64), 1)                # float32 only
    assert not rnn._row_products(np.zeros((40, 10), np.float32), 1)      # H not a multiple of 8


def test_sequence_kernels_check_their_arguments():
    f = np.float32
    n, b, h = 3, 1, 8
    w = np.zeros((4 * h, h), f)
    xw, c0 = np.zeros((n * b, 4 * h), f), np.zeros((b, h), f)
    acts, hs, cs, hbuf = (np.zeros((n * b, 4 * h), f), np.zeros((n * b, h), f), np.zeros((n * b, h), f),
                          np.zeros((b, h), f))
    K.lstm_sequence((w,), None, xw, c0, acts, hs, cs, hbuf, False)
    with pytest.raises(ValueError, match="hw must be None"):
        K.lstm_sequence((w,), hbuf, xw, c0, acts, hs, cs, hbuf, False)
    with pytest.raises(ValueError, match="multiple of 8"):
        h2 = 4
        K.lstm_sequence((np.zeros((16, 4), f),), None, np.zeros((n, 16), f), np.zeros((1, h2), f),
                        np.zeros((n, 16), f), np.zeros((n, h2), f), np.zeros((n, h2), f), np.zeros((1, h2), f), False)
    with pytest.raises(TypeError, match="w must be a C-contiguous float32 array"):
        K.lstm_sequence((np.zeros((h, 4 * h), f).T,), None, xw, c0, acts, hs, cs, hbuf, False)
    with pytest.raises(ValueError, match="w must be float32 of shape \\(32, 8\\)"):
        K.lstm_sequence((np.zeros((4 * h, h), np.float64),), None, xw, c0, acts, hs, cs, hbuf, False)
    ro = w.copy()
    ro.flags.writeable = False      # a read-only weight is fine
    K.lstm_sequence((ro,), None, xw, c0, acts, hs, cs, hbuf, False)
    K.lstm_backward_sequence(ro, None, acts, cs, c0, np.zeros_like(acts), np.zeros((b, h), f),
                             np.zeros((b, h), f), False)
    with pytest.raises(TypeError, match="float32"):
        d = np.float64
        K.lstm_sequence((w.astype(d),), None, xw.astype(d), c0.astype(d), acts.astype(d), hs.astype(d),
                        cs.astype(d), hbuf.astype(d), False)
    dgates, dh, dc = np.zeros_like(acts), np.zeros((b, h), f), np.zeros((b, h), f)
    K.lstm_backward_sequence(w, None, acts, cs, c0, dgates, dh, dc, False)
    K.lstm_backward_sequence(w, hs, acts, cs, c0, dgates, dh, dc, True)
    with pytest.raises(ValueError, match="acts and dgates share memory"):
        K.lstm_backward_sequence(w, hs, acts, cs, c0, acts, dh, dc, False)
    with pytest.raises(ValueError, match="c0 and dc share memory"):
        K.lstm_backward_sequence(w, hs, acts, cs, c0, dgates, dh, c0, False)
    with pytest.raises(ValueError, match="whole steps"):
        K.lstm_backward_sequence(w, None, acts, cs, np.zeros((2, h), f), dgates, np.zeros((2, h), f),
                                 np.zeros((2, h), f), False)
    with pytest.raises(ValueError, match="w must be"):
        K.lstm_backward_sequence(np.zeros((4 * h, h + 8), f), None, acts, cs, c0, dgates, dh, dc, False)
    with pytest.raises(TypeError, match="takes 9 arguments"):
        K.lstm_backward_sequence(w, None, acts, cs, c0, dgates, dh, dc)


def test_backward_sequence_in_place_gradients_of_h_n_and_c_n():
    """dh / dc carry the gradients of h_n / c_n in and those of h0 / c0 out: the same as the
    per-step NumPy loop, with the step gradients given or None."""
    rng = np.random.default_rng(11)
    n, b, h = 5, 2, 16
    xw, h0, c0, w = _inputs(rng, n, b, h)
    sizes = (b,) * n
    out = rnn._lstm_forward_k(xw, h0, c0, w, None, sizes, True)
    for ghs in (None, rng.standard_normal((n * b, h)).astype(np.float32)):
        grads = [ghs, rng.standard_normal((b, h)).astype(np.float32), rng.standard_normal((b, h)).astype(np.float32)]
        gk = rnn._lstm_backward_k(grads, out, xw, h0, c0, w, None, sizes, True)
        gn = rnn._lstm_backward(grads, out, xw, h0, c0, w, None, sizes, True)
        for k in range(4):
            np.testing.assert_allclose(gk[k], gn[k], rtol=2e-5, atol=2e-5 * np.abs(gn[k]).max(), err_msg=str(k))
