"""``dg.backends.mkldnn``: oneDNN switches (recorded; dyngraph computes with NumPy's BLAS).

>>> dg.backends.mkldnn.is_available()
False
"""

from __future__ import annotations

__all__ = ["enabled", "deterministic", "allow_tf32", "is_available"]

enabled = True
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """Whether oneDNN kernels are used: no (NumPy/BLAS does the work)."""
    return False
