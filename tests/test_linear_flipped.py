"""``linear`` without MKL: float32 products of 4-48 rows run as ``(W @ x.T).T`` written into a
C-ordered result (ops/nn.py ``_FLIP_ROWS``), faster in NumPy's OpenBLAS.  The values and
gradients must be PyTorch's, the result C-ordered, and the form taken exactly where the
thresholds say."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import _gemm
from dyngraph.ops import nn as nn_ops


@pytest.fixture
def numpy_products(monkeypatch):
    """The products through NumPy, as with ``DYNGRAPH_BLAS=numpy`` or without MKL."""
    monkeypatch.setattr(_gemm, "_active", False)


@pytest.mark.parametrize("rows,out_features", [(4, 640), (8, 256), (20, 1001), (48, 300), (3, 900),
                                                (49, 640), (4, 256)])
@pytest.mark.parametrize("bias", [True, False])
def test_values_and_gradients_match_torch(numpy_products, rows, out_features, bias):
    rng = np.random.default_rng(rows + out_features)
    x = rng.standard_normal((rows, 96)).astype(np.float32)
    w = (rng.standard_normal((out_features, 96)) * 0.1).astype(np.float32)
    b = rng.standard_normal(out_features).astype(np.float32) if bias else None
    expect = 4 <= rows <= 48 and rows * out_features >= 2048
    assert nn_ops._flip(x, w, b) is expect
    X, W = dg.tensor(x, requires_grad=True), dg.tensor(w, requires_grad=True)
    tX, tW = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    B = dg.tensor(b, requires_grad=True) if bias else None
    tB = torch.tensor(b, requires_grad=True) if bias else None
    y = dg.nn.functional.linear(X, W, B)
    ty = torch.nn.functional.linear(tX, tW, tB)
    assert y.detach().numpy().flags.c_contiguous and y.dtype == dg.float32
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=2e-5)
    y.sin().sum().backward()
    ty.sin().sum().backward()
    pairs = [(X, tX), (W, tW)] + ([(B, tB)] if bias else [])
    for a, t in pairs:
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_strided_and_three_d_inputs(numpy_products):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((700, 64)).astype(np.float32)
    b = rng.standard_normal(700).astype(np.float32)
    big = rng.standard_normal((40, 128)).astype(np.float32)
    x = big[::2, ::2]                          # 20 rows, strided both ways
    assert nn_ops._flip(x, w, b)
    out = nn_ops.linear_p.impl(x, w, b)
    assert out.flags.c_contiguous
    np.testing.assert_allclose(out, x.astype(np.float64) @ w.T.astype(np.float64) + b, rtol=1e-5, atol=1e-4)
    x3 = rng.standard_normal((5, 6, 64)).astype(np.float32)   # 30 rows once flattened
    y = dg.nn.functional.linear(dg.tensor(x3), dg.tensor(w), dg.tensor(b)).numpy()
    ty = torch.nn.functional.linear(torch.tensor(x3), torch.tensor(w), torch.tensor(b)).numpy()
    assert y.shape == (5, 6, 700)
    np.testing.assert_allclose(y, ty, rtol=1e-5, atol=2e-5)


def test_float64_and_other_biases_keep_the_plain_form():
    x = np.ones((10, 32))
    w = np.ones((500, 32))
    assert not nn_ops._flip(x, w, None)                                   # float64
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    assert not nn_ops._flip(x32, w32, np.ones(500))                       # float64 bias
    assert not nn_ops._flip(x32, w32, np.ones((1, 500), np.float32))      # 2-D bias
    assert nn_ops._flip(x32, w32, np.ones(500, np.float32))
