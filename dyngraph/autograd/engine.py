"""The reverse-mode engine: ``backward()`` and ``autograd.grad`` over the live graph.

The engine never recurses (graphs of 100k+ nodes are normal for RNNs):

1. discover the reachable graph with an explicit stack and count, for every
   vertex (a :class:`Node`, or a leaf tensor), how many edges point at it;
2. when ``autograd.grad``/``inputs=`` asks for specific tensors, prune the
   graph to the vertices that lie on a path to them;
3. run vertices whose gradients have all arrived (their count fell to zero),
   summing the gradients that arrive on several edges, accumulating into
   leaves' ``.grad`` or capturing them for ``autograd.grad``;
4. release saved values as each node finishes, unless ``retain_graph``.

Without ``create_graph`` every rule runs on raw arrays; with it, rules run on
Tensors under grad mode, recording the differentiable graph of the gradient.
"""

from __future__ import annotations

import sys

import numpy as np

from .._core.graph import FREED, Node, bump_version
from .._core.registry import _as_array
from .._core.rules import fit, missing_rule, node_rule_inputs
from .._core.state import STATE, set_grad
from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..tensor import Tensor
from .anomaly import annotate_error, check_grads

try:  # the optional C accelerator runs the plain-backward loop (see dyngraph/_speedups.c)
    import os as _os

    if _os.environ.get("DYNGRAPH_PURE_PYTHON"):
        raise ImportError
    from .._speedups import backward_loop as _backward_loop
    from .._speedups import discover as _discover_c
except ImportError:
    _backward_loop = _discover_c = None

__all__ = ["run_backward"]


# -- arrays the engine alone holds ------------------------------------------------------------
# A gradient array that nothing but the engine's buffer references can be added into in place,
# and a leaf's first gradient can become its ``.grad`` without a copy (PyTorch's InputBuffer and
# AccumulateGrad do the same under ``use_count() == 1``).  Rules may return arrays that are
# also held elsewhere -- their incoming gradient (``add``), a view of it (``reshape``), a saved
# input, a cached constant, the same array for two inputs -- and each of those holds a
# reference, so the reference count of the buffer entry tells.  The count a sole reference
# shows is measured once with the very expression used to test it, so the interpreter's own
# conventions cancel out; without ``sys.getrefcount`` (not CPython) nothing is in place.
_getrefcount = getattr(sys, "getrefcount", None)


def _entry_refs(container, key) -> int:
    return _getrefcount(container[key])


_SOLE_REFS = _entry_refs({0: np.empty(0)}, 0) if _getrefcount is not None else None


def _sole_array(a) -> bool:
    """``a`` is an exact ndarray owning writeable memory (not a view, not foreign memory)."""
    if type(a) is not np.ndarray or a.base is not None:
        return False
    flags = a.flags
    return flags.owndata and flags.writeable


def _held_by_entry_only(container, key) -> bool:
    """``container[key]`` is an array referenced by that entry and nothing else."""
    return _SOLE_REFS is not None and _entry_refs(container, key) == _SOLE_REFS \
        and _sole_array(container[key])


def _vertex(t):
    """(vertex, output_nr) where gradient for tensor ``t`` arrives."""
    fn = t._fn
    if fn is None:
        return t, 0
    return fn, t._nr


def run_backward(roots, root_grads, retain_graph, create_graph, inputs=None,
                 accumulate=True, allow_unused=False):
    """Differentiate ``roots`` (Tensors) with cotangents ``root_grads`` (Tensors).

    With ``accumulate=True`` gradients go to leaves' ``.grad`` (restricted to
    ``inputs`` when given); otherwise the gradients for ``inputs`` are returned
    in order (``autograd.grad``).  The one entry into the engine: an active
    interpreter sees the call through its ``on_backward`` hook (graph capture
    traces the rules instead of running them).
    """
    interp = STATE.interpreter
    if interp is not None:
        return interp.on_backward(_backward, roots, root_grads, retain_graph, create_graph,
                                  inputs, accumulate, allow_unused)
    return _backward(roots, root_grads, retain_graph, create_graph, inputs, accumulate,
                     allow_unused)


def _backward(roots, root_grads, retain_graph, create_graph, inputs=None,
              accumulate=True, allow_unused=False):
    """The engine proper (see :func:`run_backward`)."""
    root_edges = []
    for i, r in enumerate(roots):
        if not r._rg:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn: "
                "call .requires_grad_() on the inputs you want gradients for, and do not "
                "compute the output under no_grad()")
        root_edges.append(_vertex(r))

    targets = None
    if inputs is not None:
        targets = {}
        for k, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError(f"inputs[{k}] must be a Tensor, got {type(t).__name__}")
            if not t._rg:
                raise RuntimeError(
                    f"inputs[{k}] (shape {list(t.shape)}, {t.dtype}) does not require grad: "
                    "only tensors with requires_grad=True can be differentiated with respect to")
            targets.setdefault(_vertex(t), []).append(k)

    root_vertices = []
    seen_roots = set()
    for v, _ in root_edges:
        if id(v) not in seen_roots:
            seen_roots.add(id(v))
            root_vertices.append(v)

    deps, needed = _discover(root_vertices, targets)

    captured = [None] * len(inputs) if (inputs is not None and not accumulate) else None
    target_leaf_only = targets is not None and accumulate

    buffers = {}
    for (v, nr), g in zip(root_edges, root_grads):
        g = g if create_graph else g._data
        _add_to_buffer(buffers, v, nr, g)

    prev_mode = STATE.grad_enabled
    STATE.grad_enabled = bool(create_graph)
    STATE.backward_depth += 1
    try:
        ready = [v for v in root_vertices if deps.get(v, 0) == 0]
        # The common case -- plain backward() on arrays, no hooks, no anomaly mode -- runs in
        # the C accelerator when it is built; every other vertex (and, without C, every
        # vertex) takes the general path below, which is the reference.
        plain = not create_graph and targets is None and not STATE.anomaly
        if plain and _backward_loop is not None:
            _run_plain_in_c(ready, buffers, deps, retain_graph, accumulate, target_leaf_only)
        while ready:
            v = ready.pop()
            if type(v) is not Node:
                own = v in buffers and _held_by_entry_only(buffers, v)
                g = buffers.pop(v, None)
                _finish_leaf(v, g, create_graph, targets, captured, accumulate, target_leaf_only,
                             own)
                continue
            g = buffers.pop(v, None)
            node = v
            if node.pre_hooks is not None or node.retained is not None:
                g = _run_pre_hooks(node, g, create_graph)
            if targets is not None:
                for nr in range(node.n_out):
                    ks = targets.get((node, nr))
                    if ks:
                        gi = g[nr] if node.n_out > 1 else g
                        for k in ks:
                            if captured is not None:
                                captured[k] = gi
                            elif gi is not None:
                                # backward(inputs=[non_leaf]) fills that tensor's .grad (PyTorch)
                                _accumulate(inputs[k], gi, create_graph)
                if not any(e is not None and e[0] in needed for e in node.edges):
                    # a requested non-leaf with nothing needed behind it: do not run
                    # (and do not free) its node, as PyTorch stops there too
                    continue
            grads_in = _run_node(node, g, create_graph, retain_graph, needed)
            _distribute(node, grads_in, buffers, deps, ready, needed)
            # drop this frame's references, so the buffers alone hold the gradients they got
            # (what lets the next vertices add in place / keep them without a copy)
            g = grads_in = None
    finally:
        STATE.grad_enabled = prev_mode
        STATE.backward_depth -= 1
        callbacks = STATE.backward_callbacks if STATE.backward_depth == 0 else None
        if callbacks:
            STATE.backward_callbacks = None
    if callbacks:
        for cb in callbacks:
            cb()

    if captured is None:
        return None
    results = []
    for k, t in enumerate(inputs):
        g = captured[k]
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"One of the differentiated Tensors (inputs[{k}], shape {list(t.shape)}) "
                    "appears to not have been used in the graph. Set allow_unused=True if "
                    "this is the desired behavior.")
            results.append(None)
        elif create_graph:
            results.append(g)
        else:
            results.append(Tensor._make(g, False, None, 0))
    return results


def _distribute(node, grads_in, buffers, deps, ready, needed) -> None:
    """Send a node's input gradients along its edges; queue children whose count reaches 0."""
    edges = node.edges
    for i in range(len(edges)):
        e = edges[i]
        if e is None:
            continue
        child, nr = e
        if needed is not None and child not in needed:
            continue
        gi = grads_in[i] if grads_in is not None else None
        if gi is not None:
            _add_to_buffer(buffers, child, nr, gi)
        left = deps[child] - 1
        deps[child] = left
        if left == 0:
            ready.append(child)


def _run_plain_in_c(ready, buffers, deps, retain_graph, accumulate, target_leaf_only):
    """Plain backward through the C loop; Python callbacks handle the unusual vertices."""

    def general(node, g):
        if node.pre_hooks is not None or node.retained is not None:
            g = _run_pre_hooks(node, g, False)
        grads_in = _run_node(node, g, False, retain_graph, None)
        _distribute(node, grads_in, buffers, deps, ready, None)

    def leaf(v, g, own):
        # own: the C loop held the only reference to g when it popped it from the buffers
        _finish_leaf(v, g, False, None, None, accumulate, target_leaf_only, own)

    _backward_loop(ready, buffers, deps, bool(retain_graph), leaf, general, _saved_error_cb,
                   _fit_cb, _add_to_buffer, FREED)


def _saved_error_cb(node, index, t, saved_v, now_v):
    if index is None:
        raise _saved_error(node, "output", 0, t, saved_v, now_v)
    raise _saved_error(node, "input", index, t, saved_v, now_v)


def _fit_cb(gi, meta):
    if type(gi) is not np.ndarray:
        gi = _as_array(gi)
    if meta is not None:
        gi = fit(gi, meta.shape, meta.dtype)
    return gi


def _discover(root_vertices, targets):
    """Count incoming edges per vertex; with targets, also the set of needed vertices."""
    if targets is None and _discover_c is not None:
        return _discover_c(root_vertices), None
    if targets is None:
        # deps doubles as the visited set: a vertex is pushed when first seen
        deps = dict.fromkeys(root_vertices, 0)
        stack = list(root_vertices)
        while stack:
            v = stack.pop()
            if type(v) is Node:
                for e in v.edges:
                    if e is not None:
                        c = e[0]
                        if c in deps:
                            deps[c] += 1
                        else:
                            deps[c] = 1
                            stack.append(c)
        return deps, None

    target_vertices = {v for v, _ in targets}
    # iterative post-order DFS: a vertex is needed when it is a target or leads to one
    needed = set()
    done = set()
    for r in root_vertices:
        if r in done:
            continue
        stack = [(r, 0)]
        done.add(r)
        while stack:
            v, i = stack[-1]
            edges = v.edges if type(v) is Node else ()
            if i < len(edges):
                stack[-1] = (v, i + 1)
                e = edges[i]
                if e is not None and e[0] not in done:
                    done.add(e[0])
                    stack.append((e[0], 0))
                continue
            stack.pop()
            if v in target_vertices or any(e is not None and e[0] in needed for e in edges):
                needed.add(v)
    deps = {}
    for v in needed:
        if type(v) is Node:
            for e in v.edges:
                if e is not None and e[0] in needed:
                    deps[e[0]] = deps.get(e[0], 0) + 1
    return deps, needed


def _add_to_buffer(buffers, v, nr, g):
    """Sum gradient ``g`` into the buffer of vertex ``v`` (output ``nr``).

    In place when the buffer's array is the engine's alone and ``g`` has its shape and dtype
    (the C loop makes the same test with the reference count); otherwise a new sum.
    """
    n_out = v.n_out if type(v) is Node else 1
    if n_out == 1:
        container, key = buffers, v
        if v not in buffers:
            buffers[v] = g
            return
    else:
        container = buffers.get(v)
        if container is None:
            container = buffers[v] = [None] * n_out
        key = nr
        if container[nr] is None:
            container[nr] = g
            return
    if _held_by_entry_only(container, key) and type(g) is np.ndarray:
        old = container[key]
        if old.shape == g.shape and old.dtype == g.dtype:
            np.add(old, g, out=old)
            return
    s = container[key] + g
    container[key] = np.asarray(s) if isinstance(s, np.generic) else s


def _wrap(a):
    return Tensor._make(a, False, None, 0)


def _run_hook_list(hooks, g, create_graph):
    for hook in list(hooks):
        arg = g if create_graph else _wrap(g)
        res = hook(arg)
        if res is not None:
            g = res if create_graph else res._data
    return g


def _run_pre_hooks(node, g, create_graph):
    if node.pre_hooks is not None:
        for nr, hooks in node.pre_hooks.items():
            if not hooks:
                continue
            if nr == -1:
                g = _run_node_pre_hooks(node, hooks, g, create_graph)
            elif node.n_out == 1:
                if g is not None:
                    g = _run_hook_list(hooks, g, create_graph)
            elif g is not None and g[nr] is not None:
                g[nr] = _run_hook_list(hooks, g[nr], create_graph)
    if node.retained is not None:
        for nr, ref in node.retained.items():
            t = ref()
            gi = g if node.n_out == 1 else (g[nr] if g is not None else None)
            if t is not None and gi is not None:
                val = gi if create_graph else _wrap(gi.copy())
                set_grad(t, val if t._grad is None else _wrap_sum(t._grad, val, create_graph))
    return g


def _run_node_pre_hooks(node, hooks, g, create_graph):
    """``Node.register_prehook``: ``hook(grad_outputs: tuple) -> tuple | None`` (PyTorch)."""
    gs = [g] if node.n_out == 1 else list(g)
    for hook in list(hooks):
        arg = tuple(x if (x is None or create_graph) else _wrap(x) for x in gs)
        res = hook(arg)
        if res is not None:
            gs = [r if (r is None or create_graph) else r._data for r in res]
    return gs[0] if node.n_out == 1 else gs


def _wrap_sum(old, new, create_graph):
    if create_graph:
        return old + new
    return _wrap(old._data + new._data)


def _finish_leaf(leaf, g, create_graph, targets, captured, accumulate, target_leaf_only,
                 own=False):
    """The gradient ``g`` of a leaf has arrived; ``own``: no one but the engine holds it."""
    if g is None:
        return
    hooks = leaf._hooks
    if hooks is not None and hooks.pre:
        g = _run_hook_list(hooks.pre, g, create_graph)
        own = False   # a hook may have kept the gradient or returned an array it holds
    if captured is not None:
        ks = targets.get((leaf, 0))
        if ks:
            for k in ks:
                captured[k] = g
        return
    if target_leaf_only and (leaf, 0) not in targets:
        return
    if accumulate:
        _accumulate(leaf, g, create_graph, own)
        if hooks is not None and hooks.post:
            for hook in list(hooks.post):
                hook(leaf)


def _accumulate(leaf, g, create_graph, own=False):
    """Add ``g`` into ``leaf.grad`` (in place when it is safe, as PyTorch does).

    ``own``: the engine holds the only reference to ``g``, which then becomes the first
    ``.grad`` without a copy.
    """
    old = leaf._grad
    if create_graph:
        set_grad(leaf, g if old is None else old + g)
        return
    if g.shape != leaf._data.shape:
        raise RuntimeError(
            f"gradient of shape {list(g.shape)} cannot be accumulated into a leaf of shape "
            f"{list(leaf._data.shape)}")
    if g.dtype != leaf._data.dtype:
        g = g.astype(leaf._data.dtype)
        own = True
    if old is None:
        # Copy unless the engine held the only reference: the same array may have been
        # handed to several leaves (add's rule returns its incoming gradient for both
        # inputs), or be a view of a saved array or of one the user holds.
        set_grad(leaf, _wrap(g if own and _sole_array(g) else g.copy()))
    elif old._rg:
        set_grad(leaf, _wrap(np.asarray(old._data + g)))
    else:
        od = old._data
        if od.flags.writeable and od.dtype == g.dtype:
            od += g
            bump_version(old)
        else:
            old._data = np.asarray(od + g)


def _saved_error(node, kind, index, t, saved_v, now_v):
    shape = list(t.shape) if hasattr(t, "shape") else []
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: the {kind} {index} of '{node.prim.name}' ({node.name()}), a "
        f"tensor of shape {shape}, is at version {now_v}; expected version {saved_v} instead. "
        "Hint: replace the in-place operation (x.add_(...), x[...] = ..., x += ...) with its "
        "out-of-place form, or clone() the tensor before modifying it.")


def _run_node(node, g, create_graph, retain_graph, needed):
    """Compute the gradients for each input edge of ``node`` (None where not needed).

    An active interpreter sees each node through ``on_backward_node`` (the
    profiler times it there).
    """
    interp = STATE.interpreter
    if interp is not None:
        return interp.on_backward_node(
            node, lambda: _run_node_now(node, g, create_graph, retain_graph, needed))
    return _run_node_now(node, g, create_graph, retain_graph, needed)


def _run_node_now(node, g, create_graph, retain_graph, needed):
    prim = node.prim
    saved = node.saved
    if saved is FREED:
        raise RuntimeError(
            f"Trying to backward through the graph a second time (op '{prim.name}', "
            f"{node.name()}): its saved values were freed by the first backward(). Pass "
            "retain_graph=True to the first backward()/autograd.grad() if you need to "
            "backward through the graph again.")
    if g is None:
        return None
    custom = getattr(prim, "backward_node", None)
    if node.n_out > 1 and custom is None:
        # (custom Function nodes fill missing grads themselves: set_materialize_grads)
        g = _fill_missing(node, g, create_graph)
    try:
        if custom is not None:
            grads = custom(node, g, create_graph)
        else:
            grads = _apply_rules(node, prim, saved, g, create_graph)
    except Exception as exc:
        if STATE.anomaly:
            annotate_error(node, exc)  # adds where the failing op was created
        raise
    if node.post_hooks:
        for hook in node.post_hooks:
            gin = tuple(x if (x is None or create_graph) else _wrap(x) for x in grads)
            gout = (g,) if node.n_out == 1 else tuple(g)
            gout = tuple(x if (x is None or create_graph) else _wrap(x) for x in gout)
            res = hook(gin, gout)
            if res is not None:
                grads = [r if (r is None or create_graph) else r._data for r in res]
    if STATE.anomaly:
        check_grads(node, grads)
    if not retain_graph and (saved is not None or node.out is not None):
        node.saved = FREED
        node.saved_data = None
        node.out = None
    return grads


def _check_versions(node, saved) -> None:
    """Raise if a tensor the node saved was modified in place since (version counters)."""
    versions = node.saved_versions
    i = 0
    for a in saved:
        ver = versions[i]
        if ver is not None:
            vc = a._vc
            if vc is not None and vc[0] != ver:
                raise _saved_error(node, "input", i, a, ver, vc[0])
        i += 1


def _apply_rules(node, prim, saved, g, create_graph):
    edges = node.edges
    n = len(edges)
    if saved is not None:
        _check_versions(node, saved)
    inputs = node_rule_inputs(node, create_graph)
    out = node.out
    if out is not None:
        if node.out_vc is not None and node.out_vc[0] != 0:
            raise _saved_error(node, "output", 0, out, 0, node.out_vc[0])
        if create_graph:
            if node.n_out == 1:
                out = Tensor._make(out, True, node, 0)
            else:
                out = tuple(Tensor._make(o, _is_float_dtype(o.dtype), node, i) for i, o in enumerate(out))
    params = node.params
    rules = prim.vjp_rules
    meta = node.in_meta if prim.broadcasts else None
    # broadcasting primitive, no input needed fitting: the gradients take g's dtype (the
    # output's), as they would have taken each input's (equal) dtype through fit
    gdt = None
    if prim.broadcasts and meta is None and node.n_out == 1:
        gdt = (g._data if create_graph else g).dtype
    grads = [None] * n
    for i in range(n):
        if edges[i] is None:
            continue
        if rules is not None:
            rule = rules[i] if i < len(rules) else None
            if rule is None:
                raise missing_rule(prim, i)
            gi = rule(g, out, *inputs, **params)
        else:
            gi = prim.vjp(i, g, out, inputs, params)
        if gi is not None:
            if not create_graph and type(gi) is not np.ndarray:
                gi = _as_array(gi)
            if meta is not None and meta[i] is not None:
                gi = fit(gi, meta[i].shape, meta[i].dtype)
            elif gdt is not None and (gi._data if create_graph else gi).dtype != gdt:
                gi = fit(gi, gi.shape, gdt)
        grads[i] = gi
    return grads


def _fill_missing(node, g, create_graph):
    """Multi-output nodes: outputs that received no gradient get zeros."""
    g = list(g)
    for i, gi in enumerate(g):
        if gi is None:
            shape, dtype = node.out_meta[i]
            z = np.zeros(shape, dtype)
            g[i] = _wrap(z) if create_graph else z
    return tuple(g)


def queue_callback(fn) -> None:
    """Run ``fn()`` once the current (outermost) backward pass has finished.

    Only valid while a backward pass runs (from a hook); data-parallel training
    uses it to finish gradient communication.
    """
    if STATE.backward_depth == 0:
        raise RuntimeError("queue_callback can only be called while a backward pass is running")
    if STATE.backward_callbacks is None:
        STATE.backward_callbacks = []
    STATE.backward_callbacks.append(fn)
