"""Cells: record a repeated per-node function once, replay it as one fused group.

Recording every primitive of a Tree-LSTM cell costs ~18 interpreter calls per tree node,
as much as the arithmetic.  ``dg.autobatch.cell(fn)`` traces ``fn`` once per signature
(the shapes/dtypes of its tensor arguments, its other arguments, grad mode) into a
:class:`Template`; every later call inside ``dg.autobatch`` records ONE pending node.
When a group of such nodes runs, each step of the template runs once for all members
through its primitive's batching rule, so forward and backward stay batched.

A cell must compute its outputs from its arguments, parameters and other tensors that
outlive the call, without reading values (``item()``, ``bool()``...) and without side
effects: the Python body runs only when tracing.  A function that reads a value, creates
a temporary tensor outside primitives (a random mask), or returns something other than
tensors is not traceable; it then runs inline every time (correct, recorded op by op),
and ``stats.fallbacks`` lists it.
"""

from __future__ import annotations

import functools
import itertools
import weakref

from .._core.interpreter import pop, push
from .._core.state import STATE
from ..ops._batching import elementwise
from ..ops.registry import REGISTRY, bind
from ..tensor import Tensor
from .lazy import Lazy

__all__ = ["cell", "build", "Template", "NotTraceableError", "SIGNATURES"]

#: numbers of signatures (a primitive's in interpreter.py, a cell template's here): pending
#: nodes are grouped by this int
SIGNATURES = itertools.count(1)


#: dyngraph._autobatch.record_cell when the C module is built (interpreter.use_native): the
#: recording of a call whose template is cached, in C; None: Autobatcher.call_cell does it
_RECORD_CELL = None


class NotTraceableError(Exception):
    """Raised inside a cell trace when the body cannot be replayed (a value read...)."""


class Template:
    """The primitive steps of one cell signature.

    ``steps``: ``(prim, params, refs, direct)``; a ref is ``(0, j)`` cell input j, ``(1, s, k)``
    output k of step s, ``(2, tensor)`` a shared tensor (parameter), ``(4, weakref)`` a
    tensor that outlives the call (a buffer), ``(3, value)`` a Python value.
    """

    __slots__ = ("name", "steps", "outs", "specs", "rgs", "protos", "multi", "weak", "batch",
                 "batchable", "batch_reason", "is_view", "differentiable", "n_outputs", "sid",
                 "__weakref__")

    def __init__(self, name, steps, outs, specs, multi, weak):
        self.name = f"cell:{name}"
        self.steps = steps
        self.outs = outs
        self.specs = specs
        self.rgs = tuple(sp[3] for sp in specs)
        # per output, what a recorded call's pending tensor gets (interpreter.call_cell)
        self.protos = tuple((sp[0], sp[1], len(sp[0]), sp[2], bool(sp[3]), k)
                            for k, sp in enumerate(specs))
        self.multi = multi
        self.weak = weak
        self.batch = _replay_batched
        self.batchable = True
        self.batch_reason = None
        self.is_view = False
        self.differentiable = True
        self.n_outputs = len(outs)
        self.sid = next(SIGNATURES)

    def alive(self) -> bool:
        return all(r() is not None for r in self.weak)

    def __repr__(self) -> str:
        return f"<{self.name}: {len(self.steps)} steps>"

    def run_member(self, args, params):
        """Replay for one member (plain eager calls on its values)."""
        vals = []
        for prim, p, refs, _ in self.steps:
            a = tuple(_resolve(r, args, vals) for r in refs)
            if type(prim) is Template:
                out = prim.run_member(a, p)
            else:
                out = bind(prim, a, p)
            vals.append(out)
        outs = tuple(_resolve(r, args, vals) for r in self.outs)
        return outs if self.multi else outs[0]


def _resolve(r, args, vals):
    kind = r[0]
    if kind == 0:
        return args[r[1]]
    if kind == 1:
        v = vals[r[1]]
        return v[r[2]] if type(v) is tuple else v
    if kind == 4:
        return r[1]()
    return r[1]


def _replay_batched(tmpl, B, args, batched, params):
    """Run every step once for B members (batching rules), members one by one where a
    rule declines."""
    vals, flags = [], []
    for prim, p, refs, direct in tmpl.steps:
        a, bf = [], []
        for r in refs:
            kind = r[0]
            if kind == 0:
                a.append(args[r[1]])
                bf.append(batched[r[1]])
            elif kind == 1:
                v = vals[r[1]]
                a.append(v[r[2]] if type(v) is tuple else v)
                bf.append(flags[r[1]])
            elif kind == 4:
                a.append(r[1]())
                bf.append(False)
            else:
                a.append(r[1])
                bf.append(False)
        a = tuple(a)
        if not any(bf):
            out = prim.run_member(a, p) if type(prim) is Template else bind(prim, a, p)
            vals.append(out)
            flags.append(False)
            continue
        if direct:
            vals.append(bind(prim, a, p))
            flags.append(True)
            continue
        rule = prim.batch
        out = rule(prim, B, a, tuple(bf), p) if rule is not None else NotImplemented
        if out is NotImplemented:
            out = _one_by_one(prim, B, a, bf, p)
        vals.append(out)
        flags.append(True)
    outs = []
    for r in tmpl.outs:
        v = _resolve(r, args, vals)
        b = batched[r[1]] if r[0] == 0 else (flags[r[1]] if r[0] == 1 else False)
        if not b:
            shape = tuple(v._data.shape)
            v = bind(REGISTRY["expand"], (bind(REGISTRY["reshape"], (v,), {"shape": (1, *shape)}),),
                     {"shape": (B, *shape)})
        outs.append(v)
    return tuple(outs)


def _one_by_one(prim, B, args, batched, params):
    getitem, stack = REGISTRY["getitem"], REGISTRY["stack"]
    per = []
    for i in range(B):
        a = tuple(bind(getitem, (x,), {"index": (i,)}) if b else x for x, b in zip(args, batched, strict=True))
        per.append(prim.run_member(a, params) if type(prim) is Template else bind(prim, a, params))
    if type(per[0]) is tuple:
        return tuple(bind(stack, tuple(o[k] for o in per), {"dim": 0}) for k in range(len(per[0])))
    return bind(stack, tuple(per), {"dim": 0})


def _build(interp, fn, name, args, kwargs):
    """Trace ``fn(*args, **kwargs)`` under a recording sub-interpreter into a Template (or
    raise :class:`NotTraceableError`).  Separate from :func:`build` so the sub-interpreter's
    references are gone before the liveness check of captured tensors."""
    sub = type(interp)(stats=None)     # a recording Autobatcher (interpreter.py imports this module)
    sub.shapes = interp.shapes
    sub.tracing = True
    inputs = {}
    for j, a in enumerate(args):
        if isinstance(a, Tensor):
            inputs[id(a._data) if type(a._data) is Lazy else id(a)] = j
    # the body's calls on the arguments are recorded by ``sub`` but are not consumers of
    # the outer nodes (the cell call is, once, counted by call_cell): their consumer
    # counts and last consumers are put back after the trace
    outer = [(a._data.node, a._data.node.nuse, a._data.node.user) for a in args
             if isinstance(a, Tensor) and type(a._data) is Lazy]
    push(sub)
    try:
        result = fn(*args, **kwargs)
    finally:
        pop(sub)
        for m, nuse, user in outer:
            m.nuse, m.user = nuse, user
    multi = isinstance(result, (tuple, list))
    results = tuple(result) if multi else (result,)
    if not results or not all(isinstance(r, Tensor) for r in results):
        raise NotTraceableError(f"{name} returned {type(result).__name__}, not tensors")
    where = {}
    steps = []
    weak = []
    for s, node in enumerate(sub.nodes):
        refs = []
        for a in node.args:
            if type(a) is Lazy:
                if a.node.interp is sub:
                    refs.append((1, where[id(a.node)], a.k))
                elif id(a) in inputs:
                    refs.append((0, inputs[id(a)]))
                else:
                    raise NotTraceableError(f"{name} reads a pending value that is not an argument")
            elif isinstance(a, Tensor):
                j = inputs.get(id(a))
                if j is not None:
                    refs.append((0, j))
                elif a._rg and a._fn is None:
                    refs.append((2, a))
                else:
                    r = weakref.ref(a)
                    weak.append(r)
                    refs.append((4, r))
            else:
                refs.append((3, a))
        where[id(node)] = s
        steps.append((node.prim, node.params, tuple(refs), _direct(node)))
    outs = []
    for r in results:
        d = r._data
        if type(d) is Lazy and d.node.interp is sub:
            outs.append((1, where[id(d.node)], d.k))
        elif type(d) is Lazy and id(d) in inputs:
            outs.append((0, inputs[id(d)]))
        elif id(r) in inputs:
            outs.append((0, inputs[id(r)]))
        else:
            raise NotTraceableError(f"{name} returns a tensor computed outside primitives")
    specs = tuple((r._data.shape, r._data.dtype, r._data.size, r._rg) for r in results)
    return Template(name, steps, tuple(outs), specs, multi, tuple(weak))


def _direct(node) -> bool:
    """An elementwise step whose tensor inputs all have the output's rank (>= 1): the
    batched call is the primitive itself, whatever is batched (shared inputs broadcast
    over the member axis), so replay skips the rule."""
    if node.prim.__class__ is Template or node.prim.batch is not elementwise:
        return False
    n = len(node.specs[0][0])
    if n == 0 or len(node.specs) != 1:
        return False
    for a in node.args:
        d = a if type(a) is Lazy else getattr(a, "_data", None)
        if d is not None and d.ndim != n:
            return False
    return True


def cell(fn):
    """Mark ``fn`` (a per-node function of tensors) as a cell for ``dg.autobatch``.

    Outside ``dg.autobatch`` the wrapper just calls ``fn``.  Inside, the first call for a
    signature traces ``fn`` once; every call then records one pending node, and a group
    of them replays the traced primitives once for all members (one fused group).

    >>> model.phrase = dg.autobatch.cell(model.phrase)
    >>> with dg.autobatch():
    ...     loss = dg.stack([model.loss(t) for t in trees]).sum()
    """
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "cell"))
    cache: dict = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        interp = STATE.interpreter
        if interp is None:
            return fn(*args, **kwargs)
        rec = _RECORD_CELL
        if rec is not None and not kwargs:
            out = rec(interp, cache, args)    # C: a cached template's call recorded, or None
            if out is not None:
                return out
        call = getattr(interp, "call_cell", None)
        if call is None:
            return fn(*args, **kwargs)
        return call(fn, name, cache, args, kwargs)

    wrapper.__autobatch_cell__ = cache
    return wrapper


def build(interp, fn, name, args, kwargs):
    """Trace and check that every captured non-parameter tensor outlives the call."""
    tmpl = _build(interp, fn, name, args, kwargs)
    if not tmpl.alive():
        raise NotTraceableError(f"{name} uses a tensor created inside the call outside primitives "
                           "(a random mask, a new constant): replaying it would reuse that value")
    return tmpl
