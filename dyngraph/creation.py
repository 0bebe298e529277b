"""Tensor creation: ``tensor``, ``zeros``, ``arange``, ``rand`` and friends.

All functions take PyTorch's keyword arguments (``dtype``, ``device``,
``requires_grad``, ``generator``...).  Python floats become the default float
dtype (float32), Python ints int64, as in PyTorch; NumPy arrays keep their
dtype.
"""

from __future__ import annotations

import math

import numpy as np

from . import dtypes as _dt
from . import random as _random
from ._core.graph import bump_version
from ._core.state import STATE, alias
from .backend import device as _device
from .backend import get_cupy, move_to
from .dtypes import default_float_np, to_numpy_dtype
from .errors import RandomRangeError
from .random import rng_of
from .size import Size
from .tensor import Tensor

_make = Tensor._make
_empty = np.empty
_array = np.array
_INT64 = np.dtype(np.int64)

__all__ = [
    "tensor", "as_tensor", "from_numpy", "from_dlpack", "asarray", "zeros", "ones", "full",
    "empty", "zeros_like", "ones_like", "full_like", "empty_like", "arange", "linspace",
    "logspace", "eye", "rand", "randn", "randint", "normal", "rand_like", "randn_like",
    "randint_like", "randperm", "bernoulli", "multinomial", "scalar_tensor", "tril_indices",
    "triu_indices", "is_tensor", "numel", "FloatTensor", "DoubleTensor", "HalfTensor",
    "LongTensor", "IntTensor", "ShortTensor", "ByteTensor", "BoolTensor",
]


def _infer_np_dtype(data) -> np.dtype | None:
    """PyTorch's dtype inference for nested Python data (None: let NumPy decide)."""
    kinds = set()
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple, range)):
            stack.extend(x)
        elif isinstance(x, np.generic):  # before float: np.float64 subclasses float, keeps its dtype
            kinds.add(("t", x.dtype))
        elif isinstance(x, bool):
            kinds.add("b")
        elif isinstance(x, int):
            kinds.add("i")
        elif isinstance(x, float):
            kinds.add("f")
        elif isinstance(x, Tensor):
            kinds.add(("t", x._data.dtype))
        elif isinstance(x, np.ndarray):
            kinds.add(("t", x.dtype))
        else:
            raise TypeError(f"tensor(): can't convert an element of type {type(x).__name__}")
    tensor_dts = [k[1] for k in kinds if isinstance(k, tuple)]
    if tensor_dts:
        dt = tensor_dts[0]
        for d in tensor_dts[1:]:
            dt = np.promote_types(dt, d)
        if "f" in kinds and dt.kind != "f":
            return _dt.default_float_np()
        return dt
    if "f" in kinds:
        return _dt.default_float_np()
    if "i" in kinds:
        return np.dtype(np.int64)
    if "b" in kinds:
        return np.dtype(np.bool_)
    return _dt.default_float_np()  # empty list


def _unwrap_nested(data):
    if isinstance(data, Tensor):
        return data._data if type(data._data) is np.ndarray else move_to(data._data, _device("cpu"))
    if isinstance(data, (list, tuple, range)):
        return [_unwrap_nested(x) for x in data]
    return data


def _to_array(data, dtype=None, copy: bool = True) -> np.ndarray:
    np_dt = _dt.to_numpy_dtype(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
        arr = data._data
        if np_dt is not None and arr.dtype != np_dt:
            return arr.astype(np_dt)
        return arr.copy() if copy else arr
    if isinstance(data, np.ndarray):
        if data.dtype.kind not in "biuf":
            raise TypeError(f"can't convert np.ndarray of type {data.dtype}: only bool, integer and floating arrays")
        _dt.from_numpy_dtype(data.dtype) if np_dt is None else None
        # copy=None: NumPy 2 copies only when the dtype changes (False would refuse)
        return np.array(data, dtype=np_dt, copy=copy or None) if (copy or np_dt is not None) else data
    if hasattr(data, "__cuda_array_interface__"):
        arr = data
        return arr.astype(np_dt) if np_dt is not None else (arr.copy() if copy else arr)
    if hasattr(data, "__dlpack__") and not isinstance(data, (list, tuple)):
        arr = np.from_dlpack(data)
        return np.array(arr, dtype=np_dt, copy=copy or None)
    if np_dt is None:
        np_dt = _infer_np_dtype(data)
    try:
        return np.array(_unwrap_nested(data), dtype=np_dt)
    except ValueError:
        msg = _ragged(data)
        if msg is None:
            raise
        raise ValueError(msg) from None


def _legacy_init(self, *args, dtype=None, requires_grad: bool = False):
    """``Tensor.__init__`` (attached by dyngraph.surface.methods): PyTorch's legacy constructor.

    >>> dg.Tensor(2, 3).shape
    dyngraph.Size([2, 3])
    """
    # PyTorch's legacy constructor: ``Tensor(2, 3)`` / ``Tensor(Size)`` is a shape
    # (zero-filled here), ``Tensor(data)`` copies data as the default float dtype,
    # ``Tensor(tensor)`` shares the tensor's array and dtype.
    np_dt = to_numpy_dtype(dtype) if dtype is not None else default_float_np()
    if len(args) == 1 and isinstance(args[0], Tensor):
        arr = args[0]._data if dtype is None else args[0]._data.astype(np_dt)
    elif len(args) == 1 and isinstance(args[0], Size):
        arr = np.zeros(tuple(args[0]), np_dt)
    elif args and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        arr = np.zeros(tuple(int(a) for a in args), np_dt)
    elif len(args) <= 1:
        arr = _to_array(args[0] if args else [], np_dt)
    else:
        raise TypeError(f"Tensor(): expected sizes (ints) or one data argument, got {args!r}")
    self._data = arr
    self._rg = False
    self._fn = None
    self._nr = 0
    self._grad = None
    self._vc = None
    self._base = None
    self._hooks = None
    if len(args) == 1 and isinstance(args[0], Tensor) and dtype is None:
        alias(args[0], self)     # Tensor(t) shares t's array: a pending value reaches it too
    if requires_grad:
        self.requires_grad_(True)


def _ragged(data) -> str | None:
    """PyTorch's message for nested sequences of unequal lengths (None if they are even).

    The expected shape is read along the first elements, then every sequence is checked.
    """
    shape = []
    x = data
    while isinstance(x, (list, tuple)):
        shape.append(len(x))
        if not x:
            break
        x = x[0]

    def walk(x, d):
        if d == len(shape):
            return f"expected a number, got a sequence at dim {d}" if isinstance(x, (list, tuple)) else None
        if not isinstance(x, (list, tuple)):
            return f"expected sequence of length {shape[d]} at dim {d} (got a {type(x).__name__})"
        if len(x) != shape[d]:
            return f"expected sequence of length {shape[d]} at dim {d} (got {len(x)})"
        for e in x:
            r = walk(e, d + 1)
            if r is not None:
                return r
        return None

    return walk(data, 0)


def _finish(arr, device, requires_grad) -> Tensor:
    if device is not None:
        arr = move_to(arr, _device(device))
    if arr.dtype.kind == "u" and arr.dtype.itemsize > 1:
        raise TypeError(f"dyngraph does not support {arr.dtype}")
    t = Tensor._make(arr, False, None, 0)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _fast_array(data: list, requires_grad) -> np.ndarray | None:
    """The array of ``tensor(data)`` for a non-empty list of Python ints and floats, or a list
    of such lists; None for anything else (and for int data with ``requires_grad``, which
    raises on the general path)."""
    fl = False
    for x in data:
        tx = type(x)
        if tx is int:
            continue
        if tx is float:
            fl = True
            continue
        if tx is list and x:
            for y in x:
                ty = type(y)
                if ty is float:
                    fl = True
                elif ty is not int:
                    return None
            continue
        return None
    if requires_grad and not fl:
        return None
    try:
        return np.array(data, _dt.default_float_np() if fl else _INT64)
    except ValueError:  # ragged: the general path raises PyTorch's message
        return None


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (a number, nested list, array or tensor).

    >>> dg.tensor([[1, 2], [3, 4]])          # int64
    >>> dg.tensor(0.5, requires_grad=True)   # 0-d float32 leaf
    """
    if dtype is None and device is None:
        # the common calls of a per-node model -- ``dg.tensor([i])`` of word ids and labels
        # (1.5 per tree node), ``dg.tensor([[0.5, 1.0]])`` of features, ``dg.tensor(0.5)``: a
        # Python int or float, a list of them or a list of such lists skips the general
        # inference (the same dtype: int64 for ints only, else the default float; bools,
        # NumPy scalars, tensors and anything else take the general path, as do ragged lists,
        # for its message, and ints with requires_grad, for its error)
        tx = type(data)
        arr = None
        if tx is list:
            if len(data) == 1 and type(data[0]) is int and not requires_grad:
                # one id: np.empty and an item write (0.13 us) instead of np.array's list
                # walk (0.21); an int out of int64's range raises OverflowError either way
                arr = _empty(1, _INT64)
                arr[0] = data[0]
            elif data:
                arr = _fast_array(data, requires_grad)
        elif tx is float:
            arr = _array(data, _dt.default_float_np())
        elif tx is int and not requires_grad:
            arr = _array(data, _INT64)
        if arr is not None:   # a leaf (requires_grad only reaches here for a float result)
            return _make(arr, True if requires_grad else False, None, 0)
    return _finish(_to_array(data, dtype, copy=True), device, requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like :func:`tensor` but shares memory with ``data`` when it can."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device) if (dtype is not None or device is not None) else data
    return _finish(_to_array(data, dtype, copy=False), device, False)


asarray = as_tensor


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing memory with NumPy array ``a`` (zero copy).

    >>> a = np.zeros(3); t = dg.from_numpy(a); a[0] = 1; t[0].item()
    1.0
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy expects an np.ndarray, got {type(a).__name__}")
    _dt.from_numpy_dtype(a.dtype)
    return Tensor._make(a, False, None, 0)


def from_dlpack(ext) -> Tensor:
    """Zero-copy import of any DLPack producer (a PyTorch tensor, a NumPy/CuPy array...)."""
    dev = ext.__dlpack_device__()[0] if hasattr(ext, "__dlpack_device__") else 1
    if dev == 1:  # kDLCPU
        arr = np.from_dlpack(ext)
    else:
        cp = get_cupy()
        if cp is None:
            raise RuntimeError("from_dlpack: the producer lives on a GPU but CuPy is not available")
        arr = cp.from_dlpack(ext)
    _dt.from_numpy_dtype(arr.dtype)
    return Tensor._make(arr, False, None, 0)


def _shape_arg(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s.item())
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"size must be a sequence of ints, got {s!r}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(int(s))
    return tuple(out)


def _np_ones(shape, dt) -> np.ndarray:
    """``np.ones(shape, dt)`` without its Python-level copyto (1.2 -> 0.6 us at 128 elements)."""
    a = np.empty(shape, dt)
    a.fill(1)
    return a


def _dtype_or_default(dtype) -> np.dtype:
    return _dt.to_numpy_dtype(dtype) if dtype is not None else _dt.default_float_np()


def _sizes(args: tuple, size, fn: str) -> tuple:
    """The shape from ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))`` (PyTorch accepts all three)."""
    if size is None:
        # the common f(4, 16): Python ints >= 0 are the shape as given (not bool: its type
        # is not int); anything else goes through _shape_arg's checks and conversions
        for s in args:
            if type(s) is not int or s < 0:
                break
        else:
            return args
    else:
        if args:
            raise TypeError(f"{fn}() got the size both positionally {args} and as size={size!r}")
        args = (size,) if isinstance(size, (tuple, list)) else (size,)
    return _shape_arg(args)


def zeros(*args, size=None, dtype=None, device=None, requires_grad=False, out=None) -> Tensor:
    """A tensor of zeros: ``dg.zeros(2, 3)``, ``dg.zeros((2, 3))`` or ``dg.zeros(size=(2, 3))``."""
    return _finish(np.zeros(_sizes(args, size, "zeros"), _dtype_or_default(dtype)), device, requires_grad)


def ones(*args, size=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor of ones (sizes as for :func:`zeros`)."""
    return _finish(_np_ones(_sizes(args, size, "ones"), _dtype_or_default(dtype)), device, requires_grad)


def empty(*args, size=None, dtype=None, device=None, requires_grad=False, memory_format=None) -> Tensor:
    """An uninitialised tensor (sizes as for :func:`zeros`): ``dg.empty(size=(2, 3))``."""
    return _finish(np.empty(_sizes(args, size, "empty"), _dtype_or_default(dtype)), device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if dtype is None:
        if isinstance(fill_value, bool):
            dtype = _dt.bool
        elif isinstance(fill_value, int):
            dtype = _dt.int64
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _finish(np.full(_shape_arg((size,) if isinstance(size, int) else tuple(size)),
                           fill_value, _dtype_or_default(dtype)), device, requires_grad)


def scalar_tensor(value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _finish(np.array(value, _dtype_or_default(dtype)), device, requires_grad)


_make = Tensor._make


def _like(t: Tensor, dtype, device):
    np_dt = _dt.to_numpy_dtype(dtype) if dtype is not None else t._data.dtype
    dev = device if device is not None else (None if t.device.type == "cpu" else t.device)
    return t._data.shape, np_dt, dev


def zeros_like(input: Tensor, *, dtype=None, device=None, requires_grad=False, memory_format=None) -> Tensor:
    # the common call (a CPU tensor, no options): _like and _finish's work without their
    # frames (~0.3 us of zeros_like's 1.5 us, per_call.py); the input's dtype passed
    # _finish's check when it was made
    if dtype is None and device is None and not requires_grad:
        d = input._data
        if type(d) is np.ndarray:
            return _make(np.zeros(d.shape, d.dtype), False, None, 0)
    shape, np_dt, dev = _like(input, dtype, device)
    return _finish(np.zeros(shape, np_dt), dev, requires_grad)


def ones_like(input: Tensor, *, dtype=None, device=None, requires_grad=False, memory_format=None) -> Tensor:
    # the common call, as in zeros_like
    if dtype is None and device is None and not requires_grad:
        d = input._data
        if type(d) is np.ndarray:
            return _make(_np_ones(d.shape, d.dtype), False, None, 0)
    shape, np_dt, dev = _like(input, dtype, device)
    return _finish(_np_ones(shape, np_dt), dev, requires_grad)


def empty_like(input: Tensor, *, dtype=None, device=None, requires_grad=False, memory_format=None) -> Tensor:
    # the common call, as in zeros_like
    if dtype is None and device is None and not requires_grad:
        d = input._data
        if type(d) is np.ndarray:
            return _make(np.empty(d.shape, d.dtype), False, None, 0)
    shape, np_dt, dev = _like(input, dtype, device)
    return _finish(np.empty(shape, np_dt), dev, requires_grad)


def full_like(input: Tensor, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None) -> Tensor:
    shape, np_dt, dev = _like(input, dtype, device)
    return _finish(np.full(shape, fill_value, np_dt), dev, requires_grad)


def _num(x):
    return x.item() if isinstance(x, Tensor) else x


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 for int arguments."""
    start, end, step = _num(start), _num(end), _num(step)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step})")
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        np_dt = np.dtype(np.int64) if is_int else _dt.default_float_np()
    else:
        np_dt = _dt.to_numpy_dtype(dtype)
    n = max(0, math.ceil((end - start) / step))
    arr = (start + np.arange(n, dtype=np.float64 if np_dt.kind == "f" else np.int64) * step).astype(np_dt)
    return _finish(arr, device, requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if int(steps) < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    arr = np.linspace(_num(start), _num(end), int(steps), dtype=np.float64).astype(_dtype_or_default(dtype))
    return _finish(arr, device, requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    arr = np.logspace(_num(start), _num(end), int(steps), base=base).astype(_dtype_or_default(dtype))
    return _finish(arr, device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"eye: {name} must be greater or equal to 0, got {v}")
    return _finish(np.eye(n, m, dtype=_dtype_or_default(dtype)), device, requires_grad)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    r, c = np.tril_indices(row, offset, col)
    return _finish(np.stack([r, c]).astype(_dt.to_numpy_dtype(dtype or _dt.int64)), device, False)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    r, c = np.triu_indices(row, offset, col)
    return _finish(np.stack([r, c]).astype(_dt.to_numpy_dtype(dtype or _dt.int64)), device, False)


# -- random -----------------------------------------------------------------------

def rand(*args, size=None, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform samples on [0, 1): ``dg.rand(2, 3)`` or ``dg.rand(size=(2, 3))``."""
    np_dt = _dtype_or_default(dtype)
    arr = _random.uniform(_sizes(args, size, "rand"), np_dt, generator=generator)
    return _finish(arr, device, requires_grad)


def randn(*args, size=None, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Standard normal samples: ``dg.randn(2, 3)`` or ``dg.randn(size=(2, 3))``."""
    np_dt = _dtype_or_default(dtype)
    arr = _random.standard_normal(_sizes(args, size, "randn"), np_dt, generator)
    return _finish(arr, device, requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Integers in [low, high): ``dg.randint(10, (3,))``, ``dg.randint(2, 10, (3,))`` or
    ``dg.randint(10, size=(3,))``."""
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    elif high is None and size is not None:
        low, high = 0, low
    elif size is None:
        raise TypeError("randint() missing the size argument")
    low, high = _num(low), _num(high)
    if low >= high:
        raise RandomRangeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    np_dt = _dt.to_numpy_dtype(dtype) if dtype is not None else np.dtype(np.int64)
    arr = rng_of(generator).integers(low, high, size=_shape_arg((tuple(size),))).astype(np_dt)
    return _finish(arr, device, requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    np_dt = _dt.to_numpy_dtype(dtype) if dtype is not None else np.dtype(np.int64)
    return _finish(rng_of(generator).permutation(n).astype(np_dt), device, requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Normal samples; ``mean``/``std`` may be tensors (broadcast) or numbers with ``size``."""
    m = mean._data if isinstance(mean, Tensor) else mean
    s = std._data if isinstance(std, Tensor) else std
    shape = np.broadcast_shapes(np.shape(m), np.shape(s)) if size is None else _shape_arg((tuple(size),))
    if dtype is None:
        src = mean if isinstance(mean, Tensor) else (std if isinstance(std, Tensor) else None)
        np_dt = src._data.dtype if src is not None else _dt.default_float_np()
    else:
        np_dt = _dt.to_numpy_dtype(dtype)
    if np.ndim(m) == 0 and np.ndim(s) == 0:  # scaled in place, in the result's dtype
        arr = _random.normal(shape, np_dt, float(m), float(s), generator)
    else:
        arr = (m + s * _random.standard_normal(shape, np_dt, generator)).astype(np_dt)
    return _finish(arr, device, requires_grad)


def rand_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape, np_dt, dev = _like(input, dtype, device)
    return _finish(_random.uniform(shape, np_dt, generator=generator), dev, requires_grad)


def randn_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape, np_dt, dev = _like(input, dtype, device)
    return _finish(_random.standard_normal(shape, np_dt, generator), dev, requires_grad)


def randint_like(input: Tensor, low, high=None, *, generator=None, dtype=None, device=None) -> Tensor:
    if high is None:
        low, high = 0, low
    shape, np_dt, dev = _like(input, dtype, device)
    return _finish(rng_of(generator).integers(low, high, size=shape).astype(np_dt), dev, False)


def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    probs = input._data if p is None else np.full(input._data.shape, p)
    arr = (rng_of(generator).random(input._data.shape) < probs).astype(input._data.dtype)
    return _finish(arr, None, False)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    probs = np.asarray(input._data, dtype=np.float64)
    rng = rng_of(generator)
    rows = probs.reshape(-1, probs.shape[-1])
    if not np.isfinite(rows).all() or (rows < 0).any() or (rows.sum(axis=1) <= 0).any():
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or element < 0, "
                           "or a row sums to zero")
    out = np.empty((rows.shape[0], num_samples), np.int64)
    for i, row in enumerate(rows):
        if not replacement and num_samples > np.count_nonzero(row):
            raise RuntimeError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        out[i] = rng.choice(row.size, size=num_samples, replace=replacement, p=row / row.sum())
    return _finish(out.reshape(probs.shape[:-1] + (num_samples,)), None, False)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(t: Tensor) -> int:
    return t.numel()


def is_floating_point(input: Tensor) -> bool:
    """True for a floating-point tensor (bfloat16 included)."""
    return _dt.is_floating_point_dtype(input._data.dtype)


def is_complex(input: Tensor) -> bool:
    """True for a complex tensor (dyngraph has none)."""
    return input._data.dtype.kind == "c"


def is_nonzero(input: Tensor) -> bool:
    """The truth of a one-element tensor (an error for any other size, as in PyTorch)."""
    if input._data.size != 1:
        raise RuntimeError(f"Boolean value of Tensor with {'no values' if input._data.size == 0 else 'more than one value'}"
                           " is ambiguous")
    return bool(input._data.reshape(()))


def matrix_power(input: Tensor, n: int) -> Tensor:
    """``input`` multiplied by itself ``n`` times (``n < 0``: of the inverse); ``dg.linalg.matrix_power``."""
    from .linalg import matrix_power as _mp  # noqa: PLC0415  (dg.linalg imports this module)

    return _mp(input, n)


# -- Tensor.new_* and in-place random fills ------------------------------------------
# ``x.new_zeros(2, 3)`` etc. create a tensor with ``x``'s dtype and device (PyTorch's
# rule, also for ``new_tensor`` of Python ints); ``x.normal_()`` etc. refill ``x``.

def _new_like(self: Tensor, arr_fn, dtype, device, requires_grad) -> Tensor:
    np_dt = _dt.to_numpy_dtype(dtype) if dtype is not None else self._data.dtype
    dev = device if device is not None else (None if self.device.type == "cpu" else self.device)
    return _finish(arr_fn(np_dt), dev, requires_grad)


def new_tensor(self: Tensor, data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data``, with this tensor's dtype/device by default.

    >>> dg.zeros(2, dtype=dg.float64).new_tensor([1, 2]).dtype
    dyngraph.float64
    """
    if isinstance(data, Tensor):
        data = data._data
    return _new_like(self, lambda dt: _to_array(data, dt, copy=True), dtype, device, requires_grad)


def new_zeros(self: Tensor, *args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros of shape ``size`` with this tensor's dtype/device: ``x.new_zeros(2, 3)``."""
    return _new_like(self, lambda dt: np.zeros(_sizes(args, size, "new_zeros"), dt), dtype, device, requires_grad)


def new_ones(self: Tensor, *args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones of shape ``size`` with this tensor's dtype/device: ``x.new_ones((2, 3))``."""
    return _new_like(self, lambda dt: np.ones(_sizes(args, size, "new_ones"), dt), dtype, device, requires_grad)


def new_empty(self: Tensor, *args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uninitialised values of shape ``size`` with this tensor's dtype/device."""
    return _new_like(self, lambda dt: np.empty(_sizes(args, size, "new_empty"), dt), dtype, device, requires_grad)


def new_full(self: Tensor, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` everywhere, shape ``size``, this tensor's dtype/device: ``x.new_full((2,), 7.)``."""
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    shape = _shape_arg((size,) if isinstance(size, int) else (tuple(size),))
    return _new_like(self, lambda dt: np.full(shape, fill_value, dt), dtype, device, requires_grad)


def _refill(self: Tensor, values: np.ndarray, op: str) -> Tensor:
    """Overwrite ``self`` in place with freshly sampled ``values`` (no gradient flows
    to the old value, as in PyTorch)."""
    from .surface.inplace import _check_target, apply_inplace  # noqa: PLC0415  (the surface's method table imports this module)

    _check_target(self, op)
    if self._rg and STATE.grad_enabled:
        const = Tensor._make(values.astype(self._data.dtype), False, None, 0)
        return apply_inplace(self, lambda s: s * 0 + const, op)
    if self._data.flags.writeable:
        self._data[...] = values
    else:
        self._data = values.astype(self._data.dtype)
    bump_version(self)
    return self


def _check_float(self: Tensor, op: str) -> None:
    if self._data.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating point tensor, got {self.dtype} "
                        f"(shape {list(self.shape)}); convert with .float() first")


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Refill with samples of N(mean, std²) in place: ``m.weight.data.normal_(0, 0.02)``."""
    _check_float(self, "normal_")
    values = _random.normal(self._data.shape, self._data.dtype, mean, std, generator)
    return _refill(self, values, "normal_")


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None, **kwargs) -> Tensor:
    """Refill with samples of U(a, b) in place (PyTorch's keywords ``from``/``to`` work too)."""
    a, b = kwargs.pop("from", a), kwargs.pop("to", b)
    if kwargs:
        raise TypeError(f"uniform_() got unexpected keyword arguments {sorted(kwargs)}")
    _check_float(self, "uniform_")
    return _refill(self, _random.uniform(self._data.shape, self._data.dtype, a, b, generator), "uniform_")


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Refill with 0/1 samples, 1 with probability ``p`` (a number or a tensor)."""
    probs = p._data if isinstance(p, Tensor) else p
    return _refill(self, (rng_of(generator).random(self._data.shape) < probs).astype(np.float64), "bernoulli_")


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Refill with samples of an exponential distribution with rate ``lambd``."""
    _check_float(self, "exponential_")
    return _refill(self, rng_of(generator).exponential(1.0 / lambd, self._data.shape), "exponential_")


def _matrix_power_method(self: Tensor, n: int) -> Tensor:
    from .linalg import matrix_power  # noqa: PLC0415  (dg.linalg is imported lazily)

    return matrix_power(self, n)


def _pin_memory(self: Tensor, device=None) -> Tensor:
    """A copy for fast host-to-GPU transfer in PyTorch; dyngraph's CPU arrays are plain
    host memory already, so this is a copy (as PyTorch returns a new tensor)."""
    return self.clone()


def _to_sparse(self: Tensor, sparse_dim=None):
    """The COO sparse form (``dg.sparse``), differentiable with respect to this tensor."""
    from .sparse import to_sparse  # noqa: PLC0415  (dg.sparse imports this module)

    return to_sparse(self, sparse_dim)


def _to_sparse_csr(self: Tensor, dense_dim=None):
    """The CSR sparse form of a 2-D tensor (``dg.sparse``), differentiable with respect to it."""
    from .sparse import to_sparse_csr  # noqa: PLC0415  (dg.sparse imports this module)

    return to_sparse_csr(self)


def _layout(self: Tensor):
    from .sparse import strided  # noqa: PLC0415  (dg.sparse imports this module)

    return strided


# -- legacy typed constructors: dg.FloatTensor([1, 2]), dg.LongTensor(2, 3) ------------

class _LegacyTensorType(type):
    """``isinstance(x, dg.FloatTensor)`` is true for a float32 tensor, as in PyTorch."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj._data.dtype == _dt.to_numpy_dtype(cls.dtype)


class _LegacyTensor(metaclass=_LegacyTensorType):
    dtype = None

    def __new__(cls, *args) -> Tensor:
        if len(args) > 1:   # sizes: a 0-d integer tensor counts as a size (``LongTensor(t.max(), 2)``)
            args = tuple(int(a.item()) if isinstance(a, Tensor) and a.ndim == 0 and a._data.dtype.kind in "iu"
                         else a for a in args)
        return Tensor(*args, dtype=cls.dtype)


class FloatTensor(_LegacyTensor):
    """``FloatTensor(data)`` or ``FloatTensor(*sizes)``: a float32 tensor (legacy constructor)."""

    dtype = _dt.float32


class DoubleTensor(_LegacyTensor):
    """A float64 tensor from data or sizes (legacy constructor)."""

    dtype = _dt.float64


class HalfTensor(_LegacyTensor):
    """A float16 tensor from data or sizes (legacy constructor)."""

    dtype = _dt.float16


class LongTensor(_LegacyTensor):
    """An int64 tensor from data or sizes (legacy constructor)."""

    dtype = _dt.int64


class IntTensor(_LegacyTensor):
    """An int32 tensor from data or sizes (legacy constructor)."""

    dtype = _dt.int32


class ShortTensor(_LegacyTensor):
    """An int16 tensor from data or sizes (legacy constructor)."""

    dtype = _dt.int16


class ByteTensor(_LegacyTensor):
    """A uint8 tensor from data or sizes (legacy constructor)."""

    dtype = _dt.uint8


class BoolTensor(_LegacyTensor):
    """A bool tensor from data or sizes (legacy constructor)."""

    dtype = _dt.bool
