"""Small helpers shared by the ``dg.nn.functional`` modules."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor


def as_tensor(x, op: str) -> Tensor:
    """``x`` as a Tensor (numbers and arrays are wrapped), naming ``op`` on failure."""
    if isinstance(x, Tensor):
        return x
    from ..ops._util import as_tensor_arg  # noqa: PLC0415

    return as_tensor_arg(x, op)


def require_float(x: Tensor, op: str) -> None:
    """Raise a loud error for integer/bool inputs where floats are needed."""
    if x._data.dtype.kind != "f":
        raise RuntimeError(
            f"{op}: expected a floating-point input, got {x.dtype} (shape {list(x.shape)}); "
            "convert it with .float()")


def const(arr) -> Tensor:
    """A constant (no-grad) tensor around a NumPy array."""
    return Tensor._make(np.asarray(arr), False, None, 0)
