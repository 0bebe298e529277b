"""Array-module selection: NumPy on the CPU, CuPy on NVIDIA GPUs.

Primitive implementations call :func:`xp` to get the module that owns an
array, so one implementation serves both devices.  CuPy is imported lazily
and only when a GPU tensor is requested.
"""

from __future__ import annotations

import numpy as np

from .errors import DeviceStringError

__all__ = ["device", "xp", "is_array", "cuda_available", "get_cupy"]

_cupy = None
_cupy_checked = False


def get_cupy():
    """The cupy module, or None when it is not installed / has no GPU."""
    global _cupy, _cupy_checked
    if not _cupy_checked:
        _cupy_checked = True
        try:
            import cupy  # noqa: PLC0415  (CuPy: optional dependency, imported on first use (GPU only))

            cupy.cuda.runtime.getDeviceCount()
            _cupy = cupy
        except Exception:
            _cupy = None
    return _cupy


def cuda_available() -> bool:
    return get_cupy() is not None


ARRAY_TYPES: tuple = (np.ndarray,)


def _register_cupy_types():
    global ARRAY_TYPES
    cp = get_cupy()
    if cp is not None and cp.ndarray not in ARRAY_TYPES:
        ARRAY_TYPES = (np.ndarray, cp.ndarray)


def xp(a):
    """The array module (numpy or cupy) that owns ``a``."""
    if type(a) is np.ndarray or not hasattr(a, "__cuda_array_interface__"):
        return np
    return get_cupy()


def is_array(a) -> bool:
    return isinstance(a, ARRAY_TYPES) or hasattr(a, "__cuda_array_interface__")


class device:  # noqa: N801 - PyTorch's spelling
    """A device: ``dg.device("cpu")`` or ``dg.device("cuda", 0)``."""

    __slots__ = ("type", "index")

    def __init__(self, type: str | device = "cpu", index: int | None = None):
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if ":" in type:
            type, idx = type.split(":", 1)
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise DeviceStringError(f"unknown device type {type!r}: expected 'cpu' or 'cuda[:N]'")
        self.type = type
        self.index = index if type == "cuda" else None

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))


CPU = device("cpu")


def device_of(a) -> device:
    if type(a) is np.ndarray:
        return CPU
    dev = getattr(a, "device", None)
    if dev is not None and hasattr(a, "__cuda_array_interface__"):
        return device("cuda", int(getattr(dev, "id", 0)))
    return CPU


def host_array(a) -> np.ndarray:
    """``a`` as a NumPy array on the CPU (a copy only when it lives on a GPU).

    >>> host_array(np.zeros(2)).shape
    (2,)
    """
    return a if type(a) is np.ndarray else move_to(a, device("cpu"))


def move_to(a, dev: device):
    """Copy array ``a`` to device ``dev`` (no copy when it is already there)."""
    if dev.type == "cpu":
        if type(a) is np.ndarray:
            return a
        return a.get() if hasattr(a, "get") else np.asarray(a)
    cp = get_cupy()
    if cp is None:
        raise RuntimeError(
            "a CUDA device was requested but CuPy with a working GPU is not available; "
            "install cupy (pip install cupy-cuda12x) on a machine with an NVIDIA GPU"
        )
    _register_cupy_types()
    with cp.cuda.Device(dev.index or 0):
        return cp.asarray(a)
