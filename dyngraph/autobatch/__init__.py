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

from .._core.interpreter import pop, push
from .cells import cell
from .interpreter import Autobatcher, Lazy, is_pending
from .mapping import map_instances
from .stats import AutobatchStats

__all__ = ["autobatch", "cell", "map", "is_pending", "AutobatchStats", "Lazy"]

#: ``dg.autobatch.map(fn, instances)``: see :func:`dyngraph.autobatch.mapping.map_instances`
map = map_instances


class autobatch:  # noqa: N801  (a context manager, lower-case like dg.no_grad)
    """Run the per-instance code inside the block lazily and execute it in batches.

    Primitive calls on per-instance values are recorded; a value is computed when it is
    needed (``item()``, ``bool()``, ``tolist()``, ``numpy()``, printing, ``backward()``,
    an optimizer step, leaving the block) -- and then only what that value depends on.
    Calls with the same primitive, params and input shapes whose inputs are ready run
    as one call (shared weights once, per-instance inputs stacked).

    Args:
        stats: collect :class:`AutobatchStats` (``ab.stats`` after the block).
        scheduler: ``"depth"`` (default: group by depth in the graph) or ``"agenda"``
            (DyNet's heuristic: the ready signature of lowest average depth first).

    >>> with dg.autobatch(stats=True) as ab:
    ...     ys = [dg.tanh(x @ W) for x in xs]
    ...     total = dg.stack(ys).sum()
    ...     total.backward()
    >>> ab.stats.groups   # a few calls instead of 2 * len(xs)
    """

    def __init__(self, stats: bool = False, scheduler: str = "depth"):
        self.interp = Autobatcher(scheduler, AutobatchStats() if stats else None)
        self.stats = self.interp.stats

    def __enter__(self):
        interp = self.interp
        if interp.closed:
            raise RuntimeError("dg.autobatch: a context object can be entered once; create a new one")
        push(interp)
        return self

    def __exit__(self, exc_type, exc, tb):
        interp = self.interp
        try:
            interp.close()
        finally:
            pop(interp)
        return False

    def flush(self) -> None:
        """Evaluate everything pending now (the context stays open)."""
        self.interp.flush()


class _AutobatchModule(types.ModuleType):
    """``dg.autobatch`` is this package and also the context manager: ``dg.autobatch(...)``."""

    def __call__(self, stats: bool = False, scheduler: str = "depth") -> autobatch:
        return autobatch(stats=stats, scheduler=scheduler)


sys.modules[__name__].__class__ = _AutobatchModule
