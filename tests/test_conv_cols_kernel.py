"""The compiled column matrices of 2-d convolution (``_kernels.im2col2d`` / ``col2im2d``, used
by ops/conv.py): the convolution, its weight gradient and its transposed form must give the
NumPy reference's bits for every stride, padding, dilation and group count, and PyTorch's
values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import _gemm, conv
from dyngraph.ops._util import compiled_kernels

K = compiled_kernels("im2col2d", "col2im2d")
needs_kernel = pytest.mark.skipif(K is None, reason="dyngraph._kernels not built (or pure-Python run)")

# (x shape, w shape, stride, padding pairs, dilation, groups)
CASES = [
    ((4, 3, 9, 9), (5, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((2, 4, 10, 7), (6, 2, 3, 2), (2, 1), ((0, 0), (2, 2)), (1, 2), 2),
    ((3, 2, 8, 8), (4, 2, 5, 5), (2, 2), ((2, 2), (2, 2)), (1, 1), 1),
    ((2, 3, 6, 6), (3, 3, 1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),
    ((2, 2, 7, 9), (2, 2, 3, 3), (3, 2), ((1, 1), (0, 0)), (2, 1), 1),
    ((1, 1, 4, 4), (1, 1, 4, 4), (1, 1), ((3, 3), (3, 3)), (1, 1), 1),   # padding >= kernel - 1
]


def _run(x, w, b, gy, kw, ws):
    y = conv.conv_p(x, w, b, **kw)
    dw = conv.conv_weight_p(x, gy, kernel_size=ws[2:], **kw)
    dx = conv.conv_transpose_p(gy, w, None, output_size=x.shape[2:], **kw)
    return y, dw, dx


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_kernels_give_the_reference_bits(dtype, case, monkeypatch):
    xs, ws, st, pd, dl, gr = case
    # the column products through NumPy in both runs: the compiled path hands its products
    # to MKL where it is installed, the reference path to NumPy's OpenBLAS, and the two
    # libraries sum in different orders (on AMD Zen 4 MKL's bits even depend on the buffers'
    # alignment); the bits compared here are those of the column matrices
    monkeypatch.setattr(_gemm, "_active", False)
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    kw = dict(stride=st, padding=pd, dilation=dl, groups=gr)
    gy = rng.standard_normal(conv.conv_p(x, w, b, **kw).shape).astype(dtype)
    fast = _run(x, w, b, gy, kw, ws)
    monkeypatch.setattr(conv, "_K_COLS", None)
    ref = _run(x, w, b, gy, kw, ws)
    for a, r in zip(fast, ref, strict=True):
        assert a.dtype == r.dtype and np.array_equal(a, r)


@pytest.mark.parametrize("case", CASES)
def test_conv2d_values_and_gradients_match_torch(case):
    xs, ws, st, pd, dl, gr = case
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    pad = (pd[0][0], pd[1][0])
    res = []
    for lib in (dg, torch):
        X, W, B = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        y = lib.nn.functional.conv2d(X, W, B, stride=st, padding=pad, dilation=dl, groups=gr)
        (y * y).sum().backward()
        res.append([y.detach().numpy(), X.grad.numpy(), W.grad.numpy(), B.grad.numpy()])
    for a, t in zip(*res, strict=True):
        np.testing.assert_allclose(a, t, rtol=1e-11, atol=1e-11)


@needs_kernel
def test_kernels_decline_and_reject():
    x = np.ones((1, 2, 5, 5), np.float32)
    cols = np.empty((1, 2, 3, 3, 5, 5), np.float32)
    assert K.im2col2d(x, cols, 3, 3, 1, 1, 1, 1, 1, 1)
    assert not K.im2col2d(x.astype(np.int32), cols.astype(np.int32), 3, 3, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="cols must be"):
        K.im2col2d(x, cols, 3, 3, 1, 1, 0, 0, 1, 1)                 # wrong output size
    with pytest.raises(ValueError, match=">= 1"):
        K.im2col2d(x, cols, 3, 3, 0, 1, 1, 1, 1, 1)
    with pytest.raises(TypeError, match="C-contiguous"):
        K.im2col2d(np.ones((1, 2, 5, 10), np.float32)[..., ::2], cols, 3, 3, 1, 1, 1, 1, 1, 1)
    dc = np.ones((1, 9, 2, 5, 5), np.float32)
    out = np.empty((1, 2, 5, 5), np.float32)
    assert K.col2im2d(dc, out, 3, 3, 1, 1, 1, 1, 1, 1)
    assert out[0, 0, 2, 2] == 9 and out[0, 0, 0, 0] == 4       # interior and corner counts
    with pytest.raises(ValueError, match="does not fit"):
        K.col2im2d(np.ones((1, 4, 2, 5, 5), np.float32), out, 3, 3, 1, 1, 1, 1, 1, 1)
    assert not K.col2im2d(dc.astype(np.float64), out, 3, 3, 1, 1, 1, 1, 1, 1)
