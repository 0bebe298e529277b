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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((5, 1), (1, 7)), ((1, 6), (6, 4)), ((3, 8), (8, 1)),
                                    ((40, 70), (70, 60)), ((0, 3), (3, 2)), ((4, 1), (1, 0))])
def test_matmul_shape_kernels_match_torch(dtype, shapes):
    # K == 1 products are a broadcasting multiply in the rules (mm_rule), np.dot in linear;
    # operands are also tried as transposed views (the x @ W.T layout)
    rng = np.random.default_rng(2)
    (m, k), (k2, n) = shapes
    for transpose in (False, True):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((n, k2)).astype(dtype).T if transpose else \
            rng.standard_normal((k2, n)).astype(dtype)
        ad, bd = dg.tensor(a, requires_grad=True), dg.tensor(b, requires_grad=True)
        at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        yd, yt = ad @ bd, at @ bt
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(yd.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
        seed = rng.standard_normal(yt.shape).astype(dtype)
        yd.backward(dg.tensor(seed))
        yt.backward(torch.tensor(seed))
        np.testing.assert_allclose(ad.grad.numpy(), at.grad.numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(bd.grad.numpy(), bt.grad.numpy(), rtol=tol, atol=tol)
        assert yd.detach().numpy().flags.c_contiguous


def test_outer_product_kernel_is_exact():
    # K == 1: the broadcasting multiply computes each entry with one rounding, as the GEMM does
    rng = np.random.default_rng(3)
    g, x = rng.standard_normal((128, 1)).astype(np.float32), rng.standard_normal((1, 128)).astype(np.float32)
    assert np.array_equal((dg.tensor(g) @ dg.tensor(x)).numpy(), np.matmul(g, x))


@pytest.mark.parametrize("batch", [1, 3])
def test_linear_batch_one_weight_gradient(batch):
    # the weight gradient of a batch-1 linear is an outer product (the K == 1 kernel)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((batch, 16)).astype(np.float32)
    lin_d, lin_t = dg.nn.Linear(16, 8), torch.nn.Linear(16, 8)
    lin_d.weight.data = dg.tensor(lin_t.weight.detach().numpy().copy())
    lin_d.bias.data = dg.tensor(lin_t.bias.detach().numpy().copy())
    xd, xt = dg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (lin_d(xd) ** 2).sum().backward()
    (lin_t(xt) ** 2).sum().backward()
    for a, b in ((lin_d.weight.grad, lin_t.weight.grad), (lin_d.bias.grad, lin_t.bias.grad),
                 (xd.grad, xt.grad)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_matmul_second_order_through_kernels():
    # under create_graph the rules run on Tensors (matmul_p binds) and stay differentiable
    rng = np.random.default_rng(5)
    a = dg.tensor(rng.standard_normal((3, 1)), requires_grad=True)
    b = dg.tensor(rng.standard_normal((1, 4)), requires_grad=True)
    at, bt = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (a, b))
    (ga,) = dg.autograd.grad(((a @ b) ** 2).sum(), a, create_graph=True)
    (gat,) = torch.autograd.grad(((at @ bt) ** 2).sum(), at, create_graph=True)
    (gb,) = dg.autograd.grad(ga.sum(), b)
    (gbt,) = torch.autograd.grad(gat.sum(), bt)
    np.testing.assert_allclose(gb.numpy(), gbt.numpy(), rtol=1e-12)


@pytest.mark.parametrize("n,c", [(1, 5), (7, 3), (40, 50)])
@pytest.mark.parametrize("ignored", [False, True])
def test_cross_entropy_small_fast_path_matches_torch(n, c, ignored):
    # small inputs: per-row max shift, plain sums, no weight arrays when nothing is ignored
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((n, c)) * 4).astype(np.float32)
    t = rng.integers(0, c, n)
    if ignored:
        t[0] = -100
    xd, xt = dg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ld = dg.nn.functional.cross_entropy(xd, dg.tensor(t))
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(t))
    np.testing.assert_allclose(ld.item(), lt.item(), rtol=1e-6, equal_nan=True)
    if n == 1 and ignored:
        return  # everything ignored: nan loss, as in PyTorch
    ld.backward()
    lt.backward()
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_cross_entropy_fast_path_second_order():
    rng = np.random.default_rng(7)
    x = dg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    t = rng.integers(0, 4, 3)
    (g,) = dg.autograd.grad(dg.nn.functional.cross_entropy(x, dg.tensor(t)), x, create_graph=True)
    (gt,) = torch.autograd.grad(torch.nn.functional.cross_entropy(xt, torch.tensor(t)), xt,
                                create_graph=True)
    (gg,) = dg.autograd.grad((g * g).sum(), x)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("index", [[3], [[4]], [2, 2, 5]])
def test_embedding_single_row_paths_match_torch(index):
    # one looked-up row: range check without reductions, gradient as a row write
    rng = np.random.default_rng(8)
    w = rng.standard_normal((7, 4)).astype(np.float32)
    ed, et = dg.nn.Embedding(7, 4), torch.nn.Embedding(7, 4)
    ed.weight.data = dg.tensor(w)
    et.weight.data = torch.tensor(w)
    yd, yt = ed(dg.tensor(index)), et(torch.tensor(index))
    seed = rng.standard_normal(yt.shape).astype(np.float32)
    yd.backward(dg.tensor(seed))
    yt.backward(torch.tensor(seed))
    np.testing.assert_array_equal(yd.detach().numpy(), yt.detach().numpy())
    np.testing.assert_allclose(ed.weight.grad.numpy(), et.weight.grad.numpy(), rtol=1e-6)
    with pytest.raises(IndexError, match="out of range"):
        ed(dg.tensor([7]))


@pytest.mark.parametrize("sx,sy", [((6, 4), (4,)), ((4,), (4, 5)), ((2, 6, 4), (4,)), ((4,), (2, 4, 5)),
                                   ((4,), (4,)), ((3, 6, 4), (4, 5)), ((6, 4), (3, 4, 5))])
def test_matmul_vector_kernels_and_rules_match_torch(sx, sy):
    # np.dot for matrix-vector products; reshape-free rules for the 2-D/1-D cases; second order
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal(sx), rng.standard_normal(sy)
    ad, bd = dg.tensor(a, requires_grad=True), dg.tensor(b, requires_grad=True)
    at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    yd, yt = ad @ bd, at @ bt
    np.testing.assert_allclose(yd.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    gd = dg.autograd.grad((yd * yd).sum(), (ad, bd), create_graph=True)
    gt = torch.autograd.grad((yt * yt).sum(), (at, bt), create_graph=True)
    for u, v in zip(gd, gt, strict=True):
        np.testing.assert_allclose(u.detach().numpy(), v.detach().numpy(), rtol=1e-12)
    hd = dg.autograd.grad(gd[0].sum() + gd[1].sum(), (ad, bd))
    ht = torch.autograd.grad(gt[0].sum() + gt[1].sum(), (at, bt))
    for u, v in zip(hd, ht, strict=True):
        np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-10, atol=1e-12)
