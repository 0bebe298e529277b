"""``dg.accelerator``: PyTorch's device-generic accelerator API (``torch.accelerator``).

dyngraph's one accelerator is a CUDA GPU through CuPy (``dg.cuda``); without it
:func:`is_available` is ``False`` and :func:`current_accelerator` is ``None``, as in a
CPU-only PyTorch, so the usual preamble ports::

    device = dg.accelerator.current_accelerator() if dg.accelerator.is_available() else "cpu"

>>> dg.accelerator.is_available()     # False without CuPy and a GPU
False
"""

from __future__ import annotations

import contextlib

from . import cuda as _cuda
from .backend import device as _device
from .backend import get_cupy

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "current_device_idx", "set_device_index", "set_device_idx", "device_index", "synchronize",
           "empty_cache", "memory_allocated", "max_memory_allocated"]


def is_available() -> bool:
    """Whether an accelerator (a CUDA GPU usable through CuPy) is present."""
    return _cuda.is_available()


def current_accelerator(check_available: bool = False):
    """The accelerator's device type (``device("cuda")``), or ``None`` when there is none."""
    return _device("cuda") if _cuda.is_available() else None


def device_count() -> int:
    """Number of accelerator devices (0 without a GPU)."""
    return _cuda.device_count() if _cuda.is_available() else 0


def _require(what: str) -> None:
    if not _cuda.is_available():
        raise RuntimeError(f"accelerator.{what}: cannot access accelerator device when none is "
                           "available (dyngraph's accelerator is a CUDA GPU through CuPy)")


def current_device_index() -> int:
    """Index of the current accelerator device; raises when there is none (as PyTorch does)."""
    _require("current_device_index")
    return _cuda.current_device()


current_device_idx = current_device_index


def set_device_index(device) -> None:
    """Make ``device`` (an index or ``"cuda:N"``) the current GPU."""
    _require("set_device_index")

    index = device if isinstance(device, int) else (_device(device).index or 0)
    get_cupy().cuda.Device(index).use()


set_device_idx = set_device_index


@contextlib.contextmanager
def device_index(device):
    """Use accelerator ``device`` inside the block (``None``: leave it as it is)."""
    if device is None:
        yield
        return
    old = current_device_index()
    set_device_index(device)
    try:
        yield
    finally:
        set_device_index(old)


def synchronize(device=None) -> None:
    """Wait for all queued work on the accelerator."""
    _require("synchronize")
    _cuda.synchronize(device)


def empty_cache() -> None:
    """Release cached accelerator memory."""
    _require("empty_cache")
    _cuda.empty_cache()


def memory_allocated(device=None) -> int:
    """Bytes currently held by tensors on the accelerator (CuPy's memory pool)."""
    _require("memory_allocated")

    return int(get_cupy().get_default_memory_pool().used_bytes())


def max_memory_allocated(device=None) -> int:
    """CuPy's pool does not track a peak; its total allocation is the upper bound returned."""
    _require("max_memory_allocated")

    return int(get_cupy().get_default_memory_pool().total_bytes())
