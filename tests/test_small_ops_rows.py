"""The small-array loops of the C accelerator (``_speedups``: ``rows_add``, ``index_below``,
``row_shift``, ``row_sum``) give NumPy's bits; the paths that use them (one-row cross-entropy,
scatter_add/index_add along dim 0, the gather-like index checks) agree with the NumPy
reference path and PyTorch; ``@primitive(light=...)`` inputs are saved as Meta by both node
builders; the lean common case of ``apply_inplace`` keeps the in-place rules."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import torch

import dyngraph as dg
import dyngraph.ops.nn as ops_nn
from dyngraph._core import registry
from dyngraph._core.graph import Meta
from dyngraph.nn import functional as F
from dyngraph.ops.indexing import index_add_p, index_p, scatter_add_p
from dyngraph.ops.nn import SoftmaxResidual, cross_entropy_p
from dyngraph.ops.structural import expand_p
from dyngraph.surface.indexing import TENSOR

LOOPS = registry.LOOPS
needs_loops = pytest.mark.skipif(LOOPS is None, reason="C accelerator not built (pure-Python)")


# -- the loops against NumPy -------------------------------------------------------------

@needs_loops
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_sum_is_numpys_add_reduce(dtype):
    rng = np.random.default_rng(0)
    for n in [*range(1, 40), 127, 128, 129, 200, 257, 1000, 1031]:
        for k in range(60):
            v = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype)
            if k % 3 == 0:
                v = np.exp(v - v.max())
            a = np.add.reduce(v.reshape(1, n), axis=None)
            assert dtype(LOOPS.row_sum(v.reshape(1, n))).tobytes() == a.tobytes(), (n, k)
    assert LOOPS.row_sum(np.zeros(3, np.int64)) is None
    assert LOOPS.row_sum(np.zeros((3, 4))[:, 1]) is None          # not contiguous


@needs_loops
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_shift_is_x_minus_its_maximum(dtype):
    rng = np.random.default_rng(1)
    for n in range(1, 20):
        for k in range(80):
            x = (rng.standard_normal((1, n)) * 5).astype(dtype)
            if k % 8 == 0:
                x[0, rng.integers(n)] = np.nan
            elif k % 8 == 1:
                x[0, rng.integers(n)] = np.inf
            elif k % 8 == 2:
                x[0, :] = -np.inf
            t = int(rng.integers(n))
            e = np.empty_like(x)
            with np.errstate(all="ignore"):
                d = LOOPS.row_shift(x, e, t)
                m = np.maximum.reduce(x, axis=None)
                want, dwant = x - m, x[0, t] - m
            np.testing.assert_array_equal(e, want)
            np.testing.assert_array_equal(dtype(d), dwant)
    x = np.ones((1, 4), np.float32)
    assert LOOPS.row_shift(x, np.empty((1, 4), np.float32), 4) is None     # target out of range
    assert LOOPS.row_shift(x, np.empty((1, 4), np.float64), 0) is None     # dtypes differ
    assert LOOPS.row_shift(np.ones((4, 2), np.float32)[:, 0], np.empty(4, np.float32), 0) is None


@needs_loops
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_add_is_ufunc_at(dtype):
    rng = np.random.default_rng(2)
    for _ in range(200):
        n, r, m = rng.integers(1, 9), rng.integers(1, 20), rng.integers(0, 50)
        out = rng.standard_normal((n, r)).astype(dtype)
        want = out.copy()
        rows = rng.integers(-n, n, m)                      # repeats and negative rows
        vals = rng.standard_normal((m, r)).astype(dtype)
        assert LOOPS.rows_add(out, rows, vals) is True
        np.add.at(want, rows, vals)
        assert out.tobytes() == want.tobytes()
    out = np.zeros((3, 2))
    assert LOOPS.rows_add(out, np.array([0, 3]), np.ones((2, 2))) is False   # out of range ...
    assert not out.any()                                                    # ... nothing written
    assert LOOPS.rows_add(out, np.array([0, 1]), np.ones((2, 2), np.float32)) is False
    assert LOOPS.rows_add(out, np.array([0, 1], np.int32), np.ones((2, 2))) is False
    assert LOOPS.rows_add(out, np.array([0, 1]), np.ones((2, 3))) is False
    assert LOOPS.rows_add(out, np.array([0, 1]), out[1:3]) is False          # overlapping


@needs_loops
def test_index_below():
    ia = np.broadcast_to(np.array([[1], [2], [0]]), (3, 5))     # an expand()ed index
    assert LOOPS.index_below(ia, 3) is True and LOOPS.index_below(ia, 2) is False
    assert LOOPS.index_below(np.array([-1]), 5) is False
    assert LOOPS.index_below(np.array([[1, 2], [3, 4]], np.int32)[:, ::-1], 5) is True
    assert LOOPS.index_below(np.array([[1, 2], [3, 5]], np.int32).T, 5) is False
    assert LOOPS.index_below(np.zeros((0, 3), np.int64), 0) is True
    assert LOOPS.index_below(np.array(3), 4) is True
    assert LOOPS.index_below(np.array([1.0]), 5) is None
    rng = np.random.default_rng(8)
    for _ in range(200):   # every layout: strided, transposed, expanded, size-1 dimensions
        a = rng.integers(-1, 7, tuple(rng.integers(1, 5, rng.integers(1, 4))))
        a = a[tuple(slice(None, None, int(rng.choice([1, 2, -1]))) for _ in a.shape)]
        if rng.integers(2):
            a = np.broadcast_to(a[:, None], (a.shape[0], 3, *a.shape[1:]))
        if rng.integers(2):
            a = a.T
        for n in (5, 7):
            assert LOOPS.index_below(a, n) is bool((a >= 0).all() and (a < n).all()), (a, n)


# -- one-row cross-entropy: the loops' path has the NumPy path's bits ------------------------

@needs_loops
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_row_cross_entropy_bits_match_the_numpy_path(dtype, monkeypatch):
    rng = np.random.default_rng(3)
    cases = []
    for c in range(1, 16):
        for _ in range(40):
            x = (rng.standard_normal((1, c)) * 10 ** rng.uniform(-2, 1.5)).astype(dtype)
            cases.append((x, np.array([rng.integers(c)])))
    fast = []
    for x, t in cases:
        r = SoftmaxResidual()
        fast.append((cross_entropy_p.impl(x, t, "mean", -100, r), r.e, r.s))
    monkeypatch.setattr(ops_nn, "_LOOPS", None)
    for (x, t), (loss, e, s) in zip(cases, fast):
        r = SoftmaxResidual()
        want = cross_entropy_p.impl(x, t, "mean", -100, r)
        assert type(loss) is np.ndarray and loss.shape == () and loss.dtype == dtype
        assert loss.tobytes() == want.tobytes()
        assert e.tobytes() == r.e.tobytes() and type(s) is type(r.s) and s == r.s


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_per_node_losses_match_torch(dtype):
    rng = np.random.default_rng(4)
    for c in (2, 5, 9):
        z = rng.standard_normal((1, c)) * 3
        t = int(rng.integers(c))
        a = dg.tensor(z, dtype=dg.float32 if dtype == torch.float32 else dg.float64, requires_grad=True)
        b = torch.tensor(z, dtype=dtype, requires_grad=True)
        la = F.cross_entropy(a, dg.tensor([t]))
        lb = torch.nn.functional.cross_entropy(b, torch.tensor([t]))
        la.backward()
        lb.backward()
        tol = 1e-6 if dtype == torch.float32 else 1e-13
        np.testing.assert_allclose(la.item(), lb.item(), rtol=tol)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol)
    # ignore_index on one row: the general path (nan mean, zero gradient), as in PyTorch
    a = dg.zeros(1, 4, requires_grad=True)
    la = F.cross_entropy(a, dg.tensor([1]), ignore_index=1)
    assert np.isnan(la.item())


# -- scatter_add_ / index_add / h[src] -----------------------------------------------------

def _mpnn_pieces(lib, rng_seed=5):
    rng = np.random.default_rng(rng_seed)
    h0 = rng.standard_normal((9, 4))
    msg0 = rng.standard_normal((20, 4))
    dst = rng.integers(0, 9, 20)
    batch = np.repeat(np.arange(3), 3)
    h = lib.tensor(h0, requires_grad=True)
    m = lib.tensor(msg0, requires_grad=True)
    d = lib.tensor(dst)
    agg = lib.zeros_like(h)
    agg.scatter_add_(0, d.unsqueeze(1).expand(-1, 4), m * 2.0)
    v = agg._version
    hh = (agg + h)[d]
    pooled = lib.zeros(3, 4, dtype=h.dtype).index_add(0, lib.tensor(batch), hh[:9])
    (pooled * pooled).sum().backward()
    return agg, v, h, m, pooled


def test_scatter_add_inplace_and_index_add_match_torch():
    a, va, ha, ma, pa = _mpnn_pieces(dg)
    b, vb, hb, mb, pb = _mpnn_pieces(torch)
    assert va == vb == 1
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(pa.detach().numpy(), pb.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(ha.grad.numpy(), hb.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ma.grad.numpy(), mb.grad.numpy(), rtol=1e-12)
    assert a.grad_fn.name() == b.grad_fn.name()


def test_scatter_add_gradients_by_finite_differences():
    rng = np.random.default_rng(6)
    idx = dg.tensor(rng.integers(0, 5, 12)).unsqueeze(1).expand(-1, 3)

    def f(src, base):
        out = base * 1.0
        out.scatter_add_(0, idx, src)
        return out.index_add(0, dg.tensor([4, 0, 4]), src[:3] * 3.0)

    src = dg.tensor(rng.standard_normal((12, 3)), requires_grad=True)
    base = dg.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    assert dg.autograd.gradcheck(f, (src, base))


def test_gather_like_checks_keep_their_errors():
    x = dg.zeros(4, 3)
    src = dg.ones(6, 3)
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter_add(0, dg.tensor([[0, 1, 4]] * 6), src)
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter_add(0, dg.tensor([[0, -1, 2]] * 6), src)
    with pytest.raises(RuntimeError, match="smaller than self"):
        x.scatter_add(0, dg.zeros(6, 4, dtype=dg.int64), dg.ones(6, 4))
    with pytest.raises(RuntimeError, match="smaller than src"):
        x.scatter_add(0, dg.zeros(6, 3, dtype=dg.int64), dg.ones(5, 3))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.scatter_add(0, dg.zeros(6, dtype=dg.int64), src)
    with pytest.raises(RuntimeError, match="dtype int64"):
        x.scatter_add(0, dg.zeros(6, 3), src)
    with pytest.raises(IndexError):
        x.scatter_add(2, dg.zeros(6, 3, dtype=dg.int64), src)
    y = torch.zeros(4, 3)
    with pytest.raises(RuntimeError):
        y.scatter_add(0, torch.tensor([[0, 1, 4]] * 6), torch.ones(6, 3))
    # a uint8 index takes the general checks (PyTorch refuses it; the general path here accepts
    # it in range) and an index within the sizes passes
    np.testing.assert_array_equal(
        x.scatter_add(-2, dg.tensor([[3, 0, 0]]), dg.ones(1, 3)).numpy(),
        torch.zeros(4, 3).scatter_add(-2, torch.tensor([[3, 0, 0]]), torch.ones(1, 3)).numpy())


# -- light inputs: Meta in both node builders ---------------------------------------------

def _saved(node):
    return [("Meta", s.shape, s.dtype) if isinstance(s, Meta) else
            (type(s).__name__,) for s in node.saved], list(node.saved_versions), \
        [("Meta", s.shape) if isinstance(s, Meta) else type(s).__name__ for s in node.saved_data]


@needs_loops
@pytest.mark.parametrize("case", ["index", "scatter_add", "index_add"])
def test_light_inputs_are_meta_in_both_node_builders(case):
    rng = np.random.default_rng(7)
    x = dg.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    src = dg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    rows = dg.tensor([0, 4, 4, 1])
    if case == "index":
        prim, args, params = index_p, (x, rows), {"index": (TENSOR,)}
    elif case == "scatter_add":
        prim, args, params = scatter_add_p, (x, rows.unsqueeze(1).expand(-1, 3), src), {"dim": 0}
    else:
        prim, args, params = index_add_p, (x, rows, src), {"dim": 0, "alpha": 1}
    out_c = registry.bind(prim, args, params)
    out_p = registry._bind_py(prim, args, params)
    assert _saved(out_c._fn) == _saved(out_p._fn)
    light = prim.light
    for i, s in enumerate(out_c._fn.saved):
        assert isinstance(s, Meta) == (i in light)
    gc = dg.autograd.grad(out_c.sum(), [x] if case == "index" else [x, src])
    gp = dg.autograd.grad(out_p.sum(), [x] if case == "index" else [x, src])
    for a, b in zip(gc, gp):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_light_inputs_are_not_version_checked():
    h = dg.randn(5, 3, requires_grad=True) * 1.0
    y = h[dg.tensor([0, 2])]
    h[dg.tensor([1])] = 0.0          # changes h after h[idx] saved only its shape
    y.sum().backward()                # fine, as in PyTorch


# -- the lean in-place path keeps the rules -------------------------------------------------

def test_inplace_rules_are_kept():
    leaf = dg.zeros(3, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.scatter_add_(0, dg.tensor([[0, 1]]), dg.ones(1, 2))
    with dg.no_grad():
        leaf.scatter_add_(0, dg.tensor([[0, 1]]), dg.ones(1, 2))
    assert leaf._version == 1 and leaf[0, 0].item() == 1.0
    # the base sees writes through a view, and a node that saved the old value complains
    base = dg.zeros(4, 2)
    view = base[1:3]
    view.scatter_add_(0, dg.tensor([[1, 0]]), dg.ones(1, 2) * 5)
    assert base._version == view._version == 1
    np.testing.assert_array_equal(base.numpy(), [[0, 0], [0, 5], [5, 0], [0, 0]])
    w = dg.ones(3, requires_grad=True)
    a = w * 2.0
    b = a * a                          # saves a
    a.mul_(3.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()
    # the op's own rule reads the overwritten value: mul_ keeps a copy for its node
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    y.mul_(y)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    # a dtype-changing write goes through the checked path
    i = dg.zeros(2, dtype=dg.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.add_(dg.tensor([0.5, 1.5]))


# -- expand: broadcast_to's view, built directly for C-contiguous inputs -------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, bool, np.complex128, object,
                                   "datetime64[s]", np.uint8])
def test_expand_is_broadcast_to(dtype):
    rng = np.random.default_rng(9)
    for shp in [(), (1,), (3,), (1, 4), (3, 1), (1, 1), (2, 1, 3), (0,), (0, 1)]:
        x = np.zeros(shp, dtype=dtype) if dtype is object else \
            np.asarray(rng.integers(0, 5, shp)).astype(dtype)
        for lead in ((), (2,), (1, 3)):
            for tgt in itertools.product(*[(o, 4) if o == 1 else (o,) for o in shp]):
                a, b = expand_p.impl(x, shape=lead + tgt), np.broadcast_to(x, lead + tgt)
                assert (a.shape, a.strides, a.dtype) == (b.shape, b.strides, b.dtype)
                assert not a.flags.writeable and a.base is b.base
                np.testing.assert_array_equal(a, b)
    for shp, tgt in [((3,), (4,)), ((3, 1), (2,)), ((2, 1), (2, -3))]:
        with pytest.raises(ValueError):
            expand_p.impl(np.zeros(shp, dtype=dtype), shape=tgt)
    t = dg.tensor([[1.0], [2.0]])
    e = t.expand(-1, 3)
    assert e._base is t and e._vc is t._vc
    with pytest.raises(RuntimeError, match="single memory location"):
        e.add_(1.0)


# -- the C bind reads the per-thread state from the thread's dict ---------------------------

def test_bind_sees_each_threads_grad_mode():
    w = dg.ones(3, requires_grad=True)
    seen = {}

    def worker():
        seen["default"] = (w * 2.0).requires_grad          # a new thread: grad enabled
        with dg.no_grad():
            seen["no_grad"] = (w * 2.0).requires_grad
            barrier.wait()                                   # main thread runs meanwhile
            barrier.wait()

    barrier = threading.Barrier(2)
    t = threading.Thread(target=worker)
    t.start()
    barrier.wait()
    main_rg = (w * 2.0).requires_grad                        # unaffected by the worker's no_grad
    barrier.wait()
    t.join()
    assert seen == {"default": True, "no_grad": False} and main_rg
    with dg.no_grad():
        assert not (w * 2.0).requires_grad
    assert (w * 2.0).grad_fn is not None
