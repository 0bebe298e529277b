"""The float32 matmul precision switch (``dg.set_float32_matmul_precision``), shared by
``dyngraph.backends`` and ``dyngraph.backends.cuda`` (``matmul.allow_tf32`` is another view
of it).

>>> set_float32_matmul_precision("high"); get_float32_matmul_precision()
'high'
"""

from __future__ import annotations

__all__ = ["get_float32_matmul_precision", "set_float32_matmul_precision"]

_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """Record the float32 matmul precision hint ("highest", "high", "medium"); dyngraph's
    BLAS matmuls are always full float32 precision ("highest")."""
    global _matmul_precision
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', "
                           f"got {precision!r}")
    _matmul_precision = precision


def get_float32_matmul_precision() -> str:
    return _matmul_precision
