"""The interpreter protocol: who handles a primitive call, and the named hooks.

Every primitive call goes through one ``bind(prim, args, params)``
(:mod:`dyngraph.ops.registry`).  With no interpreter active, ``bind`` runs the
call eagerly -- compute now, record a graph node if an input requires grad.
Eager is the *bottom* of the interpreter stack, inlined into ``bind`` (and
into its C accelerator) for speed instead of being an object on the stack.

Everything else that wants to see calls -- graph capture
(:class:`dyngraph.jit.tracer.Tracer`), the profiler, ``dg.viz.record``,
activation checkpointing's collector, automatic batching -- is a subclass of
:class:`Interpreter` pushed onto the per-thread stack with :func:`interpreting`
(or :func:`push`/:func:`pop`).  ``STATE.interpreter`` is the innermost one;
each links to the one below through ``prev``.

An interpreter implements ``process(prim, args, params)`` and may override
named hooks, each of which has a default that hands the event to the
interpreter below (and, at the bottom, does what eager does):

==========================  ==============================================  =========================
hook                        called by                                       default at the bottom
==========================  ==============================================  =========================
``on_concrete(t, why)``     :func:`~dyngraph._core.state.concrete` (values  return ``t._data``
                            needed: ``bool()``, ``item()``, ``tolist()``,
                            ``numpy()``, printing, library decisions)
``on_inplace(t, value)``    in-place writes (``ops/inplace.py``)            nothing
``on_set_grad(t, value)``   :func:`~dyngraph._core.state.set_grad`          nothing (caller assigns)
                            (``.grad`` setter, ``zero_grad``, engine)
``on_backward(run, ...)``   ``autograd.engine.run_backward`` (every         ``run(...)``
                            ``backward()`` / ``autograd.grad``, also the
                            nested ones of checkpointing)
``on_backward_node(n, run)``  the engine's general path, once per node      ``run()``
``on_optimizer_step(o, run)``  ``Optimizer.step()`` without a closure       ``run()``
``on_node(node)``           ``autograd.Function.apply`` (custom nodes)      nothing
==========================  ==============================================  =========================

``observer = True`` marks an interpreter that only watches and hands every
call on (profiler, recorder, checkpoint collector); code that must know
whether someone *owns* the computation (``checkpoint`` gives up its memory
plan under graph capture) checks it.

Example (count calls, compute as usual)::

    class Counter(Interpreter):
        observer = True

        def __init__(self):
            self.n = 0

        def process(self, prim, args, params):
            self.n += 1
            return self.process_below(prim, args, params)

    with interpreting(Counter()) as c:
        y = (x * 2).sum()
    c.n  # 2
"""

from __future__ import annotations

from .registry import eager
from .state import STATE

__all__ = ["Interpreter", "interpreting", "push", "pop", "stack", "eager"]


class Interpreter:
    """Base class of interpreters: ``process`` plus named hooks with defaults.

    Every default hands the event to the interpreter below (``self.prev``) or,
    at the bottom of the stack, behaves as eager execution does.
    """

    prev = None        # the interpreter below this one (None: eager)
    observer = False   # True: watches calls and hands them on, never replaces them

    # -- primitive calls ------------------------------------------------------------
    def process(self, prim, args, params):
        """Handle one primitive call; the default hands it below."""
        return self.process_below(prim, args, params)

    def process_below(self, prim, args, params):
        """Hand a call to the interpreter below (eager at the bottom)."""
        prev = self.prev
        if prev is not None:
            return prev.process(prim, args, params)
        return eager(prim, args, params)

    # -- hooks ----------------------------------------------------------------------
    def on_concrete(self, t, why: str):
        """A value of ``t`` is needed (``why`` says for what); return its array."""
        prev = self.prev
        if prev is not None:
            return prev.on_concrete(t, why)
        return t._data

    def on_inplace(self, t, value) -> None:
        """``t``'s buffer now holds ``value`` (a Tensor, broadcast/cast, or a number)."""
        prev = self.prev
        if prev is not None:
            prev.on_inplace(t, value)

    def on_alias(self, src, t) -> None:
        """``t`` was just made sharing ``src``'s array (``detach()``, ``.data``, ``Parameter``,
        ``Tensor(src)``): an interpreter holding pending values hands ``t`` the value too."""
        prev = self.prev
        if prev is not None:
            prev.on_alias(src, t)

    def on_set_grad(self, t, value) -> None:
        """``t.grad`` is about to become ``value`` (a Tensor or None)."""
        prev = self.prev
        if prev is not None:
            prev.on_set_grad(t, value)

    def on_backward(self, run, roots, root_grads, retain_graph, create_graph, inputs=None,
                    accumulate=True, allow_unused=False):
        """``backward()`` / ``autograd.grad``: ``run`` is the engine with the same signature."""
        prev = self.prev
        if prev is not None:
            return prev.on_backward(run, roots, root_grads, retain_graph, create_graph,
                                    inputs, accumulate, allow_unused)
        return run(roots, root_grads, retain_graph, create_graph, inputs=inputs,
                   accumulate=accumulate, allow_unused=allow_unused)

    def on_backward_node(self, node, run):
        """The engine is about to run ``node``'s rules; ``run()`` does it and returns the grads."""
        prev = self.prev
        if prev is not None:
            return prev.on_backward_node(node, run)
        return run()

    def on_optimizer_step(self, opt, run):
        """``opt.step()`` (no closure); ``run()`` performs the update."""
        prev = self.prev
        if prev is not None:
            return prev.on_optimizer_step(opt, run)
        return run()

    def on_node(self, node) -> None:
        """A custom node (``autograd.Function``) was recorded outside ``process``."""
        prev = self.prev
        if prev is not None:
            prev.on_node(node)


def push(interp: Interpreter) -> Interpreter:
    """Make ``interp`` the innermost interpreter of this thread."""
    if not isinstance(interp, Interpreter):
        raise TypeError(f"interpreters subclass dyngraph._core.interpreter.Interpreter; got "
                        f"{type(interp).__name__}")
    interp.prev = STATE.interpreter
    STATE.interpreter = interp
    return interp


def pop(interp: Interpreter) -> None:
    """Remove ``interp`` from this thread's stack (usually the innermost one).

    Context managers may exit out of order (a profile opened inside a capture
    and closed after it); then ``interp`` is unlinked where it sits.
    """
    top = STATE.interpreter
    if top is interp:
        STATE.interpreter = interp.prev
        return
    cur = top
    while cur is not None:
        nxt = cur.prev
        if nxt is interp:
            cur.prev = interp.prev
            return
        cur = nxt


def stack() -> list:
    """The active interpreters of this thread, innermost first."""
    out = []
    cur = STATE.interpreter
    while cur is not None:
        out.append(cur)
        cur = cur.prev
    return out


class interpreting:  # noqa: N801  (a context manager, lower-case like dg.no_grad)
    """Push ``interp`` for the duration of a ``with`` block.

    >>> with interpreting(MyInterpreter()) as it:
    ...     y = f(x)
    """

    __slots__ = ("interp",)

    def __init__(self, interp: Interpreter):
        self.interp = interp

    def __enter__(self):
        return push(self.interp)

    def __exit__(self, *exc):
        pop(self.interp)
        return False
