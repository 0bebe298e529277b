"""Reductions: sum, mean, ... over ``dim`` (an int, a tuple, or all) with ``keepdim``.

``sum_to_shape``, the one helper that reverses broadcasting (the engine fits
gradients of broadcasting primitives with it), is in :mod:`.structural`.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes as _dt
from .._core.registry import LOOPS as _LOOPS
from .._core.state import STATE
from ..tensor import Tensor
from . import elementwise as _ew
from ._util import quiet_primitives
from .registry import primitive
from .structural import (  # noqa: F401  (sum_to_shape_p: ops/nn.py imports it from here)
    cast_p,
    expand_p,
    gather_backward_p,
    permute_p,
    reshape_p,
    sum_to_shape_p,
)


def _keep_shape(shape, dims):
    """The shape a reduction over ``dims`` has with keepdim=True."""
    if dims is None:
        return (1,) * len(shape)
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


_add_reduce = np.add.reduce
_row_sum = getattr(_LOOPS, "row_sum", None)   # None: pure Python, or not built
try:  # out=... (an array result, never a NumPy scalar): NumPy >= 2.3
    _add_reduce(np.zeros(1), axis=None, out=...)
    _SUM_FAST = (np.dtype(np.float32), np.dtype(np.float64))
except TypeError:
    _SUM_FAST = ()


# PyTorch: sum() is SumBackward0, sum(dim) SumBackward1 (likewise mean, prod)
@primitive("sum", meta=True, torch_name=lambda params: "SumBackward1" if "dim" in params else "SumBackward0")
def sum_p(x, dim=None, keepdim=False, dtype=None):
    if dtype is None and type(x) is np.ndarray and x.dtype in _SUM_FAST:
        if dim is None and _row_sum is not None:
            # the sum of all elements of a C-contiguous x: the accelerator's row_sum sums in
            # add.reduce's order (NumPy's pairwise summation, the same bits, tested) without
            # the ufunc's ~1.1 us entry; None for other layouts
            v = _row_sum(x)
            if v is not None:
                return np.array(v, x.dtype, ndmin=x.ndim if keepdim else 0)   # v: exact
        # ndarray.sum's own call (NumPy's _methods._sum is this add.reduce, the same bits)
        # without its Python frame; out=... returns a 0-d array, not a NumPy scalar the
        # bind would convert (~0.8 us of a float32 x.sum() of 10 x 128)
        return _add_reduce(x, axis=dim, keepdims=keepdim, out=...)
    if dtype is None and x.dtype.itemsize < 4:
        if x.dtype.kind in "biu":
            dtype = np.int64
        elif x.dtype.kind == "f":
            # half precision accumulates in float32 and rounds once, as in PyTorch (a
            # float16 running sum along a strided axis loses ~1 unit per 1000 terms)
            with np.errstate(over="ignore"):
                return x.sum(axis=dim, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
    elif dtype is None and x.dtype.kind in "iu":
        dtype = np.int64
    return x.sum(axis=dim, keepdims=keepdim, dtype=dtype)


def _reduce_grad_to_input(g, x, dim, keepdim):
    shape = tuple(x.shape)
    if type(g) is np.ndarray and math.prod(shape) <= _MATERIALIZE_MAX:
        # Array mode, small input: a filled array is ~5x cheaper to make than NumPy's
        # broadcast_to view (2.4 us), and the leaf accumulation would copy the view anyway.
        out = np.empty(shape, g.dtype)
        out[...] = g if keepdim else g.reshape(_keep_shape(shape, dim))
        return out
    if not keepdim:
        g = reshape_p(g, shape=_keep_shape(shape, dim))
    return expand_p(g, shape=shape)


_MATERIALIZE_MAX = 1 << 16


def _sum_vjp(g, out, x, dim=None, keepdim=False, dtype=None):
    return _reduce_grad_to_input(g, x, dim, keepdim)


sum_p.defvjp(_sum_vjp)


@primitive("mean", meta=True, torch_name=lambda params: "MeanBackward1" if "dim" in params else "MeanBackward0")
def mean_p(x, dim=None, keepdim=False, dtype=None):
    if x.dtype.kind != "f" and dtype is None:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {_dt.from_numpy_dtype(x.dtype).name.capitalize()}")
    if dtype is None and x.dtype.itemsize >= 4:
        n = _count(x.shape, dim)
        if n:  # add.reduce / n: the same pairwise sum as np.mean, less Python around it
            return np.add.reduce(x, axis=dim, keepdims=keepdim) / n
        # mean over an empty dim is NaN, silently (NumPy would warn)
        return np.add.reduce(x, axis=dim, keepdims=keepdim) * np.asarray(np.nan, x.dtype)
    return x.mean(axis=dim, keepdims=keepdim, dtype=dtype)


def _mean_vjp(g, out, x, dim=None, keepdim=False, dtype=None):
    shape = tuple(x.shape)
    count = 1
    for i in (range(len(shape)) if dim is None else dim):
        count *= shape[i]
    return _reduce_grad_to_input(g, x, dim, keepdim) / builtins.max(count, 1) if count else \
        _reduce_grad_to_input(g, x, dim, keepdim) * float("nan")


mean_p.defvjp(_mean_vjp)


# ===========================================================================
# helpers shared by the rules below
# ===========================================================================

def _np(a):
    """The array behind a rule argument (Tensor under create_graph, array otherwise)."""
    return a._data if isinstance(a, Tensor) else a


def _keep(g, shape, dim, keepdim):
    """``g`` (a reduction's output gradient) reshaped to the keepdim shape."""
    if keepdim:
        return g
    return reshape_p(g, shape=_keep_shape(shape, dim))


def _count(shape, dim) -> int:
    n = 1
    for i in (range(len(shape)) if dim is None else dim):
        n *= shape[i]
    return n


def _nonempty_dims(x, dim, op):
    """PyTorch refuses min/max-like reductions over a zero-size dimension."""
    if x.size:
        return
    if dim is None:
        raise RuntimeError(
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument.")
    for d in dim:
        if x.shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


def _np_dtype(x):
    return x._data.dtype if isinstance(x, Tensor) else x.dtype


def _even_weights(x, val, dim):
    """Weights that split a gradient evenly among the entries equal to ``val``.

    Built from (non-differentiable) primitives rather than NumPy on the data, so
    graph capture records the tie rule instead of baking one call's ties in.
    """
    vk = val if dim is None else reshape_p(val, shape=_keep_shape(tuple(x.shape), dim))
    mask = x == vk
    dt = _np_dtype(x)
    if dt.kind == "f":  # a NaN result came from the NaN entries
        mask = mask | (_ew.isnan_p(x) & _ew.isnan_p(vk))
    m = cast_p(mask, dtype=dt)
    return m / sum_p(m, dim=dim, keepdim=True)


def _even_rule(g, out, x, dim=None, keepdim=False):
    return _keep(g, x.shape, dim, keepdim) * _even_weights(x, out, dim)


def _select_rule(g, out, x, dim=0, keepdim=False):
    """Gradient of a (values, indices) reduction: all of it to the selected index."""
    shape = tuple(x.shape)
    idx = _keep(out[1], shape, (dim,), keepdim)
    ar = np.arange(shape[dim]).reshape((-1,) + (1,) * (len(shape) - dim - 1))
    mask = cast_p(idx == ar, dtype=_np_dtype(x))
    return _keep(g[0], shape, (dim,), keepdim) * mask


def _data_branch_ok() -> bool:
    """Rules may pick a fast path by looking at the data only outside graph capture
    (a captured graph must stay correct for the data of later calls)."""
    return STATE.interpreter is None


# ===========================================================================
# prod, cumsum, cumprod (exact gradients when inputs contain zeros)
# ===========================================================================

@primitive("prod", save_inputs=True, save_output=True, torch_name=lambda params: "ProdBackward1" if "dim" in params else "ProdBackward0")
def prod_p(x, dim=None, keepdim=False, dtype=None):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    return np.prod(x, axis=dim, keepdims=keepdim, dtype=dtype)


def _prod_vjp(g, out, x, dim=None, keepdim=False, dtype=None):
    shape = tuple(x.shape)
    gk = _keep(g, shape, dim, keepdim)
    if _data_branch_ok() and _np(x).all():
        # no zeros: prod / x is exact in a neighbourhood (so also for higher orders)
        return gk * (_keep(out, shape, dim, keepdim) / x)
    return gk * _prod_except(x, dim)


def _prod_except(x, dim):
    """For every element, the product of the *other* elements of its reduction group.

    Exclusive cumulative products from both sides: exact with zeros and made of
    differentiable primitives, so gradients of any order stay correct.
    """
    shape = tuple(x.shape)
    nd = len(shape)
    dims = tuple(range(nd)) if dim is None else dim
    rest = tuple(i for i in range(nd) if i not in dims)
    perm = rest + dims
    moved = x if perm == tuple(range(nd)) else permute_p(x, dims=perm)
    lead = tuple(shape[i] for i in rest)
    flat = reshape_p(moved, shape=lead + (_count(shape, dims),))
    ax = len(lead)
    left = shift_p(cumprod_p(flat, dim=ax), dim=ax, n=1, fill=1.0)
    right = shift_p(cumprod_p(flat, dim=ax, reverse=True), dim=ax, n=-1, fill=1.0)
    res = reshape_p(left * right, shape=tuple(shape[i] for i in perm))
    if perm == tuple(range(nd)):
        return res
    return permute_p(res, dims=tuple(int(i) for i in np.argsort(perm)))


prod_p.defvjp(_prod_vjp)


@primitive("shift")
def shift_p(x, dim=0, n=1, fill=0.0):
    """``y[k] = x[k - n]`` along ``dim``; positions shifted in from outside get ``fill``."""
    out = np.empty_like(x)
    size = x.shape[dim]
    m = builtins.min(abs(n), size)
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    pad = [slice(None)] * x.ndim
    if n >= 0:
        src[dim], dst[dim], pad[dim] = slice(0, size - m), slice(m, size), slice(0, m)
    else:
        src[dim], dst[dim], pad[dim] = slice(m, size), slice(0, size - m), slice(size - m, size)
    out[tuple(dst)] = x[tuple(src)]
    out[tuple(pad)] = fill
    return out


shift_p.defvjp(lambda g, out, x, dim=0, n=1, fill=0.0: shift_p(g, dim=dim, n=-n, fill=0.0))


@primitive("linscan", save_inputs=True, save_output=True)
def linscan_p(b, a, dim=0, reverse=False):
    """The linear recurrence ``y[k] = b[k] + a[k] * y[k-1]`` (``y[k+1]`` when reversed).

    Used by exact cumprod gradients; its own rules are linscans again, so it is
    differentiable to any order.
    """
    b, a = np.broadcast_arrays(b, a)
    y = np.moveaxis(np.array(b, dtype=np.result_type(b, a)), dim, 0)
    av = np.moveaxis(a, dim, 0)
    n = y.shape[0]
    order = range(n - 2, -1, -1) if reverse else range(1, n)
    step = 1 if reverse else -1
    for k in order:
        y[k] += av[k] * y[k + step]
    return np.moveaxis(y, 0, dim)


def _linscan_vjp_b(g, out, b, a, dim=0, reverse=False):
    n = -1 if not reverse else 1
    return linscan_p(g, shift_p(a, dim=dim, n=n, fill=0.0), dim=dim, reverse=not reverse)


def _linscan_vjp_a(g, out, b, a, dim=0, reverse=False):
    z = _linscan_vjp_b(g, out, b, a, dim, reverse)
    return z * shift_p(out, dim=dim, n=1 if not reverse else -1, fill=0.0)


linscan_p.defvjp(_linscan_vjp_b, _linscan_vjp_a)


_SCAN_ACC = {2: np.float32, 4: np.float64}  # accumulator of a float scan, by itemsize


def _scan_np(ufunc, x, dim, reverse):
    """``ufunc.accumulate`` along ``dim`` with PyTorch's accumulator types.

    Integers accumulate (and return) int64.  Floats accumulate in the next wider type and
    round once, as PyTorch's CPU scans do: float16 in float32 (10,000 x 0.1 then gives
    ~1000, where a float16 running sum stops at 256 because 256 + 0.1 rounds to 256) and
    float32 in float64 (10^6 x 0.1 gives 100000, not the 100958 of a float32 running sum;
    [1e30, 1e30, 0] gives [1e30, inf, 0], not a NaN from inf * 0).  The wider running
    array costs one extra output-sized buffer for the duration of the call.
    """
    if x.dtype.kind in "biu":
        x = x.astype(np.int64)
    acc = _SCAN_ACC.get(x.dtype.itemsize) if x.dtype.kind == "f" else None
    if reverse:
        x = np.flip(x, dim)
    y = ufunc.accumulate(x, axis=dim, dtype=acc)
    if acc is not None:
        y = y.astype(x.dtype)  # out-of-range sums become inf silently (quiet_primitives below)
    return np.flip(y, dim) if reverse else y


@primitive("cumsum")
def cumsum_p(x, dim=0, reverse=False):
    return _scan_np(np.add, x, dim, reverse)


cumsum_p.defvjp(lambda g, out, x, dim=0, reverse=False: cumsum_p(g, dim=dim, reverse=not reverse))


@primitive("cumprod", save_inputs=True, save_output=True)
def cumprod_p(x, dim=0, reverse=False):
    return _scan_np(np.multiply, x, dim, reverse)


def _cumprod_vjp(g, out, x, dim=0, reverse=False):
    if _data_branch_ok() and _np(x).all():
        # no zeros: the classic formula is exact near x (and cheap)
        return cumsum_p(g * out, dim=dim, reverse=not reverse) / x
    # d y_i / d x_k = (product before k) * (product of x_{k+1..i}): a linear recurrence
    n = 1 if not reverse else -1
    before = shift_p(out, dim=dim, n=n, fill=1.0)
    return before * linscan_p(g, shift_p(x, dim=dim, n=-n, fill=0.0), dim=dim, reverse=not reverse)


cumprod_p.defvjp(_cumprod_vjp)


# ===========================================================================
# max / min family
# ===========================================================================

@primitive("amax", save_inputs=True, save_output=True)
def amax_p(x, dim=None, keepdim=False):
    _nonempty_dims(x, dim, "amax")
    return np.max(x, axis=dim, keepdims=keepdim)


@primitive("amin", save_inputs=True, save_output=True)
def amin_p(x, dim=None, keepdim=False):
    _nonempty_dims(x, dim, "amin")
    return np.min(x, axis=dim, keepdims=keepdim)


amax_p.defvjp(_even_rule)
amin_p.defvjp(_even_rule)


def _vi_impl(fn, red, name):
    def impl(x, dim=0, keepdim=False):
        _nonempty_dims(x, (dim,), name)
        # two C reductions beat argmax + take_along_axis; both pick NaN first, like PyTorch
        return red(x, axis=dim, keepdims=keepdim), fn(x, axis=dim, keepdims=keepdim)
    return impl


max_dim_p = primitive("max_dim", n_outputs=2, meta=True, save_output=True,
                      torch_name="MaxBackward0")(
    _vi_impl(np.ndarray.argmax, np.ndarray.max, "max"))
min_dim_p = primitive("min_dim", n_outputs=2, meta=True, save_output=True,
                      torch_name="MinBackward0")(
    _vi_impl(np.ndarray.argmin, np.ndarray.min, "min"))
max_dim_p.defvjp(_select_rule)
min_dim_p.defvjp(_select_rule)


def _arg_impl(fn, name):
    def impl(x, dim=None, keepdim=False):
        _nonempty_dims(x, None if dim is None else (dim,), name)
        if dim is None:
            r = np.asarray(fn(x))
            return r.reshape((1,) * x.ndim) if keepdim else r
        return fn(x, axis=dim, keepdims=keepdim)
    return impl


argmax_p = primitive("argmax", differentiable=False)(_arg_impl(np.argmax, "argmax"))
argmin_p = primitive("argmin", differentiable=False)(_arg_impl(np.argmin, "argmin"))


def _cum_ext_impl(acc, name):
    def impl(x, dim=0):
        vals = acc(x, axis=dim)
        ar = np.arange(x.shape[dim]).reshape((-1,) + (1,) * (x.ndim - dim - 1))
        hit = x == vals  # this entry attains the running extreme (the later one wins ties)
        if x.dtype.kind == "f":
            hit |= np.isnan(x)  # a NaN takes over, as in PyTorch
        idx = np.maximum.accumulate(np.where(hit, ar, 0), axis=dim)
        return vals, idx.astype(np.int64, copy=False)
    impl.__name__ = name
    return impl


def _cum_ext_vjp(g, out, x, dim=0):
    return gather_backward_p(g[0], out[1], shape=tuple(x.shape), dim=dim)


cummax_p = primitive("cummax", n_outputs=2, meta=True, save_output=True)(
    _cum_ext_impl(np.maximum.accumulate, "cummax"))
cummin_p = primitive("cummin", n_outputs=2, meta=True, save_output=True)(
    _cum_ext_impl(np.minimum.accumulate, "cummin"))
cummax_p.defvjp(_cum_ext_vjp)
cummin_p.defvjp(_cum_ext_vjp)


# ===========================================================================
# median
# ===========================================================================

@primitive("median", save_inputs=True, save_output=True)
def median_p(x):
    if x.size == 0:
        return np.array(np.nan, dtype=x.dtype)
    flat = x.reshape(-1)
    if x.dtype.kind == "f" and np.isnan(flat).any():
        return np.array(np.nan, dtype=x.dtype)
    return np.asarray(np.partition(flat, (flat.size - 1) // 2)[(flat.size - 1) // 2])


median_p.defvjp(_even_rule)


@primitive("median_dim", n_outputs=2, meta=True, save_output=True, torch_name="MedianBackward1")
def median_dim_p(x, dim=0, keepdim=False):
    _nonempty_dims(x, (dim,), "median")
    n = x.shape[dim]
    order = np.argsort(x, axis=dim, kind="stable")
    idx = np.take(order, [(n - 1) // 2], axis=dim)
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        has = nan.any(axis=dim, keepdims=True)
        if has.any():
            idx = np.where(has, np.argmax(nan, axis=dim, keepdims=True), idx)
    vals = np.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        idx, vals = idx.squeeze(dim), vals.squeeze(dim)
    return vals, idx.astype(np.int64, copy=False)


median_dim_p.defvjp(_select_rule)


@primitive("mode", n_outputs=2, meta=True, save_output=True)
def mode_p(x, dim=0, keepdim=False):
    _nonempty_dims(x, (dim,), "mode")
    rows = np.moveaxis(x, dim, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    vals = np.empty(flat.shape[0], x.dtype)
    idx = np.empty(flat.shape[0], np.int64)
    n = flat.shape[1]
    for r, row in enumerate(flat):  # one np.unique per row: mode is a rarely hot op
        u, counts = np.unique(row, return_counts=True)
        best = u[np.argmax(counts)]  # the smallest of the most frequent values (PyTorch's tie rule)
        vals[r] = best
        idx[r] = n - 1 - int(np.argmax(row[::-1] == best))  # its last occurrence, as PyTorch
    shape = rows.shape[:-1]
    vals, idx = vals.reshape(shape), idx.reshape(shape)
    if keepdim:
        vals, idx = np.expand_dims(vals, dim), np.expand_dims(idx, dim)
    return vals, idx


mode_p.defvjp(_select_rule)


# ===========================================================================
# var / std / logsumexp
# ===========================================================================

def _var_np(x, dim, correction, keepdim):
    n = _count(x.shape, dim)
    if x.dtype.kind == "f" and x.dtype.itemsize < 4:
        # half precision: compute in float32 and round once, as in PyTorch (np.var's own
        # float16 sum of squares overflows at 65504)
        with np.errstate(over="ignore"):
            return _var_np(x.astype(np.float32), dim, correction, keepdim).astype(x.dtype)
    if n == 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.var(x, axis=dim, ddof=correction, keepdims=keepdim)
    d = x - np.add.reduce(x, axis=dim, keepdims=True) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.add.reduce(d * d, axis=dim, keepdims=keepdim) / builtins.max(n - correction, 0)


@primitive("var", save_inputs=True)
def var_p(x, dim=None, correction=1.0, keepdim=False):
    return _var_np(x, dim, correction, keepdim)


def _var_vjp(g, out, x, dim=None, correction=1.0, keepdim=False):
    shape = tuple(x.shape)
    dof = _count(shape, dim) - correction
    centred = x - mean_p(x, dim=dim, keepdim=True)
    if dof > 0:
        return _keep(g, shape, dim, keepdim) * (centred * (2.0 / dof))
    with np.errstate(invalid="ignore", divide="ignore"):  # PyTorch clamps the dof at 0: inf/NaN
        return _keep(g, shape, dim, keepdim) * (centred * float("inf"))


var_p.defvjp(_var_vjp)


@primitive("std", save_inputs=True, save_output=True)
def std_p(x, dim=None, correction=1.0, keepdim=False):
    if x.dtype.kind == "f" and x.dtype.itemsize < 4:  # float32 throughout, one rounding
        return np.sqrt(_var_np(x.astype(np.float32), dim, correction, keepdim)).astype(x.dtype)
    return np.sqrt(_var_np(x, dim, correction, keepdim))


def _std_vjp(g, out, x, dim=None, correction=1.0, keepdim=False):
    # PyTorch's convention: no gradient where the deviation is exactly 0
    zero = out == 0
    gv = _ew.where_p(zero, 0.0, g / (2.0 * _ew.where_p(zero, 1.0, out)))
    return _var_vjp(gv, None, x, dim, correction, keepdim)


std_p.defvjp(_std_vjp)


@primitive("logsumexp", promote="float", save_inputs=True, save_output=True)
def logsumexp_p(x, dim=None, keepdim=False):
    if x.size == 0:
        with np.errstate(divide="ignore"):
            return np.log(np.sum(np.exp(x), axis=dim, keepdims=keepdim))
    m = np.max(x, axis=dim, keepdims=True)
    if not np.isfinite(m).all():  # rows of -inf (or with +inf): shift by 0 there instead
        m = np.where(np.isfinite(m), m, 0).astype(x.dtype, copy=False)
    with np.errstate(divide="ignore"):
        s = np.log(np.add.reduce(np.exp(x - m), axis=dim, keepdims=keepdim))
    s += m if keepdim else (m.reshape(s.shape))
    return s


def _logsumexp_vjp(g, out, x, dim=None, keepdim=False):
    # softmax weights; -inf entries get exactly 0 (a row of only -inf gives NaN, as in PyTorch)
    shape = tuple(x.shape)
    return _keep(g, shape, dim, keepdim) * _ew.exp_p(x - _keep(out, shape, dim, keepdim))


logsumexp_p.defvjp(_logsumexp_vjp)


# ===========================================================================
# norms
# ===========================================================================

@primitive("vector_norm", save_inputs=True, save_output=True,
           torch_name="LinalgVectorNormBackward0")
def vector_norm_p(x, ord=2.0, dim=None, keepdim=False):
    if x.dtype.kind == "f" and x.dtype.itemsize < 4:
        # half precision: float32 accumulation, one rounding (PyTorch; float16 squares
        # overflow at 256)
        y = vector_norm_p.impl(x.astype(np.float32), ord, dim, keepdim)
        return y.astype(x.dtype)
    a = np.abs(x)
    if ord == 2.0:
        return np.sqrt(np.sum(a * a, axis=dim, keepdims=keepdim))
    if ord == 1.0:
        return np.sum(a, axis=dim, keepdims=keepdim)
    if ord == float("inf"):
        _nonempty_dims(x, dim, "linalg.vector_norm")
        return np.max(a, axis=dim, keepdims=keepdim)
    if ord == float("-inf"):
        _nonempty_dims(x, dim, "linalg.vector_norm")
        return np.min(a, axis=dim, keepdims=keepdim)
    if ord == 0.0:
        return np.sum(a != 0, axis=dim, keepdims=keepdim).astype(x.dtype)
    with np.errstate(divide="ignore"):
        return (np.sum(a ** ord, axis=dim, keepdims=keepdim) ** (1.0 / ord)).astype(x.dtype, copy=False)


def _vector_norm_vjp(g, out, x, ord=2.0, dim=None, keepdim=False):
    shape = tuple(x.shape)
    gk = _keep(g, shape, dim, keepdim)
    nk = _keep(out, shape, dim, keepdim)
    if ord == 0.0:
        return gk * (x * 0.0)
    if ord == 1.0:
        return gk * _ew.sign_p(x)
    if ord in (float("inf"), float("-inf")):
        return gk * (_ew.sign_p(x) * _even_weights(_ew.abs_p(x), out, dim))
    # a zero norm gets the zero subgradient (PyTorch's convention); safe_n avoids 0/0
    zero = nk == 0
    safe_n = _ew.where_p(zero, 1.0, nk)
    if ord == 2.0:
        return x * _ew.where_p(zero, 0.0, gk / safe_n)
    if ord < 1.0:
        xz = x == 0
        ax = _ew.where_p(xz, 1.0, _ew.abs_p(x))
        scaled = _ew.where_p(xz, 0.0, _ew.sign_p(x) * ax ** (ord - 1.0))
        return scaled * _ew.where_p(zero, 0.0, gk * safe_n ** (1.0 - ord))
    if ord < 2.0:
        scaled = _ew.sign_p(x) * _ew.abs_p(x) ** (ord - 1.0)
    else:
        scaled = x * _ew.abs_p(x) ** (ord - 2.0)
    return scaled * _ew.where_p(zero, 0.0, gk / safe_n ** (ord - 1.0))


vector_norm_p.defvjp(_vector_norm_vjp)


# ===========================================================================
# logical / counting reductions (not differentiable), nan-aware variants
# ===========================================================================

def _logical(name, fn):
    def impl(x, dim=None, keepdim=False):
        r = fn(x, axis=dim, keepdims=keepdim)
        return r.astype(np.uint8) if x.dtype == np.uint8 else r
    return primitive(name, differentiable=False)(impl)


all_p = _logical("all", np.all)
any_p = _logical("any", np.any)


@primitive("count_nonzero", differentiable=False)
def count_nonzero_p(x, dim=None):
    return np.asarray(np.count_nonzero(x, axis=dim)).astype(np.int64)


_ = Tensor


# Products, scans, norms and variances overflow to inf or meet 0 * inf and inf - inf:
# silent, as in PyTorch (see ops/_util.py:quiet_fp).  sum and mean stay unwrapped (hot).
quiet_primitives(prod_p, cumsum_p, cumprod_p, shift_p, linscan_p, vector_norm_p, var_p, std_p,
                 logsumexp_p)


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_reduction():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    for name in ("sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "var", "std",
                 "logsumexp", "vector_norm", "all", "any", "count_nonzero"):
        R[name].defbatch(b.reduction)
    for name in ("shift", "linscan", "cumsum", "cumprod", "max_dim", "min_dim", "cummax",
                 "cummin", "median_dim", "mode"):
        R[name].defbatch(b.shift_dim)
    R["median"].defbatch(fallback="the median of all elements: no per-member form with "
                                  "the same tie-breaking")


_defbatch_reduction()
