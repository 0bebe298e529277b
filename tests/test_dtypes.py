"""Type promotion, dtype objects and creation defaults, compared with PyTorch."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import dyngraph as dg

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _make(lib, name, zero_dim):
    dt = getattr(lib, name)
    shape = () if zero_dim else (2,)
    return lib.ones(shape, dtype=dt)


@pytest.mark.parametrize("a,b", list(itertools.product(NAMES, NAMES)))
@pytest.mark.parametrize("kinds", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["dim-dim", "dim-0d", "0d-dim", "0d-0d"])
def test_tensor_tensor_promotion_matches_torch(a, b, kinds):
    r_dg = (_make(dg, a, kinds[0]) * _make(dg, b, kinds[1])).dtype
    r_t = (_make(torch, a, kinds[0]) * _make(torch, b, kinds[1])).dtype
    assert r_dg.name == str(r_t).replace("torch.", "")


@pytest.mark.parametrize("a", NAMES)
@pytest.mark.parametrize("scalar", [True, 2, 2.5])
def test_python_scalars_do_not_upcast(a, scalar):
    r_dg = (_make(dg, a, False) * scalar).dtype
    r_t = (_make(torch, a, False) * scalar).dtype
    assert r_dg.name == str(r_t).replace("torch.", "")


@pytest.mark.parametrize("a,b", [("int64", "float32"), ("int32", "float16"), ("bool", "int8"),
                                 ("uint8", "int8"), ("float16", "float64")])
def test_promote_types_and_result_type(a, b):
    assert dg.promote_types(getattr(dg, a), getattr(dg, b)).name == \
        str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")
    assert dg.result_type(_make(dg, a, False), 1.5).name == \
        str(torch.result_type(_make(torch, a, False), 1.5)).replace("torch.", "")


def test_creation_defaults_match_torch():
    assert dg.tensor(1.0).dtype == dg.float32
    assert dg.tensor([1, 2]).dtype == dg.int64
    assert dg.tensor([True]).dtype == dg.bool
    assert dg.tensor(np.zeros(2)).dtype == dg.float64  # NumPy arrays keep their dtype
    assert dg.arange(3).dtype == dg.int64 and dg.arange(3.0).dtype == dg.float32
    assert dg.zeros(2).dtype == dg.float32 and dg.full((2,), 3).dtype == dg.int64
    assert (dg.tensor([1, 2]) / dg.tensor([2, 2])).dtype == dg.float32  # true division of ints


def test_default_dtype_switch():
    old = dg.get_default_dtype()
    try:
        dg.set_default_dtype(dg.float64)
        assert dg.tensor(1.5).dtype == dg.float64
        assert (dg.tensor([1, 2]) * 0.5).dtype == dg.float64
    finally:
        dg.set_default_dtype(old)
    with pytest.raises(TypeError, match="floating"):
        dg.set_default_dtype(dg.int32)


def test_dtype_repr_and_info():
    assert repr(dg.float32) == "dyngraph.float32"
    assert dg.finfo(dg.float32).eps == float(np.finfo(np.float32).eps)
    assert dg.iinfo(dg.int8).max == 127
    assert dg.float32.is_floating_point and not dg.int64.is_floating_point
