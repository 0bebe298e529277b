"""dtype objects and PyTorch's type-promotion rules.

A :class:`dtype` wraps a NumPy dtype and carries PyTorch's name for it
(``dg.float32`` prints as ``dyngraph.float32``).  Promotion follows PyTorch,
not NumPy: operands are ranked by *category* (bool < integer < floating), and
within the winning category dimensioned tensors decide over 0-d tensors, which
decide over Python scalars.  So ``float32_tensor * 2.5`` stays float32 and
``int_tensor / int_tensor`` is float32 (the default float dtype).
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = [
    "dtype", "float16", "float32", "float64", "bfloat16", "int8", "int16",
    "int32", "int64", "uint8", "bool", "half", "float", "double", "short", "int",
    "long", "get_default_dtype", "set_default_dtype", "promote_types",
    "is_floating_point_dtype", "finfo", "iinfo",
]

_builtin_bool = bool
_builtin_float = float
_builtin_int = int


class dtype:  # noqa: N801 - PyTorch's spelling
    """A tensor element type (``dg.float32``, ``dg.int64``, ...)."""

    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "category")

    def __init__(self, name: str, np_dtype, category: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category  # 0 bool, 1 integer, 2 floating
        self.is_floating_point = category == 2
        self.is_signed = self.np.kind in "if" or category == 2
        self.itemsize = self.np.itemsize

    def __repr__(self) -> str:
        return f"dyngraph.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def is_complex(self) -> _builtin_bool:
        return False

    def to_complex(self):  # pragma: no cover - complex dtypes are not supported
        raise TypeError("dyngraph has no complex dtypes")


float16 = dtype("float16", np.float16, 2)
float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 2)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 1)
int32 = dtype("int32", np.int32, 1)
int64 = dtype("int64", np.int64, 1)
uint8 = dtype("uint8", np.uint8, 1)
bool = dtype("bool", np.bool_, 0)


class _Bfloat16(dtype):
    """``dg.bfloat16``: ml_dtypes' NumPy extension type (NumPy kind "V", not "f": test
    floating-ness with is_floating_point_dtype, never with dtype.kind).

    ml_dtypes is imported on first use of the NumPy dtype (``.np``), not with dyngraph: its
    import registers casts and loops for all of its types and takes ~0.7-0.9 s (ml_dtypes 0.7
    on NumPy 2.4), most of ``import dyngraph``.  A bfloat16 array can only exist once
    ml_dtypes is imported, and every way into dyngraph looks its dtype up in ``_BY_NP``, whose
    miss hook loads it (:func:`is_bfloat16` tells the dtype by name without importing)."""

    __slots__ = ()

    def __init__(self):
        self.name = "bfloat16"
        self.category = 2
        self.is_floating_point = True
        self.is_signed = True
        self.itemsize = 2

    @property
    def np(self):
        return _load_bfloat16()


def _load_bfloat16() -> np.dtype:
    """``np.dtype(ml_dtypes.bfloat16)``, importing ml_dtypes and registering the dtype the
    first time (``_BY_NP``; the compiled bind's bfloat16 test, ``_speedups``)."""
    global _BF16
    if _BF16 is None:
        import ml_dtypes  # noqa: PLC0415  (on first use: see _Bfloat16)

        npd = np.dtype(ml_dtypes.bfloat16)
        _BY_NP[npd] = bfloat16
        for hook in _BF16_HOOKS:
            hook(npd)
        _BF16 = npd
    return _BF16


_BF16: np.dtype | None = None
_BF16_HOOKS: list = []      # called with the NumPy dtype when it is loaded (the C bind's test)


def on_bfloat16(hook) -> None:
    """Call ``hook(np_dtype)`` when bfloat16's NumPy dtype is loaded (now, if it is)."""
    _BF16_HOOKS.append(hook)
    if _BF16 is not None:
        hook(_BF16)


def is_bfloat16(np_dtype) -> _builtin_bool:
    """Whether a NumPy dtype is ml_dtypes' bfloat16, without importing ml_dtypes.

    >>> is_bfloat16(np.dtype("float16"))
    False
    """
    return np_dtype.kind == "V" and np_dtype.name == "bfloat16" and np_dtype.itemsize == 2


class _ByNp(dict):
    """NumPy dtype -> dyngraph dtype; a bfloat16 key not seen yet loads it (see _Bfloat16)."""

    def __missing__(self, key):
        if isinstance(key, np.dtype) and is_bfloat16(key):
            _load_bfloat16()
            if key in self:
                return dict.__getitem__(self, key)
        raise KeyError(key)


bfloat16 = _Bfloat16()

half, float, double = float16, float32, float64
short, int, long = int16, int32, int64

ALL_DTYPES = (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, bool)
_BY_NP = _ByNp((d.np, d) for d in ALL_DTYPES if d is not bfloat16)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
if "ml_dtypes" in sys.modules:    # imported already: nothing to save by waiting
    _load_bfloat16()


def _by_name(name: str) -> dtype:
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype) -> dtype:
    """The dyngraph dtype for a NumPy dtype; raises TypeError for unsupported ones."""
    try:
        return _BY_NP[np_dtype]
    except KeyError:
        pass
    np_dtype = np.dtype(np_dtype)
    try:
        return _BY_NP[np_dtype]     # (the first bfloat16 loads it: _ByNp)
    except KeyError:
        pass
    if np_dtype.kind == "u" and np_dtype.itemsize > 1:
        raise TypeError(f"dyngraph does not support {np_dtype} (only uint8 among unsigned types)")
    raise TypeError(f"dyngraph does not support the NumPy dtype {np_dtype}")


def to_numpy_dtype(d) -> np.dtype:
    """Accept a dyngraph dtype, a NumPy dtype, a Python type or a dtype name."""
    tp = type(d)
    if tp is dtype or tp is _Bfloat16:
        return d.np
    if d is _builtin_float:
        return _default_float.np
    if d is _builtin_int:
        return np.dtype(np.int64)
    if d is _builtin_bool:
        return np.dtype(np.bool_)
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d].np
    return from_numpy_dtype(d).np


def as_dtype(d) -> dtype:
    """Normalise anything :func:`to_numpy_dtype` accepts into a dyngraph dtype."""
    tp = type(d)
    if tp is dtype or tp is _Bfloat16:
        return d
    return _BY_NP[to_numpy_dtype(d)]


_default_float = float32


def get_default_dtype() -> dtype:
    """The dtype of new floating tensors (float32 unless changed)."""
    return _default_float


def set_default_dtype(d) -> None:
    """Set the dtype used for floating tensors created from Python floats."""
    global _default_float
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating dtypes are allowed, got {d}")
    _default_float = d


def default_float_np() -> np.dtype:
    return _default_float.np


def is_floating_point_dtype(np_dtype) -> _builtin_bool:
    """Whether a NumPy dtype is floating point: the one place that decides it.

    NumPy's kind ``"f"``, plus ml_dtypes' bfloat16 (kind ``"V"``, and
    ``np.issubdtype(bfloat16, np.floating)`` is False), which PyTorch treats
    as a float like any other.  Test floatness with this, never with ``.kind``:

    >>> is_floating_point_dtype(bfloat16.np), is_floating_point_dtype(np.dtype("int64"))
    (True, False)
    """
    return np_dtype.kind == "f" or is_bfloat16(np_dtype)


def _category(np_dtype) -> _builtin_int:
    return 2 if is_floating_point_dtype(np_dtype) else (0 if np_dtype.kind == "b" else 1)


def promote_types(a, b) -> dtype:
    """The smallest dtype both ``a`` and ``b`` convert to (PyTorch's table)."""
    return _BY_NP[_promote_np(to_numpy_dtype(a), to_numpy_dtype(b))]


def _promote_np(a: np.dtype, b: np.dtype) -> np.dtype:
    if a is b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        # PyTorch: the higher category wins with its own dtype (int64 + float32 -> float32),
        # where NumPy would widen (float64).
        return a if ca > cb else b
    # Within one category NumPy's table agrees with PyTorch's for the dtypes we support;
    # ml_dtypes' bfloat16 already promotes as PyTorch's does (with float16 -> float32).
    return np.promote_types(a, b)


_SCALAR_CATEGORY = {_builtin_bool: 0, _builtin_int: 1, _builtin_float: 2}


def result_np_dtype(arrays, scalars=()) -> np.dtype:
    """Result dtype for arrays (any ndim) and Python scalars, PyTorch-style.

    ``arrays`` holds the operands that are tensors; ``scalars`` the Python
    numbers.  Dimensioned tensors outrank 0-d tensors within a category, and
    both outrank Python scalars.
    """
    dim_dt = None
    zero_dt = None
    for a in arrays:
        dt = a.dtype
        if a.ndim:
            dim_dt = dt if dim_dt is None else _promote_np(dim_dt, dt)
        else:
            zero_dt = dt if zero_dt is None else _promote_np(zero_dt, dt)
    result = dim_dt
    if zero_dt is not None:
        if result is None or _category(zero_dt) > _category(result):
            result = zero_dt
    if scalars:
        cat = max(_SCALAR_CATEGORY.get(type(s), 2) for s in scalars)
        if result is None:
            result = (np.dtype(np.bool_), np.dtype(np.int64), _default_float.np)[cat]
        elif cat > _category(result):
            result = np.dtype(np.int64) if cat == 1 else _default_float.np
    return result


class finfo:  # noqa: N801
    """Machine limits of a floating dtype (``dg.finfo(dg.float32).eps``)."""

    def __init__(self, d=None):
        info = np.finfo(to_numpy_dtype(d if d is not None else _default_float))
        self.bits, self.eps, self.max, self.min = info.bits, _builtin_float(info.eps), _builtin_float(info.max), _builtin_float(info.min)
        self.tiny = self.smallest_normal = _builtin_float(info.tiny)
        self.resolution = _builtin_float(info.resolution)
        self.dtype = as_dtype(d if d is not None else _default_float)


class iinfo:  # noqa: N801
    """Limits of an integer dtype."""

    def __init__(self, d):
        info = np.iinfo(to_numpy_dtype(d))
        self.bits, self.max, self.min = info.bits, _builtin_int(info.max), _builtin_int(info.min)
        self.dtype = as_dtype(d)
