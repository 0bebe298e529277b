"""The plain SGD step (no momentum) in one compiled pass (``dyngraph._kernels.sgd_step``,
``optim/sgd.py``; issue 13's ``rnnlm`` row): the same bits as the NumPy line ``d -= lr * g``,
PyTorch 2.13's values, the cases left to NumPy, argument checks."""

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.optim import sgd as sgd_mod

needs_kernel = pytest.mark.skipif(sgd_mod._K_STEP is None,
                                  reason="dyngraph._kernels not built or DYNGRAPH_PURE_PYTHON")


def _params(dtype, seed=0, shapes=((50, 7), (7,), (3, 4, 5))):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _train(arrays, grads_per_step, monkeypatch, kernel, **opt_kw):
    """Run SGD over the given gradients; returns the final parameter arrays."""
    with monkeypatch.context() as m:
        if not kernel:
            m.setattr(sgd_mod, "_K_STEP", None)
        ps = [dg.nn.Parameter(dg.tensor(a.copy())) for a in arrays]
        opt = dg.optim.SGD(ps, **opt_kw)
        for grads in grads_per_step:
            for p, g in zip(ps, grads, strict=True):
                p.grad = dg.tensor(g.copy())
            opt.step()
            opt.zero_grad()
        return [p.detach().numpy().copy() for p in ps]


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lr", [0.1, 1e-3, 3])
def test_same_bits_as_the_numpy_line(dtype, lr, monkeypatch):
    arrays = _params(dtype)
    steps = [_params(dtype, seed=k + 1) for k in range(4)]
    fast = _train(arrays, steps, monkeypatch, True, lr=lr)
    ref = _train(arrays, steps, monkeypatch, False, lr=lr)
    for a, b in zip(fast, ref, strict=True):
        np.testing.assert_array_equal(a, b)
    # and the kernel ran: called directly it gives the same bits as well
    d, g = arrays[0].copy(), steps[0][0]
    want = d.copy()
    want -= lr * g
    sgd_mod._K_STEP.sgd_step(d, g, lr)
    np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_torch(dtype, monkeypatch):
    arrays = _params(dtype, 3)
    steps = [_params(dtype, seed=k + 10) for k in range(3)]
    got = _train(arrays, steps, monkeypatch, True, lr=0.05)
    tp = [torch.nn.Parameter(torch.tensor(a.copy())) for a in arrays]
    opt = torch.optim.SGD(tp, lr=0.05)
    for grads in steps:
        for p, g in zip(tp, grads, strict=True):
            p.grad = torch.tensor(g.copy())
        opt.step()
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    for a, p in zip(got, tp, strict=True):
        np.testing.assert_allclose(a, p.detach().numpy(), rtol=rtol, atol=rtol)


@needs_kernel
def test_weight_decay_maximize_and_odd_layouts_keep_the_numpy_path(monkeypatch):
    arrays = _params(np.float32, 5)
    steps = [_params(np.float32, seed=k + 20) for k in range(2)]
    for kw in ({"weight_decay": 0.01}, {"maximize": True}):
        fast = _train(arrays, steps, monkeypatch, True, lr=0.1, **kw)
        ref = _train(arrays, steps, monkeypatch, False, lr=0.1, **kw)
        for a, b in zip(fast, ref, strict=True):
            np.testing.assert_array_equal(a, b)
    d = np.ones((4, 6), np.float32)
    g = np.full((4, 6), 0.5, np.float32)
    assert sgd_mod._step_fusable(d, g, 0.1)
    assert not sgd_mod._step_fusable(d, g.T.copy().T, 0.1)            # strided gradient
    assert not sgd_mod._step_fusable(d, g.astype(np.float64), 0.1)
    assert not sgd_mod._step_fusable(d, g, np.float64(0.1))           # a NumPy scalar promotes
    assert not sgd_mod._step_fusable(d, d[:], 0.1)                    # same memory
    assert not sgd_mod._step_fusable(d.astype(np.float16), g.astype(np.float16), 0.1)
    # a parameter whose array is not C-contiguous: the NumPy line
    pt = dg.nn.Parameter(dg.tensor(np.ones((6, 4), np.float32)).t())
    assert not pt.detach().numpy().flags.c_contiguous
    pt.grad = dg.tensor(np.full((4, 6), 2.0, np.float32))
    dg.optim.SGD([pt], lr=0.25).step()
    np.testing.assert_array_equal(pt.detach().numpy(), np.full((4, 6), 0.5, np.float32))


@needs_kernel
def test_kernel_argument_checks():
    K = sgd_mod._K_STEP
    d = np.ones(8, np.float32)
    g = np.ones(8, np.float32)
    with pytest.raises(TypeError, match="sgd_step.*takes 3 arguments"):
        K.sgd_step(d, g)
    with pytest.raises(ValueError, match="sgd_step: g must have p's dtype and size"):
        K.sgd_step(d, np.ones(7, np.float32), 0.1)
    with pytest.raises(ValueError, match="sgd_step: g must have p's dtype and size"):
        K.sgd_step(d, np.ones(8), 0.1)
    with pytest.raises(ValueError, match="sgd_step: p and g share memory"):
        K.sgd_step(d, d, 0.1)
    ro = np.ones(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="sgd_step: p must be a writable C-contiguous"):
        K.sgd_step(ro, g, 0.1)
    with pytest.raises(TypeError, match="sgd_step: p must be float32 or float64"):
        K.sgd_step(np.ones(8, np.int32), np.ones(8, np.int32), 0.1)
    with pytest.raises(TypeError):
        K.sgd_step(d, g, "0.1")
    K.sgd_step(d, g, 0.5)
    np.testing.assert_array_equal(d, np.full(8, 0.5, np.float32))
