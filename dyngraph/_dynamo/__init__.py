"""``torch._dynamo``: the few names scripts touch (``torch._dynamo.config.suppress_errors = True``,
``torch._dynamo.disable``, ``torch._dynamo.reset()``), kept so such preambles run; dyngraph's
``dg.compile`` has no TorchDynamo, so the settings are recorded and change nothing.

>>> import dyngraph._dynamo as dynamo
>>> dynamo.config.cache_size_limit = 64
"""

from __future__ import annotations

from ..compiler import allow_in_graph, disable, is_compiling, reset
from . import config

__all__ = ["config", "disable", "reset", "is_compiling", "allow_in_graph", "mark_dynamic", "mark_static"]


def mark_dynamic(t, index, **kwargs) -> None:
    """Recorded only: ``dg.compile`` makes a dimension symbolic after it changes once (or by
    ``dg.compile(dynamic=...)``)."""


def mark_static(t, index=None) -> None:
    """Recorded only (see :func:`mark_dynamic`)."""
