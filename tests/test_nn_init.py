"""dg.nn.init against torch.nn.init: gains and fans exactly, distributions statistically."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.nn import init


@pytest.mark.parametrize("nl,param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                      ("tanh", None), ("relu", None), ("leaky_relu", None),
                                      ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain_matches_torch(nl, param):
    assert init.calculate_gain(nl, param) == torch.nn.init.calculate_gain(nl, param)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swishy")


@pytest.mark.parametrize("shape", [(3, 5), (4, 2, 3, 3), (6, 1, 7)])
def test_fans_match_torch(shape):
    assert init._calculate_fan_in_and_fan_out(dg.empty(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(dg.empty(3))


def _stats(fn, shape=(400, 300), **kw):
    dg.manual_seed(0)
    t = dg.empty(*shape)
    out = fn(t, **kw)
    assert out is t
    return t.numpy()


def test_uniform_and_normal():
    a = _stats(init.uniform_, a=-2.0, b=3.0)
    assert a.min() >= -2 and a.max() <= 3 and abs(a.mean() - 0.5) < 0.02
    n = _stats(init.normal_, mean=1.0, std=0.5)
    assert abs(n.mean() - 1.0) < 0.01 and abs(n.std() - 0.5) < 0.01


def test_trunc_normal_range():
    t = _stats(init.trunc_normal_, std=1.0, a=-0.5, b=1.0)
    assert t.min() >= -0.5 and t.max() <= 1.0
    ref = torch.nn.init.trunc_normal_(torch.empty(400, 300), std=1.0, a=-0.5, b=1.0).numpy()
    assert abs(t.mean() - ref.mean()) < 0.01 and abs(t.std() - ref.std()) < 0.01


@pytest.mark.parametrize("fn,kw", [
    ("xavier_uniform_", {"gain": 2.0}), ("xavier_normal_", {}),
    ("kaiming_uniform_", {"a": math.sqrt(5)}), ("kaiming_normal_", {"mode": "fan_out"}),
    ("kaiming_uniform_", {"nonlinearity": "relu"}),
])
def test_scaled_initialisers_match_torch_distribution(fn, kw):
    d = _stats(getattr(init, fn), **kw)
    torch.manual_seed(0)
    t = getattr(torch.nn.init, fn)(torch.empty(400, 300), **kw).numpy()
    assert abs(d.std() - t.std()) / t.std() < 0.02
    assert abs(d.mean()) < 0.01
    if "uniform" in fn:  # same bound
        assert abs(np.abs(d).max() - np.abs(t).max()) / np.abs(t).max() < 0.01


def test_constant_ones_zeros_eye_dirac():
    t = dg.empty(3, 4)
    assert init.constant_(t, 2.5).numpy().tolist() == [[2.5] * 4] * 3
    assert init.ones_(t).numpy().sum() == 12 and init.zeros_(t).numpy().sum() == 0
    np.testing.assert_array_equal(init.eye_(dg.empty(3, 5)).numpy(),
                                  torch.nn.init.eye_(torch.empty(3, 5)).numpy())
    for shape, groups in (((4, 2, 3), 1), ((6, 3, 3, 3), 2), ((2, 2, 1, 3, 3), 1)):
        np.testing.assert_array_equal(init.dirac_(dg.empty(*shape), groups).numpy(),
                                      torch.nn.init.dirac_(torch.empty(*shape), groups).numpy())


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 2, 2)])
def test_orthogonal(shape):
    t = init.orthogonal_(dg.empty(*shape), gain=2.0).numpy().reshape(shape[0], -1)
    small = min(t.shape)
    gram = t @ t.T if t.shape[0] == small else t.T @ t
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-5)


def test_sparse():
    t = init.sparse_(dg.empty(10, 6), sparsity=0.3).numpy()
    assert ((t == 0).sum(axis=0) >= 3).all()


def test_generator_and_no_graph():
    g1 = dg.Generator().manual_seed(5)
    g2 = dg.Generator().manual_seed(5)
    a = init.normal_(dg.empty(4), generator=g1).numpy().copy()
    b = init.normal_(dg.empty(4), generator=g2).numpy().copy()
    np.testing.assert_array_equal(a, b)
    p = dg.nn.Parameter(dg.zeros(3))
    init.uniform_(p)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None and p._version > 0


def test_reset_parameters_bounds_follow_torch():
    dg.manual_seed(0)
    lin = dg.nn.Linear(9, 500)
    assert np.abs(lin.weight.detach().numpy()).max() <= 1 / 3
    assert np.abs(lin.bias.detach().numpy()).max() <= 1 / 3
    ln = dg.nn.LayerNorm(4)
    assert ln.weight.detach().numpy().tolist() == [1.0] * 4 and ln.bias.detach().numpy().sum() == 0
