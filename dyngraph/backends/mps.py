"""``dg.backends.mps``: Apple's Metal backend, absent from dyngraph.

>>> dg.backends.mps.is_available()
False
"""

from __future__ import annotations

__all__ = ["is_available", "is_built", "is_macos_or_newer"]


def is_available() -> bool:
    """Whether ``device="mps"`` works: never in dyngraph."""
    return False


def is_built() -> bool:
    return False


def is_macos_or_newer(major: int, minor: int) -> bool:
    return False
