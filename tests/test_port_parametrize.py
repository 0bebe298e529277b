"""``nn.utils.parametrize`` and ``nn.utils.parametrizations`` (weight_norm, spectral_norm)
against torch 2.13: state-dict keys, values and gradients after training steps, right
inverses, caching, removal."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy()


def _pair(make):
    """The same model in both libraries, dyngraph's weights copied from torch's."""
    torch.manual_seed(0)
    tm = make(torch)
    dm = make(dyngraph)
    dm.load_state_dict({k: dyngraph.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, dm


def _train(lib, model, steps=4, eval_after=True):
    rng = np.random.default_rng(1)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        x = lib.tensor(rng.standard_normal((5, 4)), dtype=lib.float64)
        loss = model(x).pow(2).mean() + model(x).sum() * 0.1
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if eval_after:
        model.eval()
    with lib.no_grad():
        out = model(lib.tensor(rng.standard_normal((2, 4)), dtype=lib.float64))
    return losses, _np(out)


@pytest.mark.parametrize("kind", ["weight_norm", "weight_norm_dimNone", "spectral_norm", "spectral_conv",
                                  "hook_spectral_norm", "hook_spectral_conv"])
def test_parametrizations_train_like_torch(kind):
    def make(lib):
        P = lib.nn.utils.parametrizations
        if kind in ("spectral_conv", "hook_spectral_conv"):
            conv = lib.nn.Conv1d(1, 3, 2).double()
            (P.spectral_norm if kind == "spectral_conv" else lib.nn.utils.spectral_norm)(conv, n_power_iterations=2)
            return lib.nn.Sequential(lib.nn.Unflatten(1, (1, 4)), conv, lib.nn.Flatten(), lib.nn.Linear(9, 2).double())
        layer = lib.nn.Linear(4, 3).double()
        if kind == "weight_norm":
            P.weight_norm(layer)
        elif kind == "weight_norm_dimNone":
            P.weight_norm(layer, dim=None)
        elif kind == "hook_spectral_norm":
            lib.nn.utils.spectral_norm(layer)
        else:
            P.spectral_norm(layer)
        return lib.nn.Sequential(layer, lib.nn.Tanh(), lib.nn.Linear(3, 2).double())

    tm, dm = _pair(make)
    assert list(tm.state_dict()) == list(dm.state_dict())
    first = tm[1] if kind.endswith("conv") else tm[0]
    dfirst = dm[1] if kind.endswith("conv") else dm[0]
    assert type(first).__name__ == type(dfirst).__name__          # ParametrizedLinear
    np.testing.assert_allclose(_np(dfirst.weight), _np(first.weight), rtol=1e-12)
    t_res, d_res = _train(torch, tm), _train(dyngraph, dm)
    np.testing.assert_allclose(d_res[0], t_res[0], rtol=1e-10)
    np.testing.assert_allclose(d_res[1], t_res[1], rtol=1e-10)
    for (k, a), b in zip(tm.state_dict().items(), dm.state_dict().values()):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-9, atol=1e-12, err_msg=k)
    if kind.startswith("hook"):
        torch.nn.utils.remove_spectral_norm(first)
        dyngraph.nn.utils.remove_spectral_norm(dfirst)
        assert list(first.state_dict()) == list(dfirst.state_dict())
        np.testing.assert_allclose(_np(dfirst.weight), _np(first.weight), rtol=1e-10)


def test_register_custom_parametrization_like_torch():
    res = []
    for lib in (torch, dyngraph):
        P = lib.nn.utils.parametrize

        class Symmetric(lib.nn.Module):
            def forward(self, X):
                return X.triu() + X.triu(1).transpose(-1, -2)

            def right_inverse(self, A):
                return A.triu()

        class NoInverse(lib.nn.Module):
            def forward(self, X):
                return X + 1

        class Scale(lib.nn.Module):
            def forward(self, X):
                return 2 * X

            def right_inverse(self, X):
                return X / 2

        layer = lib.nn.Linear(3, 3, bias=False).double()
        with lib.no_grad():
            layer.weight.copy_(lib.tensor(np.arange(9.0).reshape(3, 3)))
        P.register_parametrization(layer, "weight", Symmetric())
        P.register_parametrization(layer, "weight", Scale())
        w = layer.weight
        x = lib.tensor(np.ones((2, 3)), dtype=lib.float64)
        layer(x).sum().backward()
        grad = layer.parametrizations.weight.original.grad
        layer.weight = lib.tensor(np.eye(3) * 4)
        stored = layer.parametrizations.weight.original.clone()
        with P.cached():
            same = layer.weight is layer.weight
        flags = (P.is_parametrized(layer), P.is_parametrized(layer, "weight"), P.is_parametrized(layer, "bias"),
                 P.type_before_parametrizations(layer).__name__, list(layer.state_dict()), same)
        P.remove_parametrizations(layer, "weight")
        other = P.register_parametrization(lib.nn.Linear(2, 2), "weight", NoInverse())
        with pytest.raises(RuntimeError, match="NoInverse does not implement right_inverse"):
            other.weight = lib.zeros(2, 2)
        res.append((_np(w), _np(grad), _np(stored), flags, type(layer).__name__, list(layer.state_dict()),
                    _np(layer.weight), isinstance(layer.weight, lib.nn.Parameter)))
    t, d = res
    for a, b in zip(t[:3], d[:3]):
        np.testing.assert_allclose(b, a)
    assert t[3:6] == d[3:6] and t[7] == d[7]
    np.testing.assert_allclose(d[6], t[6])


def test_parametrize_errors_like_torch():
    for lib in (torch, dyngraph):
        P = lib.nn.utils.parametrize

        class Shrink(lib.nn.Module):
            def forward(self, X):
                return X[:1]

        with pytest.raises(ValueError, match="may not change the shape"):
            P.register_parametrization(lib.nn.Linear(2, 2), "weight", Shrink())
        with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
            P.register_parametrization(lib.nn.Linear(2, 2), "nope", Shrink())
        with pytest.raises(ValueError, match="does not have a parametrization"):
            P.remove_parametrizations(lib.nn.Linear(2, 2), "weight")
