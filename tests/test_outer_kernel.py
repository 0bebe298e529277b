"""``_kernels.outer``: mm_rule's K == 1 products (the weight gradient of one-row ``linear``s).

Its values must be the broadcasting multiply's bit for bit (one product per element)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import linalg
from dyngraph.ops._util import compiled_kernels

K = compiled_kernels("outer")
needs_kernel = pytest.mark.skipif(K is None, reason="dyngraph._kernels not built (or pure-Python run)")


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mn", [(512, 128), (1, 1), (7, 1), (1, 9), (33, 17)])
def test_outer_equals_the_multiply_bit_for_bit(dtype, mn):
    m, n = mn
    rng = np.random.default_rng(m + 100 * n)
    col = rng.standard_normal((1, m)).astype(dtype).T     # (m, 1), a transposed view
    row = rng.standard_normal((1, n)).astype(dtype)
    for a in (col, np.ascontiguousarray(col), np.repeat(col, 3, axis=0)[::3]):
        out = np.empty((m, n), dtype)
        assert K.outer(a, row, out)
        assert np.array_equal(out, a * row)
        assert np.array_equal(linalg.mm_rule(a, row), a * row)


@needs_kernel
def test_outer_declines_and_rejects():
    a = np.ones((4, 1), np.float32)
    b = np.ones((1, 6), np.float32)
    out = np.empty((4, 6), np.float32)
    assert not K.outer(a, b.astype(np.float64), out)                     # mixed dtypes
    assert not K.outer(a.astype(np.int64), b.astype(np.int64), np.empty((4, 6), np.int64))
    assert not K.outer(a, np.ones((1, 12), np.float32)[:, ::2], out)     # strided b
    with pytest.raises(ValueError, match=r"a \(M, 1\), b \(1, N\)"):
        K.outer(np.ones((4, 2), np.float32), b, out)
    with pytest.raises(TypeError, match="out must be a writable, C-contiguous"):
        K.outer(a, b, np.empty((6, 4), np.float32).T)
    with pytest.raises(TypeError, match="a must be an array"):
        K.outer([1.0], b, out)
    # mm_rule takes NumPy's multiply for what the kernel declines: the same values
    bs = np.arange(12, dtype=np.float32).reshape(1, 12)[:, ::2]
    assert np.array_equal(linalg.mm_rule(a, bs), a * bs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_row_linear_weight_gradient_matches_torch(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 128)).astype(dtype)
    w = rng.standard_normal((512, 128)).astype(dtype)
    b = rng.standard_normal(512).astype(dtype)
    X, W, B = (dg.tensor(v, requires_grad=True) for v in (x, w, b))
    tX, tW, tB = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    for _ in range(3):    # accumulation over several steps, as a per-step cell does
        dg.nn.functional.linear(X, W, B).tanh().sum().backward()
        torch.nn.functional.linear(tX, tW, tB).tanh().sum().backward()
    tol = 1e-4 if dtype == "float32" else 1e-12   # X.grad: sums of 512 float32 products
    for a, t in ((X, tX), (W, tW), (B, tB)):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
