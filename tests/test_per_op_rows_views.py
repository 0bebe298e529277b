"""The fast surfaces of issue 13's per-op rows (``_speedups.unsqueeze/view/expand/cat/stack/
chunk``, ``expand_view`` and the C bind's direct reshape/expand forwards).

Each C surface does the common case of its Python function in ``surface/shape.py`` and then the
same ``bind`` call: the nodes, views, version counters, values and gradients must be those of
the Python code (run here with the C surfaces switched off and ``registry._bind_py``), and
every other call -- bad arguments included -- must reach the Python code and its errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph._core.interpreter import Interpreter, interpreting
from dyngraph.ops import registry
from dyngraph.ops import structural as ST
from dyngraph.surface import shape as S

needs_c = pytest.mark.skipif(S._C is None, reason="C fast surfaces not built (pure-Python dispatch)")


def _summary(t):
    """Everything a node and a view carry that the two paths must agree on."""
    n = t._fn
    node = None
    if n is not None:
        node = (n.prim.name, n.params, [None if e is None else (type(e[0]).__name__, e[1]) for e in n.edges],
                None if n.saved_versions is None else list(n.saved_versions),
                None if n.in_meta is None else [None if m is None else (m.shape, m.dtype) for m in n.in_meta],
                n.out is not None, n.out_vc is not None)
    d = t._data
    return (node, t._rg, t._nr, d.shape, d.strides, d.dtype, d.flags.writeable, d.flags.c_contiguous,
            t._base is not None, t._vc is not None)


def _python_path(monkeypatch):
    """Switch the C surfaces, the C bind and expand's C view off (the reference path)."""
    monkeypatch.setattr(S, "_C", None)
    for name in ("_C_UNSQUEEZE", "_C_VIEW", "_C_EXPAND", "_C_CAT", "_C_STACK", "_C_CHUNK"):
        monkeypatch.setattr(S, name, None)
    monkeypatch.setattr(S, "bind", registry._bind_py)
    monkeypatch.setattr(ST, "_EXPAND_VIEW", None)


def _tensor(shape, grad=True, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return dg.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=grad)


def _calls():
    """(name, make inputs, call): the common cases the C surfaces take, and near misses."""
    return [
        ("unsqueeze(-1)", lambda: [_tensor((68, 16))], lambda T, x: x.unsqueeze(-1)),
        ("unsqueeze(0)", lambda: [_tensor((128,))], lambda T, x: x.unsqueeze(0)),
        ("unsqueeze(1) int", lambda: [dg.tensor(np.arange(68) % 34)], lambda T, x: x.unsqueeze(1)),
        ("unsqueeze(-3)", lambda: [_tensor((2, 3))], lambda T, x: T.unsqueeze(x, -3)),
        ("unsqueeze 0-d", lambda: [_tensor(())], lambda T, x: x.unsqueeze(0)),
        ("unsqueeze of view", lambda: [_tensor((4, 5))], lambda T, x: x[1:3].unsqueeze(2)),
        ("unsqueeze transposed", lambda: [_tensor((4, 5))], lambda T, x: x.mT.unsqueeze(1)),
        ("view(5,256)", lambda: [_tensor((10, 128))], lambda T, x: x.view(5, 256)),
        ("view(-1)", lambda: [_tensor((10, 128))], lambda T, x: x.view(-1)),
        ("view(2,-1,4)", lambda: [_tensor((4, 8))], lambda T, x: x.view(2, -1, 4)),
        ("view(1280)", lambda: [_tensor((10, 128))], lambda T, x: x.view(1280)),
        ("view(0,2,2) empty", lambda: [_tensor((0, 4))], lambda T, x: x.view(0, 2, 2)),
        ("view(tuple)", lambda: [_tensor((3, 4))], lambda T, x: x.view((4, 3))),
        ("view of row slice", lambda: [_tensor((4, 6))], lambda T, x: x[1:3].view(3, 4)),
        ("view int", lambda: [dg.tensor(np.arange(12))], lambda T, x: x.view(3, 4)),
        ("expand(-1,16) int", lambda: [dg.tensor(np.arange(68) % 34)], lambda T, x: x.unsqueeze(1).expand(-1, 16)),
        ("expand(3,4)", lambda: [_tensor((1, 4))], lambda T, x: x.expand(3, 4)),
        ("expand(-1,-1)", lambda: [_tensor((3, 4))], lambda T, x: x.expand(-1, -1)),
        ("expand lead", lambda: [_tensor((4,))], lambda T, x: x.expand(2, 3, 4)),
        ("expand size 0", lambda: [_tensor((1, 4))], lambda T, x: x.expand(0, 4)),
        ("expand strided", lambda: [_tensor((4, 3))], lambda T, x: x[:, :1].expand(4, 5)),
        ("expand tuple", lambda: [_tensor((3, 1))], lambda T, x: x.expand((3, 2))),
        ("cat vectors", lambda: [_tensor((128,)), _tensor((128,), seed=1)], lambda T, a, b: T.cat([a, b])),
        ("cat vectors of two lengths", lambda: [_tensor((3,)), _tensor((5,), seed=1)],
         lambda T, a, b: T.cat((a, b), -1)),
        ("cat rows dim 1", lambda: [_tensor((1, 128)), _tensor((1, 7), seed=1)], lambda T, a, b: T.cat([a, b], dim=1)),
        ("cat dim -2", lambda: [_tensor((2, 3)), _tensor((4, 3), seed=1)], lambda T, a, b: T.cat([a, b, a], -2)),
        ("cat one grad", lambda: [_tensor((2, 3)), _tensor((2, 3), grad=False, seed=1)],
         lambda T, a, b: T.cat([a, b])),
        ("cat float32+float64", lambda: [_tensor((2, 3), dtype=np.float32), _tensor((2, 3), seed=1)],
         lambda T, a, b: T.cat([a, b])),
        ("cat legacy empty", lambda: [_tensor((2, 3)), _tensor((0,), seed=1)], lambda T, a, b: T.cat([a, b])),
        ("stack(4)", lambda: [_tensor((128,), seed=k) for k in range(4)], lambda T, *xs: T.stack(list(xs))),
        ("stack dim -1", lambda: [_tensor((2, 3)), _tensor((2, 3), seed=1)], lambda T, a, b: T.stack((a, b), -1)),
        ("stack one", lambda: [_tensor((2, 3))], lambda T, a: T.stack([a], 1)),
        ("stack 0-d", lambda: [_tensor(()), _tensor((), seed=1)], lambda T, a, b: T.stack([a, b])),
        ("chunk(g,3,-1)", lambda: [_tensor((1, 96))], lambda T, g: T.chunk(g, 3, dim=-1)),
        ("chunk uneven", lambda: [_tensor((7, 2))], lambda T, g: g.chunk(3)),
        ("chunk more than n", lambda: [_tensor((2, 5))], lambda T, g: g.chunk(4, 1)),
        ("chunk 1", lambda: [_tensor((3,))], lambda T, g: g.chunk(1)),
        ("chunk of view", lambda: [_tensor((4, 6))], lambda T, g: g[1:].chunk(2, 1)),
    ]


CALLS = _calls()


def _flat(r):
    return list(r) if isinstance(r, tuple) else [r]


@needs_c
@pytest.mark.parametrize("k", range(len(CALLS)), ids=[c[0] for c in CALLS])
@pytest.mark.parametrize("grad_mode", [True, False])
def test_c_surfaces_build_the_python_paths_nodes_and_views(k, grad_mode, monkeypatch):
    name, make, call = CALLS[k]
    xs = make()
    with dg.set_grad_enabled(grad_mode):
        fast = _flat(call(dg, *xs))
    with monkeypatch.context() as m:
        _python_path(m)
        with dg.set_grad_enabled(grad_mode):
            ref = _flat(call(dg, *xs))
    assert len(fast) == len(ref)
    for f, r in zip(fast, ref):
        np.testing.assert_array_equal(f.detach().numpy(), r.detach().numpy())
        assert _summary(f) == _summary(r), name
        # a view shares its root's version counter on both paths alike
        assert (f._base is None) == (r._base is None)
        if f._base is not None:
            assert f._base is r._base and f._vc is f._base._vc
    floats = [x for x in xs if x.requires_grad]
    if grad_mode and floats and fast[0].requires_grad:
        gf = dg.autograd.grad(sum((o * (i + 1)).sum() for i, o in enumerate(fast)), floats, allow_unused=True)
        gr = dg.autograd.grad(sum((o * (i + 1)).sum() for i, o in enumerate(ref)), floats, allow_unused=True)
        for a, b in zip(gf, gr):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("k", range(len(CALLS)), ids=[c[0] for c in CALLS])
def test_values_and_gradients_match_torch(k):
    name, make, call = CALLS[k]
    xs = make()
    ts = [torch.tensor(x.detach().numpy(), requires_grad=x.requires_grad) for x in xs]
    out, ref = _flat(call(dg, *xs)), _flat(call(torch, *ts))
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert tuple(o.shape) == tuple(r.shape), name
        np.testing.assert_array_equal(o.detach().numpy(), r.detach().numpy())
    floats = [i for i, x in enumerate(xs) if x.requires_grad]
    if floats and out[0].requires_grad:
        # weights per output element, so each element's gradient is distinguishable
        ws = [np.random.default_rng(i).standard_normal(tuple(r.shape)) for i, r in enumerate(ref)]
        gl = dg.autograd.grad(sum((o * dg.tensor(w)).sum() for o, w in zip(out, ws)), [xs[i] for i in floats],
                              allow_unused=True)
        tl = torch.autograd.grad(sum((r * torch.tensor(w)).sum() for r, w in zip(ref, ws)), [ts[i] for i in floats],
                                 allow_unused=True)
        for a, b in zip(gl, tl):
            if a is None:       # an input that takes no part (cat's legacy empty vector)
                assert b is None or b.numel() == 0
                continue
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


def test_gradients_match_finite_differences():
    x = _tensor((3, 4))
    w = np.random.default_rng(5).standard_normal((8, 2, 2, 2))

    def f(t):
        # (4, 3) -> (4, 1, 3) -> (4, 2, 3) -> pieces (4, 2, 2) and (4, 2, 1) -> (8, 2, 2, 2)
        a, b = t.view(4, 3).unsqueeze(1).expand(-1, 2, -1).chunk(2, dim=-1)
        y = dg.stack([dg.cat([a, a], dim=0), dg.cat([b, b * b], dim=0).expand(-1, -1, 2)], -1)
        return (y * dg.tensor(w)).sum()

    (g,) = dg.autograd.grad(f(x), [x])
    num = np.zeros(x.shape)
    eps = 1e-6
    for i in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[i] = eps
        num[i] = (f(x.detach() + dg.tensor(e)).item() - f(x.detach() - dg.tensor(e)).item()) / (2 * eps)
    np.testing.assert_allclose(g.numpy(), num, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("call, exc, words", [
    (lambda x: x.unsqueeze(3), IndexError, ["unsqueeze", "range"]),
    (lambda x: x.unsqueeze(-4), IndexError, ["unsqueeze", "range"]),
    (lambda x: x.unsqueeze(1.0), TypeError, []),
    (lambda x: x.view(7, 3), RuntimeError, ["view", "[7, 3]", "size 12"]),
    (lambda x: x.view(-1, -1), RuntimeError, ["view", "only one dimension can be inferred"]),
    (lambda x: x.view(5, -1), RuntimeError, ["view", "[5, -1]", "size 12"]),
    (lambda x: x.view(0, -1), RuntimeError, ["view", "[0, -1]", "size 12"]),
    (lambda x: x.mT.view(12), RuntimeError, ["view size is not compatible", "[4, 3]", "[12]"]),
    (lambda x: x.expand(3, 5), RuntimeError, ["expand", "(5)", "(4)", "dimension 1", "[3, 5]", "[3, 4]"]),
    (lambda x: x.expand(4), RuntimeError, ["expand", "number of sizes provided (1)", "(2)"]),
    (lambda x: dg.cat([x, x.view(4, 3)], 0), RuntimeError, ["Sizes of tensors must match", "[[3, 4], [4, 3]]"]),
    (lambda x: dg.cat([x, x.view(12)]), RuntimeError, ["same number of dimensions", "[3, 4]", "[12]"]),
    (lambda x: dg.cat([x, x], 2), IndexError, ["cat", "range"]),
    (lambda x: dg.cat([x[0, 0], x[0, 1]]), RuntimeError, ["zero-dimensional tensor"]),
    (lambda x: dg.cat([x, 1.0]), TypeError, ["cat", "element 1", "float"]),
    (lambda x: dg.stack([x, x.view(4, 3)]), RuntimeError, ["stack", "[3, 4] at entry 0", "[4, 3] at entry 1"]),
    (lambda x: dg.stack([x, x], 3), IndexError, ["stack", "range"]),
    (lambda x: dg.stack([]), RuntimeError, ["stack", "non-empty"]),
    (lambda x: dg.chunk(x, 0), RuntimeError, ["chunk", "greater than 0", "0"]),
    (lambda x: dg.chunk(x, 2, 2), IndexError, ["chunk", "range"]),
    (lambda x: dg.chunk(x[0, 0], 2), RuntimeError, ["chunk", "1-dimensional"]),
])
def test_bad_arguments_reach_the_python_errors(call, exc, words):
    x = _tensor((3, 4))
    with pytest.raises(exc) as info:
        call(x)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_writes_reach_through_the_views_and_bump_their_counters():
    x = dg.tensor(np.arange(12.0))
    v, u = x.view(3, 4), x.unsqueeze(0)
    e = x.view(3, 4)[:1].expand(2, 4)
    pieces = dg.chunk(x.view(3, 4), 2, dim=1)
    before = [t._version for t in (v, u, e, *pieces)]
    x.add_(1.0)
    assert [t._version for t in (v, u, e, *pieces)] == [b + 1 for b in before]
    np.testing.assert_array_equal(v.numpy(), np.arange(1.0, 13.0).reshape(3, 4))
    np.testing.assert_array_equal(u.numpy()[0], np.arange(1.0, 13.0))
    np.testing.assert_array_equal(e.numpy(), np.tile(np.arange(1.0, 5.0), (2, 1)))
    np.testing.assert_array_equal(pieces[1].numpy(), np.arange(1.0, 13.0).reshape(3, 4)[:, 2:])
    v[0, 0] = 100.0                         # and the other way: a write through a view
    assert x[0].item() == 100.0 and u[0, 0].item() == 100.0
    assert not e._data.flags.writeable       # an expanded view is read-only, as broadcast_to's


def test_a_saved_view_modified_in_place_fails_in_backward():
    w = _tensor((3, 4))
    x = w * 1.0
    y = x.view(12)
    z = (y * y).sum()        # y saved by mul
    x.add_(1.0)              # bumps the counter y shares
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


class _Recorder(Interpreter):
    def __init__(self):
        super().__init__()
        self.calls = []

    def process(self, prim, args, params):
        self.calls.append((prim.name, len(args), dict(params)))
        return self.process_below(prim, args, params)


@needs_c
def test_an_interpreter_sees_the_same_calls_from_both_paths(monkeypatch):
    x, d = _tensor((2, 6)), dg.tensor(np.arange(5))

    def program():
        return [x.unsqueeze(-1), x.view(3, 4), d.unsqueeze(1).expand(-1, 3), dg.cat([x, x], 1),
                dg.stack([x, x]), *dg.chunk(x, 4, 1)]

    with interpreting(_Recorder()) as fast:
        outs_f = program()
    with monkeypatch.context() as m:
        _python_path(m)
        with interpreting(_Recorder()) as ref:
            outs_r = program()
    assert fast.calls == ref.calls and len(fast.calls) == 7
    for f, r in zip(outs_f, outs_r):
        np.testing.assert_array_equal(f.detach().numpy(), r.detach().numpy())


@needs_c
def test_a_replaced_forward_is_what_bind_runs(monkeypatch):
    seen = []
    orig_r, orig_e = ST.reshape_p.impl, ST.expand_p.impl

    def reshape(x, shape=()):
        seen.append(("reshape", shape))
        return orig_r(x, shape=shape)

    def expand(x, shape=()):
        seen.append(("expand", shape))
        return orig_e(x, shape=shape)

    monkeypatch.setattr(ST.reshape_p, "impl", reshape)
    monkeypatch.setattr(ST.expand_p, "impl", expand)
    x = _tensor((1, 4))
    x.view(4).unsqueeze(0).expand(3, 4)
    assert seen == [("reshape", (4,)), ("reshape", (1, 4)), ("expand", (3, 4))]


EXPAND_CASES = [((68, 1), (68, 16)), ((1, 4), (3, 4)), ((4,), (2, 3, 4)), ((1,), (5,)), ((1, 1), (0, 3)),
                ((3, 4), (3, 4)), ((2, 1, 3), (2, 5, 3)), ((), (2, 2)), ((0, 1), (0, 4)), ((1, 4), (1, 4))]


@needs_c
@pytest.mark.parametrize("src, shape", EXPAND_CASES)
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.bool_, np.float16])
def test_expand_view_is_broadcast_to(src, shape, dt, monkeypatch):
    x = np.arange(int(np.prod(src)), dtype=np.int64).astype(dt).reshape(src)
    out, ref = S._C.expand_view(x, shape), np.broadcast_to(x, shape)
    assert out.shape == ref.shape and out.strides == ref.strides and out.dtype == ref.dtype
    assert not out.flags.writeable and not ref.flags.writeable
    # the base expand_p's own construction gives (the array owning the memory)
    monkeypatch.setattr(ST, "_EXPAND_VIEW", None)
    py = ST.expand_p.impl(x, shape=shape)
    assert out.base is py.base and out.strides == py.strides and not py.flags.writeable
    np.testing.assert_array_equal(out, ref)
    with pytest.raises(ValueError, match="read-only"):
        out[...] = 0


@needs_c
def test_expand_view_leaves_other_calls_to_expand_p():
    x = np.arange(12.0).reshape(3, 4)
    for arr, shape in [(x.T, (4, 3)), (x, (3, 5)), (x, (4,)), (x, (-1, 4)), (x, [3, 4]), (x, (3.0, 4)),
                       (x[:, :1], (3, 4))]:
        assert S._C.expand_view(arr, shape) is None
    # ... where expand_p runs np.broadcast_to (or raises its error)
    assert ST.expand_p.impl(x.T, shape=(4, 3)).strides == np.broadcast_to(x.T, (4, 3)).strides
    with pytest.raises(ValueError):
        ST.expand_p.impl(x, shape=(3, 5))


@needs_c
def test_c_surfaces_decline_what_they_do_not_cover():
    x = _tensor((3, 4))
    ni = NotImplemented
    assert S._C.unsqueeze(x, True) is ni and S._C.unsqueeze(x, 3) is ni and S._C.unsqueeze(x._data, 0) is ni
    assert S._C.view(x, (4, -1, -1)) is ni and S._C.view(x.mT, (12,)) is ni and S._C.view(x, (2 ** 70,)) is ni
    assert S._C.view(x, (5, 3)) is ni and S._C.view(x, (-2, -6)) is ni
    assert S._C.expand(x, (1, 3, 4)) is ni and S._C.expand(x, (3, 5)) is ni and S._C.expand(x, (3, -2)) is ni
    assert S._C.cat([x], 0) is ni and S._C.cat([x, x._data], 0) is ni and S._C.cat([x, x], 2) is ni
    assert S._C.cat(iter([x, x]), 0) is ni and S._C.cat([x, x], 0.0) is ni
    assert S._C.stack([], 0) is ni and S._C.stack([x, x.mT], 0) is ni and S._C.stack([x], 3) is ni
    assert S._C.chunk(x, 0, 0) is ni and S._C.chunk(x, 2, 2) is ni and S._C.chunk(x[:0], 2, 0) is ni
    assert S._C.chunk(x, 2.0, 0) is ni


@pytest.mark.parametrize("call", [lambda x: x.chunk(1), lambda x: x.unsqueeze(0).unbind(),
                                  lambda x: x.split(3), lambda x: x.view(1, 3).unbind(0)])
def test_one_piece_splits_have_gradients(call):
    """A split into one piece records a node with one output, whose rule gets the gradient
    bare, not in a tuple (it was unpacked as the rows of the gradient)."""
    w = np.array([1.0, -2.0, 0.5])
    x, t = dg.tensor(np.arange(3.0), requires_grad=True), torch.arange(3.0, dtype=torch.float64, requires_grad=True)
    (p,), (q,) = call(x), call(t)
    (gx,) = dg.autograd.grad((p * dg.tensor(w).reshape(p.shape)).sum(), [x], create_graph=True)
    (gt,) = torch.autograd.grad((q * torch.tensor(w).reshape(q.shape)).sum(), [t], create_graph=True)
    np.testing.assert_array_equal(gx.detach().numpy(), gt.detach().numpy())
    (ggx,) = dg.autograd.grad((gx * gx).sum() + (p * p).sum(), [x])
    (ggt,) = torch.autograd.grad((gt * gt).sum() + (q * q).sum(), [t])
    np.testing.assert_array_equal(ggx.numpy(), ggt.numpy())
