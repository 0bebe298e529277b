"""``Parameter`` and ``Buffer``: tensors that a :class:`~dyngraph.nn.Module` registers
automatically when they are assigned as attributes.

>>> w = dg.nn.Parameter(dg.zeros(3, 4))
>>> w.requires_grad
True
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .._core.state import alias
from ..creation import _to_array
from ..tensor import Tensor, _rebuild

__all__ = ["Parameter", "Buffer", "UninitializedParameter"]


def _source_array(data):
    if data is None:
        return np.empty((0,), dtype=np.float32)
    if isinstance(data, Tensor):
        return data._data

    return _to_array(data, None)


class Parameter(Tensor):
    """A leaf tensor that is a module parameter (``requires_grad=True`` by default).

    The parameter shares memory with ``data`` (no copy), as in PyTorch.

    >>> lin = dg.nn.Linear(2, 3)
    >>> isinstance(lin.weight, dg.nn.Parameter)
    True
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad: bool = True):
        t = Tensor._make(_source_array(data), False, None, 0, cls)
        if isinstance(data, Tensor):
            if data._vc is not None:
                t._vc = data._vc
            alias(data, t)   # shares data's array: a pending value (dg.autobatch) reaches t
        if requires_grad:
            if not _dt.is_floating_point_dtype(t._data.dtype):
                raise RuntimeError(
                    f"Only Tensors of floating point dtype can require gradients; got a "
                    f"{t.dtype} tensor of shape {list(t.shape)}: pass requires_grad=False or "
                    "convert it with .float()")
            t._rg = True
        return t

    def __init__(self, data=None, requires_grad: bool = True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (np.asarray(self._data), self._rg))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        t = Tensor._make(self._data.copy(), self._rg, None, 0, type(self))
        if self._grad is not None:
            t._grad = Tensor._make(self._grad._data.copy(), False, None, 0)
        memo[id(self)] = t
        return t


def _rebuild_parameter(data, requires_grad):
    return Parameter(_rebuild(np.array(data), False), requires_grad)


class UninitializedParameter(Parameter):
    """Placeholder type kept for API compatibility (lazy modules are not implemented)."""

    __slots__ = ()

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        raise NotImplementedError(
            "UninitializedParameter / Lazy* modules are not supported by dyngraph: give the "
            "input size explicitly (e.g. nn.Linear(in_features, out_features))")


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when assigned as an attribute.

    ``persistent=False`` keeps it out of ``state_dict()``.  Shares memory with ``data``.

    >>> m = dg.nn.Module()
    >>> m.running = dg.nn.Buffer(dg.zeros(3))
    >>> list(m.state_dict())
    ['running']
    """

    __slots__ = ("persistent",)

    def __new__(cls, data=None, *, persistent: bool = True):
        t = Tensor._make(_source_array(data), False, None, 0, cls)
        if isinstance(data, Tensor):
            t._rg = data._rg if data._fn is None else False
            if data._vc is not None:
                t._vc = data._vc
        t.persistent = bool(persistent)
        return t

    def __init__(self, data=None, *, persistent: bool = True):
        pass

    def __reduce_ex__(self, protocol):
        return (_rebuild_buffer, (np.asarray(self._data), self.persistent))

    def __deepcopy__(self, memo):
        t = Buffer(Tensor._make(self._data.copy(), False, None, 0), persistent=self.persistent)
        t._rg = self._rg
        memo[id(self)] = t
        return t


def _rebuild_buffer(data, persistent):
    return Buffer(_rebuild(np.array(data), False), persistent=persistent)
