"""Reductions: sum, mean, ... over ``dim`` (an int, a tuple, or all) with ``keepdim``.

``sum_to_shape`` is the one helper that reverses broadcasting; the engine
uses it to fit gradients of broadcasting primitives to their inputs.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from ._util import as_tensor_arg, install, normalize_dims
from .registry import bind, primitive

__all__ = ["sum", "mean", "sum_to_shape"]


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


@primitive("sum", meta=True)
def sum_p(x, dim=None, keepdim=False, dtype=None):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    return x.sum(axis=dim, keepdims=keepdim, dtype=dtype)


def _reduce_grad_to_input(g, x, dim, keepdim):
    from .shape import expand_p, reshape_p  # noqa: PLC0415

    shape = tuple(x.shape)
    if not keepdim:
        g = reshape_p(g, shape=_keep_shape(shape, dim))
    return expand_p(g, shape=shape)


def _sum_vjp(g, out, x, dim=None, keepdim=False, dtype=None):
    return _reduce_grad_to_input(g, x, dim, keepdim)


sum_p.defvjp(_sum_vjp)


@primitive("mean", meta=True)
def mean_p(x, dim=None, keepdim=False, dtype=None):
    if x.dtype.kind != "f" and dtype is None:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {_dt.from_numpy_dtype(x.dtype).name.capitalize()}")
    return x.mean(axis=dim, keepdims=keepdim, dtype=dtype)


def _mean_vjp(g, out, x, dim=None, keepdim=False, dtype=None):
    shape = tuple(x.shape)
    count = 1
    for i in (range(len(shape)) if dim is None else dim):
        count *= shape[i]
    return _reduce_grad_to_input(g, x, dim, keepdim) / max(count, 1) if count else \
        _reduce_grad_to_input(g, x, dim, keepdim) * float("nan")


mean_p.defvjp(_mean_vjp)


def _reduce_args(input, dim, keepdim, dtype, op):  # noqa: A002
    input = as_tensor_arg(input, op)
    dims = normalize_dims(dim, input._data.ndim, op)
    if dims is not None and input._data.ndim == 0:
        dims = None
    params = {}
    if dims is not None:
        params["dim"] = dims
    if keepdim:
        params["keepdim"] = True
    if dtype is not None:
        params["dtype"] = _dt.to_numpy_dtype(dtype)
    return input, params


def sum(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A001,A002
    """Sum over ``dim`` (int or tuple; all dimensions when None).

    >>> dg.tensor([[1., 2.], [3., 4.]]).sum(dim=0)
    tensor([4., 6.])
    """
    input, params = _reduce_args(input, dim, keepdim, dtype, "sum")
    return bind(sum_p, (input,), params)


def mean(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    """Arithmetic mean over ``dim``; floating inputs only (as in PyTorch)."""
    input, params = _reduce_args(input, dim, keepdim, dtype, "mean")
    return bind(mean_p, (input,), params)


def _sum_method(self, dim=None, keepdim=False, *, dtype=None, axis=None):
    return sum(self, dim if axis is None else axis, keepdim, dtype=dtype)


def _mean_method(self, dim=None, keepdim=False, *, dtype=None, axis=None):
    return mean(self, dim if axis is None else axis, keepdim, dtype=dtype)


install({"sum": _sum_method, "mean": _mean_method})

_ = Tensor
