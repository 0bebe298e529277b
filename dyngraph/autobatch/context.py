"""``with dg.autobatch():`` -- the context manager that installs the interpreter."""

from __future__ import annotations

import gc

from .._core.interpreter import pop, push
from .interpreter import Autobatcher
from .stats import AutobatchStats

__all__ = ["autobatch"]

#: gen-0 threshold of the cyclic garbage collector inside an autobatch block (see _GC)
GC_THRESHOLD = 100000


class _GC:
    """The cyclic collector's settings while the outermost autobatch block is open.

    A block records tens of thousands of small objects (pending nodes, their tensors)
    that all survive until evaluation and form no reference cycles, so collections
    inside a block find nothing to free; yet each full collection walks the whole heap
    (50-80 ms with the Tree-LSTM benchmark's heap, several per group of 50 trees).  The
    outermost block therefore freezes the objects that existed before it
    (``gc.freeze``: collections inside the block skip them) and raises the gen-0
    threshold to ``GC_THRESHOLD``; leaving it restores both.  (A gen-0 collection
    while a large graph is pending still walks every young object: at 20,000 the
    Tree-LSTM benchmark paid ~25 ms per collection, once per group of 50 trees --
    5-10% of its time; at 100,000 a group of up to ~150 trees records without one.)
    Cyclic garbage made inside the block is still collected, only less often.  Nothing
    is changed when the program has frozen objects itself.
    """

    depth = 0
    saved = None

    @classmethod
    def enter(cls):
        cls.depth += 1
        if cls.depth == 1 and gc.isenabled() and gc.get_freeze_count() == 0:
            th = gc.get_threshold()
            cls.saved = th
            gc.freeze()
            gc.set_threshold(max(th[0], GC_THRESHOLD), *th[1:])

    @classmethod
    def exit(cls):
        cls.depth -= 1
        if cls.depth == 0 and cls.saved is not None:
            th, cls.saved = cls.saved, None
            if gc.get_threshold()[0] == max(th[0], GC_THRESHOLD):   # not changed inside
                gc.set_threshold(*th)
            gc.unfreeze()


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
        _GC.enter()
        return self

    def __exit__(self, exc_type, exc, tb):
        interp = self.interp
        try:
            interp.close()
        finally:
            pop(interp)
            _GC.exit()
        return False

    def flush(self) -> None:
        """Evaluate everything pending now (the context stays open)."""
        self.interp.flush()
