"""``torch.distributions.transforms``: invertible maps with log-Jacobians, for
:class:`~dyngraph.distributions.TransformedDistribution` (squashed Gaussian policies,
log-normal and logit-normal variables).

>>> t = ComposeTransform([AffineTransform(0.0, 2.0), TanhTransform()])
>>> y = t(x); t.inv(y)          # x again
"""

from __future__ import annotations

import math

from .. import creation as _c
from . import constraints

__all__ = ["Transform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "ComposeTransform", "PowerTransform", "SoftplusTransform", "identity_transform"]


def _softplus(x):
    from ..nn import functional as F  # noqa: PLC0415  (distributions load before nn)

    return F.softplus(x)


class Transform:
    """Base class: ``__call__`` (forward), ``inv`` (inverse), ``log_abs_det_jacobian(x, y)``.
    ``cache_size=1`` remembers the last ``(x, y)`` pair so ``inv(y)`` returns the exact ``x``."""

    bijective = True
    domain = constraints.real
    codomain = constraints.real
    sign = 1

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = (None, None)

    @property
    def domain_event_dim(self) -> int:
        return self.domain.event_dim

    @property
    def codomain_event_dim(self) -> int:
        return self.codomain.event_dim

    @property
    def event_dim(self) -> int:
        return self.domain_event_dim

    @property
    def inv(self):
        return _InverseTransform(self)

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__}._call")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__}._inverse")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"{type(self).__name__}.log_abs_det_jacobian")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    def __init__(self, transform: Transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)


class _IdentityTransform(Transform):
    def _call(self, x):
        return x

    def _inverse(self, y):
        return y

    def log_abs_det_jacobian(self, x, y):
        return x * 0.0


identity_transform = _IdentityTransform()


class ExpTransform(Transform):
    """``y = exp(x)``."""

    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """``y = x ** exponent`` on positive values."""

    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class SigmoidTransform(Transform):
    """``y = sigmoid(x)``."""

    codomain = constraints.unit_interval

    def _call(self, x):
        eps = 1.1920928955078125e-07 if x.dtype.itemsize <= 4 else 2.220446049250313e-16
        return x.sigmoid().clamp(min=eps, max=1 - eps)

    def _inverse(self, y):
        eps = 1.1920928955078125e-07 if y.dtype.itemsize <= 4 else 2.220446049250313e-16
        y = y.clamp(min=eps, max=1 - eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x) - _softplus(x)


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``."""

    codomain = constraints.positive

    def _call(self, x):
        return _softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x)


class TanhTransform(Transform):
    """``y = tanh(x)``; the log-Jacobian ``2 (log 2 - x - softplus(-2x))`` is the stable form
    squashed-Gaussian policies use."""

    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * (y.log1p() - (-y).log1p())      # atanh

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))


class AffineTransform(Transform):
    """``y = loc + scale * x`` (``event_dim`` rightmost dims form one event)."""

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def domain(self):
        return constraints.real if self._event_dim == 0 else constraints.independent(constraints.real,
                                                                                     self._event_dim)

    @property
    def codomain(self):
        return self.domain

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        if isinstance(scale, (int, float)):
            result = _c.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
            if tuple(result.shape) != tuple(x.shape):
                result = result.expand(*x.shape)
        for _ in range(self._event_dim):
            result = result.sum(-1)
        return result


class ComposeTransform(Transform):
    """The transforms of ``parts`` applied in order."""

    def __init__(self, parts, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    @property
    def domain(self):
        return self.parts[0].domain if self.parts else constraints.real

    @property
    def codomain(self):
        return self.parts[-1].codomain if self.parts else constraints.real

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return x * 0.0
        total = 0.0
        for part in self.parts:
            y_part = part(x)
            total = total + part.log_abs_det_jacobian(x, y_part)
            x = y_part
        return total
