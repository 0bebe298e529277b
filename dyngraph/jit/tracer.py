"""Capture: run a Python function once under a recording interpreter.

The :class:`Tracer` is installed as ``STATE.interpreter``; ``bind`` hands it
every primitive call.  It computes the call for real with
:func:`dyngraph.ops.registry.eager` (so the function's Python control flow
runs as usual and an ordinary autograd graph is built) and records the call
into the SSA :class:`~dyngraph.jit.ir.Graph`.

* Tensors are identified by ``id()`` while the trace runs (the tracer keeps
  them alive); a tensor re-wrapping a recorded array (the autograd engine does
  that for saved outputs) is found through ``id(array)``.
* Unknown tensors are *captures*: parameters and tensors that outlive the
  call are read by reference at replay (optimizer updates are seen); tensors
  created inside the call (``dg.zeros(...)``) become constants.
* ``bool(t)``, ``t.item()``, ``t.tolist()`` and library value reads
  (``concrete(t, why)``: embedding_bag offsets, one_hot's class count...) reach
  the tracer through its ``on_concrete`` hook and become guards checked at replay.
* ``.numpy()``, ``__array__`` and printing values cannot be captured: the
  tracer stops recording and the call finishes eagerly (:class:`Uncapturable`).
* In-place writes reach the tracer through ``on_inplace`` and become
  side effects (writes into captured tensors) applied after each replay.
* ``backward()`` / ``autograd.grad`` inside the function reach the tracer
  through ``on_backward``: the vjp rules (written with primitives) are traced
  like any other code; gradients written to ``.grad`` (``on_set_grad``) and
  optimizer steps (``on_optimizer_step``) become side effects too.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np

from .._core.graph import version
from .._core.interpreter import Interpreter, interpreting
from .._core.state import STATE
from ..autograd.graph import Node as _ANode
from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..ops.registry import REGISTRY, eager, promote_arrays
from ..random import default_generator
from ..tensor import Tensor
from .autodiff import Uncapturable, reverse
from .ir import Graph, Node, ValueInfo, Var

__all__ = ["Tracer", "Uncapturable", "Capture", "capture", "flatten", "unflatten"]

_version = version  # (the counters' reader lives on the ground floor)


# ---------------------------------------------------------------------------
# pytrees of arguments / results
# ---------------------------------------------------------------------------

def flatten(obj, leaves: list):
    """Structure of ``obj`` with every Tensor replaced by its index in ``leaves``."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return ("T", len(leaves) - 1)
    if isinstance(obj, np.ndarray):
        leaves.append(Tensor._make(obj, False, None, 0))
        return ("T", len(leaves) - 1)
    if isinstance(obj, (list, tuple)):
        kind = "L" if isinstance(obj, list) else ("N", type(obj)) if hasattr(obj, "_fields") else "U"
        return (kind, tuple(flatten(o, leaves) for o in obj))
    if isinstance(obj, dict):
        return ("D", tuple((k, flatten(v, leaves)) for k, v in obj.items()))
    return ("C", obj)


def unflatten(spec, leaves):
    kind = spec[0]
    if kind == "T":
        return leaves[spec[1]]
    if kind == "C":
        return spec[1]
    if kind == "L":
        return [unflatten(s, leaves) for s in spec[1]]
    if kind == "U":
        return tuple(unflatten(s, leaves) for s in spec[1])
    if kind == "D":
        return {k: unflatten(s, leaves) for k, s in spec[1]}
    return kind[1](*(unflatten(s, leaves) for s in spec[1]))


# ---------------------------------------------------------------------------
# the interpreter
# ---------------------------------------------------------------------------

class Tracer(Interpreter):
    """Records primitive calls into a :class:`Graph` while computing them eagerly.

    The graph-capture interpreter (see :mod:`dyngraph._core.interpreter`): it
    owns the computation (``observer = False``), so it computes each call with
    :func:`eager` itself instead of handing it below, and it answers every hook.
    """

    def __init__(self):
        self.fwd = Graph()
        self.graph = self.fwd          # the graph being recorded into
        self.next_vid = 0
        self.env = {}                  # id(tensor) -> (vid, tensor, version)
        self.data_env = {}             # id(array) -> (vid, owner tensor, version)
        self.keep = []                 # keeps traced tensors alive (ids stay unique)
        self.by_vid = {}               # vid -> a tensor holding that value
        self.capture_tensors = []      # tensors read by reference, parallel to fwd.captures
        self.capture_kinds = []        # "param" | "ref" | "pending"
        self.recording = True
        self.in_backward = 0           # > 0 while vjp rules run (inside the trace)
        self.strict = 0                # > 0 while one rule is traced (errors roll it back)
        self.reason = None             # why recording stopped (uncapturable)
        self.effects = []              # (kind, target, vid): "write" into a tensor, "grad" of a leaf
        self.grad_guards = []          # (leaf tensor, had_grad)
        self.grad_state = {}           # id(leaf) -> vid of the .grad value read by reference
        self.grad_at_capture = {}      # id(param) -> its .grad object when first seen
        self.grad_written = set()      # id(leaf) whose .grad the function assigned
        self.guard_whys = []           # parallel to fwd.guards: the library's reason, or None
        self.stepped = set()           # ids of parameters an optimizer updated
        self.pending_data = {}         # capture position -> data when first seen

    # -- values ----------------------------------------------------------------
    def _new(self, shape, dtype, graph=None) -> int:
        g = graph or self.graph
        vid = self.next_vid
        self.next_vid += 1
        g.values[vid] = _info(shape, dtype)
        return vid

    def bind_tensor(self, t, vid) -> None:
        self.env[id(t)] = (vid, t, _version(t))
        self.by_vid[vid] = t
        d = t._data
        self.data_env[id(d)] = (vid, t, _version(t))
        self.keep.append(t)

    def tensor_of(self, vid):
        t = self.by_vid.get(vid)
        if t is None:
            arr = self.graph.constants.get(vid)
            if arr is None:
                arr = self.fwd.constants[vid]
            t = Tensor._make(arr, False, None, 0)
            self.by_vid[vid] = t
            self.keep.append(t)
        return t

    def lookup(self, t) -> int:
        ent = self.env.get(id(t))
        if ent is not None and ent[1] is t:
            if _version(t) != ent[2]:
                raise Uncapturable(
                    f"a tensor of shape {list(t.shape)} was modified in place by an operation "
                    "the tracer cannot see")
            return self._use(ent[0])
        ent = self.data_env.get(id(t._data))
        if ent is not None and ent[1]._data is t._data and _version(ent[1]) == ent[2] \
                and (t._vc is None or t._vc is ent[1]._vc or t._vc[0] == 0):
            vid = self._use(ent[0])
            owner = ent[1]
            if t._rg != owner._rg or (t._rg and t._fn is not owner._fn):
                # detach() / requires_grad_() made a new autograd identity for the same
                # data: give it its own value so gradients stop (or start) here
                new = self._new(t._data.shape, t._data.dtype)
                self.graph.nodes.append(Node("reshape", (Var(vid),), {"shape": tuple(t._data.shape)},
                                             (new,), out_rg=(t._rg,), arg_rg=(False,)))
                vid = new
            self.env[id(t)] = (vid, t, _version(t))
            self.by_vid.setdefault(vid, t)
            self.keep.append(t)
            return vid
        return self._capture(t)

    def _use(self, vid) -> int:
        g = self.graph
        if g is not self.fwd and vid not in g.values:
            # a forward value read by the backward program: a residual
            g.values[vid] = self.fwd.values[vid]
            g.inputs.append(vid)
        return vid

    def _capture(self, t) -> int:
        if self.in_backward:
            # created while differentiating: zeros for a missing gradient are a constant;
            # anything else was computed by a rule outside primitives (maybe from data)
            if t._data.size and np.any(t._data):
                raise Uncapturable(
                    "a vjp rule used an array computed outside primitives (maybe from tensor "
                    "data); its backward cannot be captured")
        if self.graph is not self.fwd or self.in_backward:
            vid = self._new(t._data.shape, t._data.dtype)
            self.graph.constants[vid] = np.array(t._data)
            self.bind_tensor(t, vid)
            return vid
        vid = self._new(t._data.shape, t._data.dtype, self.fwd)
        self.fwd.captures.append(vid)
        self.capture_tensors.append(t)
        if t._rg and t._fn is None:
            kind = "param"
            self.grad_at_capture[id(t)] = t._grad
        elif t._rg:
            kind = "ref"
        else:
            kind = "pending"
            # its value now (a constant if it turns out to be a temporary of the call)
            self.pending_data[len(self.capture_tensors) - 1] = np.array(t._data)
        self.capture_kinds.append(kind)
        self.bind_tensor(t, vid)
        return vid

    def _literal(self, a, prim=None):
        if isinstance(a, np.ndarray):
            if self.in_backward and prim is not None:
                # a rule computed this array with NumPy, possibly from tensor data: a
                # static graph would replay today's values (never silently wrong)
                raise Uncapturable(
                    f"a vjp rule passes a NumPy array to '{prim.name}' (computed outside "
                    "primitives, maybe from tensor data); its backward cannot be captured")
            vid = self._new(a.shape, a.dtype)
            self.graph.constants[vid] = np.array(a)
            return Var(vid)
        if isinstance(a, np.generic):
            return a.item()
        return a

    # -- the interpreter protocol ---------------------------------------------------
    def process(self, prim, args, params):
        if not self.recording:
            return eager(prim, args, params)
        out = eager(prim, args, params)
        try:
            self._record(prim, args, params, out)
        except Uncapturable as exc:
            self.stop(str(exc))
        return out

    def _record(self, prim, args, params, out):
        ir_args = []
        datas = []
        arg_rg = []
        for a in args:
            if isinstance(a, Tensor):
                ir_args.append(Var(self.lookup(a)))
                datas.append(a._data)
                arg_rg.append(a._rg)
            else:
                arg_rg.append(False)
                ir_args.append(self._literal(a, prim))
                datas.append(a)
        if prim.promote is not None:
            promoted = promote_arrays(prim, datas)
            if promoted is not datas:
                for i, (d, p) in enumerate(zip(datas, promoted, strict=False)):
                    if p is d:
                        continue
                    if isinstance(p, np.ndarray) and type(ir_args[i]) is Var and isinstance(d, np.ndarray):
                        vid = self._new(p.shape, p.dtype)
                        rg = arg_rg[i] and _is_float_dtype(p.dtype)
                        self.graph.nodes.append(Node("cast", (ir_args[i],), {"dtype": p.dtype}, (vid,),
                                                     out_rg=(rg,), arg_rg=(arg_rg[i],)))
                        ct = Tensor._make(p, rg, None, 0)
                        self.bind_tensor(ct, vid)
                        ir_args[i] = Var(vid)
                    else:
                        ir_args[i] = self._literal(p)
        outs = out if isinstance(out, tuple) else (out,)
        vids = []
        for o in outs:
            vid = self._new(o._data.shape, o._data.dtype)
            self.bind_tensor(o, vid)
            vids.append(vid)
        self.graph.nodes.append(Node(prim.name, tuple(ir_args), dict(params), tuple(vids),
                                     out_rg=tuple(o._rg for o in outs), arg_rg=tuple(arg_rg)))
        if prim.n_outputs != 1:
            self.graph.nodes[-1].check_shape = True

    def stop(self, reason: str) -> None:
        if self.strict:
            # inside one vjp rule: let autodiff replace the rule by an opaque node
            raise Uncapturable(reason)
        if self.recording:
            self.recording = False
            self.reason = reason

    def _guard(self, t, kind, value, why=None):
        if not self.recording:
            return
        what = f"{kind}()" if why is None else why
        try:
            vid = self.lookup(t)
        except Uncapturable as exc:
            self.stop(f"{what}: {exc}")
            return
        if self.graph is not self.fwd:
            self.stop(f"{what} on a value computed while differentiating")
            return
        self.fwd.guards.append((vid, kind, value))
        self.guard_whys.append(why)

    def on_concrete(self, t, why):
        """A value is needed: guard on it (replays check it) or stop recording."""
        d = t._data
        if why == "numpy":
            self.stop(f"the NumPy array of a tensor (shape {list(t.shape)}) was taken "
                      "(.numpy() / np.asarray): NumPy code on it cannot be captured")
        elif why == "repr":
            self.stop(f"the values of a tensor (shape {list(t.shape)}) were printed")
        elif why == "bool":
            self._guard(t, "bool", bool(d.reshape(())))
        elif why == "item":
            self._guard(t, "item", d.reshape(()).item())
        elif why == "tolist":
            self._guard(t, "tolist", np.asarray(d).tolist())
        else:
            # a library decision (offsets, a class count...): every value takes part
            self._guard(t, "tolist", np.asarray(d).tolist(), why)
        return d

    def on_set_grad(self, t, value):
        """``t.grad = value`` (or ``set_grad(p, None)`` in ``zero_grad``) during the trace."""
        if not (t._rg and t._fn is None):
            return  # only leaves that require grad accumulate gradients
        self.grad_written.add(id(t))
        if not self.recording:
            return
        if value is not None and not self._known(value) and (self.in_backward or value._fn is None):
            # a gradient array the tracer did not see being computed (a backward path
            # that bypassed the tracer): never bake it in as a constant
            self.stop("a gradient was computed outside the tracer")
            return
        try:
            vid = None if value is None else self.lookup(value)
        except Uncapturable as exc:
            self.stop(str(exc))
            return
        self.effects.append(("grad", t, vid))

    def _known(self, t) -> bool:
        ent = self.env.get(id(t))
        if ent is not None and ent[1] is t:
            return True
        ent = self.data_env.get(id(t._data))
        return ent is not None and ent[1]._data is t._data

    def on_optimizer_step(self, opt, run):
        """``opt.step()``: replayed as a call after the program (it updates raw arrays)."""
        if not self.recording:
            return run()
        params = [p for g in opt.param_groups for p in g["params"]]
        self.effects.append(("call", opt, None))
        out = run()
        for p in params:
            ent = self.env.get(id(p))
            if ent is not None and ent[1] is p:
                # later reads in this call would need the updated values: not replayable
                self.env[id(p)] = (ent[0], p, -1)
            self.stepped.add(id(p))
        return out

    def on_inplace(self, t, value):
        """``t``'s buffer now holds ``value`` (a Tensor, broadcast/cast, or a number)."""
        if not self.recording:
            return
        try:
            self._inplace(t, value)
        except Uncapturable as exc:
            self.stop(str(exc))

    def _inplace(self, t, value):
        if t._base is not None:
            raise Uncapturable(f"in-place write into a view (shape {list(t.shape)})")
        shape, dtype = t._data.shape, t._data.dtype
        if isinstance(value, Tensor):
            vid = self.lookup(value)
            info = self.graph.values[vid]
            arr = value._data
            rg = value._rg
            if info.dtype != dtype:
                new = self._new(info.shape, dtype)
                self.graph.nodes.append(Node("cast", (Var(vid),), {"dtype": dtype}, (new,),
                                             out_rg=(rg,), arg_rg=(rg,)))
                vid = new
                arr = arr.astype(dtype)
                self.bind_tensor(Tensor._make(arr, False, None, 0), vid)
            if info.shape != shape:
                new = self._new(shape, dtype)
                self.graph.nodes.append(Node("expand", (Var(vid),), {"shape": tuple(shape)}, (new,),
                                             out_rg=(rg,), arg_rg=(rg,)))
                vid = new
                self.bind_tensor(Tensor._make(np.broadcast_to(arr, shape), False, None, 0), vid)
        else:
            vid = self._new(shape, dtype)
            self.graph.constants[vid] = np.full(shape, value, dtype)
        # the write is a side effect when the tensor lives outside the call
        old = self.env.get(id(t))
        target = None
        if old is not None and old[1] is t:
            oid = old[0]
            if oid in self.fwd.inputs or oid in self.fwd.captures:
                target = t
        else:
            self._capture(t)
            target = t
        if target is not None:
            if self.graph is not self.fwd:
                raise Uncapturable("in-place write while differentiating")
            self.effects.append(("write", t, vid))
        self.env[id(t)] = (vid, t, _version(t))
        self.data_env[id(t._data)] = (vid, t, _version(t))

    # -- backward inside the traced function ----------------------------------------
    def on_backward(self, orig, roots, root_grads, retain_graph, create_graph, inputs=None,
                    accumulate=True, allow_unused=False):
        """``backward()`` / ``autograd.grad`` inside the traced function (see :mod:`.autodiff`)."""
        if not self.recording:
            return orig(roots, root_grads, retain_graph, create_graph, inputs=inputs,
                        accumulate=accumulate, allow_unused=allow_unused)
        try:
            if create_graph:
                raise Uncapturable("autograd with create_graph=True inside the compiled function")
            leaves = list(inputs) if inputs is not None else _leaves(roots)
            if accumulate:
                for leaf in leaves:
                    if leaf._hooks is not None and (leaf._hooks.post or leaf._hooks.pre):
                        raise Uncapturable("a gradient hook runs during backward()")
            pairs = [(self.lookup(r), g) for r, g in zip(roots, root_grads, strict=True)]
            for _, g in pairs:
                self.lookup(g)
            src = [self.lookup(t) for t in leaves]
        except Uncapturable as exc:
            self.stop(str(exc))
            return orig(roots, root_grads, retain_graph, create_graph, inputs=inputs,
                        accumulate=accumulate, allow_unused=allow_unused)
        self.in_backward += 1
        try:
            res = reverse(self, pairs, src)
        except Uncapturable as exc:
            self.stop(str(exc))
            res = None
        finally:
            self.in_backward -= 1
        if res is None:
            return orig(roots, root_grads, retain_graph, create_graph, inputs=inputs,
                        accumulate=accumulate, allow_unused=allow_unused)
        grads = [res.get(v) for v in src]
        if not accumulate:
            for k, g in enumerate(grads):
                if g is None and not allow_unused:
                    raise RuntimeError(
                        f"One of the differentiated Tensors (inputs[{k}]) appears to not have been "
                        "used in the graph. Set allow_unused=True if this is the desired behavior.")
            return [None if g is None else self._detached(g) for g in grads]
        for leaf, g in zip(leaves, grads, strict=True):
            if g is None:
                continue
            if id(leaf) not in self.grad_state and id(leaf) not in self.grad_written:
                had = leaf._grad is not None
                self.grad_guards.append((leaf, had))
                if had:
                    gt = leaf._grad
                    if id(gt) in self.env:
                        self.grad_state[id(leaf)] = self.lookup(gt)
                    else:
                        self.grad_state[id(leaf)] = self._capture(gt)
                        self.capture_kinds[-1] = "grad"
            old = leaf._grad
            if old is not None:
                self.lookup(old)
            if g._data.dtype != leaf._data.dtype:
                g = g.to(leaf.dtype)
            if tuple(g._data.shape) != tuple(leaf._data.shape):
                raise Uncapturable("gradient shape differs from the leaf's shape")
            new = g if old is None else old + g
            # the tracer's own write: recorded as the effect below, not through set_grad
            self.grad_written.add(id(leaf))
            leaf._grad = self._detached(new)
            self.effects.append(("grad", leaf, self.lookup(new)))
        return None

    def _detached(self, t):
        d = Tensor._make(t._data, False, None, 0)
        self.env[id(d)] = (self.lookup(t), d, 0)
        self.keep.append(d)
        return d


def _info(shape, dtype):
    return ValueInfo(tuple(shape), np.dtype(dtype))


def _leaves(roots):
    """Leaf tensors requiring grad that ``roots`` reach (what backward() accumulates into)."""
    out, seen, stack = [], set(), []
    for r in roots:
        if r._fn is None:
            if r._rg and id(r) not in seen:
                seen.add(id(r))
                out.append(r)
        else:
            if r._fn.special:
                raise Uncapturable("the autograd graph has hooks or custom Functions")
            stack.append(r._fn)
    done = set()
    while stack:
        n = stack.pop()
        if id(n) in done:
            continue
        done.add(id(n))
        for e in n.edges:
            if e is None:
                continue
            v = e[0]
            if isinstance(v, _ANode):
                if v.special:
                    raise Uncapturable("the autograd graph has hooks or custom Functions")
                stack.append(v)
            elif not isinstance(v, Tensor):
                stack.append(v)
            elif id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


# ---------------------------------------------------------------------------
# one capture
# ---------------------------------------------------------------------------

class Capture:
    """Everything one trace produced (see :func:`capture`)."""

    def __init__(self):
        self.fwd = None               # forward Graph
        self.bwd = None               # backward Graph (or None)
        self.out_spec = None
        self.n_user_outputs = 0
        self.out_rg = []              # output requires grad (attached to the backward node)
        self.capture_refs = []        # weakrefs (or strong refs for constants) to captured tensors
        self.capture_kinds = []
        self.effects = []             # (kind, tensor ref, output position)
        self.grad_guards = []         # (leaf ref, had_grad)
        self.grad_state = []          # (leaf ref, capture position)
        self.sources = []             # ("input", i) | ("capture", j): differentiable inputs
        self.residuals = []           # fwd vids the backward program reads
        self.cotangent_outputs = []   # positions of user outputs that take a cotangent
        self.reason = None            # why this call was not capturable
        self.results = None           # what the traced call returned (real tensors)
        self.rng_used = False
        self.guard_whys = []          # parallel to fwd.guards: why the library read the value


def _has_ndarray(obj) -> bool:
    if isinstance(obj, np.ndarray):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_ndarray(o) for o in obj)
    if isinstance(obj, dict):
        return any(_has_ndarray(o) for o in obj.values())
    return False


def _rng_state():
    return (id(default_generator.rng), repr(default_generator.rng.bit_generator.state))


def capture(fn, args: tuple, kwargs: dict, *, build_backward: bool = True, watch=()) -> Capture:
    """Run ``fn(*args, **kwargs)`` under a :class:`Tracer` and return the :class:`Capture`.

    ``watch``: tensors (module parameters and buffers) whose version counters are
    checked afterwards, so writes the tracer cannot see (raw array updates) make
    the call uncapturable instead of silently not replayed.
    """
    cap = Capture()
    if _has_ndarray((args, kwargs)):
        cap.results = fn(*args, **kwargs)
        cap.reason = "a NumPy array was passed as an argument (pass a dg.tensor to capture it)"
        return cap
    watched = [(t, _version(t)) for t in watch]
    leaves: list = []
    flatten((args, kwargs), leaves)
    tr = Tracer()
    for t in leaves:
        vid = tr._new(t._data.shape, t._data.dtype)
        tr.fwd.inputs.append(vid)
        tr.bind_tensor(t, vid)
    rng0 = _rng_state()
    with interpreting(tr):
        result = fn(*args, **kwargs)
    cap.results = result
    cap.rng_used = _rng_state() != rng0
    for t, v0 in watched:
        if _version(t) != v0 and id(t) not in tr.stepped:
            ent = tr.env.get(id(t))
            if ent is None or ent[1] is not t or ent[2] != _version(t):
                tr.stop(f"a module buffer or parameter of shape {list(t.shape)} was updated in "
                        "place by code outside primitives (e.g. BatchNorm running statistics)")
                break
    if not tr.recording:
        cap.reason = tr.reason
        return cap
    try:
        with interpreting(tr):
            _finish(tr, cap, result, leaves, build_backward, fn)
    except Uncapturable as exc:
        cap.reason = str(exc)
    if not tr.recording and cap.reason is None:
        cap.reason = tr.reason
    return cap


def _finish(tr: Tracer, cap: Capture, result, leaves, build_backward, fn):
    fwd = tr.fwd
    outs: list = []
    cap.out_spec = flatten(result, outs)
    out_vids = [tr.lookup(t) for t in outs]
    cap.n_user_outputs = len(out_vids)
    # classify tensors captured "pending": alive elsewhere -> by reference, else constant
    ours = {id(tr.keep), id(tr.capture_tensors), id(leaves), id(outs), id(tr.by_vid), id(tr.env),
            id(tr.data_env), id(tr.grad_at_capture)}
    cells = _closure_cells(fn)
    for j, t in enumerate(tr.capture_tensors):
        if tr.capture_kinds[j] == "pending":
            tr.capture_kinds[j] = "ref" if _referenced_elsewhere(t, ours, cells) else "const"
    # writes into temporaries of the call are not side effects
    consts = {id(t) for j, t in enumerate(tr.capture_tensors) if tr.capture_kinds[j] == "const"}
    tr.effects = [e for e in tr.effects if not (e[0] == "write" and id(e[1]) in consts)]
    # side effects become extra outputs
    effects = []
    for kind, t, vid in tr.effects:
        if vid is None:
            effects.append((kind, t, None))
            continue
        effects.append((kind, t, len(out_vids)))
        out_vids.append(vid)
    input_pos = {id(t): i for i, t in enumerate(leaves)}
    for t in list(leaves) + list(tr.capture_tensors):
        ent = tr.env.get(id(t))
        if ent is not None and ent[1] is t and _version(t) != ent[2] and id(t) not in tr.stepped:
            raise Uncapturable(f"a tensor of shape {list(t.shape)} from outside the call was modified "
                               "in place in a way the tracer cannot follow")
    has_effects = bool(effects)
    if cap.rng_used and "const" in tr.capture_kinds:
        raise Uncapturable("random numbers were drawn outside primitives (dg.rand/randn...); "
                           "a static graph would replay the same numbers")
    # the backward program: differentiate the outputs w.r.t. inputs and captures
    cap.out_rg = [False] * len(outs)
    if build_backward and STATE.grad_enabled and not has_effects:
        diff = [i for i, t in enumerate(outs) if t._rg and _is_float_dtype(t._data.dtype)]
        sources = []
        for i, t in enumerate(leaves):
            if t._rg:
                sources.append((("input", i), t))
        for j, t in enumerate(tr.capture_tensors):
            if t._rg and tr.capture_kinds[j] in ("param", "ref"):
                sources.append((("capture", j), t))
        if diff and sources:
            _build_backward(tr, cap, outs, diff, sources, out_vids)
    fwd.outputs = out_vids
    cap.fwd = fwd
    cap.effects = [(k, weakref.ref(t), pos) for k, t, pos in effects]
    for k, (kind, t, pos) in enumerate(effects):
        if kind == "write" and id(t) in input_pos:
            cap.effects[k] = ("write_input", input_pos[id(t)], pos)
    cap.capture_kinds = list(tr.capture_kinds)
    cap.capture_refs = []
    for j, t in enumerate(tr.capture_tensors):
        if cap.capture_kinds[j] == "const":
            vid = fwd.captures[j]
            cap.capture_refs.append(None)
            fwd.constants[vid] = tr.pending_data.get(j, t._data)
        else:
            cap.capture_refs.append(weakref.ref(t))
    # constants replace their capture slot
    keep = [j for j, k in enumerate(cap.capture_kinds) if k != "const"]
    fwd.captures = [fwd.captures[j] for j in keep]
    remap = {old: new for new, old in enumerate(keep)}
    cap.capture_refs = [cap.capture_refs[j] for j in keep]
    cap.capture_kinds = [cap.capture_kinds[j] for j in keep]
    cap.sources = [(k, remap[i]) if k == "capture" else (k, i) for k, i in cap.sources]
    cap.grad_guards = [(weakref.ref(leaf), had) for leaf, had in tr.grad_guards]
    cap.grad_state = []
    for leaf, _ in tr.grad_guards:
        vid = tr.grad_state.get(id(leaf))
        if vid is not None:
            if vid not in fwd.captures:
                raise Uncapturable("the .grad read by backward() was computed inside the call")
            cap.grad_state.append((weakref.ref(leaf), fwd.captures.index(vid)))
    cap.capture_grad_slots = {pos: ref for ref, pos in cap.grad_state}
    cap.guard_whys = list(tr.guard_whys)


def _referenced_elsewhere(t, ours, cells) -> bool:
    """True when ``t`` is held by user state (a dict, list, object or the function's closure)."""
    for r in gc.get_referrers(t):
        if id(r) in ours or isinstance(r, (tuple, _ANode, Tensor)):
            continue
        name = type(r).__name__
        if name == "frame" or (name == "cell" and id(r) not in cells):
            continue
        return True
    return False


def _closure_cells(fn) -> set:
    cells = set()
    for f in (fn, getattr(fn, "forward", None), getattr(fn, "__func__", None)):
        f = getattr(f, "__func__", f)
        for c in getattr(f, "__closure__", None) or ():
            cells.add(id(c))
    return cells


def _build_backward(tr, cap, outs, diff, sources, out_vids):
    bwd = Graph()
    out_pairs = [(tr.lookup(outs[i]), i) for i in diff]
    src = [tr.lookup(t) for _, t in sources]
    fwd_nodes = list(tr.fwd.nodes)
    tr.graph = bwd
    cots = []
    tr.in_backward += 1
    try:
        for vid, i in out_pairs:
            o = outs[i]
            c = Tensor._make(np.zeros(o._data.shape, o._data.dtype), False, None, 0)
            cvid = tr._new(o._data.shape, o._data.dtype, bwd)
            tr.bind_tensor(c, cvid)
            cots.append((vid, c, cvid))
        res = reverse(tr, [(vid, c) for vid, c, _ in cots], src, nodes=fwd_nodes)
        if not tr.recording:
            raise Uncapturable(tr.reason or "backward could not be captured")
        bwd.outputs = [tr.lookup(res[v]) if res.get(v) is not None else None for v in src]
    finally:
        tr.graph = tr.fwd
        tr.in_backward = 0
    residuals = list(bwd.inputs)
    bwd.inputs = residuals + [cvid for _, _, cvid in cots]
    cap.bwd = bwd
    cap.residuals = residuals
    cap.cotangent_outputs = diff
    cap.sources = [s for s, _ in sources]
    for i in diff:
        cap.out_rg[i] = True
    out_vids.extend(residuals)


def describe_prim(name: str) -> str:
    p = REGISTRY.get(name)
    return name if p is None else repr(p)
