"""Regression tests for gaps the dynamic-model port programs (``tests/port/p7x_*``) found,
each checked against torch directly."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph

torch = pytest.importorskip("torch")


def _cell_grads(T, cell, create_graph):
    rng = np.random.default_rng(0)
    xs = T.tensor(rng.standard_normal((3, 2, 3)))
    m = getattr(T.nn, cell)(3, 4).double()
    with T.no_grad():
        for p in m.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
    h = xs.new_zeros(2, 4)
    state = (h, h) if cell == "LSTMCell" else h
    for x in xs:                       # the hidden state of step t feeds step t+1
        state = m(x, state)
    out = state[0] if cell == "LSTMCell" else state
    gs = T.autograd.grad((out ** 2).sum(), list(m.parameters()), create_graph=create_graph)
    second = T.autograd.grad(sum((g ** 2).sum() for g in gs), m.weight_hh) if create_graph else None
    return [g.detach().numpy() for g in gs], None if second is None else second[0].numpy()


@pytest.mark.parametrize("cell", ["RNNCell", "GRUCell", "LSTMCell"])
def test_cells_unrolled_in_python_create_graph_match_torch(cell):
    # The fused cell's higher-order path differentiated w.r.t. the saved h0 itself, so
    # weight_hh also collected the gradient of all earlier steps (counted twice).
    for cg in (False, True):
        (gd, sd), (gt, st) = _cell_grads(dyngraph, cell, cg), _cell_grads(torch, cell, cg)
        for a, b in zip(gd, gt, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
        if cg:
            np.testing.assert_allclose(sd, st, rtol=1e-10, atol=1e-13)
