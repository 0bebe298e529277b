"""The per-call rows of benchmarks/per_call.py made cheaper in issue 13's seventh pass:
sigmoid's forward through ``_kernels.sigmoid`` (C-contiguous input of any shape), ``sum``'s
forward as ``np.add.reduce(..., out=...)`` (a 0-d array, not a NumPy scalar), and the
option-free ``zeros_like`` / ``ones_like`` / ``empty_like``.  Each must give the bits the
previous path gave."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import elementwise as E
from dyngraph.ops import reduction as R

_K = E._K
needs_kernels = pytest.mark.skipif(_K is None or not hasattr(_K, "sigmoid"),
                                   reason="compiled kernels not built")

SHAPES = [(1,), (7,), (128,), (1023,), (1024,), (1025,), (3000,), (3, 129), (10, 128),
          (2, 3, 4), (4, 5, 700), (0,), (3, 0)]


def _unary_sigmoid(x):
    """The previous path: unary's 2-D loop over rows of the last axis."""
    out = np.empty(x.shape, x.dtype)
    rows = (-1, x.shape[-1]) if x.ndim != 1 else (1, -1)
    _K.unary("sigmoid", np.ascontiguousarray(x).reshape(rows), out.reshape(rows))
    return out


@needs_kernels
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_sigmoid_kernel_same_bits_as_unary(dt, shape):
    rng = np.random.default_rng(sum(shape) + 7)
    x = (rng.standard_normal(shape) * 40).astype(dt)
    if x.size >= 4:
        x.flat[:4] = [np.nan, np.inf, -np.inf, -100.0]
    got = E._sigmoid_k(x)
    want = _unary_sigmoid(x) if x.size else E._sigmoid_np(x)
    assert got.dtype == x.dtype and got.shape == x.shape and got.flags.c_contiguous
    assert got.tobytes() == want.tobytes()


@needs_kernels
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_sigmoid_kernel_strided_inputs(dt):
    x = np.random.default_rng(3).standard_normal((6, 8, 5)).astype(dt)
    for v in (x[:, 1, 0], x[::2, 0], x[0].T, x[:, ::3, 1], x[:, :, ::2], x[:, :7, ::2],
              x[:, :1, 1:4]):
        out = np.full(v.shape, 7.0, dt)
        if not v.flags.c_contiguous:
            # not C-contiguous: False, nothing written
            assert _K.sigmoid(v, out) is False
            assert (out == 7.0).all()
        got = E._sigmoid_k(v)
        # strided N-d inputs run unary on a 2-D view of their rows where the leading axes
        # collapse without a copy (the same bits as the contiguous copy), else NumPy's formula
        collapses = v.ndim <= 2 or v.shape[1] == 1 or v.strides[0] == v.shape[1] * v.strides[1]
        want = _unary_sigmoid(v) if collapses else E._sigmoid_np(v)
        assert got.tobytes() == want.tobytes()
        np.testing.assert_allclose(got, 1.0 / (1.0 + np.exp(-v.astype(np.float64))),
                                   rtol=4e-7 if dt == np.float32 else 1e-15)


@needs_kernels
def test_sigmoid_kernel_argument_errors():
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        _K.sigmoid(x)
    with pytest.raises(TypeError, match="x must be a float32 or float64 array"):
        _K.sigmoid([1.0], x)
    with pytest.raises(TypeError, match="float32 or float64"):
        _K.sigmoid(np.zeros(4, np.int32), np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="dtype and size"):
        _K.sigmoid(x, np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="dtype and size"):
        _K.sigmoid(x, np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="writable, C-contiguous"):
        _K.sigmoid(x, np.zeros(8, np.float32)[::2])
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="writable, C-contiguous"):
        _K.sigmoid(x, ro)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(128,), (10, 128), (2, 3, 4)])
def test_sigmoid_values_and_grad_match_torch(dt, shape):
    xv = (np.random.default_rng(5).standard_normal(shape) * 6).astype(dt)
    x, xt = dg.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    y, yt = dg.sigmoid(x), torch.sigmoid(xt)
    tol = 1e-6 if dt == np.float32 else 1e-14
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    gv = np.random.default_rng(6).standard_normal(shape).astype(dt)
    y.backward(dg.tensor(gv))
    yt.backward(torch.tensor(gv))
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int32, np.bool_])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (1000,), (10, 128), (3, 4, 5), (0,), (0, 3),
                                   (33, 65)])
def test_sum_same_bits_as_ndarray_sum(dt, shape):
    x = np.asarray((np.random.default_rng(len(shape)).standard_normal(shape) * 100).astype(dt))
    views = [x] + ([x.T, x[:, ::2]] if x.ndim == 2 else [])
    acc = {np.float16: np.float32, np.int32: np.int64, np.bool_: np.int64}.get(dt)
    for v in views:
        dims = [None] + [(i,) for i in range(v.ndim)] + ([(0, 1)] if v.ndim >= 2 else [])
        for dim in dims:
            for kd in (False, True):
                got = R.sum_p(v, dim=dim, keepdim=kd)
                want = np.asarray(v.sum(axis=dim, keepdims=kd, dtype=acc))
                if dt == np.float16:
                    want = want.astype(dt)
                if dt in (np.float32, np.float64):
                    assert type(got) is np.ndarray  # a 0-d array for a full sum, no scalar
                got = np.asarray(got)
                assert got.dtype == want.dtype and got.shape == want.shape
                assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("call", ["sum()", "sum(0)", "sum(1, keepdim=True)", "sum((0, 1))"])
def test_sum_values_and_grad_match_torch(call):
    xv = np.random.default_rng(8).standard_normal((10, 128)).astype(np.float32)
    x, xt = dg.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    y, yt = eval(f"x.{call}"), eval(f"xt.{call}")
    assert tuple(y.shape) == tuple(yt.shape) and y.dtype == dg.float32
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-4)
    g = np.random.default_rng(9).standard_normal(tuple(yt.shape)).astype(np.float32)
    y.backward(dg.tensor(g))
    yt.backward(torch.tensor(g))
    assert x.grad.numpy().tobytes() == xt.grad.numpy().tobytes()  # a broadcast: exact
    assert y.grad_fn.name() == yt.grad_fn.name()


@pytest.mark.parametrize("fn,value", [("zeros_like", 0.0), ("ones_like", 1.0), ("empty_like", None)])
@pytest.mark.parametrize("dt", [dg.float32, dg.float64, dg.int64, dg.bool])
def test_like_fast_path(fn, value, dt):
    f = getattr(dg, fn)
    src = dg.zeros(3, 5, dtype=dt)
    for x in (src, src.t(), dg.nn.Parameter(dg.randn(4, 2)) if dt == dg.float32 else src[1]):
        y = f(x)
        assert tuple(y.shape) == tuple(x.shape) and y.dtype == x.dtype
        assert not y.requires_grad and y.grad_fn is None and y.is_leaf
        assert type(y) is dg.Tensor and y._data.flags.c_contiguous
        assert not np.shares_memory(y._data, x._data)
        if value is not None:
            assert (y.numpy() == value).all()
    # the options still take the general path
    assert f(src, dtype=dg.float64).dtype == dg.float64
    if dt in (dg.float32, dg.float64):
        assert f(src, requires_grad=True).requires_grad
    assert f(src, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_full_sum_same_bits_at_many_sizes(dt):
    # the accelerator's row_sum (pairwise, in add.reduce's order) against add.reduce itself,
    # around the pairwise block edges (8, 128) and NumPy's buffer size (8192)
    rng = np.random.default_rng(11)
    sizes = list(range(0, 140)) + [255, 256, 257, 1000, 1280, 8191, 8192, 8193, 20001, 1 << 18]
    for n in sizes:
        x = (rng.standard_normal(n) * rng.uniform(0.1, 1e4)).astype(dt)
        for v in (x, x.reshape(1, -1), x.astype(x.dtype.newbyteorder()) if n else x):
            got = np.asarray(R.sum_p(v))
            want = np.asarray(v.sum())   # the previous forward
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), n
            kd = R.sum_p(v, keepdim=True)
            assert kd.shape == (1,) * v.ndim and kd.dtype == want.dtype
            assert kd.tobytes() == want.tobytes()
    assert np.signbit(R.sum_p(np.array([-0.0, -0.0], dt))) == np.signbit(np.add.reduce(np.array([-0.0, -0.0], dt)))


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty"])
def test_factory_sizes(fn):
    f = getattr(dg, fn)
    for args, kw, shape in [((4, 16), {}, (4, 16)), ((), {}, ()), ((0, 3), {}, (0, 3)),
                            (((2, 3),), {}, (2, 3)), (([2, 3],), {}, (2, 3)),
                            ((), {"size": (2, 3)}, (2, 3)), ((np.int64(2), 3), {}, (2, 3)),
                            ((dg.tensor(2), 3), {}, (2, 3))]:
        y = f(*args, **kw)
        assert tuple(y.shape) == shape and y.dtype == dg.float32 and type(y._data) is np.ndarray
        assert all(type(s) is int for s in y._data.shape)
    with pytest.raises(TypeError, match="size must be a sequence of ints"):
        f(True, 2)
    with pytest.raises(TypeError, match="size must be a sequence of ints"):
        f(2.0, 2)
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        f(2, -1)
    assert f(2, 3, dtype=dg.int64).dtype == dg.int64
    assert f(2, 3, requires_grad=True).requires_grad


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int64, np.int8, np.uint8,
                                np.bool_])
def test_ones_same_bits_as_np_ones(dt):
    want = np.ones((3, 5), dt)
    for y in (dg.ones(3, 5, dtype=dg.from_numpy(want).dtype), dg.ones_like(dg.from_numpy(want))):
        assert y._data.dtype == want.dtype and y._data.tobytes() == want.tobytes()
