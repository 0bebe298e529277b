"""``dg.compile``: a cache of captured variants with guards, replayed as flat programs."""

from __future__ import annotations

import collections
import copy
import functools
import warnings

import numpy as np

from .._core.graph import bump_version, version
from ..autograd.grad_mode import STATE
from ..autograd.graph import Node as _ANode
from ..tensor import Tensor
from .dynamic import CannotUnify, unify
from .executor import GuardFailure, Program
from .guards import InputGuard, signature
from .passes import optimize
from .tracer import capture, flatten, unflatten

__all__ = ["CompiledFunction", "Variant", "CompiledBackward"]


class CompiledBackward:
    """The ``prim`` of the one autograd node a compiled call adds: replays the backward program."""

    __slots__ = ("name", "bwd", "vjp_rules", "vjp_argnum")

    def __init__(self, name, bwd):
        self.name = name
        self.bwd = bwd
        self.vjp_rules = None   # the engine's fast path is for registry primitives only
        self.vjp_argnum = None

    def backward_node(self, node, grads, create_graph):
        if create_graph:
            raise RuntimeError(
                f"{self.name}: backward(create_graph=True) through a compiled function is not "
                "supported (its backward is a fixed program); call the eager function for "
                "higher-order gradients")
        if node.n_out == 1:
            gs = [grads]
        else:
            gs = list(grads)
            for i, g in enumerate(gs):
                if g is None:
                    shape, dtype = node.out_meta[i]
                    gs[i] = np.zeros(shape, dtype)
        for t, v in getattr(node, "jit_checks", ()):
            if version(t) != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: a tensor of shape {list(t.shape)} read by {self.name} "
                    f"is at version {version(t)}; expected version {v} instead. Hint: clone() it "
                    "before modifying it, or modify it after backward()")
        return list(self.bwd(*node.saved, *gs))


class Variant:
    """One captured graph with the guards under which it is valid."""

    def __init__(self, cap, guard, grad_mode, struct, reason, *, program=None, eager_reason=None,
                 param_ids=None, name="compiled", optimize_level=2):
        self.cap = cap
        self.guard = guard
        self.grad_mode = grad_mode
        self.struct = struct
        self.reason = reason
        self.eager_reason = eager_reason
        self.param_ids = param_ids
        self.calls = 0
        self.name = name
        self.stats = {}
        self.program = program
        if program is None and eager_reason is None:
            fwd, bwd = cap.fwd, cap.bwd
            self.stats["forward"] = optimize(fwd, level=optimize_level)
            if bwd is not None:
                self.stats["backward"] = optimize(bwd, level=optimize_level)
            self.program = Program(fwd, bwd)
        if eager_reason is None:
            self._prepare()

    def _prepare(self):
        cap = self.cap
        slots = getattr(cap, "capture_grad_slots", {})
        self.cap_info = []
        for j, ref in enumerate(cap.capture_refs):
            gref = slots.get(j)
            if gref is not None:
                self.cap_info.append((gref, None, True))
            else:
                t = ref()
                self.cap_info.append((ref, t._rg if t is not None else False, False))
        fwd = cap.fwd
        pos_in = {v: i for i, v in enumerate(fwd.inputs)}
        pos_cap = {v: j for j, v in enumerate(fwd.captures)}
        self.out_src = []
        for k in range(cap.n_user_outputs):
            v = fwd.outputs[k]
            if v in pos_in:
                self.out_src.append(("input", pos_in[v]))
            elif v in pos_cap and not self.cap_info[pos_cap[v]][2]:
                self.out_src.append(("capture", pos_cap[v]))
            else:
                self.out_src.append(None)
        self.n_res = len(cap.residuals)
        # residuals that are the caller's tensors: their versions are checked in backward
        self.res_src = [("input", pos_in[v]) if v in pos_in else ("capture", pos_cap[v])
                        for v in cap.residuals if v in pos_in or v in pos_cap]
        self.diff_pos = {p: k for k, p in enumerate(cap.cotangent_outputs)}
        self._effects_plan = None
        self.bw_prim = CompiledBackward(f"Compiled_{self.name}", self.program.bwd) \
            if self.program.bwd is not None else None

    # -- guards ----------------------------------------------------------------
    def check(self, sig, module_params) -> str | None:
        if self.grad_mode != STATE.grad_enabled:
            return f"grad mode is {'on' if STATE.grad_enabled else 'off'}"
        why = self.guard.check(sig)
        if why is not None:
            return why
        if self.param_ids is not None and module_params is not None and self.param_ids != module_params:
            return "a module's parameters/buffers or train()/eval() mode changed since capture"
        return None

    def describe_guards(self) -> list:
        out = [self.guard.describe(), f"grad mode {'on' if self.grad_mode else 'off'}"]
        if self.struct != ("fast",):
            out.append("non-tensor arguments equal to the captured ones")
        if self.eager_reason is not None:
            return out
        n = len(self.cap.capture_refs)
        if n:
            out.append(f"{n} captured tensors alive, same objects, same requires_grad")
        for _ref, had in self.cap.grad_guards:
            out.append(f".grad of a leaf is {'set' if had else 'None'}")
        whys = getattr(self.cap, "guard_whys", ())
        for i, (vid, kind, expected) in enumerate(self.cap.fwd.guards):
            why = whys[i] if i < len(whys) else None
            if why is None:
                out.append(f"{kind}(%{vid}) == {expected!r}")
            else:
                out.append(f"values of %{vid} == {expected!r} ({why})")
        return out

    # -- replay ------------------------------------------------------------------
    def run(self, leaves):
        cap = self.cap
        for ref, had in cap.grad_guards:
            leaf = ref()
            if leaf is None or (leaf._grad is not None) != had:
                raise GuardFailure(".grad of a leaf changed between None and set")
        caps = []
        cap_tensors = []
        for ref, rg, is_grad in self.cap_info:
            t = ref()
            if t is None:
                raise GuardFailure("a captured tensor was freed")
            if is_grad:
                t = t._grad
                if t is None:
                    raise GuardFailure(".grad of a leaf is None")
            elif t._rg != rg:
                raise GuardFailure("requires_grad of a captured tensor changed")
            cap_tensors.append(t)
            caps.append(t._data)
        outs = self.program.fwd(*[t._data for t in leaves], *caps)
        n = cap.n_user_outputs
        if cap.effects:
            self._apply_effects(outs, leaves, caps)
        node = None
        if self.bw_prim is not None and STATE.grad_enabled:
            node = self._make_node(outs, leaves, cap_tensors, n)
        results = []
        diff_pos = self.diff_pos
        for k in range(n):
            src = self.out_src[k]
            if src is not None:
                results.append(leaves[src[1]] if src[0] == "input" else cap_tensors[src[1]])
                continue
            a = outs[k]
            if node is not None and k in diff_pos:
                results.append(Tensor._make(a, True, node, diff_pos[k]))
            else:
                results.append(Tensor._make(a, False, None, 0))
        self.calls += 1
        return unflatten(cap.out_spec, results)

    def _make_node(self, outs, leaves, cap_tensors, n):
        cap = self.cap
        edges = []
        for kind, i in cap.sources:
            t = leaves[i] if kind == "input" else cap_tensors[i]
            if not t._rg:
                edges.append(None)
            elif t._fn is None:
                edges.append((t, 0))
            else:
                edges.append((t._fn, t._nr))
        node = _ANode(self.bw_prim, {}, tuple(edges))
        node.special = True
        if self.res_src:
            checks = []
            for kind, i in self.res_src:
                t = leaves[i] if kind == "input" else cap_tensors[i]
                checks.append((t, version(t)))
            node.jit_checks = checks
        start = len(outs) - self.n_res
        node.saved = outs[start:]
        diff = cap.cotangent_outputs
        node.n_out = len(diff)
        node.out_meta = tuple((outs[i].shape, outs[i].dtype) for i in diff)
        return node

    def _plan_effects(self):
        """Which effect outputs are freshly allocated by the program (no copy needed)."""
        fwd = self.cap.fwd
        prod = {o: n for n in fwd.nodes for o in n.outs}
        counts = {}
        for _, _, pos in self.cap.effects:
            if pos is not None:
                counts[fwd.outputs[pos]] = counts.get(fwd.outputs[pos], 0) + 1
        plan = []
        for kind, target, pos in self.cap.effects:
            fresh = False
            if pos is not None:
                vid = fwd.outputs[pos]
                n = prod.get(vid)
                fresh = (n is not None and n.emit is not None and n.emit[0] in ("ufunc", "matmul")
                         and counts[vid] == 1 and vid not in fwd.outputs[:self.cap.n_user_outputs])
            plan.append((kind, target, pos, fresh))
        return plan

    def _apply_effects(self, outs, leaves, caps):
        plan = self._effects_plan
        if plan is None:
            plan = self._effects_plan = self._plan_effects()
        seen = None
        make = Tensor._make
        for kind, target, pos, fresh in plan:
            if pos is None:
                t = target()
                if t is None:
                    continue
                if kind == "call":       # optimizer.step() on the arrays just written
                    t.step()
                else:                    # `.grad = None`
                    t._grad = None
                continue
            arr = outs[pos]
            if kind == "grad":
                t = target()
                if t is None:
                    continue
                if not fresh:
                    if seen is None:
                        seen = {id(c) for c in caps}
                        seen.update(id(x._data) for x in leaves)
                    if arr.base is not None or id(arr) in seen or not arr.flags.writeable:
                        arr = arr.copy()
                    seen.add(id(arr))
                t._grad = make(arr, False, None, 0)
                continue
            t = leaves[target] if kind == "write_input" else target()
            if t is None:
                continue
            data = t._data
            if data.flags.writeable and data.shape == arr.shape:
                if data is not arr:
                    np.copyto(data, arr, casting="unsafe")
            else:
                t._data = np.array(np.broadcast_to(arr, data.shape), dtype=data.dtype)
            bump_version(t)


def _hkey(spec):
    """A hashable form of a flatten() structure (unhashable constants by identity)."""
    try:
        hash(spec)
        return spec
    except TypeError:
        pass
    kind = spec[0]
    if kind == "C":
        return ("C", id(spec[1]))
    if kind == "D":
        return ("D", tuple((k, _hkey(s)) for k, s in spec[1]))
    if kind == "T":
        return spec
    return (kind, tuple(_hkey(s) for s in spec[1]))


class CompiledFunction:
    """A function (or Module) compiled to cached static graphs; see :func:`dyngraph.jit.compile`."""

    def __init__(self, fn, *, dynamic=None, cache_size: int = 8, optimize: int = 2,
                 warn: bool = True, name: str | None = None):
        self.fn = fn
        self.module = fn if hasattr(fn, "parameters") and hasattr(fn, "forward") else None
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.cache_size = int(cache_size)
        self.optimize = optimize
        self.warn = warn
        self.variants = collections.OrderedDict()   # key -> Variant (most recent last)
        self.history = []                           # recapture reasons
        self.captures = 0
        self.fallbacks = 0
        self.anomaly_calls = 0                       # calls run eagerly under anomaly mode
        self._auto_dyn = {}                          # struct -> set of (pos, dim) that changed
        self._explicit_dyn = dynamic
        self._counter = 0
        self._mods = None
        if self.module is None:
            functools.update_wrapper(self, fn, updated=())

    # -- module identity guard -------------------------------------------------------
    def _module_params(self):
        """Identity of the module's parameters/buffers and every module's train/eval mode."""
        m = self.module
        mods = self._mods
        if mods is None:
            mods = self._mods = _find_modules(self.fn) if m is None else list(m.modules())
        if m is None:
            return tuple(x.training for x in mods) if mods else None
        ids = [id(p) for p in m.parameters()]
        if hasattr(m, "buffers"):
            ids.extend(id(b) for b in m.buffers())
        ids.extend(x.training for x in mods)
        return tuple(ids)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __call__(self, *args, **kwargs):
        if STATE.interpreter is not None:
            # called while another function is being captured (or profiled): inline it
            return self.fn(*args, **kwargs)
        if STATE.anomaly:
            # Anomaly mode is for finding the op and the line that produced NaN/Inf; a replayed
            # program has neither (one node for the whole graph), so debug runs are eager.
            self.anomaly_calls += 1
            return self.fn(*args, **kwargs)
        if not kwargs and all(type(a) is Tensor for a in args):
            leaves = list(args)
            struct = ("fast",)
        else:
            leaves = []
            struct = _hkey(flatten((args, kwargs), leaves))
        sig = signature(leaves)
        mparams = self._module_params()
        reasons = []
        for key in reversed(self.variants):
            v = self.variants[key]
            if v.struct != struct:
                continue
            why = v.check(sig, mparams)
            if why is not None:
                reasons.append(why)
                continue
            if v.eager_reason is not None:
                v.calls += 1
                return self.fn(*args, **kwargs)
            try:
                out = v.run(leaves)
            except GuardFailure as exc:
                reasons.append(str(exc))
                continue
            self.variants.move_to_end(key)
            return out
        reason = "first call" if not self.variants else (reasons[-1] if reasons else "new argument structure")
        return self._capture(args, kwargs, leaves, struct, sig, mparams, reason)

    def _capture(self, args, kwargs, leaves, struct, sig, mparams, reason):
        self.captures += 1
        if len(self.variants) or self.captures > 1:
            self.history.append(reason)
        watch = []
        for m in self._mods or ():
            for store in ("_parameters", "_buffers"):
                watch.extend(t for t in getattr(m, store, {}).values() if isinstance(t, Tensor))
        cap = capture(self.fn, args, kwargs, watch=watch)
        grad_mode = STATE.grad_enabled
        self._counter += 1
        name = f"{self.name}_{self._counter}"
        if cap.reason is not None:
            self.fallbacks += 1
            if self.warn:
                warnings.warn(f"dg.compile({self.name}): this call runs eagerly: {cap.reason}",
                              stacklevel=3)
            v = Variant(cap, InputGuard(sig), grad_mode, struct, reason, eager_reason=cap.reason,
                        param_ids=mparams, name=name)
            self._store(("eager", struct, sig, grad_mode, self._counter), v)
            return cap.results
        dyn = self._dynamic_dims(struct, sig)
        v = None
        if dyn:
            v = self._try_symbolic(cap, struct, sig, grad_mode, dyn, mparams, reason, name, args, kwargs)
        if v is None:
            v = Variant(cap, InputGuard(sig), grad_mode, struct, reason, param_ids=mparams, name=name,
                        optimize_level=self.optimize)
            self._store((struct, sig, grad_mode, self._counter), v)
        result = cap.results
        cap.results = None
        if cap.effects:
            result = _detach_tree(result)
        return result

    def _store(self, key, v):
        self.variants[key] = v
        self.variants.move_to_end(key)
        while len(self.variants) > self.cache_size:
            old_key, _ = self.variants.popitem(last=False)
            self.history.append(f"evicted variant {old_key[-1] if old_key else ''} (cache size {self.cache_size})")

    # -- dynamic shapes ------------------------------------------------------------------
    def _dynamic_dims(self, struct, sig):
        spec = self._explicit_dyn
        dims = set()
        if spec is not None and spec is not False:
            if spec is True or spec == "batch" or (isinstance(spec, (list, tuple)) and "batch" in spec):
                dims = {(i, 0) for i, (shape, _, _) in enumerate(sig) if len(shape) >= 1}
            elif isinstance(spec, dict):
                for i, ds in spec.items():
                    for d in (ds if isinstance(ds, (list, tuple)) else [ds]):
                        if i < len(sig):
                            nd = len(sig[i][0])
                            dims.add((i, d % nd if nd else 0))
        # automatic: dims that already changed once for this argument structure
        for _key, v in self.variants.items():
            if v.struct != struct or v.eager_reason is not None or v.grad_mode != STATE.grad_enabled:
                continue
            old = v.guard.sig
            if len(old) != len(sig):
                continue
            changed = set()
            ok = True
            for i, ((s1, d1, r1), (s2, d2, r2)) in enumerate(zip(old, sig, strict=False)):
                if d1 != d2 or r1 != r2 or len(s1) != len(s2):
                    ok = False
                    break
                changed.update((i, d) for d, (a, b) in enumerate(zip(s1, s2, strict=False)) if a != b)
            if ok and changed:
                self._auto_dyn.setdefault(struct, set()).update(changed)
        dims |= self._auto_dyn.get(struct, set())
        if spec is False:
            return []
        return sorted(dims)

    def _try_symbolic(self, cap, struct, sig, grad_mode, dyn, mparams, reason, name, args, kwargs):
        sizes = {sig[i][0][d] for i, d in dyn}
        if len(sizes) != 1:
            return None
        s2 = sizes.pop()
        if s2 < 2:
            return None
        other = None
        for key, v in self.variants.items():
            if (v.struct == struct and v.eager_reason is None and v.grad_mode == grad_mode
                    and not v.guard.dynamic and v.cap is not None):
                osig = v.guard.sig
                if len(osig) == len(sig) and all(len(a[0]) == len(b[0]) for a, b in zip(osig, sig, strict=False)):
                    vals = {osig[i][0][d] for i, d in dyn}
                    if len(vals) == 1 and next(iter(vals)) not in (s2, 0, 1):
                        other = (key, v, next(iter(vals)))
                        break
        if other is None:
            other = self._probe(cap, struct, sig, dyn, s2, args, kwargs)
            if other is None:
                return None
        okey, ov, s1 = other
        try:
            fwd, bwd = unify(ov.cap, cap, s1, s2, dyn)
        except CannotUnify as exc:
            self.history.append(f"dynamic dims {dyn} kept static: {exc}")
            return None
        symcap = _copy_cap(cap, fwd, bwd)
        v = Variant(symcap, InputGuard(sig, dyn), grad_mode, struct, reason + f"; dims {dyn} dynamic",
                    param_ids=mparams, name=name, optimize_level=self.optimize)
        if okey is not None:
            self.variants.pop(okey, None)
        self._store(("dyn", struct, tuple(dyn), grad_mode, self._counter), v)
        return v

    def _probe(self, cap, struct, sig, dyn, s, args, kwargs):
        """Trace once more at size s+1 (only for calls without side effects or randomness)."""
        if cap.effects or cap.rng_used or s < 2 or self._explicit_dyn is None:
            return None
        leaves = []
        spec = flatten((args, kwargs), leaves)
        new = []
        for i, t in enumerate(leaves):
            a = t._data
            for (pos, d) in dyn:
                if pos == i:
                    a = np.concatenate([a, np.take(a, [0], axis=d)], axis=d)
            nt = Tensor._make(a, False, None, 0)
            if t._rg:
                nt._rg = True
            new.append(nt)
        pargs, pkwargs = unflatten(spec, new)
        pcap = capture(self.fn, pargs, pkwargs)
        if pcap.reason is not None or pcap.effects:
            return None
        return (None, _ProbeVariant(pcap), s + 1)


def _find_modules(fn) -> list:
    """Modules a function reaches through its closure and the globals it names (one level)."""
    f = getattr(fn, "__func__", fn)
    code = getattr(f, "__code__", None)
    if code is None:
        return []
    objs = [c.cell_contents for c in (getattr(f, "__closure__", None) or ()) if _cell_ok(c)]
    g = getattr(f, "__globals__", {})
    objs += [g[n] for n in code.co_names if n in g]
    self_obj = getattr(fn, "__self__", None)
    if self_obj is not None:
        objs.append(self_obj)
    mods, seen = [], set()
    for o in objs:
        if hasattr(o, "modules") and hasattr(o, "training") and callable(o.modules):
            for m in o.modules():
                if id(m) not in seen:
                    seen.add(id(m))
                    mods.append(m)
    return mods


def _cell_ok(c) -> bool:
    try:
        c.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


class _ProbeVariant:
    def __init__(self, cap):
        self.cap = cap


def _copy_cap(cap, fwd, bwd):
    c = copy.copy(cap)
    c.fwd, c.bwd = fwd, bwd
    c.results = None
    return c


def _detach_tree(obj):
    if isinstance(obj, Tensor):
        return obj.detach() if obj._rg else obj
    if isinstance(obj, list):
        return [_detach_tree(o) for o in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_detach_tree(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _detach_tree(v) for k, v in obj.items()}
    return obj
