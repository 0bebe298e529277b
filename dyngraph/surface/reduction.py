"""The PyTorch surface of reductions: ``sum``, ``mean``, ``max``, ``var``, ``norm``... over
``dim`` (an int, a tuple, or all) with ``keepdim``.

The primitives (forward, rules, save spec) are in :mod:`dyngraph.ops.reduction`; the
functions here parse ``dim``/``keepdim``/``dtype`` and call :func:`bind`.
:mod:`dyngraph.surface.methods` attaches the Tensor methods.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from .. import return_types as _rt
from ..ops import elementwise as _ew
from ..ops import structural as _st
from ..ops.reduction import (
    all_p,
    amax_p,
    amin_p,
    any_p,
    argmax_p,
    argmin_p,
    count_nonzero_p,
    cummax_p,
    cummin_p,
    cumprod_p,
    cumsum_p,
    logsumexp_p,
    max_dim_p,
    mean_p,
    median_dim_p,
    median_p,
    min_dim_p,
    mode_p,
    prod_p,
    std_p,
    sum_p,
    var_p,
    vector_norm_p,
)
from ..ops.registry import bind
from ..ops.structural import sum_to_shape_p
from ..tensor import Tensor, _wrap_dim
from . import elementwise as _sew
from . import shape as _sshape
from ._args import as_tensor_arg, normalize_dims

__all__ = [
    "sum", "mean", "sum_to_shape", "prod", "cumsum", "cumprod", "amax", "amin", "max", "min",
    "argmax", "argmin", "aminmax", "median", "var", "std", "var_mean", "std_mean",
    "logsumexp", "norm", "all", "any", "count_nonzero", "nansum", "nanmean", "cummax", "cummin",
    "dist", "cdist", "cov", "corrcoef", "logcumsumexp", "renorm", "trapezoid", "trapz", "mode",
    "cumulative_trapezoid",
]


def sum_to_shape(x, shape):
    """Sum ``x`` over broadcast dimensions so it has ``shape`` (array or Tensor)."""
    return sum_to_shape_p(x, shape=tuple(shape))


def _sum_dtype(dtype):
    return np.int64 if dtype.kind in "biu" else None


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


def _float_only(x, op):
    if not _dt.is_floating_point_dtype(x.dtype):
        raise RuntimeError(
            f"{op}: expected a floating point tensor as input, got "
            f"{_dt.from_numpy_dtype(x.dtype)}; convert it first (x.float() or x.double())")


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
    one = bind(_st.reshape_p, (input,), {"shape": (1,)})
    return bind(_st.reshape_p, (bind(prim, (one,), {"dim": 0}),), {"shape": ()})


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
        v = bind(_st.reshape_p, (input,), {"shape": ()})
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


def _cum_ext(prim, rt, input, dim, op):
    input = as_tensor_arg(input, op)
    d = _wrap_dim(int(dim), input._data.ndim, op)
    if input._data.ndim == 0:
        one = bind(_st.reshape_p, (input,), {"shape": (1,)})
        v, i = bind(prim, (one,), {"dim": 0})
        return rt(bind(_st.reshape_p, (v,), {"shape": ()}), Tensor._make(np.zeros((), np.int64), False, None, 0))
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
        return _rt.median(bind(_st.reshape_p, (input,), {"shape": ()}),
                          Tensor._make(np.zeros((), np.int64), False, None, 0))
    return _rt.median(*bind(median_dim_p, (input,), {"dim": d, "keepdim": bool(keepdim)}))


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


def _var_args(input, dim, unbiased, keepdim, correction, op):
    input = as_tensor_arg(input, op)
    if isinstance(dim, bool):  # the old overload var(input, unbiased)
        dim, unbiased = None, dim
    if not _dt.is_floating_point_dtype(input._data.dtype):
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
    if not _dt.is_floating_point_dtype(x._data.dtype):
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
    if _dt.is_floating_point_dtype(input._data.dtype):
        input = bind(_ew.where_p, (bind(_ew.isnan_p, (input,)), 0.0, input))
    return sum(input, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Mean over ``dim`` of the non-NaN entries."""
    input = as_tensor_arg(input, "nanmean")
    if not _dt.is_floating_point_dtype(input._data.dtype):
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
    pair = _sshape.narrow(y, d, 1, n - 1) + _sshape.narrow(y, d, 0, n - 1) if n else y
    if x is None:
        return pair * (0.5 * (1.0 if dx is None else float(dx))), d
    x = x if isinstance(x, Tensor) else as_tensor_arg(x, op)
    if x._data.ndim == 1:  # spacing along ``dim`` only
        shape = [1] * y._data.ndim
        shape[d] = n - 1
        widths = _sshape.reshape(x[1:] - x[:-1], tuple(shape))
    else:
        k = _wrap_dim(dim, x._data.ndim, op)
        widths = _sshape.narrow(x, k, 1, n - 1) - _sshape.narrow(x, k, 0, n - 1)
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
    if not _dt.is_floating_point_dtype(x._data.dtype):
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


def _method_params(self, dim, keepdim):
    """The params of ``x.sum()`` / ``x.sum(d)`` / ``x.sum(d, keepdim=True)`` (the usual calls,
    what ``_reduce_args`` returns for them), or None for anything else."""
    if dim is None:
        return {"keepdim": True} if keepdim is True else {} if keepdim is False else None
    if type(dim) is int:
        nd = self._data.ndim
        if -nd <= dim < nd and (keepdim is False or keepdim is True):
            return {"dim": (dim % nd,), "keepdim": True} if keepdim else {"dim": (dim % nd,)}
    return None


def _sum_method(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    if dtype is None and axis is None and keepdims is None:
        params = _method_params(self, dim, keepdim)
        if params is not None:
            return bind(sum_p, (self,), params)
    return sum(self, dim if axis is None else axis, keepdim if keepdims is None else keepdims, dtype=dtype)


def _mean_method(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    if dtype is None and axis is None and keepdims is None:
        params = _method_params(self, dim, keepdim)
        if params is not None:
            return bind(mean_p, (self,), params)
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


