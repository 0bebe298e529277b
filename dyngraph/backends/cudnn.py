"""``dg.backends.cudnn``: PyTorch's cuDNN switches, as module attributes a script can set.

dyngraph has no cuDNN (GPU work goes through CuPy), so the flags are recorded and
read back but change no computation; dyngraph's kernels are deterministic anyway.

>>> import dyngraph.backends.cudnn as cudnn
>>> cudnn.benchmark = True; cudnn.deterministic = True
>>> cudnn.is_available()
False
"""

from __future__ import annotations

__all__ = ["enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32",
           "is_available", "version", "is_acceptable", "flags"]

import contextlib

enabled = True
benchmark = False
benchmark_limit = None
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """Whether cuDNN can be used: never in dyngraph (no cuDNN bindings)."""
    return False


def version():
    """cuDNN's version number; ``None`` as in a CPU-only PyTorch build."""
    return None


def is_acceptable(tensor) -> bool:
    """Whether cuDNN would take ``tensor``: never (see :func:`is_available`)."""
    return False


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Set the flags inside a ``with`` block and restore them afterwards.

    >>> with dg.backends.cudnn.flags(enabled=False): ...
    """
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    here = globals()
    old = {n: here[n] for n in names}
    here.update(zip(names, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)))
    try:
        yield
    finally:
        here.update(old)
