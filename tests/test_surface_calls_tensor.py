"""``dg.tensor`` of small Python lists (the fast paths of creation.tensor) against torch.tensor.

Every case is built by both libraries and compared: dtype, shape, values, requires_grad,
leaf state, and that each call gives a fresh, writable array.  Errors (ragged lists, ints
out of range, integer tensors that require grad) raise the same type as PyTorch, ragged
ones with PyTorch's message.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg

CASES = [
    [3], [0], [-7], [2**62], [-(2**63)], [3, 4], [1, 2, 3, 4, 5],
    [0.5], [1.0, 2.0], [1, 2.5], [2.5, 1], [True], [True, False], [True, 1], [True, 1.5],
    [[1.0, 2.0]], [[1, 2], [3, 4]], [[1, 2.0], [3, 4]], [[1], [2]], [[0.1, 0.2, 0.3]],
    [[True, False]], [[1, True]], [1e300], [-0.0], [float("inf"), float("nan")],
    [np.float64(0.5)], [np.int32(3)], [np.float32(1.0), 2], [[np.int64(1), 2]],
    [[[1, 2]], [[3, 4]]], [(1, 2), (3, 4)], [[1, 2], (3, 4)], [range(3)],
    3, 0, -5, 2**62, 0.5, -0.0, 1e300, float("nan"), True, False, np.float64(0.5), np.int32(3),
]


def _dt_name(t):
    return str(t.dtype).split(".")[-1]


def _check(data, **kw):
    tt = torch.tensor(data, **kw)
    dt = dg.tensor(data, **kw)
    assert _dt_name(dt) == _dt_name(tt), (data, kw, dt.dtype, tt.dtype)
    assert tuple(dt.shape) == tuple(tt.shape), data
    np.testing.assert_array_equal(dt.numpy() if not dt.requires_grad else dt.detach().numpy(),
                                  tt.detach().numpy())
    assert dt.requires_grad == tt.requires_grad
    assert dt.is_leaf and dt.grad_fn is None
    return dt


@pytest.mark.parametrize("data", CASES, ids=[repr(c)[:40] for c in CASES])
def test_dtype_shape_values_as_torch(data):
    _check(data)


@pytest.mark.parametrize("data", [[0.5], [1, 2.5], [[1.0, 2.0]], [[1, 2.0], [3, 4]], 0.5])
def test_requires_grad_of_float_lists(data):
    t = _check(data, requires_grad=True)
    (t * 2).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.full(t.shape, 2.0, np.float32))


@pytest.mark.parametrize("data", [[3], [3, 4], [[1, 2]], [True], 3, True])
def test_integer_lists_cannot_require_grad(data):
    with pytest.raises(RuntimeError):
        torch.tensor(data, requires_grad=True)
    with pytest.raises(RuntimeError):
        dg.tensor(data, requires_grad=True)


@pytest.mark.parametrize("data,dtype", [([3], "float32"), ([3, 4], "float64"), ([0.5], "float64"),
                                        ([[1, 2]], "int32"), ([1.7], "int64"), ([1], "bool"),
                                        ([3], "int16"), ([[0.5, 2]], "float16"), (3, "float32"),
                                        (0.5, "float64"), (2.7, "int32")])
def test_explicit_dtype(data, dtype):
    tt = torch.tensor(data, dtype=getattr(torch, dtype))
    dt = dg.tensor(data, dtype=getattr(dg, dtype))
    assert _dt_name(dt) == _dt_name(tt) == dtype
    np.testing.assert_array_equal(dt.numpy(), tt.numpy())


def test_device_argument():
    t = dg.tensor([3], device="cpu")
    assert t.device.type == "cpu" and t.dtype == dg.int64 and t.tolist() == [3]
    t = dg.tensor([[0.5, 1.0]], device=dg.device("cpu"))
    assert t.dtype == dg.float32 and t.tolist() == [[0.5, 1.0]]


def test_default_dtype_is_followed():
    old = dg.get_default_dtype()
    try:
        dg.set_default_dtype(dg.float64)
        torch.set_default_dtype(torch.float64)
        for data in ([0.5], [1, 2.5], [[1.0, 2.0]], 0.5):
            _check(data)
        _check([3])
        _check(3)
    finally:
        dg.set_default_dtype(old)
        torch.set_default_dtype(torch.float32)
    assert dg.tensor([0.5]).dtype == dg.float32


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[1.0], [2.0, 3.0]], [[1, 2], 3], [1, [2, 3]],
                                  [[1, 2], [3, [4]]], [[[1, 2]], [[3]]]])
def test_ragged_lists_name_the_shapes(data):
    with pytest.raises((ValueError, TypeError)) as te:
        torch.tensor(data)
    with pytest.raises(ValueError) as de:
        dg.tensor(data)
    if isinstance(te.value, ValueError):
        assert str(de.value) == str(te.value)
    assert "expected" in str(de.value)


@pytest.mark.parametrize("data", [[2**63], [-(2**63) - 1], [1, 2**64], [[2**70]], 2**63])
def test_ints_out_of_int64_range_raise(data):
    # (torch 2.13 raises ValueError "Overflow when unpacking long long"; dyngraph has always
    # raised NumPy's OverflowError, on the general path too)
    with pytest.raises(ValueError, match="Overflow"):
        torch.tensor(data)
    with pytest.raises(OverflowError):
        dg.tensor(data)
    with pytest.raises(OverflowError):
        dg.tensor(data, dtype=dg.int64)


def test_each_call_is_a_fresh_writable_array():
    a, b = dg.tensor([3]), dg.tensor([3])
    assert a._data is not b._data
    for t in (a, dg.tensor([1, 2]), dg.tensor([[0.5, 1.0]]), dg.tensor(3), dg.tensor(0.5)):
        d = t._data
        assert d.flags.c_contiguous and d.flags.writeable and d.flags.owndata
    a[0] = 9
    assert a.tolist() == [9] and b.tolist() == [3]
    lst = [[1.0, 2.0]]
    t = dg.tensor(lst)
    lst[0][0] = 5.0
    assert t.tolist() == [[1.0, 2.0]]


def test_empty_and_non_list_inputs_keep_the_general_path():
    for data in ([], [[]], [[], []], (1, 2), 3, 2.5, True):
        _check(data)
    with pytest.raises(TypeError):
        dg.tensor(["a"])
    with pytest.raises(TypeError):
        dg.tensor([[1, "a"]])


def test_tensor_elements():
    t = dg.tensor([dg.tensor(1.5), 2])
    assert t.dtype == dg.float32 and t.tolist() == [1.5, 2.0]
    t = dg.tensor([dg.tensor(3), 2])
    assert t.dtype == dg.int64 and t.tolist() == [3, 2]


def test_under_autobatch_the_same_leaf():
    with dg.autobatch():
        t = dg.tensor([5])
        u = dg.tensor([[0.5, 1.5]], requires_grad=True)
        assert t.dtype == dg.int64 and u.dtype == dg.float32 and u.requires_grad
        y = (u * 2).sum()
        v = float(y)
    assert v == 4.0 and t.tolist() == [5]
