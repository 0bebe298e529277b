"""``dg.distributions``: PyTorch's probability distributions, ``kl_divergence`` and
``register_kl``, with the same constructors, methods, shapes and argument validation.

``log_prob``, ``entropy``, ``rsample`` and ``kl_divergence`` are built from dyngraph
operations, so gradients flow through them; ``sample`` draws from dyngraph's generator
(``dg.manual_seed``): same distributions as PyTorch, different numbers.

>>> m = dg.distributions.Categorical(logits=policy(state))
>>> action = m.sample()
>>> loss = -(m.log_prob(action) * advantage).sum() - 0.01 * m.entropy().sum()
"""

from __future__ import annotations

from . import constraints, transforms, utils
from .distribution import Distribution
from .families import (
    Bernoulli,
    Beta,
    Binomial,
    Categorical,
    Cauchy,
    Chi2,
    Dirichlet,
    Exponential,
    Gamma,
    Geometric,
    Independent,
    Laplace,
    LogNormal,
    MixtureSameFamily,
    MultivariateNormal,
    Normal,
    OneHotCategorical,
    Poisson,
    StudentT,
    TransformedDistribution,
    Uniform,
)
from .kl import kl_divergence, register_kl
from .transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    SoftplusTransform,
    TanhTransform,
    Transform,
)

__all__ = [
    "Distribution", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "StudentT", "Dirichlet", "Exponential",
    "Gamma", "Geometric", "Independent", "Laplace", "LogNormal", "MixtureSameFamily", "MultivariateNormal", "Normal",
    "OneHotCategorical", "Poisson", "TransformedDistribution", "Uniform", "kl_divergence", "register_kl",
    "constraints", "transforms", "utils", "Transform", "AffineTransform", "ComposeTransform", "ExpTransform",
    "PowerTransform", "SigmoidTransform", "SoftplusTransform", "TanhTransform",
]
