"""The engine adds gradients in place and keeps a leaf's first gradient without a copy only
when it holds the array alone (dyngraph/autograd/engine.py, the C loop in _speedups.c).

These tests build the graphs where doing so would be wrong -- a gradient array that is also a
saved input, the user's cotangent, a view, one array reaching two leaves, hooks that keep a
gradient, retain_graph, create_graph -- and check values against hand-computed gradients and
that no array visible outside the engine was written.  They run on the C path by default and
on the pure-Python reference with DYNGRAPH_PURE_PYTHON=1.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest

import dyngraph as dg
from dyngraph._core import registry

_PRIMS = {}


@pytest.fixture(autouse=True)
def _unregister_test_primitives():
    """Test primitives live for one test: the registry is global, and other tests check
    that every registered primitive has an op-table record and an ONNX lowering."""
    yield
    for name in _PRIMS:
        registry.REGISTRY.pop(name, None)
    _PRIMS.clear()


def _prim(name, impl, **options):
    """A test primitive, registered for the current test (the registry refuses duplicates)."""
    if name not in _PRIMS:
        _PRIMS[name] = registry.Primitive(name, impl, **options)
    return _PRIMS[name]


# y = x * s with a rule that hands back the *saved* array s itself as x's gradient when g is
# all ones (a legal rule: d(x*s)/dx = s); the saved array must never be written by the engine.
def _scale_by_saved():
    p = _prim("_t_scale_saved", lambda x, s: x * s, save_inputs=True)
    if p.vjp_rules is None:
        p.defvjp(lambda g, out, x, s: s if np.all(g == 1) else g * s, None)
    return p


# identity whose rule returns a view of the incoming gradient
def _view_rule():
    p = _prim("_t_view_rule", lambda x: x.copy())
    if p.vjp_rules is None:
        p.defvjp(lambda g, out, x: g.reshape(-1).reshape(g.shape))
    return p


def _leaf(*shape, seed=0):
    return dg.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("where", range(4))
def test_a_saved_array_returned_as_a_gradient_is_never_written(where):
    x = _leaf(3, 4)
    s_arr = np.random.default_rng(1).standard_normal((3, 4))
    s_copy = s_arr.copy()
    s = dg.tensor(s_arr)
    y = registry.bind(_scale_by_saved(), (x, s))
    # three more contributions reach x, before and after the one that is s itself
    parts = [(x * 2.0).sum(), (x * 3.0).sum(), x.sum()]
    parts.insert(where, y.sum())
    loss = parts[0] + parts[1] + parts[2] + parts[3]
    del y, parts
    loss.backward()
    np.testing.assert_array_equal(s._data, s_copy)
    np.testing.assert_allclose(x.grad.numpy(), s_copy + 6.0)
    assert not np.shares_memory(x.grad._data, s._data)


def test_the_users_cotangent_is_not_written_or_aliased():
    x = _leaf(5)
    g0 = dg.tensor(np.arange(5.0))
    y = x + 0.0                      # add's rule returns the incoming gradient unchanged
    z = y * 1.0
    w = y + z                        # y gets g0 (through w) and g0 * 1 (through z)
    w.backward(g0)
    np.testing.assert_array_equal(g0._data, np.arange(5.0))
    np.testing.assert_array_equal(x.grad.numpy(), 2 * np.arange(5.0))
    assert not np.shares_memory(x.grad._data, g0._data)


def test_one_array_reaching_two_leaves_gives_two_independent_grads():
    a, b = _leaf(4, seed=1), _leaf(4, seed=2)
    (a + b).sum().backward()         # the same gradient array for both inputs
    assert not np.shares_memory(a.grad._data, b.grad._data)
    a.grad._data += 1.0
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(4))
    # accumulating again adds into each leaf's own .grad
    (a * 2.0 + b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(4, 4.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full(4, 2.0))


def test_a_gradient_that_is_a_view_is_copied_before_accumulating():
    x = _leaf(2, 3)
    y = registry.bind(_view_rule(), (x,))
    (y * 2.0).sum().backward()
    (x * 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 3.0))


def test_hooks_that_keep_a_gradient_see_it_unchanged():
    x = _leaf(3)
    kept, snap = [], []

    def keep(g):
        kept.append(g)
        snap.append(g.numpy().copy())

    h = x * 1.0
    h.register_hook(keep)              # h's gradient, kept by the user
    a = h + 0.0                         # passes h's gradient on unchanged to x ...
    loss = (a * a).sum() + (x * 5.0).sum() + (x * 7.0).sum()   # ... and x gets more after it
    x.register_hook(keep)
    loss.backward()
    for k, s in zip(kept, snap):
        np.testing.assert_array_equal(k.numpy(), s)
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 2 * xv + 12.0)
    assert all(not np.shares_memory(x.grad._data, k._data) for k in kept)


def test_a_leaf_hook_that_keeps_its_gradient_gets_an_array_the_grad_does_not_share():
    x = _leaf(3)
    kept = []
    x.register_hook(lambda g: kept.append(g))
    (x * 2.0 + x * 3.0).sum().backward()
    assert not np.shares_memory(x.grad._data, kept[0]._data)
    before = kept[0].numpy().copy()
    (x * 1.0).sum().backward()           # accumulates into x.grad in place
    np.testing.assert_array_equal(kept[0].numpy(), before)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 6.0))


def test_retain_graph_twice_gives_twice_the_gradient_and_keeps_saved_values():
    x = _leaf(4)
    s = dg.tensor(np.linspace(1.0, 2.0, 4))
    y = registry.bind(_scale_by_saved(), (x, s))
    loss = y.sum() + (x * x).sum() + x.sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    np.testing.assert_array_equal(s.numpy(), np.linspace(1.0, 2.0, 4))
    np.testing.assert_allclose(first, np.linspace(1.0, 2.0, 4) + 2 * x.detach().numpy() + 1.0)


def test_create_graph_gradients_are_tensors_and_second_derivatives_are_right():
    x = _leaf(3)
    y = (x * x * x).sum() + (x * x).sum() + x.sum()
    (gx,) = dg.autograd.grad(y, [x], create_graph=True)
    xv = x.detach().numpy()
    np.testing.assert_allclose(gx.detach().numpy(), 3 * xv ** 2 + 2 * xv + 1)
    gx.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * xv + 2)


def test_multi_output_buffers_accumulate_correctly():
    x = _leaf(2, 6)
    a, b, c = x.split(2, 1)
    loss = (a * 2.0).sum() + (a * 3.0).sum() + (a * 4.0).sum() + (b * b).sum() + c.sum()
    loss.backward()
    xv = x.detach().numpy()
    want = np.concatenate([np.full((2, 2), 9.0), 2 * xv[:, 2:4], np.ones((2, 2))], 1)
    np.testing.assert_allclose(x.grad.numpy(), want)


def test_many_contributions_to_a_weight_match_the_sum_of_the_parts():
    rng = np.random.default_rng(3)
    W = dg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    hs = [dg.tensor(rng.standard_normal(4)) for _ in range(6)]
    loss = sum((W @ h).sum() for h in hs)
    loss.backward()
    want = sum(np.outer(np.ones(4), h.numpy()) for h in hs)
    np.testing.assert_allclose(W.grad.numpy(), want)


def test_a_leafs_first_gradient_is_kept_without_a_copy_when_the_engine_holds_it_alone():
    refs = []

    def rule(g, out, x):
        r = g * 2.0
        refs.append(weakref.ref(r))
        return r

    p = _prim("_t_fresh_rule", lambda x: x * 2.0)
    if p.vjp_rules is None:
        p.defvjp(lambda g, out, x: rule(g, out, x))
    x = _leaf(3)
    registry.bind(p, (x,)).sum().backward()
    assert refs[-1]() is x.grad._data           # stolen, not copied
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_in_place_sums_equal_out_of_place_sums_bitwise(dtype):
    rng = np.random.default_rng(4)
    W = dg.tensor(rng.standard_normal((8, 8)).astype(dtype), requires_grad=True)
    xs = [rng.standard_normal((1, 8)).astype(dtype) for _ in range(10)]
    loss = sum(dg.tanh(dg.tensor(x) @ W).sum() for x in xs)
    loss.backward()
    want = None
    for x in xs:
        part = x.T @ (1 - np.tanh(x @ W.detach().numpy()) ** 2)
        want = part if want is None else want + part
    np.testing.assert_allclose(W.grad.numpy(), want, rtol=1e-5 if dtype == np.float32 else 1e-12)
