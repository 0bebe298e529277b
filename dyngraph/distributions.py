"""``dg.distributions``: the probability distributions policy-gradient and
variational code reaches for (``Categorical``, ``Bernoulli``, ``Normal``) and
``kl_divergence`` between them, with PyTorch's constructors and methods.

``log_prob``, ``entropy``, ``rsample`` and ``kl_divergence`` are built from
dyngraph operations, so gradients flow through them; ``sample`` draws from
dyngraph's generator (``dg.manual_seed``): same distributions as PyTorch,
different numbers.

>>> m = dg.distributions.Categorical(logits=policy(state))
>>> action = m.sample()
>>> loss = -(m.log_prob(action) * advantage).sum() - 0.01 * m.entropy().sum()
"""

from __future__ import annotations

import math

import numpy as np

from . import creation as _c
from . import dtypes as _dt
from .autograd.grad_mode import no_grad
from .ops import indexing as _ix
from .ops import nn as _nn
from .random import rng_of
from .size import Size
from .surface import elementwise as _ew
from .surface import reduction as _red
from .tensor import Tensor

__all__ = ["Distribution", "Categorical", "Bernoulli", "Normal", "kl_divergence"]


def _as_float_tensor(x, name: str) -> Tensor:
    if isinstance(x, Tensor):
        return x if x._data.dtype.kind == "f" else x.to(_dt.get_default_dtype())
    if isinstance(x, (int, float)):
        return _c.tensor(float(x))
    raise TypeError(f"distributions: {name} must be a Tensor or a number, got {type(x).__name__}")


def _one_of(probs, logits, cls: str):
    if (probs is None) == (logits is None):
        raise ValueError(f"{cls}: either `probs` or `logits` must be specified, but not both")


class Distribution:
    """Base class: ``batch_shape``, ``event_shape``, ``sample``/``rsample``,
    ``log_prob``, ``entropy``, ``mean``, ``variance``, ``stddev``."""

    has_rsample = False

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> tuple:
        return tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape)

    def sample(self, sample_shape=()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape=()) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised rsample(); use sample()")

    @property
    def stddev(self) -> Tensor:
        return _ew.sqrt(self.variance)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Categorical(Distribution):
    """A distribution over ``{0, ..., K-1}`` given ``probs`` (normalised along the last
    dim) or unnormalised ``logits``; batched over the leading dims."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Categorical")
        if probs is not None:
            probs = _as_float_tensor(probs, "probs")
            if probs.ndim < 1:
                raise ValueError("Categorical: `probs` must be at least one-dimensional")
            self.probs = probs / _red.sum(probs, -1, keepdim=True)
            eps = float(np.finfo(self.probs._data.dtype).eps)
            self.logits = _ew.log(_ew.clamp(self.probs, eps, 1 - eps))
        else:
            logits = _as_float_tensor(logits, "logits")
            if logits.ndim < 1:
                raise ValueError("Categorical: `logits` must be at least one-dimensional")
            self.logits = logits - _red.logsumexp(logits, -1, keepdim=True)
            self.probs = _nn.softmax(self.logits, -1)
        self._num_events = self.probs.shape[-1]
        super().__init__(self.probs.shape[:-1])

    @property
    def param_shape(self) -> Size:
        return self.probs.shape

    @property
    def mean(self) -> Tensor:
        return _c.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape=()) -> Tensor:
        p = np.asarray(self.probs._data, dtype=np.float64)
        shape = tuple(sample_shape) + tuple(self._batch_shape)
        u = rng_of(None).random(shape + (1,))
        cdf = np.cumsum(np.broadcast_to(p, shape + p.shape[-1:]), axis=-1)
        idx = np.minimum((cdf < u * cdf[..., -1:]).sum(-1), self._num_events - 1)
        return _c.from_numpy(idx.astype(np.int64))

    def log_prob(self, value: Tensor) -> Tensor:
        value = value.long()
        shape = np.broadcast_shapes(tuple(value.shape) + (1,), tuple(self.logits.shape))
        idx = value.unsqueeze(-1).expand(*shape[:-1], 1)
        return _ix.gather(self.logits.expand(*shape), -1, idx).squeeze(-1)

    def entropy(self) -> Tensor:
        min_real = float(np.finfo(self.logits._data.dtype).min)
        logits = _ew.clamp(self.logits, min=min_real)
        return -_red.sum(logits * self.probs, -1)


class Bernoulli(Distribution):
    """0/1 outcomes with probability ``probs`` of a 1 (or ``logits`` = log-odds)."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Bernoulli")
        if probs is not None:
            self.probs = _as_float_tensor(probs, "probs")
            eps = float(np.finfo(self.probs._data.dtype).eps)
            p = _ew.clamp(self.probs, eps, 1 - eps)
            self.logits = _ew.log(p) - _ew.log1p(-p)
        else:
            self.logits = _as_float_tensor(logits, "logits")
            self.probs = _ew.sigmoid(self.logits)
        super().__init__(self.probs.shape)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        draws = rng_of(None).random(shape) < np.broadcast_to(self.probs._data, shape)
        return _c.from_numpy(draws.astype(self.probs._data.dtype))

    def log_prob(self, value: Tensor) -> Tensor:
        from .nn.functional import binary_cross_entropy_with_logits  # noqa: PLC0415

        logits = self.logits
        if tuple(value.shape) != tuple(logits.shape):
            shape = np.broadcast_shapes(tuple(value.shape), tuple(logits.shape))
            logits, value = logits.expand(*shape), value.expand(*shape)
        return -binary_cross_entropy_with_logits(logits, value.to(logits.dtype), reduction="none")

    def entropy(self) -> Tensor:
        from .nn.functional import binary_cross_entropy_with_logits  # noqa: PLC0415

        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Normal(Distribution):
    """The Gaussian N(``loc``, ``scale``²); ``rsample`` is reparameterised
    (``loc + scale * eps``), so gradients reach ``loc`` and ``scale``."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        loc = _as_float_tensor(loc, "loc")
        scale = _as_float_tensor(scale, "scale")
        shape = np.broadcast_shapes(tuple(loc.shape), tuple(scale.shape))
        self.loc = loc.expand(*shape) if tuple(loc.shape) != shape else loc
        self.scale = scale.expand(*shape) if tuple(scale.shape) != shape else scale
        super().__init__(shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale ** 2

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = rng_of(None).standard_normal(shape).astype(self.loc._data.dtype)
        return self.loc + _c.from_numpy(eps) * self.scale

    def log_prob(self, value) -> Tensor:
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - _ew.log(self.scale) - math.log(math.sqrt(2 * math.pi))

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + _ew.log(self.scale)


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) for two distributions of the same family (Normal, Categorical, Bernoulli).

    >>> kl_divergence(Normal(mu, sigma), Normal(0.0, 1.0)).sum()
    """
    if isinstance(p, Normal) and isinstance(q, Normal):
        var_ratio = (p.scale / q.scale) ** 2
        t1 = ((p.loc - q.loc) / q.scale) ** 2
        return 0.5 * (var_ratio + t1 - 1 - _ew.log(var_ratio))
    if isinstance(p, Categorical) and isinstance(q, Categorical):
        t = p.probs * (p.logits - q.logits)
        t = _ix.masked_fill(t, q.probs == 0, float("inf"))
        t = _ix.masked_fill(t, p.probs == 0, 0.0)
        return _red.sum(t, -1)
    if isinstance(p, Bernoulli) and isinstance(q, Bernoulli):
        from .nn.functional import softplus  # noqa: PLC0415

        t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
        t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
        return t1 + t2
    raise NotImplementedError(
        f"kl_divergence: no rule for {type(p).__name__} || {type(q).__name__} (dyngraph has "
        "Normal||Normal, Categorical||Categorical and Bernoulli||Bernoulli)")
