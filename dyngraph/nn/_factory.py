"""Helpers shared by layers: creating parameters with ``device=``/``dtype=`` factory kwargs."""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .parameter import Parameter


def new_param(shape, device=None, dtype=None) -> Parameter:
    """An uninitialised (zero) parameter; ``reset_parameters`` fills it."""
    shape = tuple(shape)
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"parameter sizes must be ints, got {d!r} in {list(shape)} (check the "
                            "layer's size arguments)")
        if d < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {d}: {list(shape)} "
                               "(a layer size argument is negative)")
    np_dtype = _dt.default_float_np() if dtype is None else _dt.to_numpy_dtype(dtype)
    t = Tensor._make(np.zeros(tuple(shape), dtype=np_dtype), False, None, 0)
    if device is not None:
        t = t.to(device)
    return Parameter(t)


def new_buffer(array, device=None) -> Tensor:
    t = Tensor._make(np.asarray(array), False, None, 0)
    if device is not None:
        t = t.to(device)
    return t


def float_dtype(dtype=None):
    return _dt.default_float_np() if dtype is None else _dt.to_numpy_dtype(dtype)


def check_input(x) -> None:
    """Loud error for non-tensors and integer inputs to layers that need floats.

    Raised inside ``forward``, the message gets the layer and its path prefixed by
    ``Module.__call__``.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"expected a dyngraph Tensor as input, got {type(x).__name__}")
    if not _dt.is_floating_point_dtype(x._data.dtype):
        raise RuntimeError(
            f"expected a floating-point input, got {x.dtype} of shape {list(x.shape)}; convert "
            "it with .float() (or .double() for a float64 model)")
