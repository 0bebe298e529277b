"""``dg.backends.speedups``: the optional C accelerator (``dyngraph/_speedups.c``).

``setup.py`` builds it when a C compiler and the Python headers are present, and skips
it otherwise; without it dispatch and backward run in pure Python, 1.5-2x slower on small
operations.  ``import dyngraph`` then warns once (:class:`SpeedupsWarning`) naming how to
build it, unless ``DYNGRAPH_PURE_PYTHON=1`` chose the pure-Python path deliberately or
``DYNGRAPH_NO_SPEEDUPS_WARNING=1`` silences the warning.

>>> dg.backends.speedups.is_enabled() <= dg.backends.speedups.is_available()
True
"""

from __future__ import annotations

import os
import types
import warnings

from ..ops import registry

__all__ = ["is_available", "is_enabled", "build_hint", "SpeedupsWarning"]

build_hint = ("build it with a C compiler and the Python headers installed: `pip install -e .` "
              "(or `python setup.py build_ext --inplace`) in the dyngraph source tree")


class SpeedupsWarning(UserWarning):
    """Issued once at ``import dyngraph`` when the C accelerator is not available."""


def _import_error() -> str | None:
    """None when ``dyngraph._speedups`` imports, else why not (the ImportError's text)."""
    try:
        from .. import _speedups  # noqa: F401, PLC0415  (the question is whether the C extension imports)
    except ImportError as exc:
        return str(exc) or type(exc).__name__
    return None


def is_available() -> bool:
    """Whether the C accelerator is built for this interpreter (it imports).

    >>> isinstance(dg.backends.speedups.is_available(), bool)
    True
    """
    return _import_error() is None


def is_enabled() -> bool:
    """Whether dispatch runs through the C accelerator: it is available and
    ``DYNGRAPH_PURE_PYTHON`` was not set when dyngraph was imported.

    >>> dg.backends.speedups.is_enabled() in (True, False)
    True
    """
    return isinstance(registry.bind, types.BuiltinFunctionType)


def _warn_if_missing() -> None:
    """The one import-time warning (called from ``dyngraph/__init__.py``)."""
    if os.environ.get("DYNGRAPH_PURE_PYTHON") or os.environ.get("DYNGRAPH_NO_SPEEDUPS_WARNING"):
        return
    why = _import_error()
    if why is None:
        return
    warnings.warn(
        f"dyngraph's C accelerator (dyngraph._speedups) is not available ({why}): dispatch and "
        f"backward run in pure Python, 1.5-2x slower on small operations; {build_hint}. "
        "Set DYNGRAPH_NO_SPEEDUPS_WARNING=1 to silence this warning, or DYNGRAPH_PURE_PYTHON=1 "
        "to choose the pure-Python path deliberately.", SpeedupsWarning, stacklevel=2)
