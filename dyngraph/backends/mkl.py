"""``dg.backends.mkl``: whether Intel MKL computes dyngraph's matrix products.

``is_available()`` is True when MKL is at hand: NumPy is linked against it, or the ``mkl``
package put ``libmkl_rt`` in the environment (dyngraph then opens it for float products in
one-thread runs; ``dyngraph/ops/_gemm.py``).  ``library()`` is the path products use now.

>>> dg.backends.mkl.is_available() in (True, False)
True
"""

from __future__ import annotations

import os

import numpy as np

from ..ops import _gemm

__all__ = ["is_available", "library"]


def _numpy_has_mkl() -> bool:
    try:
        config = np.show_config(mode="dicts")
    except TypeError:  # NumPy < 1.26 prints only
        return False
    blas = (config or {}).get("Build Dependencies", {}).get("blas", {})
    return "mkl" in str(blas.get("name", "")).lower()


def is_available() -> bool:
    """True when NumPy is linked against MKL or dyngraph can open the ``mkl`` package's library.

    >>> isinstance(dg.backends.mkl.is_available(), bool)
    True
    """
    if _numpy_has_mkl():
        return True
    path = _gemm.find_library()
    return (path is not None and "mkl" in os.path.basename(path).lower()
            and not _gemm._missing_parts(path) and _gemm._K is not None)


def library() -> str | None:
    """The library dyngraph's float products go to now (None: NumPy's own BLAS; MKL is used only
    while BLAS runs one thread, see ``dg.set_num_threads``).

    >>> dg.backends.mkl.library() is None or "mkl" in dg.backends.mkl.library()
    True
    """
    return _gemm.library()
