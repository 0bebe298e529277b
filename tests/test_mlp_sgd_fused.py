"""SGD with momentum through the compiled one-pass update (dyngraph/_kernels.c sgd_momentum,
used by optim/sgd.py) against the NumPy lines it replaces (same bits) and PyTorch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.optim import sgd as sgd_mod

pytestmark = pytest.mark.skipif(sgd_mod._K_SGD is None, reason="kernels not built or switched off")


def _run(dtype, steps, fused, monkeypatch, **kw):
    """An MLP's parameters after `steps` SGD steps on fixed gradients of changing scale."""
    if not fused:
        monkeypatch.setattr(sgd_mod, "_K_SGD", None)
    rng = np.random.default_rng(0)
    shapes = [(24, 17), (24,), (5, 24), (5,)]
    ps = [dg.nn.Parameter(dg.tensor(rng.standard_normal(s).astype(dtype))) for s in shapes]
    grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
    opt = dg.optim.SGD(ps, lr=0.05, momentum=0.9, **kw)
    for t in range(steps):
        for p, g in zip(ps, grads, strict=True):
            p.grad = dg.tensor(g * (1.0 + 0.25 * t))
        opt.step()
    monkeypatch.undo()
    return [p.detach().numpy().copy() for p in ps], [opt.state[p]["momentum_buffer"].numpy().copy() for p in ps]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_momentum_gives_the_numpy_bits(dtype, monkeypatch):
    fp, fb = _run(dtype, 6, True, monkeypatch)
    npp, nb = _run(dtype, 6, False, monkeypatch)
    for a, b in zip(fp + fb, npp + nb, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_momentum_matches_torch(dtype, monkeypatch):
    got, _ = _run(getattr(np, dtype), 5, True, monkeypatch)
    rng = np.random.default_rng(0)
    shapes = [(24, 17), (24,), (5, 24), (5,)]
    ps = [torch.nn.Parameter(torch.tensor(rng.standard_normal(s).astype(dtype))) for s in shapes]
    grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
    opt = torch.optim.SGD(ps, lr=0.05, momentum=0.9)
    for t in range(5):
        for p, g in zip(ps, grads, strict=True):
            p.grad = torch.tensor(g * (1.0 + 0.25 * t))
        opt.step()
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-13, atol=1e-14)
    for a, p in zip(got, ps, strict=True):
        np.testing.assert_allclose(a, p.detach().numpy(), **tol)


def test_other_variants_and_layouts_stay_on_numpy(monkeypatch):
    """Nesterov, dampening, a non-contiguous gradient: the NumPy path (the kernel is not called)."""
    calls = []
    real = sgd_mod._K_SGD

    class Spy:
        def sgd_momentum(self, *a):
            calls.append(a)
            return real.sgd_momentum(*a)

    monkeypatch.setattr(sgd_mod, "_K_SGD", Spy())
    p = dg.nn.Parameter(dg.ones(4, 6))
    for kw in (dict(nesterov=True), dict(dampening=0.1)):
        opt = dg.optim.SGD([p], lr=0.1, momentum=0.9, **kw)
        for _ in range(2):
            p.grad = dg.ones(4, 6)
            opt.step()
    opt = dg.optim.SGD([p], lr=0.1, momentum=0.9)
    for _ in range(2):
        p.grad = dg.tensor(np.ones((6, 4))).T      # a transposed (non-contiguous) gradient
        opt.step()
    assert calls == []
    p.grad = dg.ones(4, 6)
    opt.step()
    assert len(calls) == 1


def test_kernel_checks_its_arguments():
    K = sgd_mod._K_SGD
    p, g, b = np.ones(8, np.float32), np.ones(8, np.float32), np.ones(8, np.float32)
    with pytest.raises(ValueError, match="sgd_momentum: g must have p's dtype and size"):
        K.sgd_momentum(p, np.ones(7, np.float32), b, 0.1, 0.9)
    with pytest.raises(ValueError, match="sgd_momentum: g must have p's dtype and size"):
        K.sgd_momentum(p, np.ones(8), b, 0.1, 0.9)
    with pytest.raises(ValueError, match="sgd_momentum: p and buf share memory"):
        K.sgd_momentum(p, g, p, 0.1, 0.9)
    with pytest.raises(TypeError, match="sgd_momentum: p must be a writable"):
        K.sgd_momentum(np.ones((4, 4), np.float32).T, np.ones(16, np.float32), np.ones(16, np.float32), 0.1, 0.9)
