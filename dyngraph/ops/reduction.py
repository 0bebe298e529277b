"""Reductions: sum, mean, ... over ``dim`` (an int, a tuple, or all) with ``keepdim``.

``sum_to_shape`` is the one helper that reverses broadcasting; the engine
uses it to fit gradients of broadcasting primitives to their inputs.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes as _dt
from .. import return_types as _rt
from .._core.state import STATE
from ..surface import elementwise as _sew  # (moves to the surface with this family's functions)
from ..tensor import Tensor, _wrap_dim
from . import elementwise as _ew
from . import shape as _shape
from ._util import as_tensor_arg, install, normalize_dims, quiet_primitives
from .registry import bind, primitive

__all__ = [
    "sum", "mean", "sum_to_shape", "prod", "cumsum", "cumprod", "amax", "amin", "max", "min",
    "argmax", "argmin", "aminmax", "median", "var", "std", "var_mean", "std_mean",
    "logsumexp", "norm", "all", "any", "count_nonzero", "nansum", "nanmean", "cummax", "cummin",
    "dist", "cdist", "cov", "corrcoef", "logcumsumexp", "renorm", "trapezoid", "trapz", "mode",
    "cumulative_trapezoid",
]


def _keep_shape(shape, dims):
    """The shape a reduction over ``dims`` has with keepdim=True."""
    if dims is None:
        return (1,) * len(shape)
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


@primitive("sum_to_shape", meta=True)
def sum_to_shape_p(x, shape=()):
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    r = x.sum(axis=axes, keepdims=True) if axes else x
    return r.reshape(shape)


def _sum_to_shape_vjp(g, out, x, shape=()):
    from .shape import expand_p  # noqa: PLC0415

    return expand_p(g, shape=tuple(x.shape))


sum_to_shape_p.defvjp(_sum_to_shape_vjp)


def sum_to_shape(x, shape):
    """Sum ``x`` over broadcast dimensions so it has ``shape`` (array or Tensor)."""
    return sum_to_shape_p(x, shape=tuple(shape))


def _sum_dtype(dtype):
    return np.int64 if dtype.kind in "biu" else None


# PyTorch: sum() is SumBackward0, sum(dim) SumBackward1 (likewise mean, prod)
@primitive("sum", meta=True, torch_name=lambda params: "SumBackward1" if "dim" in params else "SumBackward0")
def sum_p(x, dim=None, keepdim=False, dtype=None):
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
    from .shape import expand_p, reshape_p  # noqa: PLC0415

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


def _reduce_args(input, dim, keepdim, dtype, op):
    if type(dim) is int and dtype is None and isinstance(input, Tensor):
        nd = input._data.ndim
        if -nd <= dim < nd:  # the common case x.sum(1), kept short (hot path)
            return input, ({"dim": (dim % nd,), "keepdim": True} if keepdim else {"dim": (dim % nd,)})
    input = as_tensor_arg(input, op)
    dims = normalize_dims(dim, input._data.ndim, op)
    if dims == () or (dims is not None and input._data.ndim == 0):
        dims = None  # dim=() reduces over everything, as in PyTorch
    params = {}
    if dims is not None:
        params["dim"] = dims
    if keepdim:
        params["keepdim"] = True
    if dtype is not None:
        params["dtype"] = _dt.to_numpy_dtype(dtype)
    return input, params


def sum(input, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
    """Sum over ``dim`` (int or tuple; all dimensions when None).  NumPy's spellings
    ``axis=``/``keepdims=`` are accepted too, as PyTorch does.

    >>> dg.tensor([[1., 2.], [3., 4.]]).sum(dim=0)
    tensor([4., 6.])
    """
    if axis is not None:
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    input, params = _reduce_args(input, dim, keepdim, dtype, "sum")
    return bind(sum_p, (input,), params)


def mean(input, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
    """Arithmetic mean over ``dim``; floating inputs only (as in PyTorch).  NumPy's
    ``axis=``/``keepdims=`` are accepted too."""
    if axis is not None:
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    input, params = _reduce_args(input, dim, keepdim, dtype, "mean")
    return bind(mean_p, (input,), params)


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
    return _shape.reshape_p(g, shape=_keep_shape(shape, dim))


def _count(shape, dim) -> int:
    n = 1
    for i in (range(len(shape)) if dim is None else dim):
        n *= shape[i]
    return n


def _float_only(x, op):
    if x.dtype.kind != "f":
        raise RuntimeError(
            f"{op}: expected a floating point tensor as input, got "
            f"{_dt.from_numpy_dtype(x.dtype)}; convert it first (x.float() or x.double())")


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
    vk = val if dim is None else _shape.reshape_p(val, shape=_keep_shape(tuple(x.shape), dim))
    mask = x == vk
    dt = _np_dtype(x)
    if dt.kind == "f":  # a NaN result came from the NaN entries
        mask = mask | (_ew.isnan_p(x) & _ew.isnan_p(vk))
    m = _ew.cast_p(mask, dtype=dt)
    return m / sum_p(m, dim=dim, keepdim=True)


def _even_rule(g, out, x, dim=None, keepdim=False):
    return _keep(g, x.shape, dim, keepdim) * _even_weights(x, out, dim)


def _select_rule(g, out, x, dim=0, keepdim=False):
    """Gradient of a (values, indices) reduction: all of it to the selected index."""
    shape = tuple(x.shape)
    idx = _keep(out[1], shape, (dim,), keepdim)
    ar = np.arange(shape[dim]).reshape((-1,) + (1,) * (len(shape) - dim - 1))
    mask = _ew.cast_p(idx == ar, dtype=_np_dtype(x))
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
    moved = x if perm == tuple(range(nd)) else _shape.permute_p(x, dims=perm)
    lead = tuple(shape[i] for i in rest)
    flat = _shape.reshape_p(moved, shape=lead + (_count(shape, dims),))
    ax = len(lead)
    left = shift_p(cumprod_p(flat, dim=ax), dim=ax, n=1, fill=1.0)
    right = shift_p(cumprod_p(flat, dim=ax, reverse=True), dim=ax, n=-1, fill=1.0)
    res = _shape.reshape_p(left * right, shape=tuple(shape[i] for i in perm))
    if perm == tuple(range(nd)):
        return res
    return _shape.permute_p(res, dims=tuple(int(i) for i in np.argsort(perm)))


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


def prod(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Product of the elements over ``dim`` (all when None); integers give int64.

    >>> dg.tensor([[1., 2.], [3., 4.]]).prod(dim=1)
    tensor([ 2., 12.])
    """
    if dim is not None and not isinstance(dim, (tuple, list)):
        dim = int(dim)
    input, params = _reduce_args(input, dim, keepdim, None, "prod")
    if dtype is not None:  # cast first, so the gradient has the input's dtype
        input = input.to(_dt.as_dtype(dtype))
    return bind(prod_p, (input,), params)


def _scan_args(input, dim, dtype, op):
    input = as_tensor_arg(input, op)
    if dim is None:
        raise TypeError(f"{op}(): missing required argument 'dim' (the dimension to scan along)")
    d = _wrap_dim(int(dim), input._data.ndim, op)
    if dtype is not None:
        input = input.to(_dt.as_dtype(dtype))
    return input, d


def cumsum(input, dim=None, *, dtype=None):
    """Cumulative sum along ``dim``; integer inputs give int64 (like PyTorch).

    >>> dg.cumsum(dg.tensor([1., 2., 3.]), 0)
    tensor([1., 3., 6.])
    """
    input, d = _scan_args(input, dim, dtype, "cumsum")
    return _scan(cumsum_p, input, d)


def cumprod(input, dim=None, *, dtype=None):
    """Cumulative product along ``dim``; gradients are exact also where inputs are 0.

    >>> dg.cumprod(dg.tensor([1., 2., 3.]), 0)
    tensor([1., 2., 6.])
    """
    input, d = _scan_args(input, dim, dtype, "cumprod")
    return _scan(cumprod_p, input, d)


def _scan(prim, input, d):
    if input._data.ndim:
        return bind(prim, (input,), {"dim": d})
    one = bind(_shape.reshape_p, (input,), {"shape": (1,)})
    return bind(_shape.reshape_p, (bind(prim, (one,), {"dim": 0}),), {"shape": ()})


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


def _amaxmin(prim, input, dim, keepdim, op):
    input = as_tensor_arg(input, op)
    dims = normalize_dims(dim if dim != () else None, input._data.ndim, op)
    if input._data.ndim == 0:
        dims = None
    params = {}
    if dims is not None:
        params["dim"] = dims
    if keepdim:
        params["keepdim"] = True
    return bind(prim, (input,), params)


def amax(input, dim=(), keepdim: bool = False):
    """Maximum over ``dim`` (int or tuple; all when empty); ties share the gradient evenly.

    >>> dg.amax(dg.tensor([[1., 5.], [5., 2.]]), dim=1)
    tensor([5., 5.])
    """
    return _amaxmin(amax_p, input, dim, keepdim, "amax")


def amin(input, dim=(), keepdim: bool = False):
    """Minimum over ``dim`` (int or tuple; all when empty); ties share the gradient evenly."""
    return _amaxmin(amin_p, input, dim, keepdim, "amin")


def _maxmin(name, all_prim, dim_prim, binary, rt, input, dim, keepdim, other):
    input = as_tensor_arg(input, name)
    if isinstance(dim, Tensor) and other is None:
        dim, other = None, dim
    if other is not None:
        return binary(input, other)
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}(): keepdim=True needs a 'dim' argument")
        return bind(all_prim, (input,))
    d = _wrap_dim(int(dim), input._data.ndim, name)
    if input._data.ndim == 0:
        v = bind(_shape.reshape_p, (input,), {"shape": ()})
        return rt(v, Tensor._make(np.zeros((), np.int64), False, None, 0))
    return rt(*bind(dim_prim, (input,), {"dim": d, "keepdim": bool(keepdim)}))


def max(input, dim=None, keepdim: bool = False, *, other=None):
    """``max(x)``: the largest value; ``max(x, dim)``: named tuple ``(values, indices)``;
    ``max(x, y)``: elementwise maximum.

    >>> dg.tensor([[1., 5.], [3., 2.]]).max(dim=1)
    dyngraph.return_types.max(
    values=tensor([5., 3.]),
    indices=tensor([1, 0]))
    """
    return _maxmin("max", amax_p, max_dim_p, _sew.maximum, _rt.max, input, dim, keepdim, other)


def min(input, dim=None, keepdim: bool = False, *, other=None):
    """``min(x)``, ``min(x, dim)`` -> ``(values, indices)``, or elementwise ``min(x, y)``."""
    return _maxmin("min", amin_p, min_dim_p, _sew.minimum, _rt.min, input, dim, keepdim, other)


def _argmaxmin(prim, input, dim, keepdim, op):
    input = as_tensor_arg(input, op)
    params = {"keepdim": bool(keepdim)}
    if dim is not None:
        params["dim"] = _wrap_dim(int(dim), input._data.ndim, op) if input._data.ndim else None
    return bind(prim, (input,), params)


def argmax(input, dim=None, keepdim: bool = False):
    """Index of the largest value (of the flattened tensor when ``dim`` is None)."""
    return _argmaxmin(argmax_p, input, dim, keepdim, "argmax")


def argmin(input, dim=None, keepdim: bool = False):
    """Index of the smallest value (of the flattened tensor when ``dim`` is None)."""
    return _argmaxmin(argmin_p, input, dim, keepdim, "argmin")


def aminmax(input, *, dim=None, keepdim: bool = False):
    """``(min, max)`` over ``dim`` (all when None) as a named tuple."""
    if dim is not None and not isinstance(dim, int):
        raise TypeError("aminmax(): dim must be an int or None")
    return _rt.aminmax(amin(input, () if dim is None else dim, keepdim),
                       amax(input, () if dim is None else dim, keepdim))


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
    from .indexing import gather_backward_p  # noqa: PLC0415

    return gather_backward_p(g[0], out[1], shape=tuple(x.shape), dim=dim)


cummax_p = primitive("cummax", n_outputs=2, meta=True, save_output=True)(
    _cum_ext_impl(np.maximum.accumulate, "cummax"))
cummin_p = primitive("cummin", n_outputs=2, meta=True, save_output=True)(
    _cum_ext_impl(np.minimum.accumulate, "cummin"))
cummax_p.defvjp(_cum_ext_vjp)
cummin_p.defvjp(_cum_ext_vjp)


def _cum_ext(prim, rt, input, dim, op):
    input = as_tensor_arg(input, op)
    d = _wrap_dim(int(dim), input._data.ndim, op)
    if input._data.ndim == 0:
        one = bind(_shape.reshape_p, (input,), {"shape": (1,)})
        v, i = bind(prim, (one,), {"dim": 0})
        return rt(bind(_shape.reshape_p, (v,), {"shape": ()}), Tensor._make(np.zeros((), np.int64), False, None, 0))
    return rt(*bind(prim, (input,), {"dim": d}))


def cummax(input, dim: int):
    """Running maximum along ``dim`` and where it was found, as ``(values, indices)``.

    >>> dg.cummax(dg.tensor([1., 3., 2.]), 0).values
    tensor([1., 3., 3.])
    """
    return _cum_ext(cummax_p, _rt.cummax, input, dim, "cummax")


def cummin(input, dim: int):
    """Running minimum along ``dim`` and where it was found, as ``(values, indices)``."""
    return _cum_ext(cummin_p, _rt.cummin, input, dim, "cummin")


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


def median(input, dim=None, keepdim: bool = False):
    """The lower median: of all elements (``dim=None``), or ``(values, indices)`` along ``dim``.

    >>> dg.median(dg.tensor([1., 4., 2., 3.]))
    tensor(2.)
    """
    input = as_tensor_arg(input, "median")
    if dim is None:
        return bind(median_p, (input,))
    d = _wrap_dim(int(dim), input._data.ndim, "median")
    if input._data.ndim == 0:
        return _rt.median(bind(_shape.reshape_p, (input,), {"shape": ()}),
                          Tensor._make(np.zeros((), np.int64), False, None, 0))
    return _rt.median(*bind(median_dim_p, (input,), {"dim": d, "keepdim": bool(keepdim)}))


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


def mode(input, dim: int = -1, keepdim: bool = False):
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest one on ties)
    and the index of its last occurrence.

    >>> dg.mode(dg.tensor([2., 1., 2., 1.]))
    dyngraph.return_types.mode(
    values=tensor(1.),
    indices=tensor(3))
    """
    input = as_tensor_arg(input, "mode")
    if input._data.ndim == 0:
        return _rt.mode(input.clone(), Tensor._make(np.zeros((), np.int64), False, None, 0))
    d = _wrap_dim(int(dim), input._data.ndim, "mode")
    return _rt.mode(*bind(mode_p, (input,), {"dim": d, "keepdim": bool(keepdim)}))


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


def _var_args(input, dim, unbiased, keepdim, correction, op):
    input = as_tensor_arg(input, op)
    if isinstance(dim, bool):  # the old overload var(input, unbiased)
        dim, unbiased = None, dim
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"{op}(): std and var only support floating point and complex dtypes "
                           f"(got {input.dtype}); convert the input with .float() first")
    if correction is not None and unbiased is not None:
        raise TypeError(f"{op}(): pass either 'correction' or the older 'unbiased', not both")
    c = float(correction) if correction is not None else (1.0 if unbiased in (None, True) else 0.0)
    dims = normalize_dims(dim, input._data.ndim, op)
    if input._data.ndim == 0 or dims == ():
        dims = None
    params = {"correction": c}
    if dims is not None:
        params["dim"] = dims
    if keepdim:
        params["keepdim"] = True
    return input, params


def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """Variance over ``dim`` with ``correction`` (1: Bessel's; ``unbiased=False`` is 0).

    >>> dg.var(dg.tensor([1., 2., 3., 4.]))
    tensor(1.6667)
    """
    input, params = _var_args(input, dim, unbiased, keepdim, correction, "var")
    return bind(var_p, (input,), params)


def std(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """Standard deviation over ``dim``; the gradient is 0 where the result is 0 (as PyTorch)."""
    input, params = _var_args(input, dim, unbiased, keepdim, correction, "std")
    return bind(std_p, (input,), params)


def _mean_of(input, params):
    mp = {k: v for k, v in params.items() if k != "correction"}
    return bind(mean_p, (input,), mp)


def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(var, mean)`` over ``dim`` in one call."""
    input, params = _var_args(input, dim, unbiased, keepdim, correction, "var_mean")
    return _rt.var_mean(bind(var_p, (input,), params), _mean_of(input, params))


def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(std, mean)`` over ``dim`` in one call."""
    input, params = _var_args(input, dim, unbiased, keepdim, correction, "std_mean")
    return _rt.std_mean(bind(std_p, (input,), params), _mean_of(input, params))


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


def logsumexp(input, dim, keepdim: bool = False):
    """``log(sum(exp(x)))`` over ``dim``, computed stably (shifted by the maximum).

    >>> dg.logsumexp(dg.tensor([0., 0.]), 0)
    tensor(0.6931)
    """
    input = as_tensor_arg(input, "logsumexp")
    dims = normalize_dims(dim, input._data.ndim, "logsumexp")
    if dims == ():
        raise RuntimeError("logsumexp: dim=() is not supported (as in PyTorch); name the dims "
                           "to reduce, e.g. dim=tuple(range(x.ndim))")
    if input._data.ndim == 0:
        dims = None
    params = {"dim": dims} if dims is not None else {}
    if keepdim:
        params["keepdim"] = True
    return bind(logsumexp_p, (input,), params)


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


def _ord_value(ord, op):
    try:
        return float(ord)
    except (TypeError, ValueError):
        raise ValueError(f"{op}: unsupported ord {ord!r}; use a number, inf or -inf") from None


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):
    """The ``ord``-norm of ``x`` flattened (``dim=None``) or over ``dim`` (int or tuple).

    >>> dg.linalg.vector_norm(dg.tensor([3., 4.]))
    tensor(5.)
    """
    x = as_tensor_arg(x, "linalg.vector_norm")
    if x._data.dtype.kind != "f":
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {x.dtype}; convert it with .float() first")
    if dtype is not None:
        x = x.to(_dt.as_dtype(dtype))
    p = _ord_value(ord, "linalg.vector_norm")
    if p < 0 and p != float("-inf"):
        raise RuntimeError(f"linalg.vector_norm: ord must be non-negative or -inf, got {ord}")
    dims = normalize_dims(dim, x._data.ndim, "linalg.vector_norm")
    if x._data.ndim == 0 or dims == ():
        dims = None
    params = {"ord": p}
    if dims is not None:
        params["dim"] = dims
    if keepdim:
        params["keepdim"] = True
    return bind(vector_norm_p, (x,), params)


def norm(input, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """``torch.norm``: a vector norm over ``dim`` (``'fro'`` is the 2-norm; ``'nuc'`` is
    not supported). Prefer :func:`dyngraph.linalg.vector_norm` / ``matrix_norm``.

    >>> dg.tensor([3., 4.]).norm()
    tensor(5.)
    """
    if isinstance(p, str):
        if p != "fro":
            raise ValueError(f"norm: p={p!r} is not supported (use 'fro' or a number)")
        if dim is not None and not isinstance(dim, int) and len(dim) > 2:
            raise RuntimeError(f"norm: 'fro' norm expects at most 2 dims, got {list(dim)}")
        p = 2
    return vector_norm(input, p if p is not None else 2, dim, keepdim, dtype=dtype)


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


def _bool_reduce(prim, input, dim, keepdim, op):
    input = as_tensor_arg(input, op)
    dims = normalize_dims(dim, input._data.ndim, op)
    if input._data.ndim == 0:
        dims = None
    params = {"keepdim": True} if keepdim else {}
    if dims is not None:
        params["dim"] = dims
    return bind(prim, (input,), params)


def all(input, dim=None, keepdim: bool = False):
    """True where every element over ``dim`` is non-zero (all elements when None)."""
    return _bool_reduce(all_p, input, dim, keepdim, "all")


def any(input, dim=None, keepdim: bool = False):
    """True where some element over ``dim`` is non-zero (all elements when None)."""
    return _bool_reduce(any_p, input, dim, keepdim, "any")


def count_nonzero(input, dim=None):
    """Number of non-zero elements over ``dim`` (int or tuple; all when None), as int64."""
    input = as_tensor_arg(input, "count_nonzero")
    dims = normalize_dims(dim, input._data.ndim, "count_nonzero")
    if input._data.ndim == 0 or dims == ():
        dims = None
    return bind(count_nonzero_p, (input,), {"dim": dims} if dims is not None else {})


def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Sum over ``dim`` treating NaN as zero (NaN entries get zero gradient)."""
    input = as_tensor_arg(input, "nansum")
    if input._data.dtype.kind == "f":
        input = bind(_ew.where_p, (bind(_ew.isnan_p, (input,)), 0.0, input))
    return sum(input, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Mean over ``dim`` of the non-NaN entries."""
    input = as_tensor_arg(input, "nanmean")
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"nanmean(): expected a floating point input, got {input.dtype}")
    keep = bind(_ew.logical_not_p, (bind(_ew.isnan_p, (input,)),))
    total = nansum(input, dim, keepdim, dtype=dtype)
    count = sum(keep, dim, keepdim)
    return total / count.to(total.dtype)


def dist(input, other, p: float = 2):
    """The ``p``-norm of ``input - other`` (broadcast), as one number.

    >>> dg.dist(dg.tensor([0., 0.]), dg.tensor([3., 4.]))
    tensor(5.)
    """
    return vector_norm(input - other, p)


def renorm(input, p: float, dim: int, maxnorm: float):
    """Rescale each slice ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` to
    norm ``maxnorm`` (PyTorch's ``maxnorm / (norm + 1e-7)`` factor); others unchanged.

    >>> dg.renorm(dg.tensor([[3., 4.], [0.3, 0.4]]), 2, 0, 1.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    input = as_tensor_arg(input, "renorm")
    d = _wrap_dim(dim, input._data.ndim, "renorm")
    others = tuple(i for i in range(input._data.ndim) if i != d)
    nrm = vector_norm(input, p, others, keepdim=True)
    factor = _sew.where(nrm > maxnorm, maxnorm / (nrm + 1e-7), 1.0)
    return input * factor


def _trapezoid_terms(y, x, dx, dim, op):
    y = as_tensor_arg(y, op)
    d = _wrap_dim(dim, y._data.ndim, op)
    n = y._data.shape[d]
    pair = _shape.narrow(y, d, 1, n - 1) + _shape.narrow(y, d, 0, n - 1) if n else y
    if x is None:
        return pair * (0.5 * (1.0 if dx is None else float(dx))), d
    x = x if isinstance(x, Tensor) else as_tensor_arg(x, op)
    if x._data.ndim == 1:  # spacing along ``dim`` only
        shape = [1] * y._data.ndim
        shape[d] = n - 1
        widths = _shape.reshape(x[1:] - x[:-1], tuple(shape))
    else:
        k = _wrap_dim(dim, x._data.ndim, op)
        widths = _shape.narrow(x, k, 1, n - 1) - _shape.narrow(x, k, 0, n - 1)
    return pair * widths * 0.5, d


def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """Integral of ``y`` along ``dim`` by the trapezoid rule, with sample points ``x`` or
    spacing ``dx`` (default 1).

    >>> dg.trapezoid(dg.tensor([1., 2., 3.]))
    tensor(4.)
    """
    terms, d = _trapezoid_terms(y, x, dx, dim, "trapezoid")
    return sum(terms, d)


def trapz(y, x=None, *, dx=None, dim: int = -1):
    """Alias of :func:`trapezoid`."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """Running trapezoid-rule integral along ``dim`` (one element shorter than ``y``)."""
    terms, d = _trapezoid_terms(y, x, dx, dim, "cumulative_trapezoid")
    return cumsum(terms, d)


def cdist(x1, x2, p: float = 2.0, compute_mode=None):
    """Pairwise ``p``-norm distances between the rows of ``x1`` (..., P, M) and ``x2``
    (..., R, M), batch dimensions broadcast: result (..., P, R).

    Computed as the norm of the broadcast differences (exact, no ``|a|²+|b|²-2ab``
    cancellation, so it matches PyTorch's ``compute_mode`` results to rounding; memory
    is P·R·M per batch).  The gradient at a zero distance is zero, as in PyTorch.

    >>> dg.cdist(dg.tensor([[0., 0.], [1., 1.]]), dg.tensor([[3., 4.]]))
    tensor([[5.0000],
            [3.6056]])
    """
    x1 = as_tensor_arg(x1, "cdist")
    x2 = as_tensor_arg(x2, "cdist")
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"cdist: expected x1 (..., P, M) and x2 (..., R, M) with the same M and at least 2 "
            f"dimensions each, got shapes {list(x1.shape)} and {list(x2.shape)}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got p={p}")
    if compute_mode not in (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"cdist: {compute_mode!r} is not a valid value for compute_mode")
    return vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, dim=-1)


def cov(input, *, correction: int = 1, fweights=None, aweights=None):
    """Covariance matrix of the variables in the rows of ``input`` (observations in the
    columns; a 1-D input is one variable), with optional integer frequency weights and
    float observation weights, as ``numpy.cov``/``torch.cov``.

    >>> dg.cov(dg.tensor([[1., 2., 4.], [0., 1., -1.]]))
    tensor([[ 2.3333, -1.0000],
            [-1.0000,  1.0000]])
    """
    x = as_tensor_arg(input, "cov")
    if x.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input "
                           f"with {x.ndim} dimensions")
    if x._data.dtype.kind != "f":
        x = x.to(_dt.get_default_dtype())
    obs = x if x.ndim == 2 else x.reshape(1, -1)
    n = obs.shape[1]
    w = None
    if fweights is not None:
        w = as_tensor_arg(fweights, "cov")
        if w._data.dtype.kind not in "iu":
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got {w.dtype}")
    if aweights is not None:
        aw = as_tensor_arg(aweights, "cov")
        w = aw if w is None else w * aw
    if w is None:
        avg = mean(obs, 1, keepdim=True)
        norm = float(n - correction)
    else:
        w = w.to(obs.dtype)
        w_sum = sum(w)
        avg = sum(obs * w, 1, keepdim=True) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * sum(w * as_tensor_arg(aweights, "cov").to(obs.dtype)) / w_sum
    if not isinstance(norm, Tensor):
        norm = builtins.max(norm, 0.0)
    xm = obs - avg
    c = ((xm * w) if w is not None else xm) @ xm.mT / norm
    return c.reshape(()) if x.ndim < 2 else c


def logcumsumexp(input, dim: int):
    """``log(cumsum(exp(input), dim))`` computed stably (shifted by the maximum along
    ``dim``, which cancels in the value and in the gradient)."""
    x = as_tensor_arg(input, "logcumsumexp")
    if x.ndim == 0:
        return x.clone()
    m = amax(x.detach(), dim, keepdim=True)
    m = _sew.where(_sew.isfinite(m), m, 0.0)
    return _sew.log(cumsum(_sew.exp(x - m), dim)) + m


def corrcoef(input):
    """Pearson correlation coefficients of the variables in the rows of ``input``
    (``cov`` normalised by the standard deviations, clipped to [-1, 1])."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = _sew.sqrt(c.diagonal())
    c = c / d.unsqueeze(1) / d.unsqueeze(0)
    return _sew.clamp(c, -1.0, 1.0)


def sum_to_size(input, *size):
    """Sum ``input`` down to ``size`` (the reverse of broadcasting it to ``input.shape``)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    shape = input._data.shape
    lead = len(shape) - len(size)
    if lead < 0 or builtins.any(s != 1 and s != shape[lead + i] for i, s in enumerate(size)):
        raise RuntimeError(f"sum_to_size: size {list(size)} is not expandable to size {list(shape)}")
    return bind(sum_to_shape_p, (input,), {"shape": size})


def _sum_method(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    return sum(self, dim if axis is None else axis, keepdim if keepdims is None else keepdims, dtype=dtype)


def _mean_method(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    return mean(self, dim if axis is None else axis, keepdim if keepdims is None else keepdims, dtype=dtype)


def _dim_method(fn):
    def method(self, dim=None, keepdim=False, **kw):
        return fn(self, dim, keepdim, **kw)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _amax_method(fn):
    def method(self, dim=(), keepdim=False):
        return fn(self, dim, keepdim)
    method.__name__ = fn.__name__
    return method


install({
    "sum": _sum_method, "mean": _mean_method, "prod": _dim_method(prod),
    "cumsum": cumsum, "cumprod": cumprod, "cummax": cummax, "cummin": cummin, "amax": _amax_method(amax), "amin": _amax_method(amin),
    "max": max, "min": min, "argmax": argmax, "argmin": argmin, "aminmax": aminmax,
    "median": median, "var": var, "std": std, "logsumexp": logsumexp, "norm": norm,
    "all": all, "any": any, "count_nonzero": count_nonzero, "nansum": _dim_method(nansum),
    "nanmean": _dim_method(nanmean), "dist": dist, "sum_to_size": sum_to_size, "renorm": renorm,
    "logcumsumexp": lambda self, dim: logcumsumexp(self, dim), "mode": mode,
})

_ = Tensor


# Products, scans, norms and variances overflow to inf or meet 0 * inf and inf - inf:
# silent, as in PyTorch (see ops/_util.py:quiet_fp).  sum and mean stay unwrapped (hot).
quiet_primitives(prod_p, cumsum_p, cumprod_p, shift_p, linscan_p, vector_norm_p, var_p, std_p,
                 logsumexp_p)


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_reduction():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415

    for name in ("sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "var", "std",
                 "logsumexp", "vector_norm", "all", "any", "count_nonzero"):
        R[name].defbatch(b.reduction)
    for name in ("shift", "linscan", "cumsum", "cumprod", "max_dim", "min_dim", "cummax",
                 "cummin", "median_dim", "mode"):
        R[name].defbatch(b.shift_dim)
    R["median"].defbatch(fallback="the median of all elements: no per-member form with "
                                  "the same tie-breaking")
    R["sum_to_shape"].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_reduction()
