"""Reductions and linear algebra: what the op table cannot express (zeros in products,
tie rules, singular matrices, integer dtypes, error messages, return types, views)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import assert_close, to_np


def _grads(lib, fn, arrays, order=1, seed=3):
    """Gradient (``order`` 1 or 2) of a random projection of ``fn(*tensors)``."""
    rng = np.random.default_rng(seed)
    ts = [(dg.tensor(a.copy()) if lib is dg else torch.from_numpy(a.copy())).requires_grad_(True)
          for a in arrays]
    out = fn(lib, *ts)
    w = rng.uniform(-1, 1, size=tuple(out.shape))
    wt = dg.tensor(w) if lib is dg else torch.from_numpy(w)
    loss = (out * wt).sum()
    gs = lib.autograd.grad(loss, ts, create_graph=order > 1)
    if order == 1:
        return [to_np(g) for g in gs]
    loss2 = None
    for g in gs:
        v = rng.uniform(-1, 1, size=tuple(g.shape))
        term = (g * (dg.tensor(v) if lib is dg else torch.from_numpy(v))).sum()
        loss2 = term if loss2 is None else loss2 + term
    return [to_np(g) for g in lib.autograd.grad(loss2, ts)]


def _fd(fn, arrays, seed=3, eps=1e-6):
    """Central finite differences of the same projected loss, for argument 0."""
    rng = np.random.default_rng(seed)
    base = arrays[0]
    out = to_np(fn(dg, *[dg.tensor(a) for a in arrays]))
    w = rng.uniform(-1, 1, size=out.shape)
    num = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        vals = []
        for s in (1, -1):
            p = base.copy()
            p[idx] += s * eps
            rest = [dg.tensor(a) for a in arrays[1:]]
            vals.append(float((to_np(fn(dg, dg.tensor(p), *rest)) * w).sum()))
        num[idx] = (vals[0] - vals[1]) / (2 * eps)
    return num


ONE_ZERO = np.array([[0.5, 0.0, 2.0, -1.5], [1.1, 1.2, -0.3, 3.0]])
TWO_ZEROS = np.array([[0.5, 0.0, 2.0, 0.0], [0.0, 1.2, 0.0, 3.0]])
THREE_ZEROS = np.array([[0.0, 0.0, 0.0, 1.5], [0.7, 1.2, 0.9, 3.0]])


# ---------------------------------------------------------------------------
# products and scans with zeros: first and second order, against torch and FD
# ---------------------------------------------------------------------------

PROD_FNS = {
    "prod_all": lambda m, x: m.prod(x),
    "prod_dim1": lambda m, x: m.prod(x, 1),
    "prod_dim0_keep": lambda m, x: m.prod(x, 0, keepdim=True),
    "cumprod_dim1": lambda m, x: m.cumprod(x, 1),
    "cumprod_dim0": lambda m, x: m.cumprod(x, 0),
}


@pytest.mark.parametrize("name", sorted(PROD_FNS))
@pytest.mark.parametrize("x", [ONE_ZERO, TWO_ZEROS, THREE_ZEROS], ids=["one", "two", "three"])
def test_products_with_zeros_first_and_second_order(name, x):
    fn = PROD_FNS[name]
    g_dg = _grads(dg, fn, [x])[0]
    assert_close(g_dg, _grads(torch, fn, [x])[0], 1e-10, 1e-12, msg=f"{name} grad")
    np.testing.assert_allclose(g_dg, _fd(fn, [x]), rtol=1e-6, atol=1e-8)
    gg_dg = _grads(dg, fn, [x], order=2)[0]
    assert_close(gg_dg, _grads(torch, fn, [x], order=2)[0], 1e-10, 1e-12, msg=f"{name} 2nd order")


def test_prod_single_zero_gradient_is_product_of_others():
    x = dg.tensor([2.0, 0.0, 3.0, 4.0], requires_grad=True)
    x.prod().backward()
    assert x.grad.tolist() == [0.0, 24.0, 0.0, 0.0]


def test_prod_two_zeros_gradient_is_zero_but_hessian_is_not():
    x = dg.tensor([2.0, 0.0, 0.0, 4.0], requires_grad=True)
    (g,) = dg.autograd.grad(x.prod(), [x], create_graph=True)
    assert g.tolist() == [0.0, 0.0, 0.0, 0.0]
    (h,) = dg.autograd.grad(g[1], [x])  # d^2 prod / dx1 dx2 = 2 * 4
    assert h.tolist() == [0.0, 0.0, 8.0, 0.0]


@pytest.mark.parametrize("fn", [lambda m, t: m.cumprod(t, 0), lambda m, t: m.prod(t)],
                         ids=["cumprod", "prod"])
def test_third_order_with_zeros_matches_torch(fn):
    x0 = np.array([1.5, 0.0, -2.0, 0.0, 0.5])
    w1, w2 = np.array([0.3, -0.2, 0.5, 0.1, 0.7]), np.array([1.0, 2.0, -1.0, 0.5, -0.3])
    res = []
    for lib in (dg, torch):
        wrap = dg.tensor if lib is dg else torch.from_numpy
        t = wrap(x0.copy()).requires_grad_(True)
        (g,) = lib.autograd.grad(fn(lib, t).sum(), [t], create_graph=True)
        (h,) = lib.autograd.grad((g * wrap(w1)).sum(), [t], create_graph=True)
        (third,) = lib.autograd.grad((h * wrap(w2)).sum(), [t])
        res.append([to_np(g), to_np(h), to_np(third)])
    for a, b in zip(*res, strict=True):
        assert_close(a, b, 1e-10, 1e-12)


def test_integer_products_and_scans_are_int64():
    x = dg.tensor([1, 2, 3], dtype=dg.int32)
    assert dg.prod(x).dtype == dg.int64 and dg.prod(x).item() == 6
    assert dg.sum(x).dtype == dg.int64
    assert dg.cumsum(x, 0).dtype == dg.int64 and dg.cumsum(x, 0).tolist() == [1, 3, 6]
    assert dg.cumprod(x, 0).dtype == dg.int64
    assert dg.prod(dg.tensor([True, False])).dtype == dg.int64


# ---------------------------------------------------------------------------
# max / min / median: return types and tie rules
# ---------------------------------------------------------------------------

def test_max_with_dim_returns_named_tuple():
    x = dg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    r = x.max(dim=1)
    assert isinstance(r, dg.return_types.max)
    values, indices = r
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert indices.dtype == dg.int64
    r = dg.min(x, 0, keepdim=True)
    assert isinstance(r, dg.return_types.min) and r.values.shape == (1, 3)
    assert isinstance(dg.median(x, 1), dg.return_types.median)
    mm = dg.aminmax(x)
    assert mm.min.item() == 0.0 and mm.max.item() == 7.0


def test_max_dim_gradient_goes_to_selected_index_among_ties():
    data = np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0]])
    for fn in (lambda m, x: m.max(x, 1).values, lambda m, x: m.min(x, 0)[0],
               lambda m, x: m.median(x, 1).values):
        assert_close(_grads(dg, fn, [data])[0], _grads(torch, fn, [data])[0], 1e-12, 1e-12)


def test_amax_and_full_max_split_gradient_evenly_among_ties():
    data = np.array([[3.0, 1.0, 3.0], [2.0, 3.0, 2.0]])
    for fn in (lambda m, x: m.amax(x), lambda m, x: m.amax(x, 1), lambda m, x: m.max(x),
               lambda m, x: m.amin(x, (0, 1)), lambda m, x: m.median(x)):
        assert_close(_grads(dg, fn, [data])[0], _grads(torch, fn, [data])[0], 1e-12, 1e-12)
    x = dg.tensor(data, requires_grad=True)
    x.max().backward()
    assert to_np(x.grad).tolist() == [[1 / 3, 0, 1 / 3], [0, 1 / 3, 0]]


def test_max_of_two_tensors_is_elementwise():
    a, b = dg.tensor([1.0, 5.0]), dg.tensor([3.0, 2.0])
    assert dg.max(a, b).tolist() == [3.0, 5.0] and a.min(b).tolist() == [1.0, 2.0]


def test_argmax_argmin_keepdim_and_no_grad():
    x = dg.tensor([[1.0, 5.0], [7.0, 0.0]], requires_grad=True)
    assert dg.argmax(x).item() == 2 and not dg.argmax(x).requires_grad
    assert dg.argmax(x, keepdim=True).shape == (1, 1)
    assert x.argmin(1, keepdim=True).tolist() == [[0], [1]]
    assert dg.argmax(x).dtype == dg.int64


def test_median_is_the_lower_median_and_propagates_nan():
    assert dg.median(dg.tensor([4.0, 1.0, 3.0, 2.0])).item() == 2.0
    assert np.isnan(dg.median(dg.tensor([1.0, float("nan"), 2.0])).item())
    r = dg.median(dg.tensor([[1.0, float("nan"), 2.0]]), 1)
    assert np.isnan(r.values.item()) and r.indices.item() == 1


# ---------------------------------------------------------------------------
# var / std / logsumexp / norms: special values
# ---------------------------------------------------------------------------

def test_var_std_keywords():
    x = dg.tensor([[1.0, 2.0, 4.0], [0.0, 1.0, 1.0]])
    t = torch.tensor(to_np(x))
    assert_close(dg.var(x, unbiased=False), torch.var(t, unbiased=False))
    assert_close(dg.std(x, 1, True, True), torch.std(t, 1, True, True))
    assert_close(x.var(dim=0, correction=0), t.var(dim=0, correction=0))
    assert_close(dg.var(x, False), torch.var(t, False))
    v, m = dg.var_mean(x, 1)
    assert_close(v, torch.var(t, 1)) and assert_close(m, t.mean(1))
    with pytest.raises(TypeError, match="either"):
        dg.var(x, unbiased=True, correction=0)


def test_std_gradient_is_zero_where_std_is_zero():
    x = dg.tensor([[1.5, 1.5, 1.5], [1.0, 2.0, 4.0]], requires_grad=True)
    x.std(1).sum().backward()
    assert to_np(x.grad)[0].tolist() == [0.0, 0.0, 0.0]
    assert np.all(np.isfinite(to_np(x.grad)))


def test_logsumexp_is_stable_and_handles_minus_infinity():
    x = dg.tensor([1000.0, 1000.0], dtype=dg.float64)
    assert abs(dg.logsumexp(x, 0).item() - (1000 + np.log(2))) < 1e-9
    ninf = float("-inf")
    data = np.array([[ninf, 0.0, ninf], [ninf, ninf, ninf]])
    out = dg.logsumexp(dg.tensor(data), 1)
    assert out.tolist()[0] == 0.0 and out.tolist()[1] == ninf
    fn = lambda m, x: m.logsumexp(x, 1)
    assert_close(_grads(dg, fn, [data])[0], _grads(torch, fn, [data])[0], 1e-12, 1e-12)


def test_norm_gradient_at_zero_is_zero_subgradient():
    for p in (2, 3, 1.5, "fro"):
        x = dg.zeros(3, requires_grad=True)
        x.norm(p).backward()
        assert x.grad.tolist() == [0.0, 0.0, 0.0], p
    data = np.array([[3.0, -3.0, 1.0], [0.0, 0.0, 0.0]])
    for p in (float("inf"), float("-inf"), 1, 2):
        fn = lambda m, x, p=p: m.linalg.vector_norm(x, p, dim=1)
        assert_close(_grads(dg, fn, [data])[0], _grads(torch, fn, [data])[0], 1e-12, 1e-12)


def test_integer_inputs_follow_pytorch():
    i = dg.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="mean.*Long|mean.*int64|could not infer output dtype"):
        dg.mean(i)
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        dg.var(i)
    with pytest.raises(RuntimeError, match="vector_norm.*floating point"):
        i.norm()
    assert dg.logsumexp(i, 0).dtype == dg.float32
    assert dg.amax(i).dtype == dg.int64 and dg.max(i, 0).values.dtype == dg.int64


def test_nan_reductions():
    x = dg.tensor([1.0, float("nan"), 3.0], requires_grad=True)
    assert dg.nansum(x).item() == 4.0 and dg.nanmean(x).item() == 2.0
    dg.nanmean(x).backward()
    assert x.grad.tolist() == [0.5, 0.0, 0.5]


def test_logical_and_counting_reductions():
    x = dg.tensor([[1, 0, 2], [3, 4, 5]])
    assert dg.all(x, 1).tolist() == [False, True] and x.any().item() is True
    assert dg.count_nonzero(x).item() == 5 and dg.count_nonzero(x, (0, 1)).item() == 5
    assert dg.count_nonzero(x, 0).dtype == dg.int64
    assert dg.all(dg.tensor([1, 2], dtype=dg.uint8)).dtype == dg.uint8


# ---------------------------------------------------------------------------
# errors name the op, the shapes and what to do
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("call,pattern", [
    (lambda: dg.mm(dg.ones(2, 3), dg.ones(4, 5)), r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda: dg.ones(2, 3) @ dg.ones(4, 5), r"matmul: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda: dg.ones(3) @ dg.ones(4, 5), r"\(1x3 and 4x5\)"),
    (lambda: dg.ones(2, 3) @ dg.ones(4), r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda: dg.ones(3) @ dg.ones(4), r"inconsistent tensor size, expected tensor \[3\] and src \[4\]"),
    (lambda: dg.ones(2, 2, 3) @ dg.ones(3, 3, 5), r"size of tensor a \(2\) must match the size of tensor b \(3\)"),
    (lambda: dg.ones(2, 3) @ dg.ones(3, 4, dtype=dg.float64), r"same dtype, but got: float != double"),
    (lambda: dg.ones(()) @ dg.ones(3), r"at least 1D"),
    (lambda: dg.mm(dg.ones(2, 3, 1), dg.ones(3, 4)), r"mm: self must be a 2D tensor"),
    (lambda: dg.bmm(dg.ones(2, 2, 3), dg.ones(3, 3, 5)), r"batch2 tensor to be: \[2, 3\] but got: \[3, 3\]"),
    (lambda: dg.mv(dg.ones(2, 3), dg.ones(4)), r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda: dg.dot(dg.ones(3), dg.ones(4)), r"dot: inconsistent tensor size"),
    (lambda: dg.dot(dg.ones(3), dg.ones(3, dtype=dg.float64)), r"found Float and Double"),
    (lambda: dg.dot(dg.ones(3, 1), dg.ones(3)), r"1D tensors expected, but got 2D and 1D"),
    (lambda: dg.tensordot(dg.ones(2, 3), dg.ones(4, 5), dims=1), r"contracted dimensions need to match"),
    (lambda: dg.inner(dg.ones(2, 3), dg.ones(4)), r"last dimension must match"),
    (lambda: dg.einsum("ij,jk->ik", dg.ones(2, 3)), r"2 operands in the equation"),
    (lambda: dg.einsum("ij->i", dg.ones(2, 3, 4)), r"number of subscripts"),
    (lambda: dg.einsum("ij,jk->ik", dg.ones(2, 3), dg.ones(4, 5)), r"subscript 'j' has size 3"),
    (lambda: dg.einsum("i->j", dg.ones(2)), r"output subscript 'j' does not appear"),
    (lambda: dg.trace(dg.ones(2, 2, 2)), r"trace: expected a matrix"),
    (lambda: dg.linalg.inv(dg.ones(2, 3)), r"linalg.inv: A must be batches of square matrices, but they are 2 by 3"),
    (lambda: dg.linalg.inv(dg.zeros(2, 2)), r"linalg.inv: the input matrix is singular"),
    (lambda: dg.linalg.solve(dg.zeros(2, 2), dg.ones(2)), r"linalg.solve: .*singular"),
    (lambda: dg.linalg.solve(dg.eye(2), dg.ones(3, 1)), r"Incompatible shapes"),
    (lambda: dg.linalg.cholesky(-dg.eye(2)), r"linalg.cholesky: .*not positive-definite"),
    (lambda: dg.linalg.det(dg.ones(3)), r"at least 2 dimensions"),
    (lambda: dg.linalg.matrix_norm(dg.ones(2, 2), 3), r"Order 3 not supported"),
    (lambda: dg.amax(dg.ones(0, 3), 0), r"amax\(\): Expected reduction dim 0 to have non-zero size"),
    (lambda: dg.max(dg.ones(0)), r"max\(\): Expected reduction dim to be specified"),
    (lambda: dg.argmax(dg.ones(0, 2), 0), r"argmax\(\): Expected reduction dim 0"),
    (lambda: dg.sum(dg.ones(2, 3), 2), r"sum: Dimension out of range"),
    (lambda: dg.prod(dg.ones(2, 3), -3), r"prod: Dimension out of range"),
    (lambda: dg.amax(dg.ones(2, 3), (0, 0)), r"appears multiple times"),
    (lambda: dg.cumsum(dg.ones(2)), r"cumsum\(\): missing required argument 'dim'"),
    (lambda: dg.diagonal(dg.ones(2, 2), 0, 1, 1), r"diagonal dimensions cannot be identical"),
    (lambda: dg.tril(dg.ones(3)), r"tril: input tensor must have at least 2 dimensions"),
    (lambda: dg.diag(dg.ones(2, 2, 2)), r"diag\(\): Supports 1D or 2D tensors"),
])
def test_errors_name_the_op_and_shapes(call, pattern):
    with pytest.raises((RuntimeError, IndexError, ValueError, TypeError, NotImplementedError), match=pattern):
        call()


# ---------------------------------------------------------------------------
# linear algebra specifics
# ---------------------------------------------------------------------------

def test_det_gradient_at_singular_matrices_is_the_cofactor():
    for a in (np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, 1.0]]),
              np.zeros((3, 3))):
        fn = lambda m, x: m.linalg.det(x)
        np.testing.assert_allclose(_grads(dg, fn, [a])[0], _fd(fn, [a]), rtol=1e-6, atol=1e-8)
    x = dg.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    (g,) = dg.autograd.grad(dg.linalg.det(x), [x])
    assert_close(g, np.array([[4.0, -2.0], [-2.0, 1.0]]), 1e-12, 1e-12)
    with pytest.raises(NotImplementedError, match="singular"):
        dg.autograd.grad(dg.linalg.det(x), [x], create_graph=True)


def test_slogdet_sign_gets_no_gradient_and_logdet_signs():
    a = dg.tensor([[-2.0, 0.0], [0.0, 3.0]], requires_grad=True)
    sign, logabs = dg.linalg.slogdet(a)
    assert sign.item() == -1.0 and logabs.requires_grad
    (g,) = dg.autograd.grad(sign * 1.0, [a])  # sign is piecewise constant: zero gradient
    assert g.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert np.isnan(dg.logdet(a).item())
    assert dg.logdet(dg.zeros(2, 2)).item() == float("-inf")


def test_diagonal_is_a_view_and_diag_is_a_copy():
    x = dg.arange(9.0).reshape(3, 3)
    d = x.diagonal()
    assert np.shares_memory(d.numpy(), x.numpy())
    with dg.no_grad():
        d.mul_(10.0)
    assert x.numpy()[1, 1] == 40.0
    c = dg.diag(x)
    assert not np.shares_memory(c.numpy(), x.numpy())


def test_einsum_repeated_subscript_gradient_lands_on_the_diagonal():
    x = dg.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
    dg.einsum("ii->i", x).sum().backward()
    assert to_np(x.grad).tolist() == np.eye(3).tolist()
    y = dg.tensor(np.arange(8.0).reshape(2, 2, 2), requires_grad=True)
    fn = lambda m, t: m.einsum("iij->j", t)
    assert_close(_grads(dg, fn, [to_np(y)])[0], _grads(torch, fn, [to_np(y)])[0], 1e-12, 1e-12)


def test_linalg_namespace_is_lazy_and_complete():
    import dyngraph.linalg as L

    assert dg.linalg is L
    for name in ("norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet", "solve", "cholesky"):
        assert callable(getattr(dg.linalg, name)), name


def test_matmul_family_on_tensors_and_methods():
    a, b = dg.randn(2, 3), dg.randn(3, 4)
    assert_close(a.mm(b), a.numpy() @ b.numpy(), 1e-5, 1e-6)
    assert_close(dg.addmm(dg.zeros(4), a, b, beta=0.5, alpha=2.0), 2 * (a.numpy() @ b.numpy()), 1e-5, 1e-5)
    nan_in = dg.full((2, 4), float("nan"))
    assert np.all(np.isfinite(dg.addmm(nan_in, a, b, beta=0).numpy()))  # beta=0 ignores NaN, like torch


def test_qr_gradient_limits_are_loud():
    wide = dg.randn(2, 4, requires_grad=True)
    q, r = dg.linalg.qr(wide)
    with pytest.raises(NotImplementedError, match="wide matrices"):
        r.sum().backward()
    tall = dg.randn(4, 2, requires_grad=True)
    _, r = dg.linalg.qr(tall, mode="r")
    with pytest.raises(RuntimeError, match="mode='r'"):
        r.sum().backward()
    with pytest.raises(RuntimeError, match="unrecognized mode"):
        dg.linalg.qr(tall, mode="x")


def test_empty_dim_tuple_reduces_everything():
    x = dg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    for name in ("sum", "mean", "var", "std"):
        assert_close(getattr(x, name)(()), getattr(x, name)(), 1e-12, 1e-12)
    (g_empty,) = dg.autograd.grad(x.var(()), [x])  # PyTorch 2.13 returns inf here
    (g_all,) = dg.autograd.grad(x.var(), [x])
    assert_close(g_empty, g_all, 1e-12, 1e-12)
    with pytest.raises(RuntimeError, match="logsumexp: dim=\\(\\) is not supported"):
        dg.logsumexp(x, ())


def test_einsum_results_never_alias_their_input():
    x = dg.arange(9.0).reshape(3, 3)
    for eq in ("ii->i", "ij->ji", "ij->ij"):
        assert not np.shares_memory(dg.einsum(eq, x).numpy(), x.numpy()), eq
