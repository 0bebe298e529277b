"""The ``_data`` of a pending tensor under ``dg.autobatch`` (shape and dtype known, values not).

Separate from the interpreter so that cells.py and interpreter.py both import it without
importing each other.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Lazy"]


class _Flags:
    """``Lazy.flags``: in-place writers take their copying branch (``writeable`` False)."""

    __slots__ = ("lazy",)
    c_contiguous = True
    f_contiguous = False
    owndata = True

    def __init__(self, lazy):
        self.lazy = lazy

    @property
    def writeable(self):
        node = self.lazy.node
        if node.prim.is_view:
            raise NotImplementedError(
                f"dg.autobatch: in-place write into a view ('{node.prim.name}' of shape "
                f"{list(self.lazy.shape)}) of a pending tensor; under autobatch a view does not "
                "share memory with its base. clone() the tensor first, or write outside the context")
        return False


class Lazy:
    """The ``_data`` of a pending tensor: ``shape``/``dtype``/``ndim``/``size`` are known.

    Reading values through it (``np.asarray``, indexing, arithmetic, any other array
    attribute) forces the value, so library code that reads ``._data`` directly is
    correct, only not batched.
    """

    __slots__ = ("shape", "dtype", "ndim", "size", "node", "k")
    device = None  # CPU (backend.device_of)
    base = None    # a pending value is never a view of another array (views are copies here)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def flags(self):
        return _Flags(self)

    def value(self) -> np.ndarray:
        """The array (evaluates the pending subgraph; materialises the tensor if alive)."""
        return self.node.interp.value_of(self)

    def __array__(self, dtype=None, copy=None):
        a = self.value()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.value(), name)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.may_share_memory or func is np.shares_memory:
            return False   # a pending value is never a view of anything (views are copies here)
        return func(*_unlazy(args), **{k: _unlazy(v) for k, v in kwargs.items()})

    def __repr__(self) -> str:
        return f"<pending {self.node.prim.name} output shape={list(self.shape)} dtype={self.dtype}>"

    def __len__(self):
        return len(self.value())

    def __iter__(self):
        return iter(self.value())

    def __getitem__(self, key):
        return self.value()[key]

    def __bool__(self):
        return bool(self.value())

    def __float__(self):
        return float(self.value())

    def __int__(self):
        return int(self.value())

    def __index__(self):
        return int(self.value())

    __hash__ = object.__hash__


def _unlazy(a):
    if type(a) is Lazy:
        return a.value()
    if type(a) in (tuple, list):
        return type(a)(_unlazy(x) for x in a)
    return a


def _forward(name):
    def method(self, *args):
        return getattr(self.value(), name)(*(a.value() if type(a) is Lazy else a for a in args))

    method.__name__ = name
    return method


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "rfloordiv", "mod", "pow", "matmul", "neg", "abs", "invert", "and", "or", "xor",
              "lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Lazy, f"__{_name}__", _forward(f"__{_name}__"))
Lazy.__hash__ = object.__hash__
