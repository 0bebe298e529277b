"""Automatic batching: write the computation for one instance, run it batched.

>>> with dg.autobatch():
...     losses = [model(tree) for tree in trees]     # per-instance code, recorded lazily
...     loss = dg.stack(losses).sum()
...     loss.backward()                              # runs in batches, forward and backward

See ``docs/autobatch.md``.
"""

from __future__ import annotations

import sys
import types

from .cells import cell
from .context import autobatch
from .interpreter import Lazy, is_pending
from .mapping import map_instances
from .stats import AutobatchStats

__all__ = ["autobatch", "cell", "map", "is_pending", "AutobatchStats", "Lazy"]

#: ``dg.autobatch.map(fn, instances)``: see :func:`dyngraph.autobatch.mapping.map_instances`
map = map_instances


class _AutobatchModule(types.ModuleType):
    """``dg.autobatch`` is this package and also the context manager: ``dg.autobatch(...)``."""

    def __call__(self, stats: bool = False, scheduler: str = "depth") -> autobatch:
        return autobatch(stats=stats, scheduler=scheduler)


sys.modules[__name__].__class__ = _AutobatchModule
