"""``dg.backends.openmp``: whether an OpenMP thread pool is present (BLAS's, if any).

>>> dg.backends.openmp.is_available() in (True, False)
True
"""

from __future__ import annotations

__all__ = ["is_available"]


def is_available() -> bool:
    """True when a loaded BLAS or native library uses OpenMP threads (seen by ``threadpoolctl``)."""
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415  (threadpoolctl: optional)
    except ImportError:
        return False
    return any(info.get("user_api") == "openmp" for info in threadpool_info())
