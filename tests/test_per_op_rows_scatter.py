"""The scatter_add_ row of benchmarks/per_call.py (``zeros_like(h).scatter_add_(0, idx, msg)``
with ``idx = dst.unsqueeze(1).expand(-1, H)``) and the pieces made cheaper for it:

* ``_speedups.rows_add`` takes an expanded row index of the source's shape directly (the
  additions np.add.at makes, in its order: the same bits), reads exact float32/float64/int64
  arrays from their fields instead of buffer requests, and adds rows in 16-byte vector blocks;
* ``_speedups.gather_check`` is ``_check_gather_like``'s first branch in C;
* ``apply_inplace`` finds ``self`` among the node's saved arguments from its slots and takes
  the op's arguments without a closure (``_inplace``);
* ``softmax``'s usual call skips ``_softmax_args``.

Each must give what the Python reference gives: values, bits, nodes, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph._core.registry import LOOPS
from dyngraph.ops import indexing as OI
from dyngraph.ops import registry
from dyngraph.surface import indexing as SI
from dyngraph.surface import nn as SN
from dyngraph.surface.inplace import apply_inplace

needs_loops = pytest.mark.skipif(LOOPS is None or not hasattr(LOOPS, "gather_check"),
                                 reason="C accelerator not built (pure-Python dispatch)")


def _expanded(rows, h):
    return np.broadcast_to(np.asarray(rows, np.int64)[:, None], (len(rows), h))


@needs_loops
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("n, m, h", [(34, 68, 16), (5, 9, 1), (3, 7, 3), (2, 40, 33), (1, 3, 8)])
def test_rows_add_with_an_expanded_index_gives_add_at_bits(dt, n, m, h):
    rng = np.random.default_rng(n * 100 + m)
    rows = rng.integers(-n, n, m)                       # repeats and negative rows
    idx = _expanded(rows, h)
    vals = (rng.standard_normal((m, h)) * 10.0 ** rng.integers(-3, 4, (m, h))).astype(dt)
    out = rng.standard_normal((n, h)).astype(dt)
    ref = out.copy()
    np.add.at(ref, (idx, np.broadcast_to(np.arange(h), idx.shape)), vals)
    assert LOOPS.rows_add(out, idx, vals) is True
    assert out.tobytes() == ref.tobytes()


@needs_loops
def test_rows_add_expanded_index_of_a_3d_target():
    rng = np.random.default_rng(1)
    out = rng.standard_normal((4, 2, 3))
    rows = np.array([3, 0, 3, 1, -1])
    idx = np.broadcast_to(rows[:, None, None], (5, 2, 3))
    vals = rng.standard_normal((5, 2, 3))
    ref = out.copy()
    np.add.at(ref, (idx, *np.indices(idx.shape)[1:]), vals)
    assert LOOPS.rows_add(out, idx, vals) is True and out.tobytes() == ref.tobytes()


@needs_loops
def test_rows_add_declines_without_writing():
    rng = np.random.default_rng(2)
    out = rng.standard_normal((4, 3))
    keep = out.copy()
    vals = rng.standard_normal((5, 3))
    rows = np.array([0, 1, 2, 3, 0])
    cases = [
        (out, np.broadcast_to(rows[:, None], (5, 2)), vals[:, :2]),      # not whole rows
        (out, np.stack([rows, rows, rows + 0], 1), vals),                 # not repeated (no zero stride)
        (out, _expanded(rows, 3), vals[:4]),                              # vals of another shape
        (out, _expanded([0, 1, 2, 4, 0], 3), vals),                       # a row out of range
        (out, _expanded([0, 1, 2, -5, 0], 3), vals),
        (out, _expanded(rows, 3).astype(np.int32), vals),                 # int32 index
        (out, _expanded(rows, 3), vals.astype(np.float32)),               # dtypes differ
        (out.T.copy().T, _expanded(rows, 3), vals),                       # out not C-contiguous
        (out, _expanded(rows, 3), np.asfortranarray(vals)),                 # vals not C-contiguous
    ]
    for o, i, v in cases:
        before = o.copy()
        assert LOOPS.rows_add(o, i, v) is False
        np.testing.assert_array_equal(o, before)
    ro = keep.copy()
    ro.setflags(write=False)
    assert LOOPS.rows_add(ro, _expanded(rows, 3), vals) is False      # read-only out
    np.testing.assert_array_equal(out, keep)


@needs_loops
def test_rows_add_reads_other_dtype_objects_through_buffers():
    """An array whose dtype is not NumPy's canonical object (metadata, byte order) takes the
    buffer protocol as before: same result for a native one, False for a swapped one."""
    rng = np.random.default_rng(3)
    out = rng.standard_normal((4, 3)).astype(np.float32)
    vals = rng.standard_normal((6, 3)).astype(np.float32)
    rows = np.array([1, 1, 0, 3, 2, 1])
    ref = out.copy()
    np.add.at(ref, rows, vals)
    meta = np.dtype(np.float32, metadata={"k": 1})
    o2, v2 = out.copy().view(meta), vals.view(meta)
    assert o2.dtype is not np.dtype(np.float32)
    assert LOOPS.rows_add(o2, rows, v2) is True and o2.view(np.float32).tobytes() == ref.tobytes()
    assert LOOPS.rows_add(out, rows, vals) is True and out.tobytes() == ref.tobytes()
    sw = out.astype(out.dtype.newbyteorder(">"))
    assert LOOPS.rows_add(sw, rows, vals.astype(sw.dtype)) is False
    assert LOOPS.index_below(rows.astype(">i8"), 4) is None           # (not its format, as before)
    assert LOOPS.index_below(_expanded(rows, 5), 4) is True and LOOPS.index_below(_expanded(rows, 5), 3) is False


def _python_gather_check(op, x, dim, index, src, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(SI, "_GATHER_CHECK", None)
        return SI._check_gather_like(op, x, dim, index, src)


def _gather_cases():
    x = dg.zeros(4, 3)
    e = dg.tensor(np.arange(5) % 4).unsqueeze(1).expand(-1, 3)
    return [
        (x, 0, e, dg.ones(5, 3)),
        (x, -2, e, dg.ones(6, 4)),                                # src larger: fine
        (x, 0, e, 2.5),                                           # a number
        (x, 1, dg.tensor([[0, 2], [1, 1]]), dg.ones(2, 2)),
        (x, 0, dg.tensor(np.zeros((0, 3), np.int64)), dg.ones(0, 3)),
        (x, 0, dg.tensor(np.array([[0, 1, 2]], np.int32)), dg.ones(1, 3)),
        (x, 0, dg.tensor(np.array([[0, 1, 2]], np.int16)), dg.ones(1, 3)),
        (dg.zeros(5), 0, dg.tensor([4, 0, 4]), dg.ones(3)),
        (x, 0, e, dg.ones(15)),                                   # src of another rank
    ]


@needs_loops
@pytest.mark.parametrize("k", range(9))
def test_gather_check_accepts_what_the_python_branch_accepts(k, monkeypatch):
    x, dim, index, src = _gather_cases()[k]
    fast = SI._check_gather_like("scatter_add", x, dim, index, src)
    ref = _python_gather_check("scatter_add", x, dim, index, src, monkeypatch)
    assert fast[0] is ref[0] and fast[1] == ref[1] and type(fast[1]) is int


@pytest.mark.parametrize("call, words", [
    (lambda x: x.scatter_add_(0, dg.tensor([[0, 4, 1]]), dg.ones(1, 3)), ["out of bounds", "4", "size 4"]),
    (lambda x: x.scatter_add_(0, dg.tensor([[0, -1, 1]]), dg.ones(1, 3)), ["out of bounds", "-1"]),
    (lambda x: x.scatter_add_(0, dg.tensor([[0, 1, 1, 0]]), dg.ones(1, 4)), ["scatter_add", "[1, 4]", "[4, 3]"]),
    (lambda x: x.scatter_add_(0, dg.tensor([[0, 1, 1]]), dg.ones(1, 2)), ["scatter_add", "[1, 3]", "src", "[1, 2]"]),
    (lambda x: x.scatter_add_(0, dg.tensor([0, 1, 1]), dg.ones(3)), ["scatter_add", "same number of dimensions"]),
    (lambda x: x.scatter_add_(0, dg.tensor([[0.0, 1.0, 1.0]]), dg.ones(1, 3)), ["scatter_add", "int64"]),
    (lambda x: x.scatter_add_(2, dg.tensor([[0, 1, 1]]), dg.ones(1, 3)), ["scatter_add", "range"]),
])
def test_scatter_add_errors_name_the_op_and_shapes(call, words):
    x = dg.zeros(4, 3)
    with pytest.raises((RuntimeError, IndexError)) as info:
        call(x)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    np.testing.assert_array_equal(x.numpy(), np.zeros((4, 3)))     # nothing written


def test_scatter_add_on_a_leaf_that_requires_grad_is_refused():
    w = dg.zeros(4, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"scatter_add_: a leaf Variable that requires grad \(shape \[4, 3\]\)"):
        w.scatter_add_(0, dg.tensor([[0, 1, 2]]), dg.ones(1, 3))
    with dg.no_grad():
        w.scatter_add_(0, dg.tensor([[0, 1, 2]]), dg.ones(1, 3))
    np.testing.assert_array_equal(w.detach().numpy()[[0, 1, 2], [0, 1, 2]], [1.0, 1.0, 1.0])


def _mpnn(T, dt):
    rng = np.random.default_rng(7)
    h = T.tensor(rng.standard_normal((34, 16)).astype(dt), requires_grad=True)
    msg = T.tensor(rng.standard_normal((68, 16)).astype(dt), requires_grad=True)
    dst = T.tensor(rng.integers(0, 34, 68))
    return h, msg, dst


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_rows_scatter_add_matches_torch(dt):
    outs = []
    for T in (dg, torch):
        h, msg, dst = _mpnn(T, dt)
        base = h * 2.0                          # a non-leaf target: the in-place op joins its graph
        agg = base.scatter_add_(0, dst.unsqueeze(1).expand(-1, 16), msg)
        z = T.zeros_like(h).scatter_add_(0, dst.unsqueeze(1).expand(-1, 16), msg * msg)
        loss = (agg * agg).sum() + (z * h).sum()
        outs.append([agg.detach().numpy(), z.detach().numpy(), *T.autograd.grad(loss, [h, msg])])
    tol = dict(rtol=1e-5, atol=1e-5) if dt == np.float32 else dict(rtol=1e-12, atol=1e-12)
    if dt == np.float64:   # zeros plus the products, added in the same order: the same values
        np.testing.assert_array_equal(outs[0][1], outs[1][1])
    for a, b in zip(outs[0], outs[1]):
        b = b.numpy() if isinstance(b, torch.Tensor) else b
        a = a.numpy() if isinstance(a, dg.Tensor) else a
        np.testing.assert_allclose(a, b, **tol)


def test_scatter_add_gradient_matches_finite_differences():
    h, msg, dst = _mpnn(dg, np.float64)
    idx = dst[:10].unsqueeze(1).expand(-1, 3)
    m = msg[:10, :3].detach().requires_grad_(True)
    w = dg.tensor(np.random.default_rng(9).standard_normal((34, 3)))

    def f(v):
        return ((dg.zeros(34, 3, dtype=dg.float64).scatter_add_(0, idx, v) ** 2) * w).sum()

    (g,) = dg.autograd.grad(f(m), [m])
    eps, num = 1e-6, np.zeros(m.shape)
    for i in np.ndindex(*m.shape):
        e = np.zeros(m.shape)
        e[i] = eps
        num[i] = (f(m.detach() + dg.tensor(e)).item() - f(m.detach() - dg.tensor(e)).item()) / (2 * eps)
    np.testing.assert_allclose(g.numpy(), num, rtol=1e-6, atol=1e-7)


def _node(t):
    n = t._fn
    return (n.prim.name, n.params, [None if e is None else (type(e[0]).__name__, e[1]) for e in n.edges],
            [type(a).__name__ for a in n.saved], list(n.saved_versions), t._rg, t._nr, t._version)


@needs_loops
def test_the_fast_pieces_build_the_reference_node(monkeypatch):
    def run():
        h, msg, dst = _mpnn(dg, np.float32)
        z = dg.zeros_like(h).scatter_add_(0, dst.unsqueeze(1).expand(-1, 16), msg)
        node = _node(z)
        g = dg.autograd.grad((z * z).sum(), [msg])[0]
        return z, g, node

    z1, g1, n1 = run()
    with monkeypatch.context() as m:
        m.setattr(SI, "_GATHER_CHECK", None)
        m.setattr(SI, "bind", registry._bind_py)
        m.setattr(OI, "_LOOPS", None)
        z2, g2, n2 = run()
    assert n1 == n2 and n1[0] == "scatter_add" and n1[3] == ["Meta", "Tensor", "Meta"]
    assert z1.detach().numpy().tobytes() == z2.detach().numpy().tobytes()
    assert g1.numpy().tobytes() == g2.numpy().tobytes()


def test_an_op_that_saves_its_target_keeps_the_old_value():
    """apply_inplace's look for ``self`` among the saved arguments, in slots 0-2 and past them."""
    rng = np.random.default_rng(4)
    vals = [rng.standard_normal(3) for _ in range(4)]
    for pos in range(4):                       # self at position 0..3 of a four-operand einsum
        ts = [dg.tensor(v, requires_grad=True) for v in vals]
        tt = [torch.tensor(v, requires_grad=True) for v in vals]
        ys, yt = ts[pos] * 1.0, tt[pos] * 1.0
        args_d = [ys if i == pos else t for i, t in enumerate(ts)]
        args_t = [yt if i == pos else t for i, t in enumerate(tt)]
        out = apply_inplace(ys, lambda s, *a: dg.einsum("i,i,i,i->i", *a), "einsum_", tuple(args_d))
        ref = torch.einsum("i,i,i,i->i", *args_t)
        assert out is ys
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
        gd = dg.autograd.grad(out.sum(), ts)
        gt = torch.autograd.grad(ref.sum(), tt)
        for a, b in zip(gd, gt):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_in_place_mul_saving_its_target_matches_torch():
    a, b = np.array([1.0, -2.0, 3.0]), np.array([0.5, 4.0, -1.0])
    xd, yd = dg.tensor(a, requires_grad=True), dg.tensor(b, requires_grad=True)
    xt, yt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    rd, rt = xd * 1.0, xt * 1.0
    rd.mul_(yd).mul_(yd)      # mul saves both inputs: the target's old value is kept for its rule
    rt.mul_(yt).mul_(yt)
    for g, h in zip(dg.autograd.grad(rd.sum(), [xd, yd]), torch.autograd.grad(rt.sum(), [xt, yt])):
        np.testing.assert_allclose(g.numpy(), h.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dim", [-1, 0, 1, -2])
def test_softmax_usual_call_matches_the_checked_path_and_torch(dim, monkeypatch):
    x = dg.tensor(np.random.default_rng(5).standard_normal((3, 5)), requires_grad=True)
    y = dg.softmax(x, dim=dim)
    with monkeypatch.context() as m:    # the checked path (_softmax_args) builds the same node
        m.setattr(SN, "Tensor", type("NotTensor", (), {}))
        y2 = dg.softmax(x, dim=dim)
    assert y.grad_fn.params == y2.grad_fn.params == {"dim": dim % 2}
    assert y.detach().numpy().tobytes() == y2.detach().numpy().tobytes()
    t = torch.tensor(x.detach().numpy(), requires_grad=True)
    yt = torch.softmax(t, dim=dim)
    w = np.random.default_rng(6).standard_normal((3, 5))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    (g,) = dg.autograd.grad((y * dg.tensor(w)).sum(), [x])
    (gt,) = torch.autograd.grad((yt * torch.tensor(w)).sum(), [t])
    np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("call, exc, words", [
    (lambda x: dg.softmax(x, dim=2), IndexError, ["softmax", "range"]),
    (lambda x: dg.softmax(x, dim=-3), IndexError, ["softmax", "range"]),
])
def test_softmax_bad_dims_reach_the_checks(call, exc, words):
    x = dg.ones(2, 3)
    with pytest.raises(exc) as info:
        call(x)
    for w in words:
        assert w in str(info.value)


def test_softmax_other_calls_keep_their_paths():
    x = dg.tensor([[1.0, 2.0], [3.0, 5.0]])
    with pytest.warns(UserWarning, match="Implicit dimension"):
        np.testing.assert_allclose(dg.softmax(x).numpy(), torch.softmax(torch.tensor(x.numpy()), 1).numpy(),
                                   rtol=1e-6)
    np.testing.assert_allclose(dg.softmax(x, 1, dtype=dg.float64).numpy(),
                               torch.softmax(torch.tensor(x.numpy()), 1, dtype=torch.float64).numpy())
    assert dg.softmax(x, 1, dtype=dg.float64).dtype == dg.float64
    assert dg.softmax(dg.tensor(3.0), 0).item() == 1.0
