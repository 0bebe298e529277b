"""``dg.backends`` and the runtime switches scripts set in their preamble.

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
import types

__all__ = ["cudnn", "mps", "set_num_threads", "get_num_threads", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled"]

cudnn = types.SimpleNamespace(
    enabled=True, deterministic=False, benchmark=False, allow_tf32=True,
    is_available=lambda: False, version=lambda: None)
cudnn.__doc__ = "torch.backends.cudnn's flags (recorded; dyngraph has no cuDNN)."

mps = types.SimpleNamespace(is_available=lambda: False, is_built=lambda: False)

_num_threads: int | None = None
_deterministic = False


def set_num_threads(num: int) -> None:
    """Limit the number of threads BLAS uses for dyngraph's matrix products."""
    global _num_threads
    num = int(num)
    if num < 1:
        raise ValueError(f"set_num_threads: expected a positive number of threads, got {num}")
    _num_threads = num
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415
    except ImportError:  # recorded only; OMP_NUM_THREADS still applies
        return
    threadpool_limits(limits=num, user_api="blas")


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
