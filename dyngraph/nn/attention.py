"""``torch.nn.attention``: choosing the kernel behind ``F.scaled_dot_product_attention``.

dyngraph has one attention kernel, the math formula (``SDPBackend.MATH``), so
``sdpa_kernel`` records the request for the duration of the block and every backend
computes the same values; asking for only fused GPU kernels still runs the math one.

>>> from dyngraph.nn.attention import SDPBackend, sdpa_kernel
>>> with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
...     y = dg.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
"""

from __future__ import annotations

import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel", "can_use_flash_attention", "can_use_efficient_attention"]


class SDPBackend(enum.IntEnum):
    """PyTorch's attention backends (same names and values)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_current: tuple = tuple(b for b in SDPBackend if b is not SDPBackend.ERROR)


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Restrict attention to ``backends`` (one or a list) inside the block; recorded only."""
    global _current
    chosen = (backends,) if isinstance(backends, SDPBackend) else tuple(backends)
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise TypeError(f"sdpa_kernel: expected SDPBackend values, got {b!r}")
    old, _current = _current, chosen
    try:
        yield
    finally:
        _current = old


def can_use_flash_attention(params=None, debug: bool = False) -> bool:
    """False: dyngraph has no fused flash-attention kernel."""
    return False


def can_use_efficient_attention(params=None, debug: bool = False) -> bool:
    """False: dyngraph has no memory-efficient attention kernel."""
    return False
