"""Small helpers shared by the ``dg.nn.functional`` modules."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..surface import elementwise as E
from ..surface._args import as_tensor_arg
from ..surface.reduction import sum as _sum
from ..tensor import Tensor


def as_tensor(x, op: str) -> Tensor:
    """``x`` as a Tensor (numbers and arrays are wrapped), naming ``op`` on failure."""
    if isinstance(x, Tensor):
        return x
    return as_tensor_arg(x, op)


def require_float(x: Tensor, op: str) -> None:
    """Raise a loud error for integer/bool inputs where floats are needed."""
    if not _dt.is_floating_point_dtype(x._data.dtype):
        raise RuntimeError(
            f"{op}: expected a floating-point input, got {x.dtype} (shape {list(x.shape)}); "
            "convert it with .float()")


def const(arr) -> Tensor:
    """A constant (no-grad) tensor around a NumPy array."""
    return Tensor._make(np.asarray(arr), False, None, 0)


def _pnorm(x, p, dim, keepdim=False):
    if p == 2:
        return E.sqrt(_sum(x * x, dim, keepdim=keepdim))
    if p == 1:
        return _sum(E.abs(x), dim, keepdim=keepdim)
    if math.isinf(p):
        raise NotImplementedError("normalize/pairwise_distance with p=inf needs a max reduction")
    return _sum(E.abs(x) ** p, dim, keepdim=keepdim) ** (1.0 / p)


def logsigmoid(input):
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large |x|."""
    return -(E.log1p(E.exp(-E.abs(input))) + E.relu(-input))


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """``||x1 - x2 + eps||_p`` over the last dimension."""
    d = x1 - x2 + eps
    return _pnorm(d, p, -1, keepdim=keepdim)
