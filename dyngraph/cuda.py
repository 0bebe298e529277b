"""``dg.cuda``: the ``torch.cuda`` calls that ordinary scripts make.

dyngraph runs on NumPy, or on CuPy when a GPU and CuPy are present, so
``dg.cuda.is_available()`` tells whether ``device="cuda"`` will work.  The
boilerplate ``device = dg.device("cuda" if dg.cuda.is_available() else "cpu")``
then ports unchanged.

>>> dg.cuda.is_available()      # False on a machine without CuPy/GPU
False
"""

from __future__ import annotations

from .backend import cuda_available, get_cupy
from .random import manual_seed as _manual_seed

__all__ = ["amp", "is_available", "device_count", "current_device", "manual_seed", "manual_seed_all",
           "synchronize", "empty_cache"]


def is_available() -> bool:
    """Whether a GPU is usable (CuPy installed and a device present)."""
    return cuda_available()


def device_count() -> int:
    """Number of visible GPUs (0 without CuPy/GPU)."""
    cp = get_cupy()
    return 0 if cp is None else int(cp.cuda.runtime.getDeviceCount())


def current_device() -> int:
    """Index of the current GPU; raises when there is none (as PyTorch does)."""
    cp = get_cupy()
    if cp is None:
        raise RuntimeError("dg.cuda.current_device(): no GPU is available (CuPy with a CUDA "
                           "device is needed); check dg.cuda.is_available() first")
    return int(cp.cuda.runtime.getDevice())


def manual_seed(seed: int) -> None:
    """Seed the random generator.  dyngraph has one generator for every device, so this
    is ``dg.manual_seed(seed)``."""
    _manual_seed(seed)


manual_seed_all = manual_seed


def synchronize(device=None) -> None:
    """Wait for queued GPU work (a no-op without a GPU)."""
    cp = get_cupy()
    if cp is not None:
        cp.cuda.runtime.deviceSynchronize()


def empty_cache() -> None:
    """Release cached GPU memory blocks (a no-op without a GPU)."""
    cp = get_cupy()
    if cp is not None:
        cp.get_default_memory_pool().free_all_blocks()


class _CudaAmp:
    """``torch.cuda.amp.autocast`` / ``GradScaler`` (the older spellings of ``dg.amp``)."""

    @staticmethod
    def autocast(enabled: bool = True, dtype=None, cache_enabled: bool | None = None):
        from .amp import autocast  # noqa: PLC0415

        return autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    @staticmethod
    def GradScaler(*args, **kwargs):  # noqa: N802  (PyTorch's name)
        from .amp import GradScaler  # noqa: PLC0415

        return GradScaler("cuda", *args, **kwargs)


amp = _CudaAmp()
