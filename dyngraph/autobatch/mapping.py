"""``dg.autobatch.map``: per-instance code as cooperative tasks, one batched evaluation for all.

Each instance's function runs as its own task (a thread, but only one task runs at a
time: they hand a baton to each other, so the code needs no locks).  When a task reads a
value (``item()``, ``bool()``, a comparison in an ``if``...), only that task blocks; the
others keep recording.  When every live task is blocked or done, ONE evaluation computes
what all blocked tasks asked for -- batched across instances -- and they resume.  So
data-dependent per-instance control flow (a parser choosing its next action, greedy
decoding until EOS, early exit) still batches across instances.
"""

from __future__ import annotations

import threading

from .._core.state import STATE
from .context import autobatch
from .interpreter import Autobatcher

__all__ = ["map_instances"]


class _Task:
    __slots__ = ("fn", "item", "result", "error", "done", "needs", "go", "thread")

    def __init__(self, fn, item):
        self.fn = fn
        self.item = item
        self.result = None
        self.error = None
        self.done = False
        self.needs = None          # PNodes this task waits for
        self.go = threading.Event()
        self.thread = None


class Cooperative:
    """The scheduler of one ``map`` call (installed as ``Autobatcher.coop``)."""

    def __init__(self, interp):
        self.interp = interp
        self.local = threading.local()    # .task in task threads
        self.back = threading.Event()

    def current(self):
        return getattr(self.local, "task", None)

    def block(self, nodes) -> None:
        """Called in a task thread: wait until ``nodes`` have been evaluated."""
        task = self.local.task
        task.needs = list(nodes)
        self.back.set()
        task.go.wait()
        task.go.clear()

    def _body(self, task, interp, grad):
        STATE.interpreter = interp
        STATE.grad_enabled = grad
        self.local.task = task
        task.go.wait()
        task.go.clear()
        try:
            task.result = task.fn(task.item)
        except BaseException as exc:
            task.error = exc
        finally:
            task.done = True
            STATE.interpreter = None
            self.back.set()

    def run(self, fn, items):
        interp = self.interp
        tasks = [_Task(fn, it) for it in items]
        grad = STATE.grad_enabled
        for t in tasks:
            t.thread = threading.Thread(target=self._body, args=(t, interp, grad), daemon=True,
                                        name="dg.autobatch.map task")
            t.thread.start()
        runnable = list(tasks)
        rounds = 0
        try:
            while runnable:
                blocked = []
                for t in runnable:
                    self.back.clear()
                    t.go.set()
                    self.back.wait()
                    if not t.done:
                        blocked.append(t)
                    if t.error is not None:
                        raise t.error
                if blocked:
                    # one batched evaluation serves every blocked task
                    roots = [n for t in blocked for n in t.needs]
                    interp.evaluate(roots)
                    rounds += 1
                    for t in blocked:
                        t.needs = None
                runnable = blocked
        finally:
            for t in tasks:       # a failure elsewhere: let the other threads finish
                if not t.done:
                    t.error = t.error or RuntimeError("dg.autobatch.map: cancelled")
            st = interp.stats
            if st is not None:
                st.map_rounds += rounds
        for t in tasks:
            if t.thread is not None and t.done:
                t.thread.join()
        return [t.result for t in tasks]


def map_instances(fn, instances, *, stats: bool = False, scheduler: str = "depth"):
    """Run ``fn(instance)`` for every instance as cooperative tasks, batched together.

    A value read inside one instance's code blocks only that instance; when every live
    instance is blocked or done, one batched evaluation serves them all.  Returns the
    list of results (pending tensors stay pending until read, as in ``dg.autobatch``).
    Inside a ``dg.autobatch`` block it joins that block; otherwise it opens its own.

    >>> def decode(src):                       # greedy decoding until EOS, per sentence
    ...     h, out = encoder(src), []
    ...     while len(out) < 20:
    ...         tok = int(step(h).argmax())     # a read: only this sentence waits
    ...         if tok == EOS:
    ...             break
    ...         out.append(tok)
    ...     return out
    >>> outputs = dg.autobatch.map(decode, sentences)
    """
    interp = STATE.interpreter
    if isinstance(interp, Autobatcher) and not interp.tracing:
        return _run(interp, fn, instances)
    with autobatch(stats=stats, scheduler=scheduler) as ab:
        return _run(ab.interp, fn, instances)


def _run(interp, fn, instances):
    if interp.coop is not None:
        raise RuntimeError("dg.autobatch.map: cannot be nested inside another map's task")
    coop = Cooperative(interp)
    interp.coop = coop
    try:
        return coop.run(fn, list(instances))
    finally:
        interp.coop = None
