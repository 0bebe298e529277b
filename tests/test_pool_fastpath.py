"""The tiling-window fast path of max pooling (stride == kernel) against PyTorch:
ties after ReLU (first maximum wins), odd sizes (trailing rows dropped), NaN, gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (2, 3, 7, 9), (1, 2, 4, 6)])
@pytest.mark.parametrize("k", [2, 3, (2, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiled_max_pool_matches_torch(shape, k, dtype):
    rng = np.random.default_rng(0)
    x = np.maximum(rng.standard_normal(shape), 0).astype(dtype)  # many tied zeros
    xd, xt = dg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    vd, id_ = dg.nn.functional.max_pool2d(xd, k, return_indices=True)
    vt, it = torch.nn.functional.max_pool2d(xt, k, return_indices=True)
    np.testing.assert_array_equal(vd.detach().numpy(), vt.detach().numpy())
    np.testing.assert_array_equal(id_.numpy(), it.numpy())
    g = rng.standard_normal(tuple(vt.shape)).astype(dtype)
    vd.backward(dg.tensor(g))
    vt.backward(torch.tensor(g))
    np.testing.assert_array_equal(xd.grad.numpy(), xt.grad.numpy())


def test_tiled_max_pool_propagates_nan_like_torch():
    x = np.array([[[[1.0, np.nan, 0.0, 2.0], [2.0, 3.0, 5.0, 1.0]]]])
    vd, id_ = dg.nn.functional.max_pool2d(dg.tensor(x), 2, return_indices=True)
    vt, it = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(vd.numpy(), vt.numpy())
    np.testing.assert_array_equal(id_.numpy(), it.numpy())
