"""Argument coercion for the PyTorch-facing functions, and the Tensor-method installer.

Moved here from ``ops/_util.py``: only the surface (and the layers above it) coerce
arguments, and ``as_tensor_arg`` builds tensors with :func:`dyngraph.creation.tensor`,
which ``ops/`` must not import.

>>> import dyngraph as dg
>>> as_tensor_arg([1.0, 2.0]).shape
dg.Size([2])
"""

from __future__ import annotations

import operator

import numpy as np

from ..creation import tensor
from ..tensor import Tensor

_NUMBERS = (int, float, bool)


def operand(x):
    """Tensors and Python numbers pass through; NumPy scalars become Python numbers;
    anything array-like becomes a (non-grad) Tensor."""
    if isinstance(x, Tensor) or type(x) in _NUMBERS:
        return x
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (int, float)):
        return x
    if isinstance(x, np.ndarray):
        return Tensor._make(x, False, None, 0)
    return tensor(x)


def as_tensor_arg(x, op: str = "") -> Tensor:
    """Coerce a required tensor argument (numbers and arrays become tensors)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return Tensor._make(x, False, None, 0)
    try:
        return tensor(x)
    except TypeError as exc:
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}") from exc


def install(methods: dict) -> None:
    """Attach functions as Tensor methods (``x.exp()``), one definition each."""
    for name, fn in methods.items():
        setattr(Tensor, name, fn)


def normalize_dims(dim, ndim: int, op: str) -> tuple | None:
    """``dim`` (None, int, or sequence) as a sorted tuple of non-negative axes."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        dims = dim
    else:
        dims = (dim,)
    n = max(ndim, 1)
    out = []
    for d in dims:
        try:
            d = operator.index(d)  # ints, NumPy ints, 0-d integer tensors; not 1.5 or "a"
        except TypeError:
            raise TypeError(
                f"{op}(): argument 'dim' must be an int or a tuple of ints, not "
                f"{type(d).__name__} ({d!r})") from None
        if not -n <= d < n:
            raise IndexError(
                f"{op}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                f"but got {d})")
        out.append(d % n if ndim else 0)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: dim {list(dims)} appears multiple times in the list of dims")
    return tuple(sorted(out))
