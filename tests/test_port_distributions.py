"""``dg.distributions`` against ``torch.distributions`` (2.13): log_prob, entropy, moments,
cdf, KL divergences and their gradients in float64, sample shapes and supports, argument
validation errors, transforms."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph

torch = pytest.importorskip("torch")

R = np.random.default_rng(0)
POS = R.uniform(0.5, 2.0, (3, 4))
POS2 = R.uniform(0.5, 2.0, (3, 4))
REAL = R.standard_normal((3, 4))
REAL2 = R.standard_normal((3, 4))
UNIT = R.uniform(0.1, 0.9, (3, 4))
A = R.standard_normal((3, 3))
COV = A @ A.T + 3 * np.eye(3)
B = R.standard_normal((2, 3, 3))
COV2 = B @ np.swapaxes(B, 1, 2) + 2 * np.eye(3)

# name, params (arrays), a value inside the support
CASES = [
    ("Normal", (REAL, POS), REAL2),
    ("LogNormal", (REAL, POS), POS2),
    ("Laplace", (REAL, POS), REAL2),
    ("Cauchy", (REAL, POS), REAL2),
    ("Uniform", (REAL - 2, REAL + 2), REAL + 0.5),
    ("Exponential", (POS,), POS2),
    ("Gamma", (POS, POS2), POS2 * 0.7),
    ("Beta", (POS, POS2), UNIT),
    ("Dirichlet", (POS,), np.abs(REAL2) / np.abs(REAL2).sum(-1, keepdims=True)),
    ("Poisson", (POS,), np.floor(POS2 * 3)),
    ("StudentT", (POS * 2, REAL, POS2), REAL2),
    ("Chi2", (POS * 2,), POS2),
    ("Bernoulli", (UNIT,), (UNIT > 0.5).astype(np.float64)),
    ("Geometric", (UNIT,), np.floor(POS2 * 2)),
    ("Categorical", (np.abs(REAL) + 0.1,), np.array([0, 3, 2])),
    ("OneHotCategorical", (np.abs(REAL) + 0.1,), np.eye(4)[[1, 0, 3]]),
]
MOMENTS = ("mean", "variance", "stddev")


def _build(lib, name, params, requires_grad=False, **kw):
    ts = [lib.tensor(p, dtype=lib.float64, requires_grad=requires_grad) for p in params]
    return getattr(lib.distributions, name)(*ts, **kw), ts


def _close(d, t, what, rtol=1e-10):
    np.testing.assert_allclose(d.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("name, params, value", CASES, ids=[c[0] for c in CASES])
def test_family_matches_torch(name, params, value):
    dd, dps = _build(dyngraph, name, params, requires_grad=True)
    td, tps = _build(torch, name, params, requires_grad=True)
    assert tuple(dd.batch_shape) == tuple(td.batch_shape) and tuple(dd.event_shape) == tuple(td.event_shape)
    dv = dyngraph.tensor(value, dtype=dyngraph.int64 if name == "Categorical" else dyngraph.float64)
    tv = torch.tensor(value, dtype=torch.int64 if name == "Categorical" else torch.float64)
    dl, tl = dd.log_prob(dv), td.log_prob(tv)
    _close(dl, tl, f"{name}.log_prob")
    w = R.standard_normal(tuple(tl.shape))
    (dl * dyngraph.tensor(w)).sum().backward()
    (tl * torch.tensor(w)).sum().backward()
    for i, (a, b) in enumerate(zip(dps, tps)):
        _close(a.grad, b.grad, f"{name}.log_prob grad of parameter {i}")
    for m in MOMENTS:
        try:
            expected = getattr(td, m)
        except NotImplementedError:
            continue
        _close(getattr(dd, m), expected, f"{name}.{m}")
    try:
        expected = td.entropy()
    except NotImplementedError:
        expected = None
    if expected is not None:
        _close(dd.entropy(), expected, f"{name}.entropy")
    if name in ("Normal", "Laplace", "Cauchy", "Uniform", "Exponential"):
        _close(dd.cdf(dv), td.cdf(tv), f"{name}.cdf")
    s = dd.sample((5,))
    assert tuple(s.shape) == tuple(td.sample((5,)).shape)
    assert bool(td.support.check(torch.tensor(s.numpy())).all()), f"{name}: sample outside the support"
    assert dd.has_rsample == td.has_rsample or name in ("Gamma", "Beta", "Dirichlet", "StudentT", "Chi2")


@pytest.mark.parametrize("name, params", [
    ("Normal", ((REAL, POS), (REAL2, POS2))), ("LogNormal", ((REAL, POS), (REAL2, POS2))),
    ("Laplace", ((REAL, POS), (REAL2, POS2))), ("Exponential", ((POS,), (POS2,))),
    ("Gamma", ((POS, POS2), (POS2, POS))), ("Beta", ((POS, POS2), (POS2, POS))),
    ("Dirichlet", ((POS,), (POS2,))), ("Poisson", ((POS,), (POS2,))), ("Bernoulli", ((UNIT,), (1 - UNIT,))),
    ("Categorical", ((POS,), (POS2,))), ("OneHotCategorical", ((POS,), (POS2,))),
    ("Uniform", ((REAL - 1, REAL + 1), (REAL - 2, REAL + 3))),
])
def test_kl_matches_torch(name, params):
    dp, dps = _build(dyngraph, name, params[0], requires_grad=True)
    dq, _ = _build(dyngraph, name, params[1])
    tp, tps = _build(torch, name, params[0], requires_grad=True)
    tq, _ = _build(torch, name, params[1])
    dk, tk = dyngraph.distributions.kl_divergence(dp, dq), torch.distributions.kl_divergence(tp, tq)
    _close(dk, tk, f"KL {name}")
    dk.sum().backward()
    tk.sum().backward()
    for a, b in zip(dps, tps):   # trigamma (the derivative of digamma) agrees with torch's to ~3e-10
        _close(a.grad, b.grad, f"KL {name} grad", rtol=1e-10 if name not in ("Gamma", "Beta", "Dirichlet") else 1e-8)


def test_multivariate_normal_and_independent_match_torch():
    loc = REAL[:, :3]
    for kw in ("covariance_matrix", "precision_matrix", "scale_tril"):
        mats = {"covariance_matrix": COV2, "precision_matrix": np.linalg.inv(COV2),
                "scale_tril": np.linalg.cholesky(COV2)}[kw]
        res = []
        for lib in (torch, dyngraph):
            lt = lib.tensor(loc, dtype=lib.float64, requires_grad=True)[:2]
            mt = lib.tensor(mats, dtype=lib.float64, requires_grad=True)
            m = lib.distributions.MultivariateNormal(lt, **{kw: mt})
            x = lib.tensor(REAL2[:2, :3], dtype=lib.float64)
            lp = m.log_prob(x)
            lp.sum().backward()
            other = lib.distributions.MultivariateNormal(lib.zeros(3, dtype=lib.float64),
                                                         lib.tensor(COV, dtype=lib.float64))
            kl = lib.distributions.kl_divergence(m, other)
            res.append([lp, m.entropy(), m.variance, m.covariance_matrix, kl, mt.grad,
                        tuple(m.rsample((4,)).shape), tuple(m.batch_shape)])
        for a, b in zip(res[1][:6], res[0][:6]):
            _close(a, b, f"MVN {kw}")
        assert res[0][6:] == res[1][6:]
    ind = []
    for lib in (torch, dyngraph):
        base = lib.distributions.Normal(lib.tensor(REAL, dtype=lib.float64), lib.tensor(POS, dtype=lib.float64))
        d = lib.distributions.Independent(base, 1)
        q = lib.distributions.Independent(lib.distributions.Normal(lib.tensor(REAL2, dtype=lib.float64), 1.0), 1)
        ind.append((d.log_prob(lib.tensor(REAL2, dtype=lib.float64)), d.entropy(),
                    lib.distributions.kl_divergence(d, q), tuple(d.batch_shape), tuple(d.event_shape)))
    for a, b in zip(ind[1][:3], ind[0][:3]):
        _close(a, b, "Independent")
    assert ind[0][3:] == ind[1][3:]


def test_tanh_squashed_gaussian_matches_torch():
    res = []
    for lib in (torch, dyngraph):
        T = lib.distributions.transforms
        mu = lib.tensor(REAL, dtype=lib.float64, requires_grad=True)
        d = lib.distributions.TransformedDistribution(
            lib.distributions.Normal(mu, lib.tensor(POS, dtype=lib.float64)),
            [T.AffineTransform(0.5, 2.0), T.TanhTransform(cache_size=1)])
        y = lib.tensor(np.tanh(REAL2), dtype=lib.float64)
        lp = d.log_prob(y)
        lp.sum().backward()
        e = lib.distributions.TransformedDistribution(lib.distributions.Normal(0.0, 1.0), [T.ExpTransform()])
        s = lib.distributions.TransformedDistribution(lib.distributions.Normal(0.0, 1.0), [T.SigmoidTransform()])
        res.append((lp, mu.grad, e.log_prob(lib.tensor(POS, dtype=lib.float64)),
                    s.log_prob(lib.tensor(UNIT, dtype=lib.float64)), tuple(d.rsample((2,)).shape)))
    for a, b in zip(res[1][:4], res[0][:4]):
        _close(a, b, "TransformedDistribution")
    assert res[0][4] == res[1][4]


@pytest.mark.parametrize("make", [
    lambda lib: lib.distributions.Normal(0.0, -1.0),
    lambda lib: lib.distributions.Categorical(probs=lib.tensor([0.5, -0.1, 0.6])),
    lambda lib: lib.distributions.Normal(0.0, 1.0).log_prob(lib.tensor(float("nan"))),
    lambda lib: lib.distributions.Bernoulli(probs=0.3).log_prob(lib.tensor(0.5)),
    lambda lib: lib.distributions.Exponential(1.0).log_prob(lib.tensor(-1.0)),
    lambda lib: lib.distributions.Beta(1.0, 1.0).log_prob(lib.tensor(1.5)),
    lambda lib: lib.distributions.Categorical(logits=lib.zeros(3)).log_prob(lib.tensor(3)),
])
def test_validation_raises_value_error_like_torch(make):
    with pytest.raises(ValueError) as te:
        make(torch)
    with pytest.raises(ValueError) as de:
        make(dyngraph)
    for prefix in ("Expected parameter", "Expected value argument"):
        assert str(te.value).startswith(prefix) == str(de.value).startswith(prefix)


def test_validation_can_be_turned_off_and_kl_registry():
    D = dyngraph.distributions
    assert D.Normal(0.0, 1.0, validate_args=False).log_prob(dyngraph.tensor(float("nan"))).isnan().item()
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(True)

    class Shifted(D.Normal):
        pass

    assert D.kl_divergence(Shifted(0.0, 1.0), D.Normal(1.0, 1.0)).item() == pytest.approx(0.5)

    @D.register_kl(Shifted, D.Normal)
    def _kl(p, q):
        return dyngraph.tensor(7.0)

    assert D.kl_divergence(Shifted(0.0, 1.0), D.Normal(1.0, 1.0)).item() == 7.0
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0))
    assert repr(D.constraints.positive) == repr(torch.distributions.constraints.positive)
    assert repr(D.constraints.interval(0.0, 1.0)) == repr(torch.distributions.constraints.interval(0.0, 1.0))
    assert repr(D.Normal(0.0, 1.0)) == repr(torch.distributions.Normal(0.0, 1.0))


def test_submodule_imports_through_the_runner(tmp_path):
    from dyngraph import run_torch

    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch\n"
        "from torch.distributions import constraints, transforms\n"
        "from torch.distributions.multivariate_normal import MultivariateNormal\n"
        "from torch.distributions.transformed_distribution import TransformedDistribution\n"
        "from torch.distributions.kl import register_kl\n"
        "import torch.distributions as D\n"
        "m = D.Independent(D.Normal(torch.zeros(2), torch.ones(2)), 1)\n"
        "result = (constraints.positive.check(torch.tensor(1.0)).item(), m.log_prob(torch.zeros(2)).item(),\n"
        "          MultivariateNormal.__name__, transforms.TanhTransform.__name__)\n")
    r = run_torch.run_path(str(prog))["result"]
    assert r[0] is True and r[1] == pytest.approx(-1.8378770664) and r[2:] == ("MultivariateNormal",
                                                                               "TanhTransform")


def test_mixture_same_family_matches_torch():
    rng = np.random.default_rng(5)
    logits, mu, sigma = rng.standard_normal((4, 3)), rng.standard_normal((4, 3, 2)), rng.uniform(0.5, 1.5, (4, 3, 2))
    y = rng.standard_normal((4, 2))
    res = []
    for lib in (torch, dyngraph):
        D = lib.distributions
        ps = [lib.tensor(a, requires_grad=True) for a in (logits, mu, sigma)]
        m = D.MixtureSameFamily(D.Categorical(logits=ps[0]), D.Independent(D.Normal(ps[1], ps[2]), 1))
        lp = m.log_prob(lib.tensor(y))
        lp.sum().backward()
        scalar = D.MixtureSameFamily(D.Categorical(logits=ps[0]), D.Normal(ps[1][..., 0], ps[2][..., 0]))
        res.append([lp, m.mean, m.variance, scalar.log_prob(lib.tensor(y[:, 0])), scalar.variance,
                    *[p.grad for p in ps], tuple(m.sample((5,)).shape), tuple(scalar.sample((2, 3)).shape),
                    tuple(m.batch_shape), tuple(m.event_shape)])
    for a, b in zip(res[1][:8], res[0][:8]):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert res[0][8:] == res[1][8:]
