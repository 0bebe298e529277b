"""The lazy batching interpreter behind ``dg.autobatch``.

Inside the context every primitive call that involves a per-member value is
*recorded* instead of run: :meth:`Autobatcher.process` returns a Tensor whose
``_data`` is a :class:`Lazy` (shape and dtype known, values not yet).  Shapes
and dtypes come from running the primitive once per *signature* on zero-filled
stand-ins (cached), so a shape error is raised at the user's line with eager's
message.

When a value is needed (:meth:`Autobatcher.concrete`), only the pending nodes
that value depends on are executed: nodes of equal signature (primitive,
params, grad mode, per-input shape/dtype, shared inputs by identity) and equal
depth run as one call of the primitive's batching rule.  A group's outputs
live in one array (member *i* is row *i*); a later group gathers each input
with one ``index_select`` per source group.  The group calls go through the
ordinary dispatcher, so autograd records the batched graph (one node per group
plus the gathers) and ``backward()`` runs batched.

A pending tensor becomes an ordinary tensor (*materialised*) when it is forced
or when the context exits while it is alive: its data is a copy of its row and
its ``grad_fn`` selects that row from the batched graph.
"""

from __future__ import annotations

import os
import time
from itertools import repeat
from operator import attrgetter, is_, methodcaller
from weakref import ref as _weakref

import numpy as np

from .._core.interpreter import Interpreter
from .._core.state import STATE
from ..ops import _batching
from ..ops._batching import gather_p, rows_p, split_rows_p
from ..ops.registry import EMPTY, REGISTRY, Primitive, bind
from ..tensor import Tensor
from . import cells as _cells
from .cells import SIGNATURES, NotTraceableError, Template, build
from .lazy import Consts, Lazy

__all__ = ["Autobatcher", "Lazy", "PNode", "is_pending"]

_new = object.__new__


def _pending_output(node, k, shape, dtype, ndim, size, rg):
    """Output ``k`` of pending ``node``: a Tensor over a :class:`Lazy` stand-in.

    Built with ``object.__new__`` and every slot set here (a few microseconds less per
    recorded output than ``Tensor.__init__``); the one place that knows a pending tensor's
    fields, for primitive calls and cell calls alike.
    """
    lz = _new(Lazy)
    lz.shape = shape
    lz.dtype = dtype
    lz.ndim = ndim
    lz.size = size
    lz.node = node
    lz.k = k
    t = _new(Tensor)
    t._data = lz
    t._rg = rg
    t._fn = node if rg else None
    t._nr = k
    t._grad = None
    t._vc = None
    t._base = None
    t._hooks = None
    return t


def is_pending(t) -> bool:
    """True when ``t`` is a tensor recorded by ``dg.autobatch`` whose value is not computed yet."""
    return isinstance(t, Tensor) and type(t._data) is Lazy and t._data.node.result is None


class PNode:
    """One recorded primitive call (pending until its group runs).

    ``args`` holds :class:`Lazy` for pending inputs, Tensors for real ones and the
    Python values of scalars; after execution ``result`` is the group's output
    (a Tensor, or a tuple for multi-output primitives) and ``row`` this member's
    row in it (``None``: ``result`` is this member's own value).  ``specs`` are the
    outputs' ``(shape, dtype, size)``, ``refs`` weak references to the output tensors:
    a node does not hold its :class:`Lazy` outputs, so node and outputs form no
    reference cycle and a finished graph is freed by reference counting, not by the
    cyclic garbage collector (which took ~40% of the recording time when they did).
    """

    # rarely set attributes (hooks, retained grads, anomaly info) live in the instance
    # dict and default to the class attributes, as on autograd Nodes
    __slots__ = ("prim", "params", "args", "sig", "depth", "specs", "refs", "result", "row", "seq",
                 "nuse", "user",
                 "interp", "grad_enabled", "versions", "mark", "__dict__", "__weakref__")

    saved = None         # read by the in-place path (ops/inplace.py) like a Node's
    saved_data = None
    pre_hooks = None
    retained = None
    special = False
    info = None

    def name(self) -> str:
        return f"Pending{self.prim.name}"

    def __repr__(self) -> str:
        state = "pending" if self.result is None else "done"
        return f"<autobatch {state} {self.prim.name}>"

    @property
    def next_functions(self):
        return ()

    def _add_pre_hook(self, output_nr, fn):
        """``t.register_hook(fn)`` on a pending tensor: runs on this member's row of the
        batched gradient."""
        if self.pre_hooks is None:
            self.pre_hooks = {}
        hooks = self.pre_hooks.setdefault(output_nr, [])
        hooks.append(fn)
        return _HookHandle(hooks, fn)


class _HookHandle:
    """``handle.remove()`` for a hook registered on a pending tensor."""

    __slots__ = ("hooks", "fn")

    def __init__(self, hooks, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self) -> None:
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def _pkey(params):
    if not params:
        return ()
    key = tuple(params.items())
    try:
        hash(key)
    except TypeError:  # slices (getitem) are unhashable before Python 3.12
        key = repr(key)
    return key


_RANGES: dict = {}


def _range(n):
    r = _RANGES.get(n)
    if r is None:
        r = _RANGES[n] = list(range(n))
    return r


def _idx(rows):
    return Tensor._make(np.asarray(rows, dtype=np.intp), False, None, 0)


class Autobatcher(Interpreter):
    """The interpreter installed by ``dg.autobatch`` (see the module docstring)."""

    def __init__(self, scheduler: str = "depth", stats=None):
        if scheduler not in ("depth", "agenda"):
            raise ValueError(f"dg.autobatch: scheduler must be 'depth' or 'agenda', got {scheduler!r}")
        self.prev = None
        self.scheduler = scheduler
        self.nodes: list = []        # recorded nodes that may still need work (pending / alive)
        self.shapes: dict = {}       # signature -> output specs, or "eager"
        self.seq = 0
        self.epoch = 0
        self.stats = stats
        self.closed = False
        self.tracing = False         # True inside a cell trace (cells.py): record everything
        self.coop = None             # the scheduler of a running dg.autobatch.map (mapping.py)
        self.prune_at = _PRUNE_MIN   # len(nodes) at which _execute next drops finished nodes
        self.collectors: list = []   # pending stack/cat nodes of many inputs (see _collected)
        self.gks = None              # while _execute runs groups: seq -> group key (_split)
        self._todo_all = None        # _all_feed's answer
        self.arenas: dict = {}       # cell template -> its constant arguments' Consts (call_cell)
        self.aliases: dict = {}      # Lazy -> weak refs to the other tensors holding it (on_alias)

    # ------------------------------------------------------------------
    # recording
    # ------------------------------------------------------------------
    def _process_py(self, prim, args, params):
        # the hot path of recording: one pass over the inputs builds the signature.  With
        # the optional C module (dyngraph/_autobatch.c) ``process`` is its C version, which
        # records the calls of known signatures and hands every other call to this one
        spec = [prim, _pkey(params) if params else (), STATE.grad_enabled]
        depth = 0
        lazy = const = rg = False
        stored = None
        i = 0
        for a in args:
            if type(a) is Tensor or isinstance(a, Tensor):
                d = a._data
                if type(d) is Lazy:
                    lazy = True
                    spec.append(d.shape)
                    spec.append(d.dtype)
                    # a computed input is not in any later evaluation: counting its depth
                    # would put the next steps of instances with different histories
                    # (after a read, in map) at different depths, never in one group
                    m = d.node
                    m.nuse += 1     # consumers recorded (the scheduler's _collected reads it)
                    m.user = self.seq   # the last consumer (the seq _record gives it; _split)
                    nd = m.depth if m.result is None else -1
                    if nd >= depth:
                        depth = nd + 1
                    if stored is None:
                        stored = list(args)
                    stored[i] = d
                elif a._rg and a._fn is None:     # a parameter: shared by identity
                    spec.append(id(a))
                    spec.append(d.shape)
                    spec.append(d.dtype)
                else:
                    const = True
                    spec.append(d.shape)
                    spec.append(d.dtype)
                if a._rg:
                    rg = True
            else:
                spec.append(type(a))
                spec.append(a)
            i += 1
        mode = prim.batchable
        if mode is not True and (mode == "eager" or (mode.__class__ is not bool and mode is not None
                                                     and mode(args))):
            if self.tracing:
                raise NotTraceableError(f"'{prim.name}' has a value-dependent output shape")
            return self.run_now(prim, args, params)
        if not (lazy or const or self.tracing):
            return self.run_now(prim, args, params)
        sig = tuple(spec)
        info = self.shapes.get(sig)
        if info is None:
            info = self.shapes[sig] = self._infer(prim, args, params)
        if info == "eager":
            if self.tracing:
                raise NotTraceableError(f"'{prim.name}' could not be shaped from stand-ins")
            return self.run_now(prim, args, params)
        specs, multi, floats, sid = info
        out = self._record(prim, params, args if stored is None else stored, sid, depth, specs,
                           multi, floats if rg and spec[2] and prim.differentiable else None,
                           args if const else None)
        if (prim is _STACK or prim is _CAT) and i >= _COLLECTOR_MIN:
            self.collectors.append(out._data.node)   # the scheduler's _collected walks these
        return out

    process = _process_py     # replaced by the C version below when it is built

    def _record(self, prim, params, args, sig, depth, specs, multi, rgs, versions_of):
        """Create the pending node and its output tensors (``rgs``: requires_grad per
        output, None for none)."""
        node = _new(PNode)
        node.prim = prim
        node.params = params
        node.args = args
        node.sig = sig
        node.depth = depth
        node.result = None
        node.row = None
        node.seq = self.seq
        self.seq += 1
        node.interp = self
        node.grad_enabled = STATE.grad_enabled
        node.mark = 0
        node.nuse = 0
        node.user = -1
        if versions_of is not None:
            node.versions = [a._vc[0] if isinstance(a, Tensor) and a._vc is not None else 0
                             for a in versions_of]
        else:
            node.versions = None
        if STATE.anomaly:
            from ..autograd.anomaly import capture_stack  # noqa: PLC0415  (anomaly mode only)

            node.info = capture_stack()
        st = self.stats
        if st is not None:
            st.nodes += 1
        self.nodes.append(node)
        if not multi:
            shape = specs[0][0]
            t = _pending_output(node, 0, shape, specs[0][1], len(shape), specs[0][2],
                                rgs is not None and rgs[0])
            node.specs = specs
            node.refs = (_weakref(t),)
            return t
        refs = []
        tensors = []
        for k, spec in enumerate(specs):
            shape = spec[0]
            t = _pending_output(node, k, shape, spec[1], len(shape), spec[2], rgs is not None and rgs[k])
            refs.append(_weakref(t))
            tensors.append(t)
        node.specs = specs
        node.refs = refs
        return tuple(tensors)

    def call_cell(self, fn, name, cache, args, kwargs):
        """A call of a ``dg.autobatch.cell`` function: one pending node replaying its template."""
        # the key, flat: per argument (shape, dtype, requires_grad), a parameter
        # (id, shape, dtype, _PARAM), a Python value (type, value, _VALUE) -- the first
        # entry's type (tuple / int / type) tells the kinds apart
        key = [STATE.grad_enabled]
        add = key.append
        depth = 0
        stored = list(args)
        i = 0
        for a in args:
            if isinstance(a, Tensor):
                d = a._data
                if type(d) is Lazy:
                    add(d.shape)
                    add(d.dtype)
                    add(a._rg)
                    m = d.node
                    m.nuse += 1
                    m.user = self.seq
                    if m.result is None and m.depth >= depth:    # as in process()
                        depth = m.depth + 1
                    stored[i] = d
                elif a._rg and a._fn is None:
                    add(id(a))
                    add(d.shape)
                    add(d.dtype)
                    add(_PARAM)
                else:
                    add(d.shape)
                    add(d.dtype)
                    add(a._rg)
            else:
                add(type(a))
                add(a)
                add(_VALUE)
            i += 1
        if kwargs:
            add(tuple(sorted(kwargs.items())))
        key = tuple(key)
        try:
            tmpl = cache.get(key)
        except TypeError:   # unhashable non-tensor arguments: inline
            _unuse(stored)
            return fn(*args, **kwargs)
        if tmpl is None or (tmpl is not False and tmpl.weak and not tmpl.alive()):
            try:
                tmpl = build(self, fn, name, args, kwargs)
            except NotTraceableError as exc:
                cache[key] = False
                if self.stats is not None:
                    self.stats.fallback(_Named(f"cell:{name}"), f"runs inline: {exc}", 1)
                _unuse(stored)
                return fn(*args, **kwargs)
            cache[key] = tmpl
        elif tmpl is False:
            _unuse(stored)
            return fn(*args, **kwargs)
        st = self.stats
        if st is not None:
            st.cells += 1
            st.nodes += 1
        # _record inlined, with the template's output facts computed once (``protos``):
        # this runs once per cell call, the hottest path of recording
        node = _new(PNode)
        node.prim = tmpl
        node.params = EMPTY
        node.args = stored
        node.sig = tmpl.sid
        node.depth = depth
        node.result = None
        node.row = None
        node.seq = self.seq
        self.seq += 1
        node.interp = self
        node.grad_enabled = key[0]
        node.mark = 0
        node.nuse = 0
        node.user = -1
        node.versions = None
        node.specs = tmpl.specs
        if tmpl.consts and not self.tracing:
            # constant arguments (labels): copied now, while hot; the node holds the Consts
            ar = self.arenas.get(tmpl)
            if ar is None:
                ar = self._arenas_for(tmpl, args)
            for j, c in zip(tmpl.consts, ar, strict=True):
                a = args[j]
                if isinstance(a, Tensor) and c.fits(a._data):
                    c.put(a._data, node.seq)
                    stored[j] = c
        if STATE.anomaly:
            from ..autograd.anomaly import capture_stack  # noqa: PLC0415  (anomaly mode only)

            node.info = capture_stack()
        self.nodes.append(node)
        refs = []
        outs = []
        for shape, dtype, ndim, size, rg, k in tmpl.protos:
            t = _pending_output(node, k, shape, dtype, ndim, size, rg)
            refs.append(_weakref(t))
            outs.append(t)
        node.refs = tuple(refs)      # never changed: a tuple (one object, not two)
        return tuple(outs) if tmpl.multi else outs[0]

    def _arenas_for(self, tmpl, args) -> tuple:
        """The :class:`Consts` of ``tmpl``'s constant argument positions in this block
        (created at its first recorded call; C ``record_cell`` calls this too)."""
        ar = self.arenas[tmpl] = tuple(Consts(args[j]._data.shape, args[j]._data.dtype)
                                       for j in tmpl.consts)
        return ar

    def _infer(self, prim, args, params):
        """Output shapes/dtypes of one call: run it on zero-filled stand-ins (once per signature).

        Returns ``(specs, multi)`` or ``"eager"`` when the stand-ins cannot stand in (the
        call then runs for real, which also raises eager's error where there is one).
        """
        if prim is _STACK and len(args) > 8:
            info = _stack_spec(args, params)
            if info is not None:
                return info
        stand = []
        for a in args:
            if isinstance(a, Tensor):
                d = a._data
                if type(d) is Lazy or not (a._rg and a._fn is None):
                    stand.append(Tensor._make(np.zeros(d.shape, d.dtype), False, None, 0))
                else:
                    stand.append(a)
            else:
                stand.append(a)
        prev_interp, prev_grad = STATE.interpreter, STATE.grad_enabled
        STATE.interpreter = None
        STATE.grad_enabled = False
        try:
            with np.errstate(all="ignore"):
                out = bind(prim, tuple(stand), params)
        except Exception:
            return "eager"
        finally:
            STATE.interpreter, STATE.grad_enabled = prev_interp, prev_grad
        multi = isinstance(out, tuple)
        outs = out if multi else (out,)
        # the last entry: the signature's number (``PNode.sig``: groups are keyed by ints,
        # not by hashing the signature tuple again for every node)
        return (tuple((o._data.shape, o._data.dtype, o._data.size) for o in outs), multi,
                tuple(o._data.dtype.kind == "f" for o in outs), next(SIGNATURES))

    def run_now(self, prim, args, params):
        """Run a call eagerly at once (nothing per-member in it, or a value-dependent shape)."""
        real = tuple(self._real(a) for a in args)
        interp = STATE.interpreter
        STATE.interpreter = self.prev
        try:
            return bind(prim, real, params)
        finally:
            STATE.interpreter = interp

    def _real(self, a):
        if isinstance(a, Tensor) and type(a._data) is Lazy:
            self.materialize(a)
        return a

    # ------------------------------------------------------------------
    # forcing
    # ------------------------------------------------------------------
    def concrete(self, t, why: str = "value"):
        """The array of ``t``: evaluate what it depends on and materialise it (the one
        place where values are forced; every hook below calls it)."""
        if self.tracing:
            raise NotTraceableError(f"it reads a value ({why})")
        if type(t._data) is Lazy:
            st = self.stats
            if st is not None:
                st.forces[why] = st.forces.get(why, 0) + 1
            self.materialize(t)
        return t._data

    def value_of(self, lz: Lazy) -> np.ndarray:
        t = lz.node.refs[lz.k]()
        if t is not None and t._data is lz:
            return self.concrete(t, "array")
        if lz.node.result is None:
            self.need([lz.node])
        return np.array(self._row_value(lz)._data)

    def materialize(self, t) -> None:
        """Turn pending ``t`` into an ordinary tensor holding its row of the batched result.

        ``t`` may be an *alias* of the pending output -- a tensor sharing its ``Lazy``
        (``detach()``, ``.data``, ``Parameter(t)``, ``Tensor(t)``): it gets the output's
        array (shared, as those share memory eagerly) and keeps its own autograd state.
        Materialising the output also materialises its aliases registered by
        :meth:`on_alias`.
        """
        lz = t._data
        node = lz.node
        owner = node.refs[lz.k]()
        if owner is not t:
            if owner is not None and owner._data is lz:
                self.materialize(owner)        # sets the registered aliases too
                if t._data is lz:              # not registered (made without on_alias)
                    t._data = owner._data
            else:                              # the output is gone or was materialised apart
                arr = self.value_of(lz)
                self._settle_aliases(lz, arr)
                if t._data is lz:
                    t._data = arr
            return
        if node.result is None:
            self.need([node])
        interp, grad = STATE.interpreter, STATE.grad_enabled
        STATE.interpreter = self.prev
        STATE.grad_enabled = node.grad_enabled
        try:
            res = node.result
            if type(res) is tuple:
                res = res[lz.k]
            if node.row is None:
                # a copy, not an alias: the result may be saved by later nodes, and an
                # in-place write into ``t`` must not reach it
                v = bind(REGISTRY["clone"], (res,), {})
            else:
                v = bind(REGISTRY["index_select"], (res, _idx([node.row])), {"dim": 0})
                v = bind(REGISTRY["reshape"], (v,), {"shape": lz.shape})
        finally:
            STATE.interpreter, STATE.grad_enabled = interp, grad
        t._data = v._data
        t._fn = v._fn
        t._nr = v._nr
        t._vc = v._vc
        t._base = v._base
        t._rg = v._rg
        if self.aliases:
            self._settle_aliases(lz, v._data)

    def _settle_aliases(self, lz, arr) -> None:
        """Give the registered aliases of ``lz`` still holding it the array ``arr``."""
        refs = self.aliases.pop(lz, None)
        if refs:
            for r in refs:
                a = r()
                if a is not None and a._data is lz:
                    a._data = arr

    def on_alias(self, src, t) -> None:
        """``t`` was made sharing ``src``'s data (``detach()``, ``.data``, ``Parameter``,
        ``Tensor(src)``): if that is a pending value, ``t`` is materialised with it."""
        d = t._data
        if type(d) is Lazy:
            interp = d.node.interp
            if interp is self and not self.closed:
                self.aliases.setdefault(d, []).append(_weakref(t))
            elif interp is not self:
                interp.on_alias(src, t)    # an outer block's pending value
        else:
            super().on_alias(src, t)       # an interpreter below (Interpreter passes it down)

    # -- the interpreter hooks: every value request forces through concrete() --
    def on_concrete(self, t, why):
        return self.concrete(t, why)

    def on_optimizer_step(self, opt, run):
        """Pending calls read the parameters as they are now: run them before the update."""
        self.flush()
        interp = STATE.interpreter
        STATE.interpreter = self.prev
        try:
            return super().on_optimizer_step(opt, run)
        finally:
            STATE.interpreter = interp

    def on_backward(self, run, roots, root_grads, retain_graph, create_graph, inputs=None,
                    accumulate=True, allow_unused=False):
        """``backward()``/``autograd.grad``: force the roots, then run the engine on the
        batched graph with this interpreter out of the way (create_graph records eagerly)."""
        roots = [self._real(r) for r in roots]
        if root_grads is not None:
            root_grads = [self._real(g) if isinstance(g, Tensor) else g for g in root_grads]
        rows = None
        if inputs is not None:
            inputs, rows = self._grad_inputs(list(inputs))
        interp = STATE.interpreter
        STATE.interpreter = self.prev
        try:
            out = super().on_backward(run, roots, root_grads, retain_graph, create_graph, inputs,
                                      accumulate, allow_unused)
            if rows is not None and out is not None:
                out = self._slice_grads(out, rows)
            return out
        finally:
            STATE.interpreter = interp

    def _grad_inputs(self, inputs):
        """Pending intermediates as ``autograd.grad`` inputs: differentiate with respect to
        their batched group output and take their row."""
        if not any(type(t._data) is Lazy for t in inputs):
            return inputs, None
        self.need([t._data.node for t in inputs if type(t._data) is Lazy])
        new, rows = [], []
        for t in inputs:
            lz = t._data
            if type(lz) is not Lazy:
                rows.append((len(new), None, None))
                new.append(t)
                continue
            res = lz.node.result
            if type(res) is tuple:
                res = res[lz.k]
            j = next((i for i, x in enumerate(new) if x is res), None)
            if j is None:
                j = len(new)
                new.append(res)
            rows.append((j, lz.node.row, lz.shape))
        return new, rows

    @staticmethod
    def _slice_grads(grads, rows):
        out = []
        for j, row, shape in rows:
            g = grads[j]
            if g is not None and row is not None:
                g = bind(REGISTRY["reshape"], (bind(REGISTRY["index_select"], (g, _idx([row])),
                                                    {"dim": 0}),), {"shape": shape})
            out.append(g)
        return tuple(out)

    # ------------------------------------------------------------------
    # scheduling
    # ------------------------------------------------------------------
    def need(self, nodes) -> None:
        """Make ``nodes`` computed: evaluate now, or -- inside a ``map`` task -- wait for
        the next batched evaluation that serves every blocked task."""
        coop = self.coop
        if coop is not None and coop.current() is not None:
            coop.block(nodes)
            if any(n.result is None for n in nodes):   # not reached by that evaluation
                self.evaluate(nodes)
        else:
            self.evaluate(nodes)

    def flush(self) -> None:
        """Evaluate every pending node."""
        todo = [n for n in self.nodes if n.result is None]
        if todo:
            coop = self.coop
            if coop is not None and coop.current() is not None:
                self.need(todo)
            else:
                self._execute(todo)

    def evaluate(self, roots) -> None:
        """Evaluate the pending subgraph that ``roots`` (PNodes) depend on, nothing else."""
        if self._all_feed(roots):
            self._execute(self._todo_all)
            self._todo_all = None
            return
        self.epoch += 1
        ep = self.epoch
        todo = []
        add = todo.append
        stack = [n for n in roots if n.result is None]
        pop, push = stack.pop, stack.append
        while stack:
            n = pop()
            if n.mark == ep:
                continue
            n.mark = ep
            add(n)
            for a in n.args:
                if type(a) is Lazy:
                    m = a.node
                    if m.mark != ep and m.result is None:
                        push(m)
        if todo:
            nodes = self.nodes
            if 4 * len(todo) >= len(nodes):
                # most of what is recorded: the nodes list is already in recording order,
                # a filter is cheaper than sorting (unless the walk reached nodes not in it)
                inorder = [n for n in nodes if n.mark == ep]
                if len(inorder) == len(todo):
                    todo = inorder
                else:
                    todo.sort(key=_seq)
            else:
                todo.sort(key=_seq)
            self._execute(todo)

    def _all_feed(self, roots) -> bool:
        """True when every pending node feeds ``roots`` (the common ``loss.item()`` or
        ``loss.backward()`` on everything recorded): then the pending nodes in recording
        order are the subgraph, found in one pass instead of a walk over every input.

        ``nuse`` counts a node's recorded consumers, and a pending node's consumers are
        pending too; following consumers from any pending node ends at one with none.
        So if each pending node with no consumer is a root, every pending node reaches a
        root.  (Only cell calls that run inline record no node; they give their count
        back, ``_unuse``.)  Sets ``mark`` like the walk and leaves the list in
        ``_todo_all``."""
        self.epoch += 1
        ep = self.epoch
        rm = -ep                     # roots' mark during the pass
        nroots = 0
        for r in roots:
            if r.result is None and r.mark != rm:
                r.mark = rm
                nroots += 1
        found = _EV.pending(self.nodes, rm, ep)
        if found is None:            # a pending sink that is not a root: walk
            return False
        todo, seen = found
        if not todo or nroots != seen:   # nothing, or a root not in the list: walk
            return False
        self._todo_all = todo
        return True

    def _execute(self, todo) -> None:
        t0 = time.perf_counter()
        st = self.stats
        compute = 0.0
        fused = _cells._FUSED
        _cells._FUSED = {}       # fused cells' concatenated weights, once per evaluation
        try:
            if self.scheduler == "depth":
                late = _collected(self, self.epoch)
                outer = self.gks
                groups, keys = _EV.group_by(todo, late)
                # group key by seq for _split: an array, -1 for a seq not in this evaluation
                seqs = np.fromiter(map(_seq, todo), np.int64, len(todo))
                s0 = int(seqs.min())
                gk = np.full(int(seqs.max()) - s0 + 1, -1, np.int64)
                gk[seqs - s0] = keys
                self.gks = (s0, gk)
                try:
                    for k in sorted(groups):
                        compute += self._run_group(groups[k])
                finally:
                    self.gks = outer
            else:
                compute = self._agenda(todo)
        finally:
            _cells._FUSED = fused
        # forget nodes that are done and whose outputs are dead or materialised (they keep
        # their group's result arrays alive): when the list has doubled since the last
        # time, so that the liveness checks cost O(1) per recorded node, not O(nodes) per
        # evaluation (a loop of small reads); memory stays within twice what is live
        if len(self.nodes) >= self.prune_at:
            self.nodes = _EV.keep(self.nodes)
            self.prune_at = max(_PRUNE_MIN, 2 * len(self.nodes))
        if st is not None:
            total = time.perf_counter() - t0
            st.compute_s += compute
            st.schedule_s += total - compute
            st.evaluations += 1

    def _agenda(self, todo) -> float:
        """DyNet's agenda heuristic: among ready signatures run the one whose ready nodes
        have the lowest average depth; a node becomes ready when its inputs are done."""
        ep = self.epoch
        waiting = {}
        users: dict = {}
        ready: dict = {}
        for n in todo:
            c = 0
            for a in n.args:
                if type(a) is Lazy:
                    m = a.node
                    if m.result is None and m.mark == ep:
                        c += 1
                        u = users.get(id(m))
                        if u is None:
                            users[id(m)] = [n]
                        else:
                            u.append(n)
            if c:
                waiting[id(n)] = c
            else:
                ready.setdefault(n.sig, []).append(n)
        compute = 0.0
        while ready:
            sig = min(ready, key=lambda s: sum(x.depth for x in ready[s]) / len(ready[s]))
            group = ready.pop(sig)
            compute += self._run_group(group)
            for n in group:
                for u in users.get(id(n), ()):
                    c = waiting[id(u)] - 1
                    if c:
                        waiting[id(u)] = c
                    else:
                        del waiting[id(u)]
                        ready.setdefault(u.sig, []).append(u)
        return compute

    # ------------------------------------------------------------------
    # execution
    # ------------------------------------------------------------------
    def _run_group(self, group) -> float:
        n0 = group[0]
        prim = n0.prim
        B = len(group)
        st = self.stats
        interp, grad = STATE.interpreter, STATE.grad_enabled
        STATE.interpreter = self.prev
        STATE.grad_enabled = n0.grad_enabled
        t0 = time.perf_counter()
        try:
            if _EV.stale(group) is not None:     # some member's input was written in place
                for n in group:
                    if n.versions is not None:
                        self._check_versions(n)
            rule = prim.batch
            done = split = False
            if B > 1 and rule is not None:
                args, batched = self._gather_args(group, B)
                if not any(batched):
                    out = prim.run_member(args, n0.params) if type(prim) is Template \
                        else bind(prim, args, n0.params)
                    _EV.assign(group, out, False)
                    done = True
                else:
                    out = rule(prim, B, args, batched, n0.params)
                    if out is not NotImplemented:
                        self._check_out(n0, out, B)
                        _EV.assign(group, out, True)     # member i is row i
                        done = True
                        split = B >= _SPLIT_MIN and self.gks
                    elif st is not None:
                        st.fallback(prim, "the rule does not cover these inputs "
                                          f"({_describe(args, batched)})", B)
            elif B > 1 and st is not None:
                st.fallback(prim, prim.batch_reason or "no batching rule", B)
            if not done and B == 1 and (prim is _STACK or prim is _CAT) and len(n0.args) > 2:
                done = self._stack_gathered(n0)
            if not done:
                run = prim.run_member if type(prim) is Template else None
                for n in group:
                    a = tuple(self._member_arg(x, n) for x in n.args)
                    n.result = run(a, n.params) if run is not None else bind(prim, a, n.params)
            if st is not None:
                st.group(prim, B if done or B == 1 else 1, 1 if done or B == 1 else B,
                         time.perf_counter() - t0)
            if n0.info is not None:
                self._attach_info(group)
            for n in _EV.release(group):    # args dropped; these have instance attributes
                if n.pre_hooks is not None or n.retained is not None:   # rare
                    self._attach_hooks(n)
            if split:    # after the hooks and anomaly info, which name the group's rows
                self._split(group, out, B)
        finally:
            STATE.interpreter, STATE.grad_enabled = interp, grad
        return time.perf_counter() - t0

    def _split(self, group, out, B) -> None:
        """Cut a large group's outputs into one piece per group that reads them.

        A gather's gradient is full-size for its source group: every later group that
        reads a few rows of a large group (the leaves of 50 trees, read by the phrase
        group of each height) used to return (and the engine to add) a gradient of all
        its rows, ~20x the rows it carries on the Tree-LSTM benchmark.  Members are
        grouped by the group of their last recorded consumer in this evaluation
        (``user``; -1: none in it) and each output is split once (``split_rows_p``:
        one node, whose backward puts the pieces' gradients back in one array); a
        member's ``result``/``row`` then name its piece, so every later reader gathers
        from (and returns a gradient the size of) the pieces it reads.  Not done when
        one piece would hold most rows (a sequence step read by the next step)."""
        s0, gk = self.gks
        # most large groups have one reading group (an embedding read by the leaf cells,
        # the losses read by their stack): three members with the same reader's group
        # skip the per-member pass (a heuristic; splitting only changes the layout)
        hi = len(gk)
        k3 = {gk[x] if 0 <= x < hi else -1 for x in (group[0].user - s0, group[B // 2].user - s0,
                                                      group[-1].user - s0)}
        if len(k3) == 1:
            return
        u = np.frombuffer(_EV.users(group), np.int64) - s0
        ok = (u >= 0) & (u < len(gk))
        keys = np.where(ok, gk[np.where(ok, u, 0)], -1)
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        cut = np.flatnonzero(sk[1:] != sk[:-1]) + 1
        if not len(cut):
            return
        bounds = [0, *cut.tolist(), B]
        sizes = np.diff(bounds)
        if 4 * int(sizes.max()) > 3 * B:
            return
        idx = tuple(order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=False))
        params = {"idx": idx, "n": B}
        multi = type(out) is tuple
        if multi:
            outs = [bind(_SPLIT, (o,), params) for o in out]
            pieces = list(zip(*outs, strict=True))      # per piece, a tuple of the outputs
        else:
            pieces = list(bind(_SPLIT, (out,), params))
        if self.stats is not None:
            self.stats.splits += 1
        rows = np.empty(B, np.intp)
        for i in idx:
            rows[i] = _arange(len(i))
        piece_of = np.repeat(np.arange(len(idx)), sizes)[np.argsort(order, kind="stable")]
        _EV.assign_pieces(group, pieces, piece_of.tolist(), rows.tolist())

    def _stack_gathered(self, n) -> bool:
        """``stack`` (or ``cat`` along dim 0) of many equal-shaped values (a loss list, the
        states of a sequence): one index op per source group instead of one slice per input,
        forward and backward."""
        refs = list(n.args)
        dt = shape = None
        for r in refs:
            d = r if type(r) is Lazy else getattr(r, "_data", None)
            if d is None:
                return False
            if dt is None:
                dt, shape = d.dtype, d.shape
            elif d.dtype != dt or d.shape != shape:
                return False
        if n.prim is _CAT and (not shape or n.params.get("dim", 0) % len(shape) != 0):
            return False
        x, batched = self._gather(refs, len(refs))
        if not batched:
            return False
        if n.pre_hooks or n.retained:
            # hooks of this result must see its own gradient, not that of the source group
            # array it may be (rows already in order): give it a node of its own
            x = bind(REGISTRY["reshape"], (x,), {"shape": tuple(x._data.shape)})
        if n.prim is _CAT:     # cat along dim 0 of equal shapes: the gathered rows, merged
            n.result = bind(REGISTRY["reshape"], (x,), {"shape": (-1, *shape[1:])})
            return True
        nd = x._data.ndim
        d = n.params.get("dim", 0) % nd
        if d:
            perm = list(range(1, nd))
            perm.insert(d, 0)
            x = bind(REGISTRY["permute"], (x,), {"dims": tuple(perm)})
        n.result = x
        return True

    @staticmethod
    def _check_versions(n):
        for a, v in zip(n.args, n.versions, strict=True):
            if isinstance(a, Tensor) and type(a._data) is not Lazy and (a._vc[0] if a._vc else 0) != v:
                raise RuntimeError(
                    f"dg.autobatch: a tensor of shape {list(a.shape)} used by a pending "
                    f"'{n.prim.name}' was modified in place before that call ran; read a value "
                    "(or leave the autobatch context) before the in-place write, or clone() the tensor")

    @staticmethod
    def _check_out(n0, out, B):
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(n0.specs) or any(
                o._data.shape != (B, *sp[0]) or o._data.dtype != sp[1]
                for o, sp in zip(outs, n0.specs, strict=False)):
            got = [(list(o._data.shape), str(o._data.dtype)) for o in outs]
            want = [([B, *sp[0]], str(sp[1])) for sp in n0.specs]
            raise RuntimeError(f"dg.autobatch: the batching rule of '{n0.prim.name}' returned "
                               f"{got}, expected {want} (a bug in the rule)")

    def _member_arg(self, a, n):
        if type(a) is Lazy:
            return self._row_value(a)
        if type(a) is Consts:
            return self._const_arg(a, n)
        return a

    @staticmethod
    def _const_arg(c, n):
        """Member ``n``'s value of a constant argument kept in ``c`` (a tensor of its own)."""
        return Tensor._make(c.take(np.array([n.seq], np.int64))[0], False, None, 0)

    @staticmethod
    def _row_value(lz):
        n = lz.node
        res = n.result
        if type(res) is tuple:
            res = res[lz.k]
        if n.row is None:
            return res
        return bind(REGISTRY["getitem"], (res,), {"index": (n.row,)})

    def _gather_args(self, group, B):
        n0 = group[0]
        args, batched = [], []
        memo = {}
        cols = None
        prim = n0.prim
        ar = self.arenas.get(prim) if type(prim) is Template and prim.consts else None
        if ar is not None:
            ar = dict(zip(prim.consts, ar, strict=True))
        for j, a0 in enumerate(n0.args):
            if ar is not None and j in ar:
                # a constant argument copied when recorded (call_cell): one take for the
                # group; members whose argument was pending (or did not fit) get their own
                if cols is None:
                    cols = _EV.columns(group, len(n0.args))
                c, col = ar[j], cols[j]
                k = sum(map(is_, col, repeat(c, B)))
                if k == B:
                    if self.stats is not None:
                        self.stats.gathers += 1
                    x = Tensor._make(c.take(np.fromiter(map(_seq, group), np.int64, B)), False, None, 0)
                    b = True
                else:
                    if k:
                        col = [self._const_arg(c, n) if x is c else x for x, n in zip(col, group, strict=True)]
                    x, b = self._gather(col, B, memo if type(col[0]) is Lazy else None)
            elif type(a0) is Lazy or (isinstance(a0, Tensor) and not (a0._rg and a0._fn is None)):
                if cols is None:   # every member's args by position, in one pass
                    cols = _EV.columns(group, len(n0.args))
                x, b = self._gather(cols[j], B, memo if type(a0) is Lazy else None)
            else:
                x, b = a0, False
            args.append(x)
            batched.append(b)
        return tuple(args), tuple(batched)

    def _gather(self, refs, B, memo=None):
        """One tensor with member i's value in row i (or the shared value, unbatched).

        The common case -- every member's input is a row of an executed group -- is
        done with C-level maps and NumPy on the members' row numbers, without a Python
        loop over members: one source group in order is used as it is; otherwise the
        sources (each first cut to its needed rows when it is much larger) are
        concatenated and ONE ``rows_p`` gather puts the rows in member order.
        """
        sc = _EV.scan(refs)
        if sc is not None:      # every ref an output of an executed node (the common case)
            if sc[0] == 1:      # the same value for every member
                return self._row_value(refs[0]), False
            out = self._gather_rows(refs, B, memo, sc[0] == 2, sc)
            if out is not None:
                return out, True
        a0 = refs[0]
        nid = len(set(map(id, refs)))
        if nid == 1:
            return (self._row_value(a0) if type(a0) is Lazy else a0), False
        kinds = set(map(type, refs))
        if kinds == _LAZY_ONLY:
            # distinct Lazy refs are distinct (node, output) pairs: no row of any source
            # is taken twice (the gathers' gradients are plain scatters, no check needed)
            out = self._gather_rows(refs, B, memo, nid == B, _scan_py(refs))
            if out is not None:
                return out, True
        elif Lazy not in kinds:
            ts = tuple(refs)
            if not any(map(_RG, ts)):   # constants (labels, indices): one NumPy stack
                if self.stats is not None:
                    self.stats.gathers += 1
                return Tensor._make(np.array(list(map(_DATA, ts))), False, None, 0), True
        sources: dict = {}
        singles_pos, singles = [], []
        for pos, r in enumerate(refs):
            if type(r) is Lazy:
                n = r.node
                res = n.result
                if type(res) is tuple:
                    res = res[r.k]
                row = n.row
                if row is None:
                    singles_pos.append(pos)
                    singles.append(res)
                    continue
                e = sources.get(id(res))
                if e is None:
                    sources[id(res)] = (res, [row], [pos])
                else:
                    e[1].append(row)
                    e[2].append(pos)
            else:
                singles_pos.append(pos)
                singles.append(r)
        index_select = REGISTRY["index_select"]
        st = self.stats
        if st is not None:
            st.gathers += len(sources) + (1 if singles else 0)
        parts, order = [], []
        for res, rows, poss in sources.values():
            if len(rows) == res._data.shape[0] and rows == _range(len(rows)):
                parts.append(res)
            else:
                parts.append(bind(index_select, (res, _idx(rows)), {"dim": 0}))
            order.extend(poss)
        if singles:
            if any(t._rg for t in singles):
                parts.append(bind(REGISTRY["stack"], tuple(singles), {"dim": 0}))
            else:   # constants (labels, indices, masks): one NumPy stack, nothing to record
                parts.append(Tensor._make(np.stack([t._data for t in singles]), False, None, 0))
            order.extend(singles_pos)
        x = parts[0] if len(parts) == 1 else bind(REGISTRY["cat"], tuple(parts), {"dim": 0})
        if order != _range(B):
            x = bind(index_select, (x, _idx(np.argsort(order))), {"dim": 0})
        return x, True

    def _gather_rows(self, refs, B, memo, distinct, sc):
        """``_gather`` when every ref is a Lazy output of an executed node.  A node whose
        result is its own value (``row`` None: a group of one, a member run alone) is a
        source of one row.

        ``memo`` (one per group): inputs that are other outputs of the same nodes (the
        ``h`` and ``c`` of the same children) reuse the first one's plan.  ``sc``: what
        ``_scan_py`` (or its C version) found about ``refs``."""
        _, nodes, k, results, rows, keys = sc
        if memo is None or k < 0:
            k = None
        elif memo.get("nodes") == nodes:          # identity per member
            return self._apply_plan(memo["plan"], memo["results"], k)
        plan = self._plan(results, refs, B, distinct, rows, keys)
        if plan is None:
            return None
        if k is not None:
            memo["nodes"], memo["plan"], memo["results"] = nodes, plan, results
        if k is None:
            return self._apply_plan(plan, results, None, refs)
        return self._apply_plan(plan, results, k)

    @staticmethod
    def _plan(results, refs, B, distinct, rows, keys):
        """Which rows of which sources, in member order (no binds: ``_apply_plan`` runs
        it).  ``(None, p, index, n, unique)`` for one source (``index`` None: its rows
        in order), else ``(sources, params)``: the member index of each source and the
        params of the one ``gather_p`` call.  ``rows``: each member's row (-1: its node's
        result is its own value); ``keys``: each member's source array's identity (both
        bytes of intp, as ``scan`` gives them)."""
        rb, kb = rows, keys
        rows = np.frombuffer(rb, np.intp)
        keys = np.frombuffer(kb, np.intp)
        if (keys == keys[0]).all():        # one source group
            if rows[0] < 0:                # the same value for every member, unbatched
                return None
            res = results[0]
            if type(res) is tuple:
                res = res[refs[0].k]
            n = res._data.shape[0]
            if n == B and (rows == _arange(B)).all():
                return (None, 0, None, n, True)
            return (None, 0, _idx(rows), n, distinct or _unique(rows))
        # several sources, in order of first appearance (each source's members in member
        # order): one ``gather_p`` call takes every source's rows
        srcs, rws, poss, ns, uq = [], [], [], [], []
        for p0, r, pos, unique in _EV.plan(rb, kb, distinct):
            srcs.append(p0)
            if r is None:                  # a member's own value (a group of one)
                rws.append(None)
                ns.append(0)
            else:
                res = results[p0]
                if type(res) is tuple:
                    res = res[refs[p0].k]
                rws.append(np.frombuffer(r, np.intp))
                ns.append(res._data.shape[0])
            uq.append(unique)
            poss.append(slice(*pos) if type(pos) is tuple else np.frombuffer(pos, np.intp))
        return (tuple(srcs), {"B": B, "rows": tuple(rws), "pos": tuple(poss), "ns": tuple(ns),
                              "uniq": tuple(uq)})

    def _apply_plan(self, plan, results, k, refs=None):
        """Run a ``_plan`` for output ``k`` of the sources (``refs``: each source's own k)."""
        st = self.stats

        def source(p):
            r = results[p]
            if type(r) is tuple:
                r = r[k if refs is None else refs[p].k]
            return r

        if plan[0] is None:
            _, p, index, n, unique = plan
            if st is not None:
                st.gathers += 1
            res = source(p)
            return res if index is None else bind(_ROWS, (res, index), {"n": n, "unique": unique})
        sources, params = plan
        if st is not None:
            st.gathers += 1
        return bind(_GATHER, tuple(map(source, sources)), params)

    def _attach_hooks(self, n):
        """Tensor hooks / retain_grad of pending members act on their row of the batched
        gradient."""
        res = n.result
        for k in range(len(n.specs)):
            out = res[k] if type(res) is tuple else res
            hooks = (n.pre_hooks or {}).get(k) or []
            ret = (n.retained or {}).get(k)
            if not hooks and ret is None:
                continue
            if not out._rg:
                continue
            row = n.row
            if row is None:
                for h in hooks:
                    out.register_hook(h)
                if ret is not None:
                    out.register_hook(_retainer(ret))
                continue
            out.register_hook(_row_hook(row, hooks, ret))

    @staticmethod
    def _attach_info(group):
        """Anomaly mode: the batched node shows the creation stack of the member whose
        output row is not finite (else the first member's)."""
        n0 = group[0]
        res = n0.result
        outs = res if type(res) is tuple else (res,)
        pick = n0
        if n0.row is not None:
            for o in outs:
                d = getattr(o, "_data", None)
                if d is not None and d.dtype.kind == "f" and d.ndim:
                    bad = ~np.isfinite(d.reshape(d.shape[0], -1)).all(axis=1)
                    if bad.any():
                        pick = group[int(np.argmax(bad))]
                        break
        for o in outs:
            fn = getattr(o, "_fn", None)
            # replace the stack of the scheduler's call by the member's (only on the node
            # this group made: a gathered ``stack`` may return its source group's array)
            if fn is not None and (fn.prim is n0.prim or type(n0.prim) is Template):
                fn.info = pick.info

    # ------------------------------------------------------------------
    # leaving the context
    # ------------------------------------------------------------------
    def close(self) -> None:
        """Evaluate what live tensors need and materialise every live pending tensor."""
        live = [n for n in self.nodes if _alive(n)]
        pend = [n for n in live if n.result is None]
        aliased = []
        for lz, refs in self.aliases.items():
            # an alias whose output tensor is gone still needs its node's value
            if any(a is not None and a._data is lz for a in map(_CALL, refs)):
                aliased.append(lz)
                if lz.node.result is None:
                    pend.append(lz.node)
        if pend:
            self.evaluate(list(dict.fromkeys(pend)))
        for n in live:
            for k, r in enumerate(n.refs):
                t = r()
                if t is not None and _pending_out(t, n, k):
                    self.materialize(t)
        for lz in aliased:
            if lz in self.aliases:
                self._settle_aliases(lz, self.value_of(lz))
        self.aliases = {}
        self.nodes = []
        self.collectors = []
        self.closed = True


class _Named:
    """A name for the stats of things that are not primitives (cells)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


_STACK = REGISTRY["stack"]
_CAT = REGISTRY["cat"]
_ROWS = rows_p
_GATHER = gather_p
_SPLIT = split_rows_p
_RESHAPE = REGISTRY["reshape"]
_LAZY_ONLY = {Lazy}
_NODE = attrgetter("node")
_ARGS = attrgetter("args")
_ROW = attrgetter("row")
_RESULT = attrgetter("result")
_K = attrgetter("k")
_CALL = methodcaller("__call__")
_RG = attrgetter("_rg")
_DATA = attrgetter("_data")
_ARANGE: dict = {}


def _arange(n):
    a = _ARANGE.get(n)
    if a is None:
        a = _ARANGE[n] = np.arange(n)
    return a


def _scan_py(refs):
    """What a gather needs to know about ``refs`` (C: ``dyngraph._autobatch.scan``):
    None unless each is the :class:`Lazy` output of an executed node, else ``(distinct,
    nodes, k, results, rows, keys)`` -- distinct 1: one object for all, 2: all differ,
    0: some repeat; k the output number shared by all (-1: mixed); rows and keys bytes of
    intp per member: its row (-1: the result is its own value) and the identity of its
    source array (the node's result, or output k of a tuple result)."""
    if not refs or set(map(type, refs)) != _LAZY_ONLY:
        return None
    nodes = list(map(_NODE, refs))
    results = list(map(_RESULT, nodes))
    if None in results:
        return None
    ks = set(map(_K, refs))
    nid = len(set(map(id, refs)))
    rows = list(map(_ROW, nodes))
    if None in rows:
        rows = [-1 if r is None else r for r in rows]
    rows = np.array(rows, dtype=np.intp)
    if tuple in set(map(type, results)):     # multi-output results: output k's identity
        keys = np.fromiter((id(r[lz.k] if type(r) is tuple else r) for r, lz in zip(results, refs, strict=True)),
                           np.intp, len(refs))
    else:
        keys = np.fromiter(map(id, results), np.intp, len(refs))
    return (1 if nid == 1 else 2 if nid == len(refs) else 0, nodes, ks.pop() if len(ks) == 1 else -1,
            results, rows.tobytes(), keys.tobytes())


def _plan_py(rows, keys, distinct) -> list:
    """The sources of a gather from several source arrays (C: ``plan``), in order of first
    appearance: per source ``(p0, rows, pos, unique)`` -- its first member, the rows it
    gives (bytes of intp; None: the source is one member's own value), its members'
    positions (``(start, stop)`` when contiguous, else bytes of intp), and whether no row
    is taken twice.  ``rows``/``keys``: bytes of intp per member, as ``scan`` gives them."""
    rows = np.frombuffer(rows, np.intp)
    keys = np.frombuffer(keys, np.intp)
    rank: dict = {}
    for k in keys.tolist():                  # sources numbered by first appearance
        if k not in rank:
            rank[k] = len(rank)
    r = np.fromiter(map(rank.__getitem__, keys.tolist()), np.intp, len(keys))
    order = np.argsort(r, kind="stable")
    bounds = [0, *(np.flatnonzero(np.diff(r[order])) + 1).tolist(), len(r)]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=False):
        pos = order[a:b]
        p0 = int(pos[0])
        pos_out = (p0, p0 + b - a) if int(pos[-1]) - p0 == b - a - 1 else pos.astype(np.intp).tobytes()
        if rows[p0] < 0:
            out.append((p0, None, pos_out, True))
        else:
            rw = rows[pos]
            out.append((p0, rw.tobytes(), pos_out, bool(distinct) or _unique(rw)))
    return out


def _pending_py(nodes, rm, ep):
    """``_all_feed``'s pass (C: ``pending``): the pending nodes in order, each marked
    ``ep``, and how many were marked ``rm`` (roots): ``(todo, roots)``; None as soon as a
    pending node with no consumer is not a root."""
    todo = []
    add = todo.append
    roots = 0
    for n in nodes:
        if n.result is None:
            if n.mark == rm:
                roots += 1
            elif n.nuse == 0:
                return None
            n.mark = ep
            add(n)
    return todo, roots


def _users_py(group) -> bytes:
    """Every member's last recorded consumer, bytes of int64 (C: ``users``)."""
    return np.fromiter(map(_USER, group), np.int64, len(group)).tobytes()


def _assign_pieces_py(group, pieces, piece_of, rows) -> None:
    """After a split: member i's result is ``pieces[piece_of[i]]``, its row ``rows[i]``
    (C: ``assign_pieces``)."""
    for n, p, r in zip(group, piece_of, rows, strict=True):
        n.result = pieces[p]
        n.row = r


def _group_by_py(todo, late):
    """``_execute``'s groups (C: ``group_by``): key ``(depth << 32) | sig`` per node, a
    node's depth ``late.get(node, node.depth)``; ``({key: [nodes]}, [key per node])``."""
    groups: dict = {}
    keys = []
    add = keys.append
    for n in todo:
        d = late.get(n, n.depth) if late else n.depth
        k = (d << 32) | n.sig     # depth first, then signature
        add(k)
        g = groups.get(k)
        if g is None:
            groups[k] = [n]
        else:
            g.append(n)
    return groups, keys


def _assign_py(group, out, rows) -> None:
    """Every member's result is ``out``; with ``rows`` member i's row is i (C: ``assign``)."""
    if rows:
        for i, n in enumerate(group):
            n.result = out
            n.row = i
    else:
        for n in group:
            n.result = out


def _release_py(group) -> list:
    """Drop every member's args; the members with hooks or retained grads are returned
    for the rare-case loop (C: ``release``, which returns every member with instance
    attributes: these and those with anomaly info)."""
    rare = []
    for n in group:
        if n.pre_hooks is not None or n.retained is not None:
            rare.append(n)
        n.args = None
    return rare


def _stale_py(group):
    """The first member whose tensor inputs were written in place since it was recorded,
    else None (C: ``stale``)."""
    for n in group:
        vs = n.versions
        if vs is None:
            continue
        for a, v in zip(n.args, vs, strict=True):
            if isinstance(a, Tensor) and type(a._data) is not Lazy and (a._vc[0] if a._vc else 0) != v:
                return n
    return None


def _columns_py(group, width) -> list:
    """Per argument position, every member's argument (C: ``columns``)."""
    return [list(c) for c in zip(*map(_ARGS, group), strict=True)] if width else []


class _Ev:
    """The per-member loops of an evaluation (``pending``, ``scan``, ``group_by``, ``assign``,
    ``release``, ``stale``, ``columns``, ``keep``, ``late_depths``, ``plan``, ``users``,
    ``assign_pieces``): the C
    versions or the Python functions named ``_<name>_py`` here (set by ``use_native``)."""


_EV = _Ev


def _unique(rows) -> bool:
    """No row index repeats (the gather's gradient is then a plain scatter)."""
    if len(rows) < 2:
        return True
    s = np.sort(rows)
    return bool((s[1:] != s[:-1]).all())


_seq = attrgetter("seq")
_USER = attrgetter("user")
_PRUNE_MIN = 4096   # see Autobatcher._execute
_SPLIT_MIN = 32     # a group of at least this many members may be split (Autobatcher._split)
_COLLECTOR_MIN = 8  # a stack/cat of at least this many inputs is a collector (_collected)
_PARAM = "param"   # markers in a cell's call key (call_cell)
_VALUE = "value"


def _stack_spec(args, params):
    """The output spec of ``stack`` of many equal-shaped tensors of one dtype (a list of
    per-node losses): computed, not run on stand-ins (thousands of zero arrays)."""
    a0 = args[0]
    if not isinstance(a0, Tensor):
        return None
    d0 = a0._data
    shape, dtype = d0.shape, d0.dtype
    for a in args:
        if type(a) is not Tensor and not isinstance(a, Tensor):
            return None
        d = a._data
        s, t = d.shape, d.dtype   # pending losses share their spec's objects: identity first
        if (s is not shape and s != shape) or (t is not dtype and t != dtype):
            return None
    dim = params.get("dim", 0)
    n = len(shape) + 1
    if type(dim) is not int or not -n <= dim < n:
        return None     # the stand-in run raises eager's error
    dim %= n
    out = (*shape[:dim], len(args), *shape[dim:])
    return (((out, dtype, int(np.prod(out))),), False, (dtype.kind == "f",), next(SIGNATURES))


def _pending_out(t, n, k) -> bool:
    """``t`` (output ``k`` of node ``n``) is still pending, not materialised."""
    d = t._data
    return type(d) is Lazy and d.node is n and d.k == k


def _collected(interp, ep) -> dict:
    """As late as possible for what only feeds a collector.

    A collector is a ``stack``/``cat`` of many inputs (the per-node losses of
    ``stack(losses).sum()``).  A node recorded with one consumer (``nuse``) that is a
    collector runs at the collector's depth - 1, and a node whose one consumer is such a
    delayed node runs just before it (the whole loss chain of a node: ``linear``,
    ``log_softmax``, ``nll_loss``), so each step of the chain forms ONE group instead of
    one per depth it was recorded at (~25 for 50 trees).  Only those chains are walked:
    the collectors were listed when they were recorded (``interp.collectors``; the ones
    that ran are dropped here).  Returns ``{node: depth}``.
    """
    late: dict = {}
    cs = interp.collectors
    if not cs:
        return late
    interp.collectors = [c for c in cs if c.result is None]
    return _EV.late_depths(cs, ep)


def _late_depths_py(cs, ep) -> dict:
    """``_collected``'s walk (C: ``late_depths``): ``{node: depth}`` for the chains that
    only feed the pending collectors marked ``ep``."""
    late: dict = {}
    for c in cs:
        if c.mark != ep or c.result is not None:
            continue
        stack = [(a.node, c.depth - 1) for a in c.args if type(a) is Lazy]
        while stack:
            m, d = stack.pop()
            if m.nuse != 1 or m.mark != ep or m.result is not None:
                continue
            late[m] = d               # >= m.depth: its one consumer runs at d + 1
            for a in m.args:
                if type(a) is Lazy:
                    stack.append((a.node, d - 1))
    return late


def _unuse(args) -> None:
    """A cell call that runs inline records no node of its own: its count of consumers
    goes back (``Autobatcher._all_feed`` relies on exact counts)."""
    for a in args:
        if type(a) is Lazy:
            a.node.nuse -= 1


def _keep(nodes) -> list:
    """The nodes still pending or with a live, unmaterialised output (``_alive`` inlined:
    this runs over every recorded node; C: ``keep``)."""
    keep = []
    add = keep.append
    for n in nodes:
        if n.result is None:
            add(n)
            continue
        for r in n.refs:
            t = r()
            if t is not None:
                d = t._data
                if type(d) is Lazy and d.node is n:
                    add(n)
                    break
    return keep


def _alive(n) -> bool:
    for k, r in enumerate(n.refs):
        t = r()
        if t is not None and _pending_out(t, n, k):
            return True
    return False


def _describe(args, batched):
    return ", ".join(
        (f"{'batched ' if b else ''}{list(a._data.shape)}" if isinstance(a, Tensor) else repr(a))
        for a, b in zip(args, batched, strict=True))


def _retainer(ref):
    def hook(g):
        t = ref()
        if t is not None:
            t._grad = g if not isinstance(g, Tensor) else Tensor._make(g._data, False, None, 0)
    return hook


def _row_hook(row, hooks, ret):
    def hook(g):
        gi = Tensor._make(np.array(g._data[row]), False, None, 0)
        changed = False
        for h in hooks:
            r = h(gi)
            if r is not None:
                gi = r
                changed = True
        if ret is not None:
            t = ret()
            if t is not None:
                t._grad = gi
        if changed:
            arr = np.array(g._data)
            arr[row] = gi._data
            return Tensor._make(arr, False, None, 0)
        return None
    return hook



# ---------------------------------------------------------------------------
# the optional C recording paths (dyngraph/_autobatch.c)
# ---------------------------------------------------------------------------

def _load_native():
    """``dyngraph._autobatch`` set up for these classes, or None (not built, or the
    pure-Python path was asked for with DYNGRAPH_PURE_PYTHON)."""
    if os.environ.get("DYNGRAPH_PURE_PYTHON"):
        return None
    try:
        from .. import _autobatch as mod  # noqa: PLC0415  (optional C extension)
    except ImportError:
        return None
    mod.setup(Lazy, Tensor, PNode, Template, Autobatcher, Primitive, STATE, Autobatcher._process_py,
              _STACK, _CAT, EMPTY, _PARAM, _VALUE, _COLLECTOR_MIN, Consts, np.ndarray)
    _cells._CELL_TYPE = mod.Cell
    return mod


_NATIVE = _load_native()
_NATIVE_PROCESS = _NATIVE.process_method() if _NATIVE is not None else None


def use_native(on: bool = True) -> bool:
    """Record through the C paths of ``dyngraph._autobatch`` (when built) or the Python
    reference; returns whether they were in use.  For tests that compare the two.

    >>> was = use_native(False)      # the Python reference from here on
    >>> _ = use_native(was)
    """
    was = Autobatcher.process is not Autobatcher._process_py
    mod = _NATIVE if on else None
    if mod is not None:
        Autobatcher.process = _NATIVE_PROCESS
        _cells._RECORD_CELL = mod.record_cell
    else:
        Autobatcher.process = Autobatcher._process_py
        _cells._RECORD_CELL = None
    for name, py in (("pending", _pending_py), ("scan", _scan_py), ("group_by", _group_by_py),
                     ("assign", _assign_py),
                     ("release", _release_py), ("stale", _stale_py), ("columns", _columns_py),
                     ("keep", _keep), ("late_depths", _late_depths_py), ("plan", _plan_py),
                     ("users", _users_py), ("assign_pieces", _assign_pieces_py)):
        setattr(_Ev, name, staticmethod(getattr(mod, name) if mod is not None else py))
    _batching._FILL = mod.fill if mod is not None else None
    _batching._SCATTER = mod.scatter if mod is not None else None
    if _NATIVE is not None:
        _NATIVE.set_cell_native(mod is not None)
    return was


use_native(True)
