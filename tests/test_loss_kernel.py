"""The compiled cross-entropy rows (``dyngraph/_kernels.c``, "cross-entropy rows"; issue 13)
behind ``cross_entropy_p``'s forward and ``log_softmax_p`` (float32; float64 stays on NumPy and
its kernel rows are tested directly): against the NumPy reference path, extended-precision
truth and PyTorch 2.13, row by row the same bits eagerly and batched, special values, errors."""

import numpy as np
import pytest
import torch

import dyngraph as dg
import dyngraph.nn.functional as F
from dyngraph.ops import nn as ops_nn
from dyngraph.ops.nn import cross_entropy_p

needs_kernel = pytest.mark.skipif(ops_nn._K_CE is None,
                                  reason="dyngraph._kernels not built or DYNGRAPH_PURE_PYTHON")


def _logits(shape, dtype, seed, spread=3.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * spread).astype(dtype)


def _targets(n, c, seed):
    return np.random.default_rng(seed + 1).integers(0, c, size=n)


def _rows(x, t, ign=-100):
    """The kernel called directly: ``(e, s, picked (N,), rows ignored)`` for either dtype."""
    n, c = x.shape
    e, s, p = (np.empty(sh, x.dtype) for sh in ((n, c), (n, 1), (n, 1)))
    ignored = ops_nn._K_CE.cross_entropy(x, t, ign, e, s, p)
    return e, s, p.reshape(n), ignored


def _reference(monkeypatch, fn):
    """``fn()`` on the NumPy reference path (the compiled rows switched off)."""
    with monkeypatch.context() as m:
        m.setattr(ops_nn, "_K_CE", None)
        return fn()


def _ulp_err(got, truth, dtype, floor=0.0):
    """Error of ``got`` in units in the last place of ``dtype`` at the (float64) truth (at
    ``floor`` for smaller values: a log-probability near 0 is ``-log(s)`` with ``s`` near 1,
    whose rounding to ``dtype`` bounds the absolute, not the relative, error)."""
    truth = np.asarray(truth, np.float64)
    sp = np.spacing(np.maximum(np.abs(truth), floor).astype(dtype)).astype(np.float64)
    return np.max(np.abs(np.asarray(got, np.float64) - truth) / sp)


def _truth(x):
    """log_softmax of the rows of x in extended precision (x87 long double where NumPy has it)"""
    x = x.astype(np.longdouble)
    sh = x - x.max(axis=1, keepdims=True)
    return (sh - np.log(np.exp(sh).sum(axis=1, keepdims=True))).astype(np.float64)


def _truth_logp(x, t):
    return _truth(x)[np.arange(x.shape[0]), t]


SHAPES = [(1, 5), (1, 1), (6, 7), (3, 1), (8, 300), (20, 5001), (2, 17)]


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_rows_against_extended_precision_truth(dtype, shape):
    n, c = shape
    for seed, spread in ((0, 3.0), (1, 80.0)):
        x = _logits(shape, dtype, seed, spread)
        t = _targets(n, c, seed)
        picked = _rows(x, t)[2]
        assert picked.dtype == dtype
        # float32: exp 1.3 ulp, the sum in double, log rounded once; float64: exp <= 1 ulp,
        # the compensated sum
        assert _ulp_err(picked, _truth_logp(x, t), dtype, 1.0) <= 2


@needs_kernel
@pytest.mark.parametrize("shape", SHAPES)
def test_float32_primitive_against_the_reference(shape, monkeypatch):
    n, c = shape
    for seed, spread in ((0, 3.0), (1, 80.0)):
        x = _logits(shape, np.float32, seed, spread)
        t = _targets(n, c, seed)
        for red in ("none", "mean", "sum"):
            g = cross_entropy_p.impl(x, t, reduction=red)
            r = _reference(monkeypatch, lambda x=x, t=t, red=red: cross_entropy_p.impl(
                x, t, reduction=red))
            assert g.dtype == np.float32 and g.shape == r.shape
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-7)
        got = cross_entropy_p.impl(x, t, reduction="none")
        if c >= ops_nn._KCE_MIN_C:      # the kernel's rows, else (short rows) the reference
            np.testing.assert_array_equal(got, -_rows(x, t)[2])
        else:
            np.testing.assert_array_equal(got, _reference(
                monkeypatch, lambda x=x, t=t: cross_entropy_p.impl(x, t, reduction="none")))


@needs_kernel
def test_rows_shorter_than_the_threshold_stay_on_the_reference(monkeypatch):
    m = ops_nn._KCE_MIN_C
    for c, kernel in ((m - 1, False), (m, True)):
        x = _logits((3, c), np.float32, c)
        t = _targets(3, c, c)
        assert (ops_nn._ce_kernel(x, t, -100) is not None) == kernel
        lsm = ops_nn.log_softmax_p.impl(x, dim=1)
        ref = _reference(monkeypatch, lambda x=x: ops_nn.log_softmax_p.impl(x, dim=1))
        if not kernel:
            np.testing.assert_array_equal(lsm, ref)
        else:
            out = np.empty_like(x)
            ops_nn._K_CE.log_softmax(x, out)
            np.testing.assert_array_equal(lsm, out)


@needs_kernel
def test_float64_stays_on_the_reference_path(monkeypatch):
    x = _logits((20, 5001), np.float64, 3)
    t = _targets(20, 5001, 3)
    for fn in (lambda: cross_entropy_p.impl(x, t, reduction="none"),
               lambda: ops_nn.log_softmax_p.impl(x, dim=1)):
        np.testing.assert_array_equal(fn(), _reference(monkeypatch, fn))
    assert ops_nn._ce_kernel(x, t, -100) is None


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kept_exponentials_match_exp_of_the_shifted_rows(dtype):
    x = _logits((5, 301), dtype, 4)
    t = _targets(5, 301, 4)
    e, s, picked, ignored = _rows(x, t)
    assert ignored == 0 and e.shape == x.shape and s.shape == (5, 1) and picked.shape == (5,)
    m = x.max(axis=1, keepdims=True)
    truth = np.exp((x - m).astype(np.float64))     # the same (exact) shift, exp in float64
    assert _ulp_err(e, truth, dtype) <= (1.5 if dtype == np.float32 else 1.0)
    np.testing.assert_allclose(s, truth.sum(axis=1, keepdims=True),
                               rtol=3e-7 if dtype == np.float32 else 1e-15)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_eager_row_and_the_same_row_in_a_batched_block_give_the_same_bits(dtype):
    # dg.autobatch stacks the rows of several calls into one reduction='none' call
    rows = [_logits((k, 5001), dtype, k) for k in (1, 3, 7)]
    ts = [_targets(k, 5001, k) for k in (1, 3, 7)]
    block = np.concatenate(rows)
    tb = np.concatenate(ts)
    together = _rows(block, tb)
    alone = [_rows(x, t) for x, t in zip(rows, ts, strict=True)]
    for k in range(3):
        np.testing.assert_array_equal(together[k], np.concatenate([a[k] for a in alone]))
    # strided logits (a transposed product, a column slice) read as the same rows
    xt = np.ascontiguousarray(block.T).T
    np.testing.assert_array_equal(_rows(xt, tb)[2], together[2])
    wide = np.concatenate([block, block], axis=1)[:, :5001]
    np.testing.assert_array_equal(_rows(wide, tb)[2], together[2])
    if dtype == np.float32:   # and so the primitive
        np.testing.assert_array_equal(cross_entropy_p.impl(block, tb, reduction="none"),
                                      -together[2])


@needs_kernel
def test_autobatch_matches_eager_bits():
    rng = np.random.default_rng(5)
    w = dg.tensor(rng.standard_normal((300, 8)).astype(np.float32), requires_grad=True)
    xs = [dg.tensor(rng.standard_normal((3, 8)).astype(np.float32)) for _ in range(4)]
    ts = [dg.tensor(rng.integers(0, 300, size=3)) for _ in range(4)]

    def losses():
        return dg.stack([F.cross_entropy(x @ w.T, t) for x, t in zip(xs, ts, strict=True)])

    eager = losses()
    eager.sum().backward()
    ge = w.grad.numpy().copy()
    w.grad = None
    with dg.autobatch(stats=True) as ab:
        batched = losses()
        batched.sum().backward()
    assert ab.stats.per_primitive["cross_entropy"][:2] == [1, 4]
    np.testing.assert_array_equal(batched.detach().numpy(), eager.detach().numpy())
    np.testing.assert_allclose(w.grad.numpy(), ge, rtol=1e-6, atol=1e-8)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ignored_rows_match_the_reference_and_torch(dtype, reduction, monkeypatch):
    x = _logits((6, 40), dtype, 7)
    t = _targets(6, 40, 7)
    t[::2] = 3
    got = cross_entropy_p.impl(x, t, reduction=reduction, ignore_index=3)
    ref = _reference(monkeypatch, lambda: cross_entropy_p.impl(x, t, reduction=reduction,
                                                               ignore_index=3))
    np.testing.assert_allclose(got, ref, rtol=1e-6 if dtype == np.float32 else 1e-14)
    if reduction == "none":
        assert (got[::2] == 0).all() and not np.signbit(got[::2]).any()
    want = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t), ignore_index=3,
                                             reduction=reduction).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.float32 else 1e-13)
    e, s, picked, ignored = _rows(x, t, 3)
    assert ignored == 3
    np.testing.assert_array_equal(picked[::2], _rows(x, np.zeros(6, np.int64))[2][::2])
    # every row ignored: mean is nan (0/0), as in PyTorch
    allign = np.full(6, 3)
    got = cross_entropy_p.impl(x, allign, reduction="mean", ignore_index=3)
    assert np.isnan(got)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 5), (20, 5001), (4, 33)])
def test_values_and_gradients_match_torch(dtype, shape):
    n, c = shape
    x = _logits(shape, dtype, 11)
    t = _targets(n, c, 11)
    a = dg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    la = F.cross_entropy(a, dg.tensor(t))
    lb = torch.nn.functional.cross_entropy(b, torch.tensor(t))
    rtol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(la.item(), lb.item(), rtol=rtol)
    la.backward(retain_graph=True)
    lb.backward()
    first = a.grad.numpy().copy()
    np.testing.assert_allclose(first, b.grad.numpy(), rtol=20 * rtol, atol=1e-9 if dtype == np.float32 else 1e-16)
    a.grad = None
    la.backward()     # the residual was taken: recomputed by the same rows, the same bits
    np.testing.assert_array_equal(a.grad.numpy(), first)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_as_the_reference(dtype, monkeypatch):
    x = _logits((5, 20), dtype, 3)
    x[0, 4] = np.nan            # a NaN: that row's loss (and gradient) NaN
    x[1, 2] = np.inf            # +inf: inf - inf, NaN
    x[2, :] = -np.inf           # all -inf: NaN
    x[3, 1::2] = -np.inf        # masked classes: finite
    t = np.array([1, 2, 0, 0, 5])
    got = -_rows(x, t)[2]
    if dtype == np.float32:
        np.testing.assert_array_equal(cross_entropy_p.impl(x, t, reduction="none"), got)
    with np.errstate(invalid="ignore"):   # the reference's inf - inf
        ref = _reference(monkeypatch, lambda: cross_entropy_p.impl(x, t, reduction="none"))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.isnan(got[:3]).all() and np.isfinite(got[3:]).all()
    np.testing.assert_allclose(got[3:], ref[3:], rtol=1e-6 if dtype == np.float32 else 1e-14)
    want = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t), reduction="none")
    np.testing.assert_allclose(got, want.numpy(), rtol=2e-6 if dtype == np.float32 else 1e-13)
    # gradient rows: NaN where the loss is, finite (and torch's) elsewhere
    a = dg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    F.cross_entropy(a, dg.tensor(t), reduction="none")[3:].sum().backward()
    torch.nn.functional.cross_entropy(b, torch.tensor(t), reduction="none")[3:].sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7)


@needs_kernel
def test_kernel_errors_name_the_op_and_the_problem():
    K = ops_nn._K_CE
    x = _logits((3, 4), np.float32, 0)
    e = np.empty((3, 4), np.float32)
    s = np.empty((3, 1), np.float32)
    p = np.empty((3, 1), np.float32)
    with pytest.raises(IndexError, match=r"cross_entropy: target 4 of row 1 is out of bounds for 4"):
        K.cross_entropy(x, np.array([0, 4, 1]), -100, e, s, p)
    with pytest.raises(IndexError, match="target -1 of row 0"):
        K.cross_entropy(x, np.array([-1, 0, 1]), -100, e, s, p)
    assert K.cross_entropy(x, np.array([-1, 0, 1]), -1, e, s, p) == 1
    with pytest.raises(ValueError, match="cross_entropy: target must be an aligned int64"):
        K.cross_entropy(x, np.array([0, 1, 2], dtype=np.int32), -100, e, s, p)
    with pytest.raises(ValueError, match=r"cross_entropy: s must have shape \(3, 1\)"):
        K.cross_entropy(x, np.array([0, 1, 2]), -100, e, np.empty((2, 1), np.float32), p)
    with pytest.raises(TypeError, match="cross_entropy: e is float64 but the other arrays"):
        K.cross_entropy(x, np.array([0, 1, 2]), -100, e.astype(np.float64), s, p)
    with pytest.raises(TypeError, match="takes 6 arguments"):
        K.cross_entropy(x, np.array([0, 1, 2]), -100, e, s)
    # the primitive: an out-of-range class is an IndexError on both paths
    with pytest.raises(IndexError):
        cross_entropy_p.impl(x, np.array([0, 9, 1]))


@needs_kernel
def test_target_and_logit_layouts(monkeypatch):
    x = _logits((6, 40), np.float32, 30)
    t = _targets(6, 40, 30)
    want = cross_entropy_p.impl(x, t, reduction="none")
    # reversed rows and a reversed, strided target: the same rows, the same bits
    np.testing.assert_array_equal(cross_entropy_p.impl(x[::-1], t[::-1], reduction="none"),
                                  want[::-1])
    t2 = np.repeat(t, 2)[::2]
    assert t2.strides == (16,)
    np.testing.assert_array_equal(cross_entropy_p.impl(x, t2, reduction="none"), want)
    # an ignore_index beyond int64 cannot match an int64 target: NumPy's path, no overflow
    got = cross_entropy_p.impl(x, t, reduction="none", ignore_index=2 ** 70)
    ref = _reference(monkeypatch, lambda: cross_entropy_p.impl(x, t, reduction="none",
                                                               ignore_index=2 ** 70))
    np.testing.assert_array_equal(got, ref)


@needs_kernel
def test_other_target_dtypes_and_float16_take_the_reference_path(monkeypatch):
    x = _logits((4, 20), np.float32, 2)
    t32 = np.array([0, 5, 2, 1], dtype=np.int32)
    assert ops_nn._ce_kernel(x, t32, -100) is None
    assert ops_nn._ce_kernel(x.astype(np.float16), t32.astype(np.int64), -100) is None
    got = cross_entropy_p.impl(x, t32)
    ref = _reference(monkeypatch, lambda: cross_entropy_p.impl(x, t32))
    np.testing.assert_array_equal(got, ref)


def test_the_reference_path_runs_without_the_kernel(monkeypatch):
    # what the pure-Python pass runs: the NumPy functions, against PyTorch
    monkeypatch.setattr(ops_nn, "_K_CE", None)
    x = _logits((20, 501), np.float32, 1)
    t = _targets(20, 501, 1)
    a = dg.tensor(x, requires_grad=True)
    la = F.cross_entropy(a, dg.tensor(t))
    b = torch.tensor(x, requires_grad=True)
    lb = torch.nn.functional.cross_entropy(b, torch.tensor(t))
    np.testing.assert_allclose(la.item(), lb.item(), rtol=2e-6)
    la.backward()
    lb.backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=2e-5, atol=1e-9)


# -- log_softmax along the last axis: the same row operations ------------------------------

@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 5), (6, 7), (20, 5001), (3, 1)])
def test_log_softmax_rows_against_truth_reference_and_torch(dtype, shape, monkeypatch):
    x = _logits(shape, dtype, 21, 10.0)
    got = np.empty(shape, dtype)
    ops_nn._K_CE.log_softmax(x, got)
    if dtype == np.float32 and shape[1] >= ops_nn._KCE_MIN_C:
        np.testing.assert_array_equal(ops_nn.log_softmax_p.impl(x, dim=1), got)
    t = _targets(shape[0], shape[1], 21)
    np.testing.assert_array_equal(got[np.arange(shape[0]), t], _rows(x, t)[2])   # same bits
    assert _ulp_err(got, _truth(x), dtype, 1.0) <= 2
    ref = _reference(monkeypatch, lambda: ops_nn.log_softmax_p.impl(x, dim=1))
    np.testing.assert_allclose(got, ref, rtol=1e-6 if dtype == np.float32 else 1e-14,
                               atol=1e-6 if dtype == np.float32 else 1e-14)
    want = torch.log_softmax(torch.tensor(x), 1).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.float32 else 1e-13,
                               atol=2e-6 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_fused_loss_and_the_composition_agree_on_both_paths(kernel, reduction, monkeypatch):
    if kernel and ops_nn._K_CE is None:
        pytest.skip("dyngraph._kernels not built or DYNGRAPH_PURE_PYTHON")
    if not kernel:
        monkeypatch.setattr(ops_nn, "_K_CE", None)
    for dtype in (np.float32, np.float64):
        for shape in ((1, 5), (7, 9), (20, 5001)):
            x = _logits(shape, dtype, 2, 40.0)
            t = _targets(shape[0], shape[1], 2)
            fused = cross_entropy_p.impl(x, t, reduction=reduction)
            comp = ops_nn.nll_loss_p.impl(ops_nn.log_softmax_p.impl(x, dim=1), t,
                                          reduction=reduction)
            np.testing.assert_array_equal(fused, comp)


@needs_kernel
def test_log_softmax_layouts_and_the_cases_left_to_numpy(monkeypatch):
    x3 = _logits((2, 3, 50), np.float32, 5)
    got = ops_nn.log_softmax_p.impl(x3, dim=-1)
    np.testing.assert_array_equal(got.reshape(6, 50),
                                  ops_nn.log_softmax_p.impl(x3.reshape(6, 50), dim=1))
    v = x3[0, 1]                                     # 1-D
    np.testing.assert_array_equal(ops_nn.log_softmax_p.impl(v, dim=0), got[0, 1])
    xs = x3.transpose(1, 0, 2)                       # not contiguous, N-d: NumPy's
    ref = _reference(monkeypatch, lambda: ops_nn.log_softmax_p.impl(xs, dim=-1))
    np.testing.assert_array_equal(ops_nn.log_softmax_p.impl(xs, dim=-1), ref)
    x2 = _logits((40, 24), np.float32, 6)            # another axis: NumPy's
    ref = _reference(monkeypatch, lambda: ops_nn.log_softmax_p.impl(x2, dim=0))
    np.testing.assert_array_equal(ops_nn.log_softmax_p.impl(x2, dim=0), ref)
    xt = np.ascontiguousarray(x2.T).T                # strided 2-D rows: the same bits
    np.testing.assert_array_equal(ops_nn.log_softmax_p.impl(xt, dim=1),
                                  ops_nn.log_softmax_p.impl(x2, dim=1))
    with np.errstate(invalid="ignore"):
        sp = np.tile(np.array([[0.0, -np.inf, 1.0], [np.nan, 0.0, 1.0], [np.inf, 0.0, 1.0],
                               [-np.inf, -np.inf, -np.inf]], np.float32), (1, 7))
        ref = _reference(monkeypatch, lambda: ops_nn.log_softmax_p.impl(sp, dim=1))
    got = ops_nn.log_softmax_p.impl(sp, dim=1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)


@needs_kernel
def test_log_softmax_gradients_match_torch():
    x = _logits((5, 300), np.float32, 8)
    a = dg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    w = _logits((5, 300), np.float32, 9)
    (F.log_softmax(a, 1) * dg.tensor(w)).sum().backward()
    (torch.log_softmax(b, 1) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=2e-5, atol=1e-5)
