"""The PyTorch surface of in-place operations: ``add_``, ``x += y``, ``zero_``, ``fill_``,
``copy_``, ``share_memory_``.

The machinery (leaf check, the version bump, writing into the tensor's buffer, rebasing a
view) is :func:`dyngraph.ops.inplace.apply_inplace`; the methods here compute out of place
with the surface functions and hand the result to it.  :mod:`dyngraph.surface.methods`
attaches them.
"""

from __future__ import annotations

import mmap

import numpy as np

from .._core.graph import bump_version
from .._core.state import STATE
from ..ops._util import operand
from ..ops.inplace import _check_target, _notify, _write, apply_inplace
from ..tensor import Tensor


def _binary_inplace(fn, name):
    def method(self, other, *args, **kwargs):
        other = operand(other)
        return apply_inplace(self, lambda s: fn(s, other, *args, **kwargs), name)

    method.__name__ = name
    return method


def _unary_inplace(fn, name):
    def method(self, *args, **kwargs):
        return apply_inplace(self, lambda s: fn(s, *args, **kwargs), name)

    method.__name__ = name
    return method


def zero_(self: Tensor) -> Tensor:
    """Fill with zeros in place."""
    return fill_(self, 0)


def fill_(self: Tensor, value) -> Tensor:
    """Fill with ``value`` (a number or a 0-d tensor) in place."""
    if isinstance(value, Tensor) and value._rg and STATE.grad_enabled:
        return apply_inplace(self, lambda s: s * 0 + value.to(s.dtype), "fill_")
    v = value.item() if isinstance(value, Tensor) else value
    _check_target(self, "fill_")
    if self._rg and STATE.grad_enabled:
        return apply_inplace(self, lambda s: s * 0 + v, "fill_")
    if self._data.flags.writeable:
        self._data.fill(v)
    else:
        _write(self, np.asarray(v, self._data.dtype), "fill_")  # read-only: copies, or refuses expands
    bump_version(self)
    _notify(self, v)
    return self


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast, cast to this dtype) into this tensor in place.

    Any dtype converts to any dtype, as in PyTorch: floats are truncated toward zero
    into integers, nonzero values become ``True`` in a bool tensor.

    >>> dg.zeros((), dtype=dg.long).copy_(dg.tensor(3.7))
    tensor(3)
    """
    src = operand(src)
    if not isinstance(src, Tensor):
        return fill_(self, src)
    if src._rg and STATE.grad_enabled or (self._rg and STATE.grad_enabled):
        def compute(s):
            v = src if src._data.dtype == s._data.dtype else src.to(s.dtype)
            if tuple(v.shape) != tuple(s.shape):
                v = v.expand(*s.shape)
            return s * 0 + v

        return apply_inplace(self, compute, "copy_")
    _check_target(self, "copy_")
    value = src._data
    from ..backend import device_of, move_to  # noqa: PLC0415

    if device_of(value) != device_of(self._data):
        value = move_to(value, device_of(self._data))
    if value.dtype != self._data.dtype:
        with np.errstate(over="ignore", invalid="ignore"):   # PyTorch converts silently
            value = value.astype(self._data.dtype)   # copy_ converts across every dtype pair
    _write(self, value, "copy_")
    bump_version(self)
    _notify(self, src)
    return self


def share_memory_(self: Tensor) -> Tensor:
    """Move this tensor's values into shared memory (an anonymous ``MAP_SHARED`` mapping).

    Processes forked afterwards (``dg.multiprocessing.Process`` with the default ``fork``
    start method) see each other's in-place writes, which is what Hogwild-style training
    needs.  Already-shared tensors and GPU tensors are returned as they are.

    >>> w = dg.zeros(3).share_memory_(); w.is_shared()
    True
    """
    data = self._data
    if is_shared(self) or not isinstance(data, np.ndarray):
        return self
    buf = mmap.mmap(-1, max(data.nbytes, 1))    # anonymous mappings are MAP_SHARED on POSIX
    shared = np.frombuffer(buf, dtype=data.dtype, count=data.size).reshape(data.shape)
    shared[...] = data
    self._data = shared
    return self


def is_shared(self: Tensor) -> bool:
    """Whether :meth:`share_memory_` moved this tensor (or the tensor it views) to shared memory."""
    base = self._data
    while base is not None:
        if isinstance(base, mmap.mmap):
            return True
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return False


def requires_grad_leaf_check(self):  # pragma: no cover - kept for API symmetry
    return self


