"""The MLP step's fast paths (issue 13): relu against a broadcast row of zeros (ops/elementwise.py)
and the momentum update's memory test left to the compiled kernel (optim/sgd.py), each against
the form it replaces (same bits), PyTorch 2.13 and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import elementwise as E
from dyngraph.optim import sgd as sgd_mod

SPECIAL = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, -1.5, 2.5, 1e-40, -1e-40]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(128, 512), (3, 64), (64, 100), (2, 30, 100), (128, 10), (4096,),
                                   (70,), (500, 63), (64, 8, 7, 7), (40, 8, 7, 7), (16384, 1), (64, 1),
                                   (8192, 2), (2, 20000), (0, 100), (3, 0, 5)])
def test_relu_forward_gives_the_scalar_forms_bits(dtype, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    k = min(len(SPECIAL), x.size)
    x.flat[:k] = SPECIAL[:k]
    for a in (x, x[..., ::-1], np.asfortranarray(x)):
        got, ref = E.relu_p.impl(a), np.maximum(a, 0)
        assert got.dtype == a.dtype and got.shape == a.shape
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))   # -0.0 -> +0.0 both ways
        assert got is not a and not np.shares_memory(got, a)
        assert got.base is None or got.size == 0           # an owning array, as the scalar form's


def test_relu_row_path_is_taken_and_bounded(monkeypatch):
    monkeypatch.setattr(E, "_RELU_ZEROS", {})
    f32 = np.dtype(np.float32)
    E.relu_p.impl(np.ones((64, 64), np.float32))
    assert list(E._RELU_ZEROS) == [(f32, 64)]
    z = E._RELU_ZEROS[(f32, 64)]
    assert not z.flags.writeable and not z.any()
    E.relu_p.impl(np.ones((4, 512), np.float32))           # 2048 elements: the scalar form
    E.relu_p.impl(np.ones((1000, 10), np.float32))         # rows of 10, < 16384 elements: scalar
    E.relu_p.impl(np.ones((4000, 10), np.float32)[:, :5])  # strided short rows: scalar
    E.relu_p.impl(np.ones((2, 20000), np.float32))         # rows past 16384: scalar
    E.relu_p.impl(np.arange(-4096, 4096).reshape(2, 4096))  # integers: scalar
    assert len(E._RELU_ZEROS) == 1
    E.relu_p.impl(np.ones((64, 8, 7, 7), np.float32))      # C-contiguous: rows of 8 * 7 * 7
    assert (f32, 392) in E._RELU_ZEROS
    for n in range(4100, 4200):
        E.relu_p.impl(np.ones(n, np.float64))
    assert len(E._RELU_ZEROS) == 32
    np.testing.assert_array_equal(E.relu_p.impl(np.full(5000, -2.0)), np.zeros(5000))   # past the cap


def test_relu_integer_and_half_inputs_keep_their_dtype():
    for a in (np.arange(-4096, 4096).reshape(2, 4096), np.linspace(-1, 1, 8192).astype(np.float16),
              np.linspace(-1, 1, 8192).astype(np.dtype(np.float32).newbyteorder())):
        got = E.relu_p.impl(a)
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, np.maximum(a, 0))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_layer_values_and_gradients_match_torch(dtype):
    rng = np.random.default_rng(1)
    xn = rng.standard_normal((64, 96)).astype(dtype)
    gn = rng.standard_normal((64, 96)).astype(dtype)
    x = dg.tensor(xn, requires_grad=True)
    y = dg.relu(x)
    y.backward(dg.tensor(gn))
    xt = torch.tensor(xn, requires_grad=True)
    yt = torch.relu(xt)
    yt.backward(torch.tensor(gn))
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_relu_gradient_against_finite_differences():
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((4, 80))
    xn[np.abs(xn) < 1e-3] = 0.5                       # away from the kink
    x = dg.tensor(xn, requires_grad=True)
    w = dg.tensor(rng.standard_normal((64, 80)))
    # 16 copies: (64, 80), on the broadcast-row path, from 320 inputs; one weighted-sum output
    assert dg.autograd.gradcheck(lambda t: (dg.relu(dg.cat([t * 1.5] * 16, 0)) * w).sum(), (x,),
                                 eps=1e-6, atol=1e-8)


def _numpy_momentum(p, g, buf, lr, m):
    buf *= m
    buf += g
    p -= lr * buf


@pytest.mark.skipif(sgd_mod._K_SGD is None, reason="kernels not built or switched off")
def test_momentum_with_a_gradient_sharing_the_parameters_memory_takes_the_numpy_lines():
    """p.grad = p.detach(): the kernel refuses (shared memory) before writing, the NumPy lines run."""
    calls = []
    real = sgd_mod._K_SGD

    class Spy:
        def sgd_momentum(self, *a):
            calls.append(a)
            return real.sgd_momentum(*a)

    start = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    p = dg.nn.Parameter(dg.tensor(start.copy()))
    opt = dg.optim.SGD([p], lr=0.1, momentum=0.9)
    ref_p, ref_buf = start.copy(), None
    old = sgd_mod._K_SGD
    sgd_mod._K_SGD = Spy()
    try:
        for _ in range(3):
            p.grad = p.detach()                            # shares p's memory
            assert np.shares_memory(p.grad.numpy(), p.detach().numpy())
            opt.step()
            if ref_buf is None:
                ref_buf = ref_p.copy()
                ref_p -= 0.1 * ref_buf
            else:
                _numpy_momentum(ref_p, ref_p, ref_buf, 0.1, 0.9)
    finally:
        sgd_mod._K_SGD = old
    assert len(calls) == 2                               # steps 2 and 3 tried the kernel
    np.testing.assert_array_equal(p.detach().numpy(), ref_p)
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"].numpy(), ref_buf)


@pytest.mark.skipif(sgd_mod._K_SGD is None, reason="kernels not built or switched off")
def test_momentum_with_separate_gradients_still_uses_the_kernel_and_matches_torch():
    rng = np.random.default_rng(3)
    shapes = [(32, 20), (32,), (7, 32), (7,)]
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ps = [dg.nn.Parameter(dg.tensor(a.copy())) for a in init]
    pt = [torch.nn.Parameter(torch.tensor(a.copy())) for a in init]
    opt, optt = dg.optim.SGD(ps, lr=0.05, momentum=0.9), torch.optim.SGD(pt, lr=0.05, momentum=0.9)
    for t in range(4):
        for p, q, g in zip(ps, pt, grads, strict=True):
            p.grad = dg.tensor(g * (1 + t))
            q.grad = torch.tensor(g * (1 + t))
        opt.step()
        optt.step()
    for p, q in zip(ps, pt, strict=True):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-6)
