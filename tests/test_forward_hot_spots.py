"""Forward hot spots of issue 13 (fifth pass): fewer GC-tracked objects per recorded op.

A recorded op's ``Node`` keeps ``out_vc``/``out_meta`` in slots (no instance dict), and the
C bind untracks a call's atomic params (``{"shape": (1, 128)}``) and saved-argument tuples
(``(None, 2.0)``).  These tests check the counts, that values and gradients are unchanged,
that a later mutation of a params dict re-tracks it, and that the version check on saved
outputs still fires.
"""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.autograd.graph import Node
from dyngraph.ops import registry

C_BIND = registry.bind is not registry._bind_py
needs_c = pytest.mark.skipif(not C_BIND, reason="C accelerator not active")


def _tracked_per_call(fn, n=200):
    """GC-tracked objects each call of ``fn`` leaves alive (its result kept)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        before = len(gc.get_objects())
        keep = [fn() for _ in range(n)]
        after = len(gc.get_objects())
    finally:
        if was:
            gc.enable()
    del keep
    return (after - before - 1) / n   # -1: the list ``keep``


def test_node_slots_hold_saved_output_metadata():
    a = dg.randn(8, requires_grad=True)
    y = dg.tanh(a)
    node = y.grad_fn
    assert "out_vc" in Node.__slots__ and "out_meta" in Node.__slots__
    assert node.out_vc == [0] and node.out_meta is None
    # no instance dict was needed to store them
    assert not any(type(r) is dict for r in gc.get_referents(node) if r is not node.params)
    parts = dg.randn(6, requires_grad=True).chunk(3)
    assert parts[0].grad_fn.out_meta == (((2,), np.dtype(np.float32)),) * 3


@needs_c
@pytest.mark.parametrize("name, fn, limit", [
    ("tanh", lambda a, b: dg.tanh(a), 4),          # tensor, node, edges, edge tuple
    ("a*2", lambda a, b: a * 2.0, 4),              # saved (None, 2.0) untracked
    ("unsqueeze", lambda a, b: a.unsqueeze(0), 4),  # params {"shape": (1, n)} untracked
    ("a*b", lambda a, b: a * b, 6),                # + second edge, saved (a, b)
])
def test_tracked_objects_per_recorded_op(name, fn, limit):
    a = dg.randn(16, requires_grad=True)
    b = dg.randn(16, requires_grad=True)
    per = _tracked_per_call(lambda: fn(a, b))
    assert per <= limit + 0.05, f"{name}: {per} tracked objects per call (limit {limit})"


@needs_c
def test_untracked_params_and_saved_keep_values_and_gradients():
    a = dg.randn(5, dtype=dg.float64, requires_grad=True)
    u = a.unsqueeze(0)
    s = a * 2.0
    assert not gc.is_tracked(u.grad_fn.params)
    assert not gc.is_tracked(s.grad_fn.saved)
    gc.collect()   # untracked objects stay alive: they are held by reference counts
    assert u.grad_fn.params["shape"] == (1, 5)
    (u.sum() * 3.0 + s.sum()).backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(5, 5.0))


@needs_c
@pytest.mark.skipif(sys.version_info >= (3, 14), reason="dicts stay tracked there")
def test_params_dict_is_tracked_again_when_a_container_is_stored():
    a = dg.randn(4, requires_grad=True)
    params = a.unsqueeze(0).grad_fn.params
    assert not gc.is_tracked(params)
    params["extra"] = []
    assert gc.is_tracked(params)


def test_cycle_through_a_node_is_still_collected():
    # a leaf's hook that holds an output: leaf -> hook -> output -> node -> edge -> leaf
    import weakref

    a = dg.randn(4, requires_grad=True)
    y = dg.tanh(a).unsqueeze(0) * 2.0
    a.register_hook(lambda g, y=y: g)
    ref = weakref.ref(y.grad_fn)
    del a, y
    gc.collect()
    assert ref() is None


def test_modified_saved_output_still_raises():
    a = dg.randn(4, requires_grad=True)
    y = dg.sigmoid(a)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
