"""Anomaly mode: find the forward operation whose backward produced NaN/Inf.

While enabled, each recorded node keeps the user's stack at creation; when a
backward rule returns a non-finite gradient the engine raises an error that
names the op and shows the line of user code that created it.
"""

from __future__ import annotations

import functools
import traceback

import numpy as np

from .._core.graph import capture_stack  # noqa: F401  (re-exported: the node-creation stack)
from ..dtypes import is_floating_point_dtype as _is_float_dtype
from .grad_mode import STATE

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled"]

def is_anomaly_enabled() -> bool:
    return STATE.anomaly


def describe_source(node) -> str | None:
    info = node.info
    if isinstance(info, dict) and info.get("traceback"):
        f = info["traceback"][-1]
        return f"{f.filename}:{f.lineno}: {f.line}"
    return None


def check_grads(node, grads) -> None:
    """Raise if any gradient ``node`` produced contains NaN (or Inf with check_inf)."""
    mode = STATE.anomaly_check_nan
    if not mode:
        return
    for i, g in enumerate(grads):
        if g is None:
            continue
        arr = g._data if hasattr(g, "_data") else g
        if not _is_float_dtype(arr.dtype):
            continue
        bad = np.isnan(arr).any()
        what = "nan"
        if not bad and mode == "inf":
            bad = not np.isfinite(arr).all()
            what = "inf"
        if bad:
            trace = _forward_trace(node)
            where = f"\nThe forward call that created it:\n{trace}" if trace else ""
            raise RuntimeError(
                f"Function '{node.name()}' returned {what} values in its {i}th output "
                f"(the gradient for input {i} of op '{node.prim.name}').{where}")


def _forward_trace(node) -> str:
    info = node.info
    if isinstance(info, dict) and info.get("traceback"):
        return "".join(traceback.format_list(info["traceback"][-6:]))
    return ""


def annotate_error(node, exc: BaseException) -> None:
    """Add to an error raised inside a node's backward where that op was created."""
    trace = _forward_trace(node)
    if trace and hasattr(exc, "add_note"):
        exc.add_note(f"Error detected in {node.name()} (anomaly mode). "
                     f"Traceback of the forward call that caused the error:\n{trace}")


def _check_mode(check_nan, check_inf):
    # STATE.anomaly_check_nan: False (no check), True (NaN) or "inf" (NaN and Inf)
    if check_inf or check_nan == "inf":
        return "inf"
    return bool(check_nan)


class detect_anomaly:  # noqa: N801
    """Context manager: record creation stacks and check every backward for NaN.

    >>> with dg.autograd.detect_anomaly():
    ...     loss = model(x); loss.backward()   # raises, naming the op and your line

    ``check_nan=True`` checks gradients for NaN (PyTorch's behaviour);
    ``check_inf=True`` also rejects infinities.  With ``check_nan=False`` only
    the creation stacks are recorded (shown by ``dg.autograd.graph.walk``).
    """

    def __init__(self, check_nan=True, check_inf: bool = False):
        self.check_nan = _check_mode(check_nan, check_inf)

    def __enter__(self):
        self._prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly = True
        STATE.anomaly_check_nan = self.check_nan
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:  # noqa: N801
    """Turn anomaly mode on or off (takes effect at once; also a context manager).

    >>> dg.autograd.set_detect_anomaly(True)
    >>> with dg.autograd.set_detect_anomaly(False): ...
    """

    def __init__(self, mode: bool, check_nan=True, check_inf: bool = False):
        self._prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly = bool(mode)
        STATE.anomaly_check_nan = _check_mode(check_nan, check_inf)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self._prev
        return False
