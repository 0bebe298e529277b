"""The fused Adam update (``_kernels.adam_step``, used by optim/adam.py): the NumPy lines'
bits for every option that takes it, PyTorch's values, and the fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.optim import adam

K = adam._K_ADAM
needs_kernel = pytest.mark.skipif(K is None, reason="dyngraph._kernels not built (or pure-Python run)")

OPTIONS = [dict(), dict(weight_decay=0.01), dict(weight_decay=0.01, decoupled_weight_decay=True),
           dict(maximize=True), dict(betas=(0.8, 0.95), eps=1e-6, lr=3e-2), dict(amsgrad=True)]


def _train(dtype, options, steps=7, shape=(300, 77)):
    p = dg.nn.Parameter(dg.tensor(np.random.default_rng(5).standard_normal(shape).astype(dtype)))
    opt = dg.optim.Adam([p], **{"lr": 1e-2, **options})
    rng = np.random.default_rng(1)
    for _ in range(steps):
        p.grad = dg.tensor(rng.standard_normal(shape).astype(dtype))
        opt.step()
    return p.detach().numpy().copy(), opt


@needs_kernel
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("options", OPTIONS)
def test_fused_step_gives_the_numpy_bits(dtype, options, monkeypatch):
    fused, opt = _train(dtype, options)
    st = next(iter(opt.state.values()))
    monkeypatch.setattr(adam, "_K_ADAM", None)
    ref, opt0 = _train(dtype, options)
    st0 = next(iter(opt0.state.values()))
    assert np.array_equal(fused, ref)
    for key in ("exp_avg", "exp_avg_sq"):
        assert np.array_equal(st[key].numpy(), st0[key].numpy())


@pytest.mark.parametrize("options", OPTIONS)
def test_adam_matches_torch(options):
    ours, _ = _train("float64", options)
    p = torch.nn.Parameter(torch.tensor(np.random.default_rng(5).standard_normal((300, 77))))
    opt = torch.optim.Adam([p], **{"lr": 1e-2, **options})
    rng = np.random.default_rng(1)
    for _ in range(7):
        p.grad = torch.tensor(rng.standard_normal((300, 77)))
        opt.step()
    np.testing.assert_allclose(ours, p.detach().numpy(), rtol=1e-12, atol=1e-12)


@needs_kernel
def test_kernel_checks_and_fallbacks():
    p = np.ones(8, np.float32)
    g, m, v = np.ones(8, np.float32), np.zeros(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="share memory"):
        K.adam_step(p, p, m, v, 0.1, 0.999, 0.001, 1.0, 1e-8, 0.01)
    with pytest.raises(ValueError, match="p's dtype and size"):
        K.adam_step(p, g, m, np.zeros(8, np.float64), 0.1, 0.999, 0.001, 1.0, 1e-8, 0.01)
    with pytest.raises(TypeError, match="C-contiguous"):
        K.adam_step(p, np.ones(16, np.float32)[::2], m, v, 0.1, 0.999, 0.001, 1.0, 1e-8, 0.01)
    # a non-contiguous parameter view takes the NumPy lines: the same result as eagerly
    base = dg.nn.Parameter(dg.ones(4, 6))
    view = dg.nn.Parameter(base.detach()[:, ::2])
    opt = dg.optim.Adam([view], lr=0.1)
    view.grad = dg.ones(4, 3)
    opt.step()
    np.testing.assert_allclose(view.detach().numpy(), np.full((4, 3), 0.9), rtol=1e-6)
