"""``dg.backends.mkl``: whether Intel MKL is the BLAS behind NumPy.

>>> dg.backends.mkl.is_available() in (True, False)
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["is_available"]


def is_available() -> bool:
    """True when NumPy is linked against MKL (its build configuration names it)."""
    try:
        config = np.show_config(mode="dicts")
    except TypeError:  # NumPy < 1.26 prints only
        return False
    blas = (config or {}).get("Build Dependencies", {}).get("blas", {})
    return "mkl" in str(blas.get("name", "")).lower()
