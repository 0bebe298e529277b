"""API gaps the port scripts (tests/port/scripts/s13...) found, each checked against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
@pytest.mark.parametrize("dim, keepdim", [((-2, -1), False), ((0, 2), True), ((1, 0), False)])
def test_matrix_norm_from_singular_values(ord, dim, keepdim):
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    ta, da = torch.tensor(a, requires_grad=True), dyngraph.tensor(a, requires_grad=True)
    t = torch.linalg.matrix_norm(ta, ord=ord, dim=dim, keepdim=keepdim)
    d = dyngraph.linalg.matrix_norm(da, ord=ord, dim=dim, keepdim=keepdim)
    assert tuple(d.shape) == tuple(t.shape)
    np.testing.assert_allclose(d.detach().numpy(), t.detach().numpy(), rtol=1e-10)
    t.sum().backward()
    d.sum().backward()
    np.testing.assert_allclose(da.grad.numpy(), ta.grad.numpy(), rtol=1e-8, atol=1e-10)
    m = a[0]
    assert dyngraph.linalg.norm(dyngraph.tensor(m), ord=ord).item() == pytest.approx(
        torch.linalg.norm(torch.tensor(m), ord=ord).item(), rel=1e-12)
