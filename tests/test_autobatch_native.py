"""The optional C paths of ``dg.autobatch`` (dyngraph/_autobatch.c) against the Python
reference in ``autobatch/interpreter.py``: the recorded nodes and pending tensors are
the same field by field, values and gradients are bit-identical, nothing leaks, and the
C paths are the ones in use when the module is built.
"""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.autobatch import cells as C
from dyngraph.autobatch import interpreter as I
from dyngraph.autobatch.lazy import Consts, Lazy

native = pytest.mark.skipif(I._NATIVE is None, reason="dyngraph._autobatch not built or DYNGRAPH_PURE_PYTHON")


@pytest.fixture
def python_path():
    """The Python reference for the duration of a test (restored after)."""
    was = I.use_native(False)
    yield
    I.use_native(was)


class _Model(dg.nn.Module):
    def __init__(self):
        super().__init__()
        dg.manual_seed(3)
        self.emb = dg.nn.Embedding(11, 4).double()
        self.lin = dg.nn.Linear(8, 4).double()
        self.cell = dg.autobatch.cell(self._cell)
        self.two = dg.autobatch.cell(self._two)

    def _cell(self, a, b):
        e = dg.cat([a, b], dim=1)
        return dg.tanh(self.lin(e))

    def _two(self, h, scale):
        return h * scale, dg.sigmoid(h)

    def tree(self, ids, depth):
        if depth == 0:
            return self.emb(dg.tensor([ids.pop()]))
        left = self.tree(ids, depth - 1)
        right = self.tree(ids, depth - 1)
        h = self.cell(left, right)
        s, g = self.two(h, dg.tensor([0.5 + depth], dtype=dg.float64))   # a constant (Consts)
        return (s + g).sum(dim=1, keepdim=True) * h


def _program(model, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 11, size=32).tolist()
    outs = [model.tree(ids, d) for d in (1, 2, 3)]
    return dg.stack([o.sum() for o in outs]).sum()


def _fields(interp, node, base):
    """A node's recorded facts, pending inputs named by (seq - base, k)."""
    def arg(a):
        if type(a) is Lazy:
            return ("lazy", a.node.seq - base, a.k)
        if type(a) is Consts:      # the value copied when the call was recorded
            return ("consts", a.take(np.array([node.seq], np.int64))[0].tolist())
        if isinstance(a, dg.Tensor):
            if a._rg and a._fn is None:
                return ("param", id(a))
            return ("const", a._data.shape, a._data.tolist())
        return ("value", type(a), a)

    outs = []
    for r in node.refs:
        t = r()
        if t is None:
            outs.append(None)
            continue
        lz = t._data
        outs.append((type(lz) is Lazy and lz.node is node, lz.k, lz.shape, lz.dtype, lz.ndim, lz.size,
                     t._rg, t._fn is node if t._rg else t._fn, t._nr, t._grad, t._vc, t._base, t._hooks))
    return (node.prim, dict(node.params), tuple(map(arg, node.args)), type(node.args), node.sig,
            node.depth, node.result, node.row, node.nuse, node.user - base if node.user >= 0 else -1,
            node.interp is interp, node.grad_enabled, node.versions, node.specs, node.mark,
            type(node.refs), outs)


@native
def test_native_paths_are_in_use():
    assert I.Autobatcher.process is not I.Autobatcher._process_py
    assert C._RECORD_CELL is I._NATIVE.record_cell
    model = _Model()
    calls = []
    orig = I.Autobatcher.call_cell

    def counting(self, *a):
        calls.append(1)
        return orig(self, *a)

    I.Autobatcher.call_cell = counting
    try:
        with dg.autobatch():
            _program(model, 0).item()
            first = len(calls)
            _program(model, 1).item()
    finally:
        I.Autobatcher.call_cell = orig
    assert first == 2                 # one trace per cell signature, in Python
    assert len(calls) == first        # every later call recorded in C


@native
def test_native_records_the_same_nodes_as_python():
    """One block: the program recorded through C, then again through Python (same
    templates and signature cache), node by node equal."""
    model = _Model()
    with dg.autobatch() as ab:
        _program(model, 0)           # traces the cells, fills the signature cache
        interp = ab.interp
        keep = []
        views = []
        for on in (True, False):
            I.use_native(on)
            try:
                base = interp.seq
                start = len(interp.nodes)
                keep.append(_program(model, 5))
                views.append((base, interp.nodes[start:]))
            finally:
                I.use_native(True)
        (b1, n1), (b2, n2) = views
        assert len(n1) == len(n2) > 40
        for x, y in zip(n1, n2, strict=True):
            assert _fields(interp, x, b1) == _fields(interp, y, b2)
        assert keep[0].item() == keep[1].item()


@pytest.mark.parametrize("grad", [True, False])
def test_values_and_gradients_bit_identical(grad, python_path):
    """The Python reference (this test's fixture) and the C paths give the same bits."""
    results = []
    for on in (False, True):
        I.use_native(on)
        model = _Model()
        with dg.autobatch(), dg.set_grad_enabled(grad):
            loss = _program(model, 7)
            if grad:
                loss.backward()
        results.append((loss.item(), [None if p.grad is None else p.grad.numpy().copy()
                                      for p in model.parameters()]))
    I.use_native(False)
    (v1, g1), (v2, g2) = results
    assert v1 == v2
    for a, b in zip(g1, g2, strict=True):
        if a is None:
            assert b is None
        else:
            np.testing.assert_array_equal(a, b)
    if grad:
        assert all(g is not None for g in g1)


@native
def test_stats_and_fallbacks_through_native():
    """Stats counters are kept by the C path; a cell that cannot be traced still runs
    inline (Python path) and keeps its consumer counts exact."""
    model = _Model()

    @dg.autobatch.cell
    def reads(h):
        return h * float(h.sum())      # a value read: not traceable, runs inline

    with dg.autobatch(stats=True) as ab:
        loss = _program(model, 2)
        extra = reads(model.tree([1, 2], 1))
        total = loss + extra.sum()
        total.item()
    st = ab.stats
    assert st.nodes > 40 and st.cells >= 6
    assert any(k.startswith("cell:") for k in map(str, (getattr(p, "name", p) for p in st.fallbacks)))


def test_no_leak_and_no_cycle():
    """Nodes and pending tensors recorded in C are freed by reference counting."""
    model = _Model()
    with dg.autobatch():
        _program(model, 0).item()       # traces
    p = model.lin.weight
    rc = sys.getrefcount(p)
    gc.disable()
    try:
        with dg.autobatch() as ab:
            loss = _program(model, 4)
            node = weakref.ref(loss._data.node)
            leaf = weakref.ref(ab.interp.nodes[0])
            loss.backward()
        del loss, ab
        assert node() is None and leaf() is None
    finally:
        gc.enable()
    assert sys.getrefcount(p) == rc


# -- the evaluation helpers: C and Python give the same answers -------------------------

_HELPERS = ("scan", "group_by", "assign", "release", "stale", "columns")


def _recorded(seed):
    """An open block with one program recorded (all kinds of nodes: cells, primitives,
    a collector); the caller closes it."""
    model = _Model()
    ab = dg.autobatch()
    ab.__enter__()
    _program(model, seed).item()        # traces the cells
    return ab, model, _program(model, seed + 1)


@native
def test_helpers_equal_python_reference():
    ab, model, loss = _recorded(11)
    try:
        interp = ab.interp
        pend = [n for n in interp.nodes if n.result is None]
        assert len(pend) > 40
        # group_by, with and without late depths
        late = {n: n.depth + 3 for n in pend[::3]}
        for lt in ({}, late):
            assert I._NATIVE.group_by(pend, lt) == I._group_by_py(pend, lt)
        # columns of each group of equal signature
        groups, _ = I._group_by_py(pend, {})
        assert len(groups) > 5
        for g in groups.values():
            w = len(g[0].args)
            assert I._NATIVE.columns(g, w) == I._columns_py(g, w)
        # stale: nothing written; then an index tensor of an embedding call written in place
        for g in groups.values():
            assert I._NATIVE.stale(g) is None and I._stale_py(g) is None
        emb = [n for n in pend if n.versions is not None]
        assert emb
        idx = next(a for a in emb[-1].args if isinstance(a, dg.Tensor) and not a._rg)
        idx.add_(0)
        assert I._NATIVE.stale(emb) is emb[-1] and I._stale_py(emb) is emb[-1]
        idx._vc[0] -= 1          # back to the recorded version
        # scan: pending refs (None), then the same refs once their nodes ran: several
        # sources, repeats, one object, tuple results (cells), a non-Lazy entry (None)
        lazies = [a for n in pend for a in n.args if type(a) is Lazy]
        assert I._NATIVE.scan(lazies) is None and I._scan_py(lazies) is None
        interp.evaluate([loss._data.node])
        assert all(lz.node.result is not None for lz in lazies)
        multi = [lz for lz in lazies if type(lz.node.result) is tuple]
        assert multi
        cases = [lazies, lazies[:1] * 5, lazies[:3] + lazies[:2], multi, multi[::-1], lazies + [1.0]]
        for refs in cases:
            a, b = I._NATIVE.scan(refs), I._scan_py(refs)
            assert (a is None) == (b is None)
            if a is None:
                continue
            assert a[0] == b[0] and a[2] == b[2] and a[4] == b[4] and a[5] == b[5]
            assert all(x is y for x, y in zip(a[1], b[1], strict=True))
            assert all(x is y for x, y in zip(a[3], b[3], strict=True))
        assert [I._NATIVE.scan(c)[0] for c in cases[:3]] == [0 if len(set(map(id, lazies))) < len(lazies)
                                                             else 2, 1, 0]
    finally:
        ab.__exit__(None, None, None)


def _bare(n):
    nodes = []
    for i in range(n):
        p = object.__new__(I.PNode)
        p.args, p.result, p.row, p.versions = [i, "x"], None, None, None
        nodes.append(p)
    return nodes


@native
def test_assign_and_release_equal_python_reference():
    results = []
    marker = dg.zeros(2)
    for assign, release in ((I._NATIVE.assign, I._NATIVE.release), (I._assign_py, I._release_py)):
        nodes = _bare(12)
        nodes[4].retained = weakref.ref(marker)        # an instance attribute (rare case)
        assign(nodes[:6], marker, True)
        assign(nodes[6:], marker, False)
        rare = release(nodes)
        results.append(([(n.result is marker, n.row, n.args) for n in nodes], [nodes.index(n) for n in rare]))
    assert results[0] == results[1]
    assert results[0][1] == [4]
    assert [r for _, r, _ in results[0][0]] == [0, 1, 2, 3, 4, 5] + [None] * 6
    assert all(ok and args is None for ok, _, args in results[0][0])


@native
def test_keep_and_late_depths_equal_python_reference():
    ab, model, _ = _recorded(5)
    try:
        interp = ab.interp
        losses = [model.two(model.tree([1, 2, 3, i], 1), 0.5)[0].sum() for i in range(10)]
        loss = dg.stack(losses).sum()        # a collector of 10 loss chains
        ep = interp.epoch + 1
        pend = [n for n in interp.nodes if n.result is None]
        for n in pend:
            n.mark = ep
        cs = list(interp.collectors)
        assert cs
        a, b = I._NATIVE.late_depths(cs, ep), I._late_depths_py(cs, ep)
        assert a == b and len(a) > 10
        assert I._NATIVE.late_depths(cs, ep + 1) == I._late_depths_py(cs, ep + 1) == {}
        interp.epoch = ep
        interp.evaluate([loss._data.node])
        del losses
        nodes = list(interp.nodes)
        assert I._NATIVE.keep(nodes) == I._keep(nodes)
        assert 0 < len(I._keep(nodes)) < len(nodes)
    finally:
        ab.__exit__(None, None, None)


@native
@pytest.mark.parametrize("distinct", [False, True])
def test_plan_equals_python_reference(distinct):
    rng = np.random.default_rng(1)
    for _ in range(20):
        B = int(rng.integers(2, 60))
        keys = rng.choice(np.array([7, 3, 11, 5], np.intp), size=B)
        rows = rng.integers(0, 9 if not distinct else 1000, size=B).astype(np.intp)
        if distinct:
            rows = rng.permutation(1000)[:B].astype(np.intp)
        rows[keys == 5] = -1                     # a source that is one member's own value
        if rng.random() < 0.3:
            keys = np.sort(keys)                 # contiguous positions
        a = I._NATIVE.plan(rows.tobytes(), keys.tobytes(), distinct)
        b = I._plan_py(rows.tobytes(), keys.tobytes(), distinct)
        assert a == b
        assert [p0 for p0, *_ in a] == sorted(p0 for p0, *_ in a)     # first appearance


def _gather_args(rng, B, contiguous_sources=True):
    srcs, rows, pos = [], [], []
    perm = rng.permutation(B)
    cuts = np.sort(rng.choice(np.arange(1, B), size=2, replace=False))
    for k, p in enumerate(np.split(perm, cuts)):
        if k == 2:                               # one member's own value
            srcs.append(rng.random(5))
            rows.append(None)
        else:
            n = int(rng.integers(3, 9))
            s = rng.random((n, 5))
            srcs.append(s if contiguous_sources else np.asfortranarray(s))
            rows.append(rng.integers(0, n, size=len(p)).astype(np.intp))
        p = np.sort(p)
        pos.append(slice(int(p[0]), int(p[0]) + len(p)) if p[-1] - p[0] == len(p) - 1 else p)
    return srcs, rows, pos


@native
@pytest.mark.parametrize("contiguous", [True, False])
def test_fill_equals_numpy_gather(contiguous):
    from dyngraph.ops import _batching

    rng = np.random.default_rng(2)
    impl = _batching.gather_p._impl if hasattr(_batching.gather_p, "_impl") else _batching.gather_p.impl
    for _ in range(20):
        B = int(rng.integers(4, 30))
        srcs, rows, pos = _gather_args(rng, B, contiguous)
        kw = {"B": B, "rows": tuple(rows), "pos": tuple(pos), "ns": (0,) * 3, "uniq": (True,) * 3}
        out = np.full((B, 5), np.nan)
        done = _batching._FILL(out, tuple(srcs), tuple(rows), tuple(pos))
        assert done is contiguous
        saved = _batching._FILL
        _batching._FILL = None
        try:
            want = impl(*srcs, **kw)
        finally:
            _batching._FILL = saved
        if done:
            np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(impl(*srcs, **kw), want)
    # an index out of range: nothing written, NumPy raises its error
    srcs, rows, pos = _gather_args(rng, 10)
    rows[0] = rows[0].copy()
    rows[0][0] = 99
    out = np.zeros((10, 5))
    assert _batching._FILL(out, tuple(srcs), tuple(rows), tuple(pos)) is False
    assert not out.any()
    with pytest.raises(IndexError):
        impl(*srcs, B=10, rows=tuple(rows), pos=tuple(pos), ns=(0,) * 3, uniq=(True,) * 3)


@pytest.mark.parametrize("on", [True, False])
def test_first_cell_call_counts_one_consumer(on):
    """Tracing a cell records its body's calls on the arguments in a sub-interpreter: they
    are not consumers of the outer nodes.  After the first (traced) call and after a later
    (recorded) one, each argument's node has exactly one consumer, the cell call."""
    was = I.use_native(on)
    try:
        model = _Model()
        with dg.autobatch() as ab:
            for _ in range(2):
                a = model.emb(dg.tensor([1]))
                b = model.emb(dg.tensor([2]))
                h = model.cell(a, b)
                cell_node = h._data.node
                for x in (a, b):
                    assert x._data.node.nuse == 1
                    assert x._data.node.user == cell_node.seq
            assert len([t for t in model.cell.__autobatch_cell__.values() if t]) == 1
            h.sum().item()
            assert ab.interp.nodes
    finally:
        I.use_native(was)


@native
def test_pending_equals_python_reference():
    ab, model, loss = _recorded(9)
    try:
        interp = ab.interp
        nodes = list(interp.nodes)
        root = loss._data.node
        for rm, ep in ((-50, 50), (-51, 51)):
            answers = []
            for fn in (I._NATIVE.pending, I._pending_py):
                for n in nodes:
                    n.mark = 0
                root.mark = rm
                out = fn(nodes, rm, ep)
                answers.append((None if out is None else ([nodes.index(n) for n in out[0]], out[1]),
                                [n.mark for n in nodes]))
            assert answers[0] == answers[1]
            assert answers[0][0] is not None and answers[0][0][1] == 1     # loss feeds all
        extra = model.emb(dg.tensor([4]))             # a pending sink that is not a root
        nodes = list(interp.nodes)
        for fn in (I._NATIVE.pending, I._pending_py):
            root.mark = -52
            assert fn(nodes, -52, 52) is None
        del extra
    finally:
        ab.__exit__(None, None, None)


@native
def test_users_and_assign_pieces_equal_python_reference():
    results = []
    pieces = [dg.zeros(1), dg.zeros(2), dg.zeros(3)]
    for users, assign in ((I._NATIVE.users, I._NATIVE.assign_pieces), (I._users_py, I._assign_pieces_py)):
        nodes = _bare(7)
        for i, n in enumerate(nodes):
            n.user = 100 - 3 * i if i != 2 else -1
        u = users(nodes)
        assign(nodes, pieces, [2, 0, 1, 1, 0, 2, 2], [0, 0, 0, 1, 1, 1, 2])
        results.append((u, [(next(k for k, p in enumerate(pieces) if p is n.result), n.row) for n in nodes]))
    assert results[0] == results[1]
    assert np.frombuffer(results[0][0], np.int64).tolist() == [100, 97, -1, 91, 88, 85, 82]
    with pytest.raises(ValueError):
        I._NATIVE.assign_pieces(_bare(2), pieces, [0, 3], [0, 0])
