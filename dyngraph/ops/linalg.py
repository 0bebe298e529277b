"""Linear algebra primitives: matmul (batched, broadcasting) and friends."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._util import as_tensor_arg, install
from .registry import bind, primitive

__all__ = ["matmul"]


def _check_matmul(x, y):
    if x.ndim == 0 or y.ndim == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {x.ndim}D and {y.ndim}D")
    kx = x.shape[-1]
    ky = y.shape[-2] if y.ndim >= 2 else y.shape[0]
    if kx != ky:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({_fmt(x.shape)} and {_fmt(y.shape)})")
    if x.dtype != y.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {x.dtype} != {y.dtype}")


def _fmt(shape):
    if len(shape) == 1:
        return f"1x{shape[0]}"
    return "x".join(str(s) for s in shape[-2:]) if len(shape) == 2 else "x".join(map(str, shape))


@primitive("matmul", save_inputs=True)
def matmul_p(x, y):
    if x.dtype is not y.dtype and x.dtype != y.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {x.dtype} != {y.dtype}")
    try:
        return np.matmul(x, y)
    except ValueError:
        _check_matmul(x, y)
        raise


def _sum_to(g, shape):
    from .reduction import sum_to_shape_p  # noqa: PLC0415

    return sum_to_shape_p(g, shape=tuple(shape))


def _unsq_last(a):
    from .shape import reshape_p  # noqa: PLC0415

    return reshape_p(a, shape=tuple(a.shape) + (1,))


def _unsq_second_last(a):
    from .shape import reshape_p  # noqa: PLC0415

    s = tuple(a.shape)
    return reshape_p(a, shape=s[:-1] + (1,) + s[-1:])


def _matmul_vjp_x(g, out, x, y):
    if x.ndim == 1 and y.ndim == 1:
        return g * y
    if y.ndim == 1:  # (..., n, k) @ (k,) -> (..., n)
        return _sum_to(_unsq_last(g) * y, x.shape)
    if x.ndim == 1:  # (k,) @ (..., k, m) -> (..., m)
        gx = matmul_p(y, _unsq_last(g))  # (..., k, 1)
        return _sum_to(_squeeze_last(gx), x.shape)
    gx = g @ y.mT  # operators: NumPy directly on arrays, dyngraph ops on Tensors
    return gx if gx.shape == x.shape else _sum_to(gx, x.shape)


def _squeeze_last(a):
    from .shape import reshape_p  # noqa: PLC0415

    return reshape_p(a, shape=tuple(a.shape)[:-1])


def _matmul_vjp_y(g, out, x, y):
    if x.ndim == 1 and y.ndim == 1:
        return g * x
    if x.ndim == 1:  # (k,) @ (..., k, m): gy = x[:, None] * g[..., None, :]
        return _sum_to(_unsq_last(x) * _unsq_second_last(g), y.shape)
    if y.ndim == 1:  # (..., n, k) @ (k,): gy = sum over ... of x^T g
        gy = matmul_p(x.mT, _unsq_last(g))  # (..., k, 1)
        return _sum_to(_squeeze_last(gy), y.shape)
    gy = x.mT @ g
    return gy if gy.shape == y.shape else _sum_to(gy, y.shape)


matmul_p.defvjp(_matmul_vjp_x, _matmul_vjp_y)


def matmul(input, other):  # noqa: A002
    """Matrix product with NumPy/PyTorch broadcasting of batch dimensions.

    >>> (dg.ones(2, 3) @ dg.ones(3, 4)).shape
    dyngraph.Size([2, 4])
    """
    input = as_tensor_arg(input, "matmul")
    other = as_tensor_arg(other, "matmul")
    return bind(matmul_p, (input, other))


def _matmul_method(self, other):
    return bind(matmul_p, (self, other if isinstance(other, Tensor) else as_tensor_arg(other, "matmul")))


def _rmatmul_method(self, other):
    return bind(matmul_p, (as_tensor_arg(other, "matmul"), self))


install({"matmul": matmul, "__matmul__": _matmul_method, "__rmatmul__": _rmatmul_method})
