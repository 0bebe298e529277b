"""The compiled tiled max pooling (``_kernels.max_pool_tiled`` / ``pool_scatter_tiled``, used by
ops/pooling.py): values, PyTorch's flat indices and the gradient, bit for bit against
PyTorch and the NumPy reference path, ties, -inf, NaN windows and malformed calls."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import pooling
from dyngraph.ops._util import compiled_kernels

K = compiled_kernels("max_pool_tiled", "pool_scatter_tiled")
needs_kernel = pytest.mark.skipif(K is None, reason="dyngraph._kernels not built (or pure-Python run)")

CASES = [((4, 3, 28, 28), (2, 2)), ((3, 5, 9, 7), (2, 2)), ((2, 3, 9, 10), (3, 2)),
         ((2, 2, 8, 8), (4, 4)), ((1, 1, 2, 2), (2, 2)), ((2, 2, 5, 5), (1, 1))]


def _input(shape, dtype, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    x[0, 0, 0, :4] = 5.0        # ties inside and across windows: the first in scan order wins
    x[0, 0, 1, :4] = 5.0
    x[-1, -1, :2, :2] = -np.inf  # a window of -inf
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_max_pool_matches_torch_bit_for_bit(dtype, case):
    shape, k = case
    x = _input(shape, dtype, sum(shape))
    X = dg.tensor(x, requires_grad=True)
    y, i = dg.nn.functional.max_pool2d(X, k, return_indices=True)
    tX = torch.tensor(x, requires_grad=True)
    ty, ti = torch.nn.functional.max_pool2d(tX, k, return_indices=True)
    assert np.array_equal(y.detach().numpy(), ty.detach().numpy())
    assert np.array_equal(i.numpy(), ti.numpy())
    g = np.random.default_rng(7).standard_normal(ty.shape).astype(dtype)
    y.backward(dg.tensor(g))
    ty.backward(torch.tensor(g))
    assert np.array_equal(X.grad.numpy(), tX.grad.numpy())


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_kernel_equals_the_numpy_reference(dtype, case, monkeypatch):
    shape, k = case
    x = _input(shape, dtype, 3)
    out = (shape[2] // k[0], shape[3] // k[1])
    v, i = pooling._max_pool_tiled(x, k, out)
    g = np.random.default_rng(5).standard_normal(v.shape).astype(dtype)
    s = pooling._scatter_tiled(g, i, shape[2:], k)
    monkeypatch.setattr(pooling, "_K_POOL", None)
    v0, i0 = pooling._max_pool_tiled(x, k, out)
    s0 = pooling._scatter_tiled(g, i0, shape[2:], k)
    assert np.array_equal(v, v0) and np.array_equal(i, i0) and np.array_equal(s, s0)


@needs_kernel
def test_nan_windows_take_the_general_path():
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 6)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    vals, idx = np.empty((2, 3, 3, 3), np.float32), np.empty((2, 3, 3, 3), np.int64)
    assert not K.max_pool_tiled(x, 2, 2, vals, idx)
    X = dg.tensor(x, requires_grad=True)
    y = dg.nn.functional.max_pool2d(X, 2)
    y.sum().backward()
    tX = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tX, 2)
    ty.sum().backward()
    assert np.array_equal(y.detach().numpy(), ty.detach().numpy(), equal_nan=True)
    assert np.array_equal(X.grad.numpy(), tX.grad.numpy())


@needs_kernel
def test_kernels_decline_and_reject():
    x = np.ones((1, 1, 4, 4), np.float32)
    v, i = np.empty((1, 1, 2, 2), np.float32), np.empty((1, 1, 2, 2), np.int64)
    assert not K.max_pool_tiled(x.astype(np.int32), 2, 2, v.astype(np.int32), i)   # not float
    assert not K.max_pool_tiled(x, 2, 2, v.astype(np.float64), i)                  # dtypes differ
    with pytest.raises(ValueError, match="do not tile"):
        K.max_pool_tiled(x, 3, 3, v, i)
    with pytest.raises(ValueError, match="4 dimensions"):
        K.max_pool_tiled(x[0], 2, 2, v, i)
    with pytest.raises(TypeError, match="C-contiguous"):
        K.max_pool_tiled(np.ones((1, 1, 4, 8), np.float32)[..., ::2], 2, 2, v, i)
    out = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(IndexError, match="outside a plane"):
        K.pool_scatter_tiled(v, np.full((1, 1, 2, 2), 16, np.int64), out)
    with pytest.raises(ValueError, match="do not match"):
        K.pool_scatter_tiled(v, np.zeros((1, 1, 1, 2), np.int64), out)
    assert not K.pool_scatter_tiled(v, i.astype(np.int32), out)


def test_max_pool_training_step_matches_torch():
    """A small CNN's gradients through two MaxPool2d(2) layers, against PyTorch (float64)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 1, 12, 12))
    w1, w2 = rng.standard_normal((3, 1, 3, 3)), rng.standard_normal((5, 3, 3, 3))
    out = []
    for lib in (dg, torch):
        X, W1, W2 = (lib.tensor(a, requires_grad=True) for a in (x, w1, w2))
        F = lib.nn.functional
        h = F.max_pool2d(F.relu(F.conv2d(X, W1, padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, W2, padding=1)), 2)
        h.square().sum().backward()
        out.append([t.grad.numpy() for t in (X, W1, W2)])
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
