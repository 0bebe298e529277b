"""``dg.cuda``: the ``torch.cuda`` calls that ordinary scripts make.

dyngraph runs on NumPy, or on CuPy when a GPU and CuPy are present, so
``dg.cuda.is_available()`` tells whether ``device="cuda"`` will work.  The
boilerplate ``device = dg.device("cuda" if dg.cuda.is_available() else "cpu")``
then ports unchanged.

>>> dg.cuda.is_available()      # False on a machine without CuPy/GPU
False
"""

from __future__ import annotations

from .amp import GradScaler, autocast
from .backend import cuda_available, get_cupy
from .backend import device as _device
from .random import manual_seed as _manual_seed

__all__ = ["amp", "is_available", "device_count", "current_device", "manual_seed", "manual_seed_all",
           "synchronize", "empty_cache", "is_initialized", "is_bf16_supported", "set_device", "get_device_name",
           "get_device_capability", "get_device_properties", "mem_get_info", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats", "Event"]


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


def is_initialized() -> bool:
    """Whether a GPU context exists (CuPy loaded with a device)."""
    return get_cupy() is not None


def _need_gpu(what: str):
    cp = get_cupy()
    if cp is None:
        raise RuntimeError(f"dg.cuda.{what}: no GPU is available (dyngraph reaches CUDA through CuPy, "
                           "which needs a CUDA device); check dg.cuda.is_available() first")
    return cp


def _index(device) -> int:
    if device is None:
        return int(get_cupy().cuda.runtime.getDevice())
    if isinstance(device, int):
        return device

    return _device(device).index or 0


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the GPU has bfloat16 arithmetic (compute capability 8.0+); False without a GPU."""
    if get_cupy() is None:
        return False
    return get_device_capability()[0] >= 8


def set_device(device) -> None:
    """Make ``device`` (an index, ``"cuda:N"`` or a ``dg.device``) the current GPU."""
    _need_gpu("set_device").cuda.Device(_index(device)).use()


def get_device_properties(device=None) -> dict:
    """CUDA's device properties (``name``, ``totalGlobalMem``, ``major``, ``minor``...) as CuPy reports them."""
    cp = _need_gpu("get_device_properties")
    props = cp.cuda.runtime.getDeviceProperties(_index(device))
    return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in props.items()}


def get_device_name(device=None) -> str:
    """The GPU's marketing name (``"NVIDIA H100 80GB HBM3"``)."""
    return str(get_device_properties(device)["name"])


def get_device_capability(device=None) -> tuple:
    """``(major, minor)`` compute capability."""
    props = get_device_properties(device)
    return int(props["major"]), int(props["minor"])


def mem_get_info(device=None) -> tuple:
    """``(free_bytes, total_bytes)`` of GPU memory."""
    cp = _need_gpu("mem_get_info")
    with cp.cuda.Device(_index(device)):
        free, total = cp.cuda.runtime.memGetInfo()
    return int(free), int(total)


def memory_allocated(device=None) -> int:
    """Bytes held by tensors in CuPy's memory pool (0 without a GPU, as PyTorch's CPU build says)."""
    cp = get_cupy()
    return 0 if cp is None else int(cp.get_default_memory_pool().used_bytes())


def memory_reserved(device=None) -> int:
    """Bytes CuPy's pool has reserved from the driver (0 without a GPU)."""
    cp = get_cupy()
    return 0 if cp is None else int(cp.get_default_memory_pool().total_bytes())


# CuPy's pool keeps no high-water mark; the reserved total bounds what was ever allocated.
max_memory_allocated = memory_reserved
max_memory_reserved = memory_reserved


def reset_peak_memory_stats(device=None) -> None:
    """Nothing to reset: see :func:`max_memory_allocated`."""
    _need_gpu("reset_peak_memory_stats")


class Event:
    """A CUDA event for timing GPU work (``record``, ``synchronize``, ``elapsed_time`` in ms).

    >>> start, end = dg.cuda.Event(enable_timing=True), dg.cuda.Event(enable_timing=True)
    >>> start.record(); y = model(x); end.record(); dg.cuda.synchronize()
    >>> start.elapsed_time(end)
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        cp = _need_gpu("Event")
        self._event = cp.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)

    def record(self, stream=None) -> None:
        self._event.record(stream)

    def synchronize(self) -> None:
        self._event.synchronize()

    def query(self) -> bool:
        return bool(self._event.done)

    def wait(self, stream=None) -> None:
        (stream or get_cupy().cuda.get_current_stream()).wait_event(self._event)

    def elapsed_time(self, end_event: Event) -> float:
        return float(get_cupy().cuda.get_elapsed_time(self._event, end_event._event))


class _CudaAmp:
    """``torch.cuda.amp.autocast`` / ``GradScaler`` (the older spellings of ``dg.amp``)."""

    @staticmethod
    def autocast(enabled: bool = True, dtype=None, cache_enabled: bool | None = None):
        return autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    @staticmethod
    def GradScaler(*args, **kwargs):
        return GradScaler("cuda", *args, **kwargs)

    @staticmethod
    def custom_fwd(fwd=None, *, cast_inputs=None):
        from .amp import custom_fwd  # noqa: PLC0415  (the older spelling of dg.amp.custom_fwd)

        return custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)

    @staticmethod
    def custom_bwd(bwd=None):
        from .amp import custom_bwd  # noqa: PLC0415  (the older spelling of dg.amp.custom_bwd)

        return custom_bwd(bwd, device_type="cuda")


amp = _CudaAmp()
