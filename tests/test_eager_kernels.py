"""Shape- and value-specific kernels chosen inside primitive impls (issue 13): the fast paths
must give PyTorch's values, dtypes and gradients, including special values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 3.0, -2.5, 1e20, -1e20]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("exponent", [2, 3, 3.0, 4, 5.0, 8, 9, -1, -1.0, -2, 0.5, -0.5, 0, 1, 2.5])
def test_pow_scalar_exponent_matches_torch(dtype, exponent):
    rng = np.random.default_rng(0)
    a = np.concatenate([np.array(SPECIAL), rng.standard_normal(53) * 3]).astype(dtype).reshape(8, 8)
    xd, xt = dg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    yd, yt = xd ** exponent, xt ** exponent
    assert yd.dtype == (dg.float32 if dtype == np.float32 else dg.float64)
    rtol = 2e-6 if dtype == np.float32 else 1e-14
    out, ref = yd.detach().numpy(), yt.detach().numpy()
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=1e-37, equal_nan=True)
    ok = ~np.isnan(ref)
    assert np.array_equal(np.signbit(out[ok]), np.signbit(ref[ok]))  # -0.0 and -inf kept
    seed = np.isfinite(a).astype(dtype)
    yd.backward(dg.tensor(seed))
    yt.backward(torch.tensor(seed))
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=1e-37, equal_nan=True)


def test_pow_cube_bit_exact_like_torch():
    # PyTorch computes x ** 3 as x * x * x: the product kernel gives the same bits
    a = np.random.default_rng(1).standard_normal((32, 16, 256)).astype(np.float32)
    out = dg.pow(dg.tensor(a), 3.0).numpy()
    assert np.array_equal(out, torch.pow(torch.tensor(a), 3.0).numpy())


def test_pow_second_order_through_fast_kernel():
    x = dg.tensor([-1.5, 0.5, 2.0], dtype=dg.float64, requires_grad=True)
    (g,) = dg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    (gg,) = dg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), 3 * x.detach().numpy() ** 2)
    np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy())
