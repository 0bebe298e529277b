"""``dg.testing.assert_close``: PyTorch's closeness assertion for tensors, numbers and
nested sequences/mappings of them.

Default tolerances depend on the dtype, as in PyTorch (float32: rtol 1.3e-6, atol
1e-5; float64: 1e-7, 1e-7; float16: 1e-3, 1e-5; integers and bools: exact).

>>> dg.testing.assert_close(dg.tensor([1.0, 2.0]), dg.tensor([1.0, 2.0 + 1e-7]))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .tensor import Tensor

__all__ = ["assert_close"]

_DEFAULT_TOLS = {np.dtype(np.float16): (1e-3, 1e-5), np.dtype(np.float32): (1.3e-6, 1e-5),
                 np.dtype(np.float64): (1e-7, 1e-7)}


def _as_array(x):
    if isinstance(x, Tensor):
        return x.detach().cpu().numpy(), True
    if isinstance(x, (bool, int, float, np.number, np.bool_)):
        return np.asarray(x), False
    if isinstance(x, np.ndarray):
        return x, True
    return None, False


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: str | None = None) -> None:
    """Raise ``AssertionError`` unless ``|actual - expected| <= atol + rtol * |expected|``
    elementwise, with equal shapes (and dtypes, unless ``check_dtype=False``)."""
    if (rtol is None) != (atol is None):
        raise ValueError("assert_close: both 'rtol' and 'atol' must be either specified or omitted")
    _compare(actual, expected, rtol, atol, equal_nan, check_dtype, msg, "")


def _fail(msg, default):
    raise AssertionError(msg if msg is not None else default)


def _compare(actual, expected, rtol, atol, equal_nan, check_dtype, msg, where):
    a, a_is_tensor = _as_array(actual)
    e, e_is_tensor = _as_array(expected)
    if a is None or e is None:
        if isinstance(actual, Mapping) and isinstance(expected, Mapping):
            if set(actual) != set(expected):
                _fail(msg, f"The keys of the mappings do not match{where}: {sorted(map(str, actual))} "
                           f"vs {sorted(map(str, expected))}")
            for k in actual:
                _compare(actual[k], expected[k], rtol, atol, equal_nan, check_dtype, msg, f"{where}[{k!r}]")
            return
        if (isinstance(actual, Sequence) and isinstance(expected, Sequence)
                and not isinstance(actual, str) and not isinstance(expected, str)):
            if len(actual) != len(expected):
                _fail(msg, f"The length of the sequences mismatch{where}: {len(actual)} != {len(expected)}")
            for i, (x, y) in enumerate(zip(actual, expected, strict=True)):
                _compare(x, y, rtol, atol, equal_nan, check_dtype, msg, f"{where}[{i}]")
            return
        if actual == expected:
            return
        _fail(msg, f"Inputs are not close{where}: {actual!r} != {expected!r}")
    if a.shape != e.shape:
        _fail(msg, f"The values for attribute 'shape' do not match{where}: {list(a.shape)} != {list(e.shape)}.")
    if check_dtype and a_is_tensor and e_is_tensor and a.dtype != e.dtype:
        _fail(msg, f"The values for attribute 'dtype' do not match{where}: {a.dtype} != {e.dtype}.")
    if rtol is None:
        dt = np.result_type(a, e)
        rtol, atol = _DEFAULT_TOLS.get(dt, (0.0, 0.0))
    if a.dtype == np.bool_ or e.dtype == np.bool_:
        bad = a != e
    else:
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        close = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=equal_nan)
        bad = ~close
    if bad.any():
        n, total = int(bad.sum()), bad.size
        with np.errstate(all="ignore"):
            diff = np.abs(a.astype(np.float64) - e.astype(np.float64))[bad]
            rel = diff / np.maximum(np.abs(e.astype(np.float64))[bad], np.finfo(np.float64).tiny)
        _fail(msg, f"Tensor-likes are not close{where}!\n\nMismatched elements: {n} / {total} "
                   f"({100.0 * n / total:.1f}%)\nGreatest absolute difference: {np.max(diff)} "
                   f"(up to {atol} allowed)\nGreatest relative difference: {np.max(rel)} "
                   f"(up to {rtol} allowed)")
