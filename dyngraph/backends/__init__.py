"""``dg.backends`` and the runtime switches scripts set in their preamble.

``dg.backends.cudnn``, ``dg.backends.cuda``, ``dg.backends.mps``, ``dg.backends.mkldnn``,
``dg.backends.openmp`` and ``dg.backends.mkl`` are modules, as in PyTorch, so
``import torch.backends.cudnn as cudnn`` ports.
``dg.backends.cudnn.deterministic = True``, ``dg.backends.cudnn.benchmark = False``,
``dg.use_deterministic_algorithms(True)``, ``dg.set_num_threads(1)`` port unchanged.
dyngraph's computations are deterministic already (NumPy/BLAS on one device), so
the flags are recorded and readable; ``set_num_threads`` limits the BLAS thread
pools (through ``threadpoolctl``, installed with scikit-learn).

>>> dg.set_num_threads(1); dg.get_num_threads()
1
"""

from __future__ import annotations

import os

from ..backend import device
from ..backend import device as _device
from ..ops import _gemm
from ._precision import get_float32_matmul_precision, set_float32_matmul_precision

__all__ = ["cudnn", "cuda", "mps", "mkldnn", "mkl", "openmp", "speedups", "set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads",
           "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "set_float32_matmul_precision",
           "get_float32_matmul_precision", "get_default_device", "set_default_device"]

_num_threads: int | None = None
_deterministic = False


def set_num_threads(num: int) -> None:
    """Limit the number of threads BLAS uses for dyngraph's matrix products."""
    global _num_threads
    num = int(num)
    if num < 1:
        raise ValueError(f"set_num_threads: expected a positive number of threads, got {num}")
    _num_threads = num
    # one thread: products may take MKL's sequential kernels (ops/_gemm.py), more: NumPy's BLAS
    _gemm.set_single_thread(num == 1)
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415  (threadpoolctl: optional; without it the count is only recorded)
    except ImportError:  # recorded only; OMP_NUM_THREADS still applies
        return
    threadpool_limits(limits=num, user_api="blas")


_num_interop_threads = 1


def set_num_interop_threads(num: int) -> None:
    """Record PyTorch's inter-op thread count: dyngraph runs ops one after another in the
    calling thread, so only the value is kept (``get_num_interop_threads`` returns it)."""
    global _num_interop_threads
    num = int(num)
    if num < 1:
        raise RuntimeError(f"set_num_interop_threads: number of interop threads must be positive, got {num}")
    _num_interop_threads = num


def get_num_interop_threads() -> int:
    """The value :func:`set_num_interop_threads` recorded (1 by default: ops run in order)."""
    return _num_interop_threads


def get_num_threads() -> int:
    """The thread count set by :func:`set_num_threads` (else ``OMP_NUM_THREADS`` or the CPU count)."""
    if _num_threads is not None:
        return _num_threads
    env = os.environ.get("OMP_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record the flag; every dyngraph kernel is deterministic already."""
    global _deterministic
    _deterministic = bool(mode)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic


def get_default_device():
    """Where factory functions create tensors: always the CPU (pass ``device=`` per call)."""
    return device("cpu")


def set_default_device(device) -> None:
    """Only the CPU default is available: new tensors go to ``device=`` when given."""
    if device is not None and _device(device).type != "cpu":
        raise RuntimeError(f"set_default_device: dyngraph creates tensors on the CPU by default; "
                           f"pass device={device!r} to each factory call (or .to(device)) instead")


# The flag modules (torch.backends.<name>), after this package's own switches.
from . import cuda, cudnn, mkl, mkldnn, mps, openmp, speedups  # noqa: E402

speedups._warn_if_missing()  # once, at import: the C accelerator is not built
