"""The ``_data`` of a pending tensor under ``dg.autobatch`` (shape and dtype known, values not).

Separate from the interpreter so that cells.py and interpreter.py both import it without
importing each other.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Lazy", "Consts", "CONST_MAX"]


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


#: a cell argument that is a constant tensor of at most this many elements (a label, an
#: index) is copied into its :class:`Consts` when the call is recorded
CONST_MAX = 64


class Consts:
    """The values of one constant argument of a cell, copied when each call is recorded.

    A cell call's constant tensor argument (``dg.tensor([label])`` of a per-node loss:
    not pending, not a parameter, no grad, at most :data:`CONST_MAX` elements of a
    numeric dtype) is not kept in the pending node: its value is copied into row ``n``
    of ``buf`` (one per interpreter, template and argument position: the same shape and
    dtype in every call) and ``seqs[n]`` notes the node's ``seq``; the node's argument is
    this object.  Evaluation then takes a group's values with one NumPy gather instead
    of reading thousands of small tensors scattered over the heap (~1 us each, the first
    touch of cold objects), and dropping the node's arguments frees nothing per member.
    Rows are appended in recording order, so ``seqs[:n]`` is increasing.

    >>> c = Consts((1,), np.dtype(np.int64))
    >>> c.put(np.array([7]), 3); c.put(np.array([9]), 5)
    >>> c.take(np.array([5, 3])).tolist()
    [[9], [7]]
    """

    __slots__ = ("buf", "seqs", "n", "cap", "row_bytes", "shape", "dtype")

    def __init__(self, shape, dtype, cap: int = 64):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.buf = np.empty((cap, *self.shape), dtype)
        self.seqs = np.empty(cap, np.int64)
        self.n = 0
        self.cap = cap
        self.row_bytes = int(np.prod(self.shape, dtype=np.int64)) * dtype.itemsize

    def grow(self) -> None:
        """Double the capacity (the rows so far copied over)."""
        cap = 2 * self.cap
        buf = np.empty((cap, *self.shape), self.dtype)
        buf[:self.n] = self.buf[:self.n]
        seqs = np.empty(cap, np.int64)
        seqs[:self.n] = self.seqs[:self.n]
        self.buf, self.seqs, self.cap = buf, seqs, cap

    def fits(self, d) -> bool:
        """``d`` (a tensor's ``_data``) can be copied into a row (C: the same test)."""
        return type(d) is np.ndarray and d.flags.c_contiguous and d.nbytes == self.row_bytes

    def put(self, d, seq: int) -> None:
        """Append ``d``'s values as the row of the node numbered ``seq`` (the Python
        reference of ``dyngraph._autobatch.record_cell``'s copy)."""
        if self.n == self.cap:
            self.grow()
        self.buf[self.n] = d
        self.seqs[self.n] = seq
        self.n += 1

    def take(self, seqs) -> np.ndarray:
        """A fresh array of the rows of nodes ``seqs`` (int64, increasing or not), in that order."""
        have = self.seqs[:self.n]
        r = np.searchsorted(have, seqs)
        if len(r) and (int(r.max()) >= self.n or not (have[r] == seqs).all()):
            raise RuntimeError("dg.autobatch: a cell's constant argument was not recorded (a bug)")
        if len(r) and int(r[-1]) - int(r[0]) == len(r) - 1 and (len(r) < 2 or (np.diff(r) == 1).all()):
            return self.buf[int(r[0]):int(r[0]) + len(r)].copy()
        return self.buf.take(r, axis=0)

    def __repr__(self) -> str:
        return f"<autobatch constants {list(self.shape)} {self.dtype}: {self.n} rows>"


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
