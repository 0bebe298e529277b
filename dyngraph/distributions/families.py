"""The distribution families, with PyTorch's constructors, formulas and shapes.

``log_prob``, ``entropy``, ``cdf``, ``rsample`` and the moments are built from dyngraph
operations, so gradients flow to the parameters.  ``sample`` draws with dyngraph's
generator (``dg.manual_seed``): the same distributions as PyTorch, different numbers.
Gamma, Beta and Dirichlet sample without a reparameterised gradient (no ``rsample``).
"""

from __future__ import annotations

import math

import numpy as np

from ..random import rng_of
from ..size import Size
from ..tensor import Tensor
from . import constraints
from .distribution import Distribution, _dg, broadcast_all, from_host, host, sum_rightmost

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet", "Exponential", "Gamma",
           "Geometric", "Independent", "Laplace", "LogNormal", "MixtureSameFamily", "MultivariateNormal", "Normal",
           "OneHotCategorical", "Poisson", "StudentT", "TransformedDistribution", "Uniform"]

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def _as_float(x, name: str) -> Tensor:
    dg = _dg()
    if isinstance(x, Tensor):
        return x if x.dtype.is_floating_point else x.to(dg.get_default_dtype())
    if isinstance(x, (int, float)):
        return dg.tensor(float(x))
    raise TypeError(f"distributions: {name} must be a Tensor or a number, got {type(x).__name__}")


def _one_of(probs, logits, cls: str):
    if (probs is None) == (logits is None):
        raise ValueError(f"Either `probs` or `logits` must be specified, but not both. ({cls})")


def _eps(t) -> float:
    return float(np.finfo(t.dtype.np if hasattr(t.dtype, "np") else np.float32).eps)


def _clamp_probs(p):
    eps = _eps(p)
    return p.clamp(min=eps, max=1 - eps)


def _uniform(shape, like):
    """U[0, 1) draws of ``shape`` in ``like``'s dtype (NumPy's generator)."""
    return from_host(rng_of(None).random(tuple(shape)), like)


def _normal(shape, like):
    return from_host(rng_of(None).standard_normal(tuple(shape)), like)


# -- discrete --------------------------------------------------------------------------------

class Categorical(Distribution):
    """A distribution over ``{0, ..., K-1}`` given ``probs`` (normalised along the last dim)
    or unnormalised ``logits``; batched over the leading dims.

    >>> m = Categorical(logits=dg.tensor([0.0, 1.0, 2.0]))
    >>> m.log_prob(dg.tensor(2))
    tensor(-0.4076)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Categorical")
        if probs is not None:
            probs = _as_float(probs, "probs")
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = _clamp_probs(self.probs).log()
        else:
            logits = _as_float(logits, "logits")
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self.probs = self.logits.softmax(-1)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self.probs.shape[-1]
        super().__init__(self.probs.shape[:-1], validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self) -> Size:
        return self._param.shape

    @property
    def mean(self) -> Tensor:
        return _dg().full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return _dg().full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape=()) -> Tensor:
        p = host(self.probs).astype(np.float64)
        shape = tuple(self._extended_shape(sample_shape))
        u = rng_of(None).random(shape + (1,))
        cdf = np.cumsum(np.broadcast_to(p, shape + p.shape[-1:]), axis=-1)
        idx = np.minimum((cdf < u * cdf[..., -1:]).sum(-1), self._num_events - 1)
        return _dg().from_numpy(idx.astype(np.int64))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        shape = np.broadcast_shapes(tuple(value.shape), tuple(self.logits.shape))
        value = value.expand(*shape[:-1], 1)
        return self.logits.expand(*shape).gather(-1, value).squeeze(-1)

    def entropy(self) -> Tensor:
        min_real = float(np.finfo(host(self.logits).dtype).min)
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        dg = _dg()
        values = dg.arange(self._num_events, dtype=dg.long)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class OneHotCategorical(Distribution):
    """One-hot vectors of a :class:`Categorical` (``event_shape == (K,)``)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=False)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        dg = _dg()
        idx = self._categorical.sample(sample_shape)
        return dg.nn.functional.one_hot(idx, self._categorical._num_events).to(self.probs.dtype)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self) -> Tensor:
        return self._categorical.entropy()


class Bernoulli(Distribution):
    """0/1 outcomes with probability ``probs`` of a 1 (or ``logits`` = log-odds)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Bernoulli")
        if probs is not None:
            self.probs, = broadcast_all(_as_float(probs, "probs"))
            p = _clamp_probs(self.probs)
            self.logits = p.log() - (-p).log1p()
        else:
            self.logits, = broadcast_all(_as_float(logits, "logits"))
            self.probs = self.logits.sigmoid()
        super().__init__(self.probs.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        draws = rng_of(None).random(shape) < np.broadcast_to(host(self.probs), shape)
        return from_host(draws, self.probs)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        F = _dg().nn.functional
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value.to(logits.dtype), reduction="none")

    def entropy(self) -> Tensor:
        F = _dg().nn.functional
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        dg = _dg()
        values = dg.arange(2, dtype=self.probs.dtype).view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class Binomial(Distribution):
    """The number of successes in ``total_count`` Bernoulli(``probs``) trials."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Binomial")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, _as_float(probs, "probs"))
            self.total_count = self.total_count.type_as(self.probs)
            p = _clamp_probs(self.probs)
            self.logits = p.log() - (-p).log1p()
        else:
            self.total_count, self.logits = broadcast_all(total_count, _as_float(logits, "logits"))
            self.total_count = self.total_count.type_as(self.logits)
            self.probs = self.logits.sigmoid()
        super().__init__(self.probs.shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        n = np.broadcast_to(host(self.total_count), shape).astype(np.int64)
        p = np.broadcast_to(host(self.probs), shape).astype(np.float64)
        return from_host(rng_of(None).binomial(n, p).astype(np.float64), self.probs)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_factorial_n = (n + 1).lgamma()
        log_factorial_k = (value + 1).lgamma()
        log_factorial_nmk = (n - value + 1).lgamma()
        # value * logits - n * log1p(exp(logits)), written stably as PyTorch does
        normalize_term = n * self.logits.clamp(min=0) + n * (-self.logits.abs()).exp().log1p() \
            - log_factorial_n
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term


class Geometric(Distribution):
    """The number of failures before the first success of Bernoulli(``probs``) trials."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Geometric")
        if probs is not None:
            self.probs, = broadcast_all(_as_float(probs, "probs"))
            p = _clamp_probs(self.probs)
            self.logits = p.log() - (-p).log1p()
        else:
            self.logits, = broadcast_all(_as_float(logits, "logits"))
            self.probs = self.logits.sigmoid()
        super().__init__(self.probs.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        p = np.broadcast_to(host(self.probs), shape).astype(np.float64)
        return from_host((rng_of(None).geometric(p) - 1).astype(np.float64), self.probs)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = probs.clone().masked_fill((probs == 1) & (value == 0), 0.0)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        F = _dg().nn.functional
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs


class Poisson(Distribution):
    """Counts with mean ``rate``."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        self.rate, = broadcast_all(_as_float(rate, "rate"))
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape=()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        lam = np.broadcast_to(host(self.rate), shape).astype(np.float64)
        return from_host(rng_of(None).poisson(lam).astype(np.float64), self.rate)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()


# -- continuous, location-scale ---------------------------------------------------------------

class _LocScale(Distribution):
    """What the real-valued location-scale families share: ``loc`` and ``scale`` broadcast
    together, a reparameterised ``rsample``, and ``loc`` as the mean and the mode."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(_as_float(loc, "loc"), _as_float(scale, "scale"))
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc


class Normal(_LocScale):
    """The Gaussian N(``loc``, ``scale``²); ``rsample`` is reparameterised
    (``loc + scale * eps``), so gradients reach ``loc`` and ``scale``.

    >>> Normal(0.0, 1.0).log_prob(dg.tensor(0.5))
    tensor(-1.0439)
    """

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def sample(self, sample_shape=()) -> Tensor:
        dg = _dg()
        with dg.no_grad():
            return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape=()) -> Tensor:
        eps = _normal(self._extended_shape(sample_shape), self.loc)
        return self.loc + eps * self.scale

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def icdf(self, value) -> Tensor:
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class LogNormal(Distribution):
    """``exp(X)`` for X ~ Normal(``loc``, ``scale``)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.base_dist = Normal(loc, scale, validate_args=validate_args)
        self.loc, self.scale = self.base_dist.loc, self.base_dist.scale
        super().__init__(self.base_dist.batch_shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self) -> Tensor:
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def rsample(self, sample_shape=()) -> Tensor:
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        x = value.log()
        return self.base_dist.log_prob(x) - x

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc


class Laplace(_LocScale):
    """The Laplace distribution with ``loc`` and ``scale`` (reparameterised ``rsample``)."""

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()) -> Tensor:
        eps = np.finfo(host(self.loc).dtype).eps
        u = rng_of(None).uniform(eps - 1, 1, tuple(self._extended_shape(sample_shape)))
        u = from_host(u, self.loc)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value) -> Tensor:
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()


class Cauchy(_LocScale):
    """The Cauchy (Lorentz) distribution with ``loc`` and ``scale``."""

    @property
    def mean(self) -> Tensor:
        return _dg().full(tuple(self._extended_shape()), float("nan"), dtype=self.loc.dtype)

    @property
    def variance(self) -> Tensor:
        return _dg().full(tuple(self._extended_shape()), float("inf"), dtype=self.loc.dtype)

    def rsample(self, sample_shape=()) -> Tensor:
        eps = from_host(rng_of(None).standard_cauchy(tuple(self._extended_shape(sample_shape))), self.loc)
        return self.loc + eps * self.scale

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value) -> Tensor:
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """Uniform on ``[low, high)`` (reparameterised ``rsample``)."""

    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(_as_float(low, "low"), _as_float(high, "high"))
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate_args and not bool(self.low.lt(self.high).all()):
            raise ValueError("Uniform is not defined when low>= high")

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return _dg().full(tuple(self._extended_shape()), float("nan"), dtype=self.low.dtype)

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()) -> Tensor:
        rand = _uniform(self._extended_shape(sample_shape), self.low)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).type_as(self.low)
        ub = self.high.gt(value).type_as(self.low)
        return (lb.mul(ub)).log() - (self.high - self.low).log()

    def cdf(self, value) -> Tensor:
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def icdf(self, value) -> Tensor:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()


class Exponential(Distribution):
    """The exponential distribution with ``rate`` (reparameterised ``rsample``)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        self.rate, = broadcast_all(_as_float(rate, "rate"))
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return _dg().zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()) -> Tensor:
        e = from_host(rng_of(None).standard_exponential(tuple(self._extended_shape(sample_shape))), self.rate)
        return e / self.rate

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value) -> Tensor:
        return 1 - (-self.rate * value).exp()

    def icdf(self, value) -> Tensor:
        return -(-value).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()


# -- gamma family (sampled with NumPy; no reparameterised gradient) ---------------------------

class _NoRsample:
    def rsample(self, sample_shape=()):
        raise NotImplementedError(
            f"{type(self).__name__}.rsample: dyngraph has no reparameterised gradient for this family "
            "(PyTorch's implicit gradient of the gamma sampler); use sample(), or a score-function "
            "estimator with log_prob")


class Gamma(_NoRsample, Distribution):
    """The gamma distribution with ``concentration`` (shape) and ``rate`` (inverse scale)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(_as_float(concentration, "concentration"),
                                                      _as_float(rate, "rate"))
        super().__init__(self.concentration.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape=()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        k = np.broadcast_to(host(self.concentration), shape).astype(np.float64)
        r = np.broadcast_to(host(self.rate), shape).astype(np.float64)
        g = rng_of(None).standard_gamma(k) / r
        tiny = np.finfo(host(self.rate).dtype).tiny
        return from_host(np.maximum(g, tiny), self.rate)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = _as_float(value, "value").to(self.rate.dtype)
        return (self.concentration.xlogy(self.rate) + (self.concentration - 1).xlogy(value)
                - self.rate * value - self.concentration.lgamma())

    def entropy(self) -> Tensor:
        c = self.concentration
        return c - self.rate.log() + c.lgamma() + (1.0 - c) * c.digamma()


class Dirichlet(_NoRsample, Distribution):
    """The Dirichlet distribution over the simplex with ``concentration`` (last dim: categories)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex

    def __init__(self, concentration, validate_args=None):
        concentration = _as_float(concentration, "concentration")
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def sample(self, sample_shape=()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        a = np.broadcast_to(host(self.concentration), shape).astype(np.float64)
        g = rng_of(None).standard_gamma(a)
        g = np.maximum(g, np.finfo(np.float64).tiny)
        return from_host(g / g.sum(-1, keepdims=True), self.concentration)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return value.log().mul(c - 1.0).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    def entropy(self) -> Tensor:
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return c.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma() - ((c - 1.0) * c.digamma()).sum(-1)


class Beta(_NoRsample, Distribution):
    """The beta distribution on (0, 1) with ``concentration1`` (alpha) and ``concentration0`` (beta)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(
            _as_float(concentration1, "concentration1"), _as_float(concentration0, "concentration0"))
        dg = _dg()
        self._dirichlet = Dirichlet(dg.stack([self.concentration1, self.concentration0], -1),
                                    validate_args=validate_args)
        super().__init__(self._dirichlet.batch_shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def sample(self, sample_shape=()) -> Tensor:
        return self._dirichlet.sample(sample_shape).select(-1, 0)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        dg = _dg()
        heads_tails = dg.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()


# -- multivariate and wrappers ----------------------------------------------------------------

def _batch_mahalanobis(bL, bx):
    """``|L^-1 x|^2`` over the last dim, broadcasting batch dims."""
    dg = _dg()
    shape = np.broadcast_shapes(tuple(bL.shape[:-2]), tuple(bx.shape[:-1]))
    n = bx.shape[-1]
    L = bL.expand(*shape, n, n)
    x = bx.expand(*shape, n).unsqueeze(-1)
    sol = dg.linalg.solve(L, x).squeeze(-1)
    return sol.pow(2).sum(-1)


class MultivariateNormal(Distribution):
    """The multivariate Gaussian given ``loc`` and one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (its lower Cholesky factor).

    >>> m = MultivariateNormal(dg.zeros(2), dg.eye(2))
    >>> m.log_prob(dg.zeros(2))
    tensor(-1.8379)
    """

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        dg = _dg()
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = scale_tril if scale_tril is not None else (
            covariance_matrix if covariance_matrix is not None else precision_matrix)
        if given.dim() < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix must be at least "
                             "two-dimensional, with optional leading batch dimensions")
        batch_shape = np.broadcast_shapes(tuple(given.shape[:-2]), tuple(loc.shape[:-1]))
        n = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*batch_shape, n, n)
            L = scale_tril.tril()   # only the lower triangle is read (PyTorch's triangular solves)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*batch_shape, n, n)
            L = dg.linalg.cholesky(covariance_matrix)
        else:
            self.precision_matrix = precision_matrix.expand(*batch_shape, n, n)
            L = dg.linalg.cholesky(dg.linalg.inv(precision_matrix))
        self.loc = loc.expand(*batch_shape, n)
        self._unbroadcasted_scale_tril = L
        super().__init__(batch_shape, (n,), validate_args=validate_args)

    def __getattr__(self, name):
        # the parameterisations not given are computed on first use (PyTorch's lazy properties)
        dg = _dg()
        if name == "scale_tril":
            return self._unbroadcasted_scale_tril.expand(*self._batch_shape, *self._event_shape * 2)
        if name == "covariance_matrix":
            L = self._unbroadcasted_scale_tril
            return (L @ L.mT).expand(*self._batch_shape, *self._event_shape * 2)
        if name == "precision_matrix":
            L = self._unbroadcasted_scale_tril
            return dg.linalg.inv(L @ L.mT).expand(*self._batch_shape, *self._event_shape * 2)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        eps = _normal(self._extended_shape(sample_shape), self.loc)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self) -> Tensor:
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        if len(self._batch_shape) == 0:
            return H
        return H.expand(*self._batch_shape)

    def __repr__(self) -> str:
        return f"MultivariateNormal(loc: {Size(self.loc.shape)})"


class Independent(Distribution):
    """Reinterprets the ``reinterpreted_batch_ndims`` rightmost batch dims of
    ``base_distribution`` as event dims (``log_prob`` sums over them).

    >>> Independent(Normal(dg.zeros(3), dg.ones(3)), 1).log_prob(dg.zeros(3))   # one number
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims: int, validate_args=None):
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                             f"actual {reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        result = self.base_dist.support
        if self.reinterpreted_batch_ndims and result is not None:
            result = constraints.independent(result, self.reinterpreted_batch_ndims)
        return result

    @property
    def mean(self) -> Tensor:
        return self.base_dist.mean

    @property
    def mode(self) -> Tensor:
        return self.base_dist.mode

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def sample(self, sample_shape=()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value) -> Tensor:
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self) -> Tensor:
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


class TransformedDistribution(Distribution):
    """``base_distribution`` pushed through ``transforms`` (applied in order); ``log_prob``
    subtracts each transform's ``log_abs_det_jacobian``.

    >>> from dyngraph.distributions.transforms import TanhTransform
    >>> squashed = TransformedDistribution(Normal(mu, std), [TanhTransform(cache_size=1)])
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        from .transforms import Transform  # noqa: PLC0415  (transforms import this module)

        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif not all(isinstance(t, Transform) for t in transforms):
            raise ValueError("transforms must be a Transform or a list of Transforms")
        self.base_dist = base_distribution
        self.transforms = list(transforms)
        event_dim = max([len(base_distribution.event_shape)] + [t.codomain_event_dim for t in self.transforms])
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    def sample(self, sample_shape=()) -> Tensor:
        dg = _dg()
        with dg.no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=()) -> Tensor:
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self._event_shape)
        log_prob = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain_event_dim - t.codomain_event_dim
            log_prob = log_prob - sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.domain_event_dim)
            y = x
        return log_prob + sum_rightmost(self.base_dist.log_prob(y),
                                        event_dim - len(self.base_dist.event_shape))

    def cdf(self, value) -> Tensor:
        for t in reversed(self.transforms):
            value = t.inv(value)
        return self.base_dist.cdf(value)


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom (``Gamma(df / 2, 1 / 2)``)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        df, = broadcast_all(_as_float(df, "df"))
        super().__init__(0.5 * df, df * 0 + 0.5, validate_args=validate_args)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2


class StudentT(_NoRsample, Distribution):
    """Student's t with ``df`` degrees of freedom, ``loc`` and ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(_as_float(df, "df"), _as_float(loc, "loc"),
                                                      _as_float(scale, "scale"))
        super().__init__(self.df.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        m = self.loc.clone()
        return m.masked_fill(self.df <= 1, float("nan"))

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        dg = _dg()
        m = self.df.clone()
        var = self.scale.pow(2) * m / (m - 2)
        var = dg.where(self.df <= 2, dg.full_like(var, float("inf")), var)
        return var.masked_fill(self.df <= 1, float("nan"))

    def sample(self, sample_shape=()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        df = np.broadcast_to(host(self.df), shape).astype(np.float64)
        t = from_host(rng_of(None).standard_t(df), self.loc)
        return (self.loc + self.scale * t).detach()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + (0.5 * self.df).lgamma() - (0.5 * (self.df + 1.0)).lgamma())
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - Z

    def entropy(self) -> Tensor:
        lbeta = (0.5 * self.df).lgamma() + math.lgamma(0.5) - (0.5 * (self.df + 1)).lgamma()
        return (self.scale.log() + 0.5 * (self.df + 1) * ((0.5 * (self.df + 1)).digamma()
                                                          - (0.5 * self.df).digamma())
                + 0.5 * self.df.log() + lbeta)


class MixtureSameFamily(Distribution):
    """A mixture whose components are the rightmost batch dim of ``component_distribution``,
    weighted by ``mixture_distribution`` (a :class:`Categorical`); the usual head of a mixture
    density network.

    >>> mix = Categorical(logits=pi_logits)                            # (B, K)
    >>> comp = Independent(Normal(mu, sigma), 1)                       # (B, K) x (D,)
    >>> nll = -MixtureSameFamily(mix, comp).log_prob(y).mean()         # y: (B, D)
    """

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        mdbs = tuple(mixture_distribution.batch_shape)
        cdbs = tuple(component_distribution.batch_shape)[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not compatible with "
                                 f"`component_distribution.batch_shape`({cdbs})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, component_distribution.event_shape, validate_args=validate_args)

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    @property
    def support(self):
        return self._component_distribution.support

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        for _ in range(self._event_ndims):
            x = x.unsqueeze(-1)
        return x

    @property
    def mean(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        mean_cond_var = (probs * self.component_distribution.variance).sum(-1 - self._event_ndims)
        var_cond_mean = (probs * (self.component_distribution.mean - self._pad(self.mean)).pow(2)).sum(
            -1 - self._event_ndims)
        return mean_cond_var + var_cond_mean

    def log_prob(self, x) -> Tensor:
        if self._validate_args:
            self._validate_sample(x)
        x = self._pad(x)
        log_prob_x = self.component_distribution.log_prob(x)
        log_mix_prob = self.mixture_distribution.logits.log_softmax(-1)
        return (log_prob_x + log_mix_prob).logsumexp(-1)

    def sample(self, sample_shape=()) -> Tensor:
        dg = _dg()
        with dg.no_grad():
            sample_len = len(tuple(sample_shape))
            batch_len = len(self.batch_shape)
            gather_dim = sample_len + batch_len
            es = tuple(self.event_shape)
            mix_sample = self.mixture_distribution.sample(sample_shape)
            mix_shape = tuple(mix_sample.shape)
            comp_samples = self.component_distribution.sample(sample_shape)
            mix_sample_r = mix_sample.reshape(*mix_shape, 1, *([1] * len(es)))
            mix_sample_r = mix_sample_r.expand(*mix_shape, 1, *es) if es else mix_sample_r
            if tuple(comp_samples.shape[:gather_dim]) != mix_shape:
                mix_sample_r = mix_sample_r.expand(*comp_samples.shape[:gather_dim], 1, *es)
            samples = comp_samples.gather(gather_dim, mix_sample_r)
            return samples.squeeze(gather_dim)
