"""Graph nodes and the cyclic garbage collector (issue 13, sixth pass).

A node keeps its edges flat in its own slots (``_ne``, ``_f0``/``_n0`` .. ``_f2``/``_n2``,
``_fx``) instead of a list of ``(fn, nr)`` tuples, and its saved arguments likewise (``_sn``,
``_s0`` .. ``_s2``, ``_sx``) instead of a tuple, so a recorded op of up to three inputs leaves
2 GC-tracked objects (its tensor and its node) where it left 4-7.  These tests check that

* the C bind and the Python reference build the same slots, and ``node.edges`` /
  ``node.saved`` / ``next_functions`` read as before (also for nodes built in Python: custom
  Functions, more than three inputs);
* cycles through nodes are still collected -- hooks closing over outputs, custom Functions'
  ctx, retain_grad, in-place ops, ``create_graph`` gradients, nodes with more than three inputs;
* the number of tracked objects per recorded op does not grow back.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.autograd.graph import FREED, AccumulateGrad, Node
from dyngraph.ops import registry
from dyngraph.ops.elementwise import add_p, mul_p, tanh_p
from dyngraph.ops.nn import linear_p
from dyngraph.ops.shape import cat_p
from tests.helpers import tracked_per_call

C_BIND = registry.bind is not registry._bind_py
needs_c = pytest.mark.skipif(not C_BIND, reason="C accelerator not active")


def _slots(node, names):
    """The edge and saved slots of ``node``, objects replaced by labels from ``names`` (id ->
    name; numbers kept)."""
    def lab(v):
        if v is None or isinstance(v, (int, float)):
            return v
        return names.get(id(v), type(v).__name__)
    fx, sx = node._fx, node._sx
    return (node._ne, lab(node._f0), node._n0, lab(node._f1), node._n1, lab(node._f2), node._n2,
            None if fx is None else tuple(lab(v) for v in fx),
            node._sn, lab(node._s0), lab(node._s1), lab(node._s2),
            None if sx is None else tuple(lab(v) for v in sx))


def _calls():
    """(name, prim, args builder, params) covering 0-2 slot edges, _fx, leaves, nodes, no-grad."""
    return [
        ("tanh leaf", tanh_p, lambda a, b, c, h: (a,), {}),
        ("mul leaf*node", mul_p, lambda a, b, c, h: (a, h), {}),
        ("add node+const", add_p, lambda a, b, c, h: (h, c), {}),       # c: no grad -> None edge
        ("add scalar", add_p, lambda a, b, c, h: (2.0, h), {}),
        ("cat 2", cat_p, lambda a, b, c, h: (a, b), {"dim": 0}),
        ("cat 3", cat_p, lambda a, b, c, h: (a, c, h), {"dim": 0}),     # three inline edges
        ("cat 5", cat_p, lambda a, b, c, h: (c, a, h, c, b), {"dim": 0}),  # _fx: inputs 3, 4
        ("linear", linear_p, lambda a, b, c, h: (h.unsqueeze(0), b.expand(2, 3), a[:2]), {}),
        ("mul saves both", mul_p, lambda a, b, c, h: (h, b), {}),
        ("mul by number", mul_p, lambda a, b, c, h: (h, 2.0), {}),     # saves (None, 2.0)
    ]


@needs_c
@pytest.mark.parametrize("case", range(len(_calls())))
def test_c_bind_and_python_record_build_the_same_edge_slots(case):
    name, prim, pick, params = _calls()[case]
    a = dg.randn(3, requires_grad=True)
    b = dg.randn(3, requires_grad=True)
    c = dg.randn(3)
    h = dg.tanh(a) * 1.5
    names = {id(a): "a", id(b): "b", id(c): "c", id(h.grad_fn): "h.node"}
    args = pick(a, b, c, h)
    out_c = registry.bind(prim, args, params)
    out_p = registry._bind_py(prim, args, params)
    nc, np_ = out_c.grad_fn, out_p.grad_fn
    assert type(nc._ne) is int and type(np_._ne) is int
    assert _slots(nc, names) == _slots(np_, names), name
    assert (nc._fx is None) == (len(args) <= 3)
    assert nc.edges == np_.edges      # the same vertex objects
    assert (nc.saved is None) == (np_.saved is None)
    if nc.saved is not None:
        assert all(x is y for x, y in zip(nc.saved, np_.saved, strict=True))
    assert [(type(f).__name__, nr) for f, nr in nc.next_functions] == \
        [(type(f).__name__, nr) for f, nr in np_.next_functions]
    ga = dg.autograd.grad(out_c.sum(), [a], allow_unused=True, retain_graph=True)
    gp = dg.autograd.grad(out_p.sum(), [a], allow_unused=True)
    for x, y in zip(ga, gp, strict=True):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_edges_read_and_write_back_as_before():
    a = dg.randn(3, requires_grad=True)
    h = dg.tanh(a)
    node = Node(tanh_p, {}, [(a, 0), None, (h.grad_fn, 0), None, (a, 0)])
    assert node._ne == 5 and node._f0 is a and node._n0 == 0 and node._f1 is None
    assert node._f2 is h.grad_fn and node._fx == (None, None, a, 0)
    assert node.edges == ((a, 0), None, (h.grad_fn, 0), None, (a, 0))
    nf = node.next_functions
    assert nf[0] == (AccumulateGrad(a), 0) and nf[1] == (None, 0) and nf[2] == (h.grad_fn, 0)
    node.edges = [None]
    assert node._ne == 1 and node.edges == (None,) and node._fx is None
    node.edges = ()
    assert node.edges == () and node._f0 is None
    with pytest.raises(ValueError, match="edge 0"):
        node.edges = [(None, 0)]
    y = a * 2.0
    assert y.grad_fn.edges == ((a, 0), None)
    assert y.grad_fn.next_functions == ((AccumulateGrad(a), 0), (None, 0))


def test_saved_reads_and_writes_back_as_before():
    a = dg.randn(3, requires_grad=True)
    node = Node(mul_p, {}, [(a, 0), None])
    assert node.saved is None and node._sn is None
    for value in [(a,), (a, 2.0), (a, None, a), (a, 1, 2, a, None), ()]:
        node.saved = value
        assert node.saved == value and type(node.saved) is tuple and node._sn == len(value)
        assert (node._sx is None) == (len(value) <= 3)
    node.saved = [a, 3.0]             # any sequence: read back as a tuple
    assert node.saved == (a, 3.0)
    node.saved = FREED
    assert node.saved is FREED and node.saved_tensors_freed
    assert node._s0 is None and node._s1 is None and node._sx is None   # references released
    y = a * a
    y.sum().backward()
    assert y.grad_fn.saved is FREED and y.grad_fn._s0 is None


def test_backward_through_nodes_with_more_than_two_inputs_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(4) for _ in range(5)]
    ds = [dg.tensor(x, requires_grad=True) for x in xs]
    ts = [torch.tensor(x, requires_grad=True) for x in xs]
    for lib, v in ((dg, ds), (torch, ts)):
        parts = [lib.tanh(v[0]), v[1], v[2] * 2.0, v[3], lib.sigmoid(v[4])]
        out = (lib.stack(parts).sum(0) * lib.cat(parts)[:4]).sum()
        out.backward()
    for d, t in zip(ds, ts, strict=True):
        np.testing.assert_allclose(d.grad.numpy(), t.grad.numpy(), rtol=1e-12)


class _Keep(dg.autograd.Function):
    """A custom Function whose ctx keeps its own output: node -> prim -> ctx -> output -> node."""

    @staticmethod
    def forward(ctx, x, y, z):
        return x * y + z

    @staticmethod
    def backward(ctx, g):
        return g, g, g


def _collected(make):
    """``make()`` builds a structure and returns (weakref to a node, objects to drop); True
    when the collector frees the node once everything is dropped."""
    ref, hold = make()
    del hold
    gc.collect()
    return ref() is None


CYCLES = {
    # a leaf's hook holds an output: leaf -> hooks -> closure -> out -> node -> leaf
    "leaf hook": lambda: _leaf_hook(lambda x: dg.tanh(x)),
    "leaf hook, node in _fx": lambda: _leaf_hook(lambda x: dg.cat([x * 1.0, x * 2.0, x * 3.0, x])),
    "leaf hook, mul saves x": lambda: _leaf_hook(lambda x: x * x),
    # a node's own hook holds its output: node -> post_hooks -> closure -> out -> node
    "node hook": lambda: _node_hook(),
    "non-leaf tensor hook": lambda: _tensor_hook(),
    "retain_grad": lambda: _retain(),
    "custom Function ctx": lambda: _custom(),
    "in-place op": lambda: _inplace(),
    "create_graph grad": lambda: _double_backward(),
    "leaf .grad reaching an output": lambda: _leaf_grad_holds_output(),
}


def _leaf_hook(f):
    x = dg.randn(3, requires_grad=True)
    z = f(x)
    x.register_hook(lambda g, keep=z: g)
    return weakref.ref(z.grad_fn), [x, z]


def _node_hook():
    x = dg.randn(3, requires_grad=True)
    z = dg.tanh(x) * 3.0
    z.grad_fn.register_hook(lambda gi, go, keep=z: None)
    return weakref.ref(z.grad_fn), [x, z]


def _tensor_hook():
    x = dg.randn(3, requires_grad=True)
    z = dg.sigmoid(x + 1.0)
    z.register_hook(lambda g, keep=z: g)
    return weakref.ref(z.grad_fn), [x, z]


def _retain():
    x = dg.randn(3, requires_grad=True)
    z = dg.tanh(x) * x
    z.retain_grad()
    z.sum().backward(retain_graph=True)
    z.register_hook(lambda g, keep=z: g)
    return weakref.ref(z.grad_fn), [x, z]


def _custom():
    x = dg.randn(3, requires_grad=True)
    y = dg.randn(3, requires_grad=True)
    z = _Keep.apply(x, y, dg.tanh(x))
    assert z.grad_fn._ne == 3      # three inputs: the third edge in _fx
    z.grad_fn.prim.ctx.keep = z
    return weakref.ref(z.grad_fn), [x, y, z]


def _inplace():
    x = dg.randn(3, requires_grad=True)
    z = x * 2.0
    v = z[1:]
    z.mul_(x)          # z is rebased onto the in-place node (and its view v through z)
    v.tanh_()
    x.register_hook(lambda g, keep=z: g)   # x -> hook -> z -> in-place nodes -> ... -> x
    return weakref.ref(z.grad_fn), [x, z]


def _double_backward():
    w = dg.randn(3, requires_grad=True)
    loss = (dg.tanh(w) * w).sum()
    loss.backward(create_graph=True)     # w.grad has a graph that leads back to w
    node = w.grad.grad_fn
    assert node is not None
    return weakref.ref(node), [w, loss]


def _leaf_grad_holds_output():
    x = dg.randn(3, requires_grad=True)
    z = dg.tanh(x) * x
    x.grad = z.detach()
    x.grad._base = z   # a view's base: the leaf's .grad reaches the output (and its node)
    return weakref.ref(z.grad_fn), [x, z]


@pytest.mark.parametrize("name", list(CYCLES))
def test_cycles_through_nodes_are_collected(name):
    gc.collect()
    assert _collected(CYCLES[name]), f"{name}: the cycle was not collected (leak)"


def test_graphs_without_cycles_are_freed_by_reference_counts_alone():
    gc.collect()
    gc.disable()
    try:
        x = dg.randn(3, requires_grad=True)
        z = dg.cat([dg.tanh(x), x * x, x + 1.0]).sum()
        refs = [weakref.ref(z.grad_fn)]
        refs.append(weakref.ref(z.grad_fn.edges[0][0]))
        del z
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_node_referents_are_the_edge_vertices():
    """What the collector traverses: the node reaches its edges' vertices directly."""
    a = dg.randn(3, requires_grad=True)
    h = dg.tanh(a)
    refs = gc.get_referents((a * h).grad_fn)
    assert any(r is a for r in refs) and any(r is h.grad_fn for r in refs)
    n3 = dg.cat([a, h, a, h]).grad_fn
    refs = gc.get_referents(n3)
    assert any(r is n3._fx for r in refs) and n3._fx[0] is h.grad_fn
    assert gc.is_tracked(n3) and gc.is_tracked(n3._fx)


_W = dg.randn(4, 16, requires_grad=True)
_B = dg.randn(4, requires_grad=True)


@needs_c
@pytest.mark.parametrize("name, fn, limit", [
    ("tanh", lambda a, b: dg.tanh(a), 2),                 # tensor, node
    ("a+b", lambda a, b: a + b, 2),
    ("a*b", lambda a, b: a * b, 2),                       # the saved (a, b) in slots too
    ("a*2", lambda a, b: a * 2.0, 2),
    ("cat of 2", lambda a, b: dg.cat([a, b]), 2),
    ("cat of 3", lambda a, b: dg.cat([a, b, a]), 2),
    ("cat of 5", lambda a, b: dg.cat([a, b, a, b, a]), 3),  # + the _fx tuple
    ("linear", lambda a, b: dg.nn.functional.linear(a, _W, _B), 2),      # three inputs inline
    ("x[3]", lambda a, b: a[3], 2),
    ("chunk", lambda a, b: a.chunk(2), 4),                # 2 tensors, node, result tuple
])
def test_tracked_objects_per_recorded_op(name, fn, limit):
    a = dg.randn(16, requires_grad=True)
    b = dg.randn(16, requires_grad=True)
    per = tracked_per_call(lambda: fn(a, b))
    assert per <= limit + 0.05, f"{name}: {per} tracked objects per call (limit {limit})"


@needs_c
def test_multi_output_metadata_is_untracked_and_unchanged():
    a = dg.randn(6, dtype=dg.float64, requires_grad=True)
    parts = a.chunk(3)
    meta = parts[0].grad_fn.out_meta
    assert meta == (((2,), np.dtype(np.float64)),) * 3
    assert not gc.is_tracked(meta) and not any(gc.is_tracked(m) for m in meta)
    (parts[0] * parts[2]).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.r_[a.detach().numpy()[4:], 0, 0,
                                                         a.detach().numpy()[:2]])


@needs_c
def test_edges_written_around_the_setter_are_reported_not_misread():
    """The C discovery reads the slot layout only; a layout written around ``Node.edges``
    (here a list where the tuple goes) is an error naming the node, never a misread."""
    xs = [dg.randn(3, requires_grad=True) for _ in range(4)]
    y = dg.cat(xs).sum()
    node = y.grad_fn.edges[0][0]          # the cat node: four inputs, one in _fx
    assert node._fx == (xs[3], 0)
    node._fx = [xs[3], 0]
    with pytest.raises(TypeError, match="not in Node's layout"):
        y.backward()
    node.edges = node.edges               # written back through the setter: usable again
    y.backward()
    for x in xs:
        np.testing.assert_array_equal(x.grad.numpy(), np.ones(3, np.float32))
