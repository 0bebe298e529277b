"""The C accelerator (dyngraph/_speedups.c) must build the same objects as the Python path."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.autograd.graph import Node
from dyngraph.ops import registry
from dyngraph.ops.elementwise import add_p, exp_p, mul_p, tanh_p, where_p
from dyngraph.ops.linalg import matmul_p
from dyngraph.ops.reduction import sum_p

pytestmark = pytest.mark.skipif(registry.bind is registry._bind_py,
                                reason="C accelerator not built (pure-Python dispatch)")


def _node_summary(t):
    n = t._fn
    if n is None:
        return None
    return (n.prim.name, n.params, [None if e is None else (type(e[0]).__name__, e[1]) for e in n.edges],
            None if n.saved_versions is None else list(n.saved_versions),
            None if n.in_meta is None else [None if m is None else (m.shape, m.dtype) for m in n.in_meta],
            n.out is not None, n.out_vc is not None)


CASES = [
    (add_p, lambda a, b, c: (a, b), {}),
    (add_p, lambda a, b, c: (a, c), {}),            # broadcasting: in_meta recorded
    (add_p, lambda a, b, c: (a, 2.5), {}),          # weak scalar
    (mul_p, lambda a, b, c: (a, b), {}),
    (matmul_p, lambda a, b, c: (a, b.mT), {}),
    (tanh_p, lambda a, b, c: (a,), {}),
    (exp_p, lambda a, b, c: (a,), {}),
    (sum_p, lambda a, b, c: (a,), {"dim": (1,)}),
    (where_p, lambda a, b, c: (a > 0, a, b), {}),   # promote_from != 0: Python path
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("grad", [True, False])
def test_c_and_python_dispatch_agree(case, grad):
    prim, pick, params = CASES[case]
    rng = np.random.default_rng(case)
    a = dg.tensor(rng.standard_normal((3, 4)), requires_grad=grad)
    b = dg.tensor(rng.standard_normal((3, 4)), requires_grad=grad)
    c = dg.tensor(rng.standard_normal((4,)), requires_grad=grad)
    args = pick(a, b, c)
    out_c = registry.bind(prim, args, params)
    out_p = registry._bind_py(prim, args, params)
    np.testing.assert_array_equal(out_c.detach().numpy(), out_p.detach().numpy())
    assert out_c.requires_grad == out_p.requires_grad
    assert type(out_c._data) is np.ndarray
    assert _node_summary(out_c) == _node_summary(out_p)
    if grad:
        assert isinstance(out_c.grad_fn, Node)
        gc = dg.autograd.grad(out_c.sum(), [t for t in args if isinstance(t, dg.Tensor) and t.requires_grad])
        gp = dg.autograd.grad(out_p.sum(), [t for t in args if isinstance(t, dg.Tensor) and t.requires_grad])
        for x, y in zip(gc, gp):
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_errors_name_the_op_in_c_path():
    from dyngraph.ops.elementwise import add_p
    from dyngraph.ops.registry import bind

    with pytest.raises(ValueError, match="add"):  # NumPy's error, renamed by the bind path
        bind(add_p, (dg.ones(2, 3), dg.ones(4)))
    with pytest.raises(RuntimeError, match="add: The size of tensor a"):  # PyTorch's class
        dg.ones(2, 3) + dg.ones(4)


def test_zero_dim_results_are_arrays():
    x = dg.tensor(2.0, requires_grad=True)
    y = x * x
    assert type(y._data) is np.ndarray and y._data.shape == ()
    y.backward()
    assert x.grad.item() == 4.0


# -- generated programs: the C paths (bind, backward loop) against the pure-Python reference --
_PROGRAM = r'''
import json, sys
import numpy as np
import dyngraph as dg

def summary(t):
    n = t._fn
    if n is None:
        return None
    return [n.prim.name, sorted((k, repr(v)) for k, v in n.params.items()),
            [None if e is None else [type(e[0]).__name__, e[1]] for e in n.edges],
            None if n.saved_versions is None else list(n.saved_versions),
            None if n.in_meta is None else [None if m is None else [list(m.shape), str(m.dtype)]
                                             for m in n.in_meta],
            n.out is not None, n.out_vc is not None, n.n_out]

OPS = [
    lambda r, x, y, v: x + y, lambda r, x, y, v: x * y, lambda r, x, y, v: x - v,   # v broadcasts
    lambda r, x, y, v: x * 2.5, lambda r, x, y, v: x.tanh(), lambda r, x, y, v: (x * 0.1).exp(),
    lambda r, x, y, v: x @ y.mT @ x, lambda r, x, y, v: x.sum(1, keepdim=True) + y,
    lambda r, x, y, v: dg.where(x > 0, x, y), lambda r, x, y, v: x.reshape(-1).reshape(x.shape),
    lambda r, x, y, v: x.t().t(), lambda r, x, y, v: dg.cat(x.split(2, 1), 1),
    lambda r, x, y, v: x / (y * y + 1.0), lambda r, x, y, v: x.float() * y,
    lambda r, x, y, v: x + x.argmax(1, keepdim=True).float(),
    lambda r, x, y, v: x.double().float() + v.double().float(),
    lambda r, x, y, v: dg.maximum(x, y) + dg.relu(v),
    # views (getitem, reshape, permute, expand), variadic and multi-output calls: C bind too
    lambda r, x, y, v: x[1:].sum(0, keepdim=True) + y, lambda r, x, y, v: x.unsqueeze(0)[0] * y,
    lambda r, x, y, v: dg.cat([x[k:k + 1] for k in range(3)]) - y,
    lambda r, x, y, v: dg.stack([x, y, x], 0).sum(0),
    lambda r, x, y, v: dg.cat([x[:, k:k + 1] for k in range(4)] * 3, 1)[:, 4:8] + y,
    lambda r, x, y, v: dg.sort(x, 1)[0] + dg.topk(y, 4, 1)[0],
    lambda r, x, y, v: x.permute(1, 0).reshape(4, 3).t() + v.expand(3, 4),
]

out = []
for seed in json.loads(sys.argv[1]):
    rng = np.random.default_rng(seed)
    leaves = [dg.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
              for _ in range(2)]
    v = dg.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=bool(seed % 2))
    x, y = leaves
    nodes = []
    for _ in range(8):
        op = OPS[int(rng.integers(len(OPS)))]
        x, y = op(rng, x, y, v), x
        nodes.append(summary(x))
    loss = (x * x).sum() + y.sum()
    loss.backward()
    grads = [None if t.grad is None else t.grad.numpy().tolist() for t in leaves]
    out.append([nodes, float(loss.item()), grads, None if v.grad is None else v.grad.numpy().tolist()])
print(json.dumps(out))
'''


def _run_program(seeds, pure):
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("DYNGRAPH_PURE_PYTHON", None)
    if pure:
        env["DYNGRAPH_PURE_PYTHON"] = "1"
    res = subprocess.run([sys.executable, "-c", _PROGRAM, json.dumps(seeds)], capture_output=True,
                         text=True, env=env, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_generated_programs_build_the_same_nodes_and_gradients_in_both_paths():
    seeds = list(range(40))
    c_path = _run_program(seeds, pure=False)
    py_path = _run_program(seeds, pure=True)
    for seed, (c, p) in enumerate(zip(c_path, py_path, strict=True)):
        assert c[0] == p[0], f"seed {seed}: node summaries differ"
        assert c[1] == p[1], f"seed {seed}: loss differs"
        assert c[2] == p[2], f"seed {seed}: leaf gradients differ"
        assert c[3] == p[3], f"seed {seed}: broadcast-input gradient differs"


def test_no_forward_runs_twice_on_a_late_c_fallback():
    """A differentiable call whose output is not floating: the C path hands the computed
    result to the Python tail (registry._finish) instead of running the forward again."""
    calls = []

    @registry.primitive("_test_int_out", save_inputs=False)
    def int_out(x):
        calls.append(1)
        return (x > 0).astype(np.int64)

    try:
        x = dg.randn(3, requires_grad=True)
        y = registry.bind(int_out, (x,))
        assert calls == [1] and y.dtype == dg.int64 and y.grad_fn is None
    finally:
        del registry.REGISTRY["_test_int_out"]


def test_c_objects_have_every_slot_initialised():
    """C reads Tensor's and Node's __slots__ at set-up: a slot added in Python is set (None)
    on objects the C path creates, so adding one needs no C change."""
    x = dg.randn(3, requires_grad=True)
    y = registry.bind(tanh_p, (x,))
    for obj in (y, y.grad_fn):
        for name in type(obj).__slots__:
            if name not in ("__dict__", "__weakref__"):
                getattr(obj, name)   # AttributeError if the C path left it unset


def _views_summary(outs, inputs):
    """Which input each output is a view of (by identity of the root), and counter sharing."""
    res = []
    for o in outs:
        res.append((None if o._base is None else [i for i, a in enumerate(inputs) if a is o._base],
                    o._vc is not None and any(o._vc is a._vc for a in inputs)))
    return res


def _view_cases():
    from dyngraph.ops.nn import nll_loss_p
    from dyngraph.ops.shape import cat_p, stack_p
    from dyngraph.ops.structural import expand_p, getitem_p, permute_p, reshape_p

    return [
        (getitem_p, lambda a, b, c: (a,), {"index": (1,)}),
        (getitem_p, lambda a, b, c: (a,), {"index": ((0, 2, None),)}),
        (reshape_p, lambda a, b, c: (a,), {"shape": (12,)}),
        (reshape_p, lambda a, b, c: (a.mT,), {"shape": (12,)}),       # a copy: no view
        (permute_p, lambda a, b, c: (a,), {"dims": (1, 0)}),
        (expand_p, lambda a, b, c: (c,), {"shape": (3, 4)}),
        (cat_p, lambda a, b, c: (a, b, a), {"dim": 0}),
        (cat_p, lambda a, b, c: tuple([a, b] * 20), {"dim": 1}),        # more than 8 inputs
        (cat_p, lambda a, b, c: tuple([a] * 70), {"dim": 0}),           # past the C limit
        (stack_p, lambda a, b, c: (a, b), {"dim": 0}),
        (nll_loss_p, lambda a, b, c: (a, dg.tensor([0, 3, 1]), None), {}),   # None input
    ]


@pytest.mark.parametrize("case", range(11))
@pytest.mark.parametrize("grad", [True, False])
def test_c_and_python_dispatch_agree_on_views_variadic_and_none_inputs(case, grad):
    prim, pick, params = _view_cases()[case]
    rng = np.random.default_rng(case)
    a = dg.tensor(rng.standard_normal((3, 4)), requires_grad=grad)
    b = dg.tensor(rng.standard_normal((3, 4)), requires_grad=grad)
    c = dg.tensor(rng.standard_normal((4,)), requires_grad=grad)
    args = pick(a, b, c)
    out_c = registry.bind(prim, args, params)
    out_p = registry._bind_py(prim, args, params)
    np.testing.assert_array_equal(out_c.detach().numpy(), out_p.detach().numpy())
    assert _node_summary(out_c) == _node_summary(out_p)
    assert out_c.requires_grad == out_p.requires_grad
    assert _views_summary([out_c], [a, b, c]) == _views_summary([out_p], [a, b, c])
    if prim.is_view and prim.name != "reshape" or case == 2:
        assert out_c._base is not None and out_c._vc is out_c._base._vc
    if grad:
        ts = [t for t in {id(t): t for t in args if isinstance(t, dg.Tensor) and t.requires_grad}.values()]
        gc = dg.autograd.grad(out_c.sum(), ts)
        gp = dg.autograd.grad(out_p.sum(), ts)
        for x, y in zip(gc, gp):
            np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("grad", [True, False])
def test_c_and_python_dispatch_agree_on_several_outputs(grad):
    from dyngraph.ops.sorting import sort_p, topk_p

    x = dg.tensor(np.random.default_rng(0).standard_normal((3, 5)), requires_grad=grad)
    for prim, params in ((sort_p, {"dim": 1, "descending": False}), (topk_p, {"k": 2, "dim": 1})):
        params = {k: v for k, v in params.items() if k in prim.impl.__code__.co_varnames}
        out_c = registry.bind(prim, (x,), params)
        out_p = registry._bind_py(prim, (x,), params)
        assert type(out_c) is tuple and len(out_c) == len(out_p)
        for oc, op in zip(out_c, out_p):
            np.testing.assert_array_equal(oc.detach().numpy(), op.detach().numpy())
            assert (oc.requires_grad, oc._nr, oc.dtype) == (op.requires_grad, op._nr, op.dtype)
        assert _node_summary(out_c[0]) == _node_summary(out_p[0])
        if grad:
            fc, fp = out_c[0].grad_fn, out_p[0].grad_fn
            assert fc.out_meta == fp.out_meta and fc.n_out == fp.n_out
            assert (fc.out is None) == (fp.out is None)
            gc = dg.autograd.grad((out_c[0] * out_c[0]).sum(), [x])[0]
            gp = dg.autograd.grad((out_p[0] * out_p[0]).sum(), [x])[0]
            np.testing.assert_array_equal(gc.numpy(), gp.numpy())


def test_views_from_the_c_path_see_in_place_writes_of_their_base():
    x = dg.randn(4, 3, requires_grad=True)
    w = x * 1.0
    for make in (lambda t: t[1], lambda t: t.unsqueeze(0), lambda t: t.t(), lambda t: t[1:3]):
        v = make(w)
        y = (v * v).sum()                 # mul saves v
        assert v._vc is w._vc             # one counter for the base and its views
        with dg.no_grad():
            w.add_(1.0)                   # a write through the base bumps the view's version
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
        w = x * 1.0


def test_integer_promotion_with_python_ints_is_a_no_op_on_both_paths():
    from dyngraph.ops.elementwise import add_p, mul_p

    for dt in (np.int64, np.int32, np.uint8):
        i = dg.tensor(np.array(3, dtype=dt))
        for prim in (add_p, mul_p):
            oc, op = registry.bind(prim, (i, 64)), registry._bind_py(prim, (i, 64))
            assert oc.dtype == op.dtype == i.dtype and oc.item() == op.item()
        assert registry.bind(add_p, (i, 2.5)).dtype == dg.get_default_dtype()   # float scalar
    b = dg.tensor(np.array(True))
    assert registry.bind(add_p, (b, 1)).dtype == registry._bind_py(add_p, (b, 1)).dtype == dg.int64


# -- quiet-FP primitives: the C bind sets NumPy's FP state around the wrapped forward --------
def _quiet_cases():
    from dyngraph.ops.elementwise import _K, div_p, exp_p, log_p, sigmoid_p

    big = np.array([-200.0, -1.0, 0.0, 1.0, 200.0], dtype=np.float32)
    # (primitive, input arrays, whether its unwrapped forward reports an FP exception on them;
    # sigmoid's forward runs in dyngraph._kernels when built, which raises no NumPy FP report)
    return [(exp_p, (big,), True), (sigmoid_p, (big,), _K is None), (tanh_p, (big,), False),
            (log_p, (np.array([0.0, -1.0, 2.0]),), True),
            (div_p, (np.array([1.0, 0.0, -1.0]), np.array([0.0, 0.0, 2.0])), True)]


@pytest.mark.parametrize("case", range(5))
def test_quiet_primitives_run_silently_and_agree_on_both_paths(case):
    import warnings

    prim, arrays, reports = _quiet_cases()[case]
    assert prim._quiet_impl is not None and prim._quiet_impl is prim.impl.__wrapped__
    args = tuple(dg.tensor(a, requires_grad=True) for a in arrays)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # an FP report would be a RuntimeWarning -> error
        out_c = registry.bind(prim, args)
        out_p = registry._bind_py(prim, args)
    assert np.geterr() == before             # the FP state is reset after the call
    np.testing.assert_array_equal(out_c.detach().numpy(), out_p.detach().numpy())
    assert _node_summary(out_c) == _node_summary(out_p)
    # the C path really runs under the quiet state: without it NumPy would warn
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        registry.bind(prim, args)
        if reports:
            with pytest.raises(FloatingPointError):
                prim._quiet_impl(*arrays)


def test_quiet_state_is_reset_when_the_forward_raises():
    from dyngraph.ops.elementwise import div_p

    before = np.geterr()
    with np.errstate(divide="raise"), pytest.raises(ValueError, match="div"):
        registry.bind(div_p, (dg.ones(2, 3), dg.ones(4)))      # NumPy's shape error, renamed
    with np.errstate(divide="raise"):
        assert np.geterr()["divide"] == "raise"                # the caller's state is back
        with pytest.raises(FloatingPointError):
            np.ones(1) / np.zeros(1)
    assert np.geterr() == before


def test_replacing_impl_replaces_what_the_c_bind_runs():
    """``prim.impl = f`` (a plain function) must stop the C path from running the old quiet
    forward; a quiet_fp-wrapped replacement is run through its new wrapped function."""
    from dyngraph.ops._util import quiet_fp
    from dyngraph.ops.elementwise import exp_p

    old = exp_p.impl
    try:
        exp_p.impl = lambda x: x + 1.0
        assert exp_p._quiet_impl is None
        assert registry.bind(exp_p, (dg.zeros(2),)).tolist() == [1.0, 1.0]
        exp_p.impl = quiet_fp(lambda x: x + 2.0)
        assert exp_p._quiet_impl is not None
        assert registry.bind(exp_p, (dg.zeros(2),)).tolist() == [2.0, 2.0]
    finally:
        exp_p.impl = old
    assert exp_p._quiet_impl is old.__wrapped__


def test_meta_records_from_the_c_path_are_complete_meta_objects():
    from dyngraph.autograd.graph import Meta
    from dyngraph.ops.shape import cat_p

    a, b = dg.randn(2, 3, requires_grad=True), dg.randn(4, 3, dtype=dg.float64, requires_grad=True)
    n = registry.bind(cat_p, (a, a.double().float()), {"dim": 0}).grad_fn
    for m in n.in_meta:
        assert type(m) is Meta and m.shape == (2, 3) and m.dtype == np.float32 and m.ndim == 2
    assert repr(n.in_meta[0]) == repr(Meta((2, 3), np.dtype(np.float32)))
    y = (b * b).sum(0)
    assert [type(m) for m in y.grad_fn.in_meta] == [Meta]


def test_numpy_fields_are_read_directly_and_agree_with_the_attributes():
    """The C path reads ndarray/dtype fields directly when its set-up probe agrees with NumPy's
    attributes (else it uses the attributes); the decisions built on them -- which inputs need
    their gradient fitted (shape or dtype differs from the output's), view bases, dtype kinds --
    must match the Python path's."""
    from dyngraph import _speedups

    assert _speedups.fields_direct()          # NumPy's layout as this file declares it
    rng = np.random.default_rng(0)
    shapes = [((3, 4), (3, 4)), ((3, 1), (3, 4)), ((1, 4), (3, 4)), ((4,), (3, 4)), ((), (3, 4)),
              ((2, 3, 4), (3, 4)), ((3, 4), (1,))]
    for sa, sb in shapes:
        a = dg.tensor(rng.standard_normal(sa).astype(np.float32), requires_grad=True)
        b = dg.tensor(rng.standard_normal(sb).astype(np.float32), requires_grad=True)
        for prim in (add_p, mul_p):
            oc, op = registry.bind(prim, (a, b)), registry._bind_py(prim, (a, b))
            assert _node_summary(oc) == _node_summary(op), (sa, sb)
            gc = dg.autograd.grad(oc.sum(), [a, b])
            gp = dg.autograd.grad(op.sum(), [a, b])
            for x, y in zip(gc, gp):
                assert x.shape == y.shape and x.dtype == y.dtype
                np.testing.assert_array_equal(x.numpy(), y.numpy())
    for dt in (np.int64, np.bool_, np.float64):
        t = dg.tensor(np.ones(3, dtype=dt))
        assert registry.bind(tanh_p, (t,)).dtype == registry._bind_py(tanh_p, (t,)).dtype


# -- bookkeeping the C path takes out of the cyclic GC (atomic contents only) ---------------
def test_atomic_bookkeeping_is_untracked_and_cycles_through_the_graph_are_still_collected():
    import gc
    import weakref

    from dyngraph.ops.shape import cat_p

    a = dg.randn(3, requires_grad=True)
    b = dg.randn(3, requires_grad=True)
    y = registry.bind(mul_p, (a, b))
    n = y.grad_fn
    assert not gc.is_tracked(n.saved_data) and not gc.is_tracked(n.saved_versions)
    c = registry.bind(cat_p, (a, b), {"dim": 0})
    assert not gc.is_tracked(c.grad_fn.in_meta)
    assert all(not gc.is_tracked(m) and not gc.is_tracked(m.shape) for m in c.grad_fn.in_meta)
    t = registry.bind(tanh_p, (a,))
    assert not gc.is_tracked(t._vc) and t._vc == [0]
    # what can close a cycle stays tracked: tensors, nodes (which hold their edges' vertices in
    # their own slots: tests/test_gc_nodes.py), the saved inputs (slots too)
    assert gc.is_tracked(y) and gc.is_tracked(n) and n._s0 is a and n._s1 is b
    assert any(r is a for r in gc.get_referents(n)) and any(r is b for r in gc.get_referents(n))
    # identical values on the Python path (tracked there)
    p = registry._bind_py(mul_p, (a, b)).grad_fn
    assert (p.saved_data[0] == n.saved_data[0]).all() and p.saved_versions == n.saved_versions
    # cycles through the graph are still found by the collector: a leaf whose hook holds an
    # output (leaf -> hook -> output -> node -> leaf; tanh saves no input, so the
    # edges are the only way back), and an input saved by the node of its own hook's output
    for prim in (tanh_p, mul_p):
        x = dg.randn(3, requires_grad=True)
        z = registry.bind(prim, (x,) if prim is tanh_p else (x, x))
        x.register_hook(lambda g, keep=z: g)
        ref = weakref.ref(z.grad_fn)
        del x, z
        gc.collect()
        assert ref() is None
    # version counters still count (in-place writes bump the untracked cell)
    w = registry.bind(tanh_p, (a,))
    v = w._vc
    with dg.no_grad():
        w.add_(1.0)
    assert w._vc is v and v == [1]


# -- the forward's keyword params (call_impl: a cached names tuple per set of key objects) ----
def test_forward_params_reach_the_impl_by_name_in_any_order_and_count():
    """The C bind passes params as keywords through a names tuple it reuses while the keys are
    the same objects: every key set, order, count and a fresh (non-interned) key string must
    reach the impl as the Python path passes them."""
    rng = np.random.default_rng(3)
    x = dg.tensor(rng.standard_normal((3, 4, 5)), requires_grad=True)
    fresh = "".join(["di", "m"])          # an equal key that is another string object
    assert fresh == "dim" and id(fresh) != id("dim")   # (identity is the point)
    cases = [{"dim": (1,)}, {"dim": (1,), "keepdim": True}, {"keepdim": True, "dim": (2,)},
             {"keepdim": False}, {fresh: (0,)}, {fresh: (0, 2), "keepdim": True}, {"dim": (1,)}]
    for _ in range(2):                     # the second round reads the cache
        for params in cases:
            out_c = registry.bind(sum_p, (x,), params)
            out_p = registry._bind_py(sum_p, (x,), params)
            assert out_c.shape == out_p.shape, params
            np.testing.assert_array_equal(out_c.detach().numpy(), out_p.detach().numpy())
            assert _node_summary(out_c) == _node_summary(out_p)
    with pytest.raises(TypeError, match="bogus"):
        registry.bind(sum_p, (x,), {"bogus": 1})


def test_saved_outputs_share_their_version_cell_with_the_node():
    x = dg.tensor(np.ones(3), requires_grad=True)
    y = registry.bind(tanh_p, (x,))
    assert y.grad_fn.out_vc is y._vc and y._vc == [0]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z = y * 1.0
        y.add_(1.0)
        (z.sum() + y.sum()).backward()


# -- the C backward loop's multi-output nodes (split's pieces, rnn_layer's outputs) ----------

def _multi_graphs():
    import torch
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 6))
    w = rng.standard_normal((4, 4))

    def run(lib, tensor):
        x = tensor(a.copy(), requires_grad=True)
        m = tensor(w.copy(), requires_grad=True)
        y = (m @ x).tanh()
        p, q, r = lib.split(y, 2, dim=1)
        s1 = (p * q + r.exp() * 2).sum()                       # every piece: the C path
        s2 = (p * 3).sum() + (p * p).sum()                     # one piece twice, two unused
        s3 = sum((c * (k + 1)).sum() for k, c in enumerate(lib.unbind(y, 0)))
        s4 = lib.chunk(y, 3, dim=1)[0].sum() * lib.chunk(y, 3, dim=1)[2].mean()
        return x, m, [s1, s2, s3, s4]

    return run, torch


@pytest.mark.parametrize("case", range(4))
def test_backward_loop_multi_output_nodes_match_python_and_torch(case, monkeypatch):
    from dyngraph.autograd import engine
    run, torch = _multi_graphs()
    got = {}
    for mode in ("c", "python"):
        if mode == "python":
            monkeypatch.setattr(engine, "_backward_loop", None)
        x, m, losses = run(dg, lambda v, requires_grad: dg.tensor(v, requires_grad=requires_grad))
        losses[case].backward(retain_graph=True)
        losses[case].backward()                                  # accumulates: twice the grads
        got[mode] = (x.grad.numpy().copy(), m.grad.numpy().copy())
    x, m, losses = run(torch, lambda v, requires_grad: torch.tensor(v, requires_grad=requires_grad))
    (losses[case] * 2).backward()
    for mode in ("c", "python"):
        np.testing.assert_array_equal(got[mode][0], got["python"][0])
        np.testing.assert_array_equal(got[mode][1], got["python"][1])
        np.testing.assert_allclose(got[mode][0], x.grad.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[mode][1], m.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_backward_loop_multi_output_fast_path_taken(monkeypatch):
    """Split nodes whose pieces all got a gradient do not reach the Python callback."""
    from dyngraph.autograd import engine
    calls = []
    real = engine._run_node

    def spy(node, *a, **k):
        calls.append(node.prim.name)
        return real(node, *a, **k)

    monkeypatch.setattr(engine, "_run_node", spy)
    y = dg.randn(4, 6, dtype=dg.float64, requires_grad=True)
    p, q, r = dg.split(y * 1.0, 2, dim=1)
    (p * q + r).sum().backward()
    assert "split" not in calls
    p, q, r = dg.split(y * 1.0, 2, dim=1)
    (p * q).sum().backward()                                     # r: no gradient, zeros
    assert "split" in calls
