"""PyTorch-style ``repr`` for tensors: ``tensor([1., 2.], grad_fn=<MulBackward0>)``."""

from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .backend import host_array

_OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None) -> None:
    """Control how tensors print (same arguments as ``torch.set_printoptions``)."""
    if profile == "full":
        _OPTIONS.update(threshold=np.inf)
    elif profile == "short":
        _OPTIONS.update(precision=2, threshold=1000, edgeitems=2)
    elif profile == "default":
        _OPTIONS.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                 ("linewidth", linewidth)):
        if v is not None:
            _OPTIONS[k] = v
    _OPTIONS["sci_mode"] = sci_mode


def _float_formatter(a: np.ndarray):
    finite = a[np.isfinite(a)] if a.size else a
    prec = _OPTIONS["precision"]
    if finite.size == 0:
        return lambda v: _special(v) or f"{v:.{prec}f}"
    absvals = np.abs(finite.astype(np.float64))
    amax, nonzero = absvals.max(), absvals[absvals > 0]
    amin = nonzero.min() if nonzero.size else 0.0
    integral = bool(np.all(finite == np.round(finite)))
    sci = _OPTIONS["sci_mode"]
    if sci is None:
        # PyTorch's rule: a range over 1000x or values over 1e8 (and, for non-integral
        # values, anything under 1e-4) switch to scientific notation
        sci = amax > 1e8 or (amin > 0 and amax / amin > 1000.0) or \
            (not integral and 0 < amin < 1e-4)
    if integral and not sci:
        width = max(len(f"{int(v)}") for v in finite.flat) + 1
        return lambda v: _special(v) or f"{v:.0f}.".rjust(width)
    if sci:
        # every entry takes the width of the widest one, so positive numbers get the
        # leading space that lines them up with negative ones (as PyTorch prints)
        width = max(len(f"{v:.{prec}e}") for v in finite.flat)
        return lambda v: (_special(v) or f"{v:.{prec}e}").rjust(width)
    width = max(len(f"{v:.{prec}f}") for v in finite.flat)
    return lambda v: (_special(v) or f"{v:.{prec}f}").rjust(width)


def _special(v) -> str | None:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def format_array(a: np.ndarray, prefix: str) -> str:
    if _dt.is_bfloat16(a.dtype):
        a = a.astype(np.float32)   # exact; NumPy's float formatting only applies to kind "f"
    if a.dtype.kind == "f":
        fmt = {"float_kind": _float_formatter(a)}
    elif a.dtype.kind == "b":
        width = 5 if (a.size and not a.all()) else 4  # PyTorch right-aligns " True" next to "False"
        fmt = {"bool": lambda v: ("True" if v else "False").rjust(width)}
    else:
        fmt = None
    if a.size == 0:
        return "[]"
    return np.array2string(
        a, separator=", ", prefix=prefix, formatter=fmt, threshold=_OPTIONS["threshold"],
        edgeitems=_OPTIONS["edgeitems"], max_line_width=_OPTIONS["linewidth"])


def tensor_repr(t) -> str:
    a = host_array(t._data)
    prefix = "tensor("
    body = format_array(a, prefix)
    extras = []
    if a.size == 0 and a.ndim != 1:
        extras.append(f"size={tuple(a.shape)}")
    implied = {_dt.get_default_dtype().np, np.dtype(np.int64), np.dtype(np.bool_)}
    if a.dtype not in implied:
        extras.append(f"dtype={t.dtype}")
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    if t._fn is not None:
        extras.append(f"grad_fn=<{t._fn.name()}>")
    elif t._rg:
        extras.append("requires_grad=True")
    tail = "".join(", " + e for e in extras)
    return f"{prefix}{body}{tail})"
