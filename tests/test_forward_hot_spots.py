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
from tests.helpers import tracked_per_call

C_BIND = registry.bind is not registry._bind_py
needs_c = pytest.mark.skipif(not C_BIND, reason="C accelerator not active")


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
    # (sixth pass: the edges live in the node's slots -- no list, no tuple per edge)
    ("tanh", lambda a, b: dg.tanh(a), 2),          # tensor, node
    ("a*2", lambda a, b: a * 2.0, 2),              # saved (None, 2.0) untracked
    ("unsqueeze", lambda a, b: a.unsqueeze(0), 2),  # params {"shape": (1, n)} untracked
    ("a*b", lambda a, b: a * b, 3),                # + saved (a, b)
])
def test_tracked_objects_per_recorded_op(name, fn, limit):
    a = dg.randn(16, requires_grad=True)
    b = dg.randn(16, requires_grad=True)
    per = tracked_per_call(lambda: fn(a, b))
    assert per <= limit + 0.05, f"{name}: {per} tracked objects per call (limit {limit})"


@needs_c
def test_untracked_params_and_saved_keep_values_and_gradients():
    a = dg.randn(5, dtype=dg.float64, requires_grad=True)
    u = a.unsqueeze(0)
    s = a * 2.0
    assert not gc.is_tracked(u.grad_fn.params)
    # the saved (None, 2.0) lives in the node's slots (sixth pass): no tuple of its own
    assert s.grad_fn.saved == (None, 2.0) and s.grad_fn._s0 is None and s.grad_fn._s1 == 2.0
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


# -- sigmoid's forward in the compiled kernel (dyngraph/_kernels.c) --------------------------

from dyngraph.ops import elementwise as _ew  # noqa: E402

needs_k = pytest.mark.skipif(_ew._K is None, reason="dyngraph._kernels not built or pure-Python pass")


def _ulp_diff(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    scale = np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(a.dtype))
    return np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)) / scale.astype(np.float64))


@needs_k
@pytest.mark.parametrize("dtype, max_ulp", [(np.float32, 4), (np.float64, 4)])
@pytest.mark.parametrize("shape", [(7,), (3, 128), (2, 3, 5), (1, 1)])
def test_sigmoid_kernel_matches_the_numpy_reference(dtype, max_ulp, shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 6).astype(dtype)
    got = _ew._sigmoid_k(x)
    ref = _ew._sigmoid_np(x)
    assert got.dtype == x.dtype and got.shape == x.shape and got.flags.c_contiguous
    assert _ulp_diff(got, ref) <= max_ulp
    # the primitive uses it, and PyTorch agrees
    import torch
    t = dg.sigmoid(dg.tensor(x)).numpy()
    np.testing.assert_array_equal(t, got)
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(t, torch.sigmoid(torch.from_numpy(x)).numpy(), rtol=rtol, atol=0)


@needs_k
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_kernel_special_values(dtype):
    x = np.array([np.nan, np.inf, -np.inf, -80.0, -30.0, -0.0, 0.0, 30.0, 800.0, -800.0], dtype=dtype)
    got = _ew._sigmoid_k(x)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[[1, 2, 5, 6, 8, 9]], np.array([1, 0, 0.5, 0.5, 1, 0], dtype))
    np.testing.assert_allclose(got[3:5], _ew._sigmoid_np(x[3:5]), rtol=1e-5, atol=0)


@needs_k
def test_sigmoid_kernel_inputs_it_does_not_take_use_numpy():
    rng = np.random.default_rng(1)
    # non-contiguous 2-D: the kernel reads strides; 3-D transposed: the NumPy path
    x2 = rng.standard_normal((6, 8)).astype(np.float32)[:, ::2]
    np.testing.assert_array_equal(_ew._sigmoid_k(x2), _ew._sigmoid_k(np.ascontiguousarray(x2)))
    x3 = rng.standard_normal((2, 3, 4)).transpose(2, 0, 1)
    np.testing.assert_array_equal(_ew._sigmoid_k(x3), _ew._sigmoid_np(x3))
    for x in (np.float32(0.3) * np.ones(()), np.zeros((0, 4), np.float32),
              rng.standard_normal(5).astype(np.float16)):
        r = _ew._sigmoid_k(x)
        assert r.dtype == x.dtype and r.shape == x.shape
        np.testing.assert_array_equal(r, _ew._sigmoid_np(x))


@needs_k
def test_sigmoid_kernel_rows_agree_inside_a_batch():
    # an eager row and the same row in a stacked batch (dg.autobatch) give the same bits
    rng = np.random.default_rng(2)
    rows = [rng.standard_normal(37).astype(np.float32) for _ in range(5)]
    batch = _ew._sigmoid_k(np.stack(rows))
    for i, r in enumerate(rows):
        np.testing.assert_array_equal(_ew._sigmoid_k(r), batch[i])


def test_sigmoid_gradient_matches_finite_differences():
    x = dg.tensor(np.linspace(-4, 4, 9), dtype=dg.float64, requires_grad=True)
    assert dg.autograd.gradcheck(dg.sigmoid, (x,))


# -- softmax along the last axis in the compiled kernel ------------------------------------

from dyngraph.ops import nn as _nn  # noqa: E402


def _softmax64(x, axis=-1):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@needs_k
# rtol: x - max is rounded to the dtype, and exp turns its error into ~|x - max| * eps relative
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-5), (np.float64, 1e-13)])
@pytest.mark.parametrize("shape", [(128,), (1, 128), (10, 7), (2, 3, 33), (3, 1)])
def test_softmax_kernel_is_accurate_and_matches_torch(dtype, rtol, shape):
    import torch
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 8).astype(dtype)
    got = _nn.softmax_p.impl(x, dim=x.ndim - 1)
    assert got.dtype == x.dtype and got.shape == x.shape
    truth = _softmax64(x)
    np.testing.assert_allclose(got, truth, rtol=rtol, atol=0)
    # no worse than the NumPy reference path
    with np.errstate(all="ignore"):
        e = np.exp(_nn._shifted(x, x.ndim - 1))
        ref = e / _nn._sum_keep(e, x.ndim - 1)
    rel = np.max(np.abs(got - truth) / truth)
    assert rel <= 2 * np.max(np.abs(ref - truth) / truth) + 8 * np.finfo(dtype).eps
    t = dg.softmax(dg.tensor(x), dim=-1).numpy()
    np.testing.assert_array_equal(t, got)
    np.testing.assert_allclose(t, torch.softmax(torch.from_numpy(x), -1).numpy(), rtol=4 * rtol,
                               atol=np.finfo(dtype).tiny)


@needs_k
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_kernel_special_values_as_numpy(dtype):
    x = np.array([[1, np.nan, 2], [1, np.inf, 2], [-np.inf] * 3, [np.inf, np.inf, 1],
                  [-np.inf, 0, 1], [np.nan, 1, 2], [0, -1000, 1000]], dtype)
    got = _nn.softmax_p.impl(x, dim=1)
    with np.errstate(all="ignore"):
        ref = _softmax64(x).astype(dtype)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)   # NaNs in the same places
    assert np.isnan(got[:4]).all() and np.isnan(got[5]).all()


@needs_k
def test_softmax_kernel_paths_it_does_not_take():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    xt = x.transpose(2, 0, 1)                                     # N-d, not contiguous
    np.testing.assert_allclose(_nn.softmax_p.impl(xt, dim=2), _softmax64(xt), rtol=1e-6)
    np.testing.assert_allclose(_nn.softmax_p.impl(x, dim=0), _softmax64(x, 0), rtol=1e-6)
    big = rng.standard_normal((2, _nn._K_SOFTMAX_MAX)).astype(np.float32)
    np.testing.assert_allclose(_nn.softmax_p.impl(big, dim=1), _softmax64(big), rtol=1e-5)
    x2 = rng.standard_normal((6, 8)).astype(np.float32)[:, ::2]   # 2-D strided: the kernel
    np.testing.assert_array_equal(_nn.softmax_p.impl(x2, dim=1),
                                  _nn.softmax_p.impl(np.ascontiguousarray(x2), dim=1))
    h = rng.standard_normal((3, 4)).astype(np.float16)
    assert _nn.softmax_p.impl(h, dim=1).dtype == np.float16
    z = np.float64(0.5) * np.ones(())
    assert _nn.softmax_p.impl(z, dim=-1).shape == ()


def test_softmax_gradient_matches_finite_differences():
    x = dg.tensor(np.linspace(-3, 2, 12).reshape(3, 4), dtype=dg.float64, requires_grad=True)
    assert dg.autograd.gradcheck(lambda t: dg.softmax(t, dim=-1), (x,))
    assert dg.autograd.gradcheck(lambda t: dg.softmax(t, dim=0), (x,))
