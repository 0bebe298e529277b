"""``torch.distributions.constraints``: the sets a parameter or a value must lie in.

Each constraint's ``check(value)`` returns a bool tensor (one entry per event), and a
distribution checks its parameters against ``arg_constraints`` and ``log_prob``'s value
against ``support`` when argument validation is on (the default, as in PyTorch).

>>> constraints.positive.check(dg.tensor([1.0, -1.0]))
tensor([ True, False])
>>> constraints.interval(0.0, 1.0)
Interval(lower_bound=0.0, upper_bound=1.0)
"""

from __future__ import annotations

from .. import creation as _c
from .. import dtypes as _dt
from ..surface import elementwise as _ew
from ..surface import shape as _sh

__all__ = [
    "Constraint", "boolean", "cat", "dependent", "dependent_property", "greater_than", "greater_than_eq",
    "half_open_interval", "independent", "integer_interval", "interval", "is_dependent", "less_than",
    "lower_cholesky", "lower_triangular", "nonnegative", "nonnegative_integer", "one_hot", "positive",
    "positive_definite", "positive_integer", "positive_semidefinite", "real", "real_vector", "simplex",
    "square", "stack", "symmetric", "unit_interval",
]


class Constraint:
    """A set of values.  ``is_discrete``: integer-valued; ``event_dim``: how many rightmost
    dims form one event (``check`` reduces over them)."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError(f"{type(self).__name__}.check")

    def __repr__(self) -> str:
        return f"{type(self).__name__[1:]}()"


def _all_last(ok, n: int):
    for _ in range(n):
        ok = ok.all(-1)
    return ok


class _Dependent(Constraint):
    """A constraint that depends on other parameters (not checked)."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete, self._event_dim = is_discrete, event_dim

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    """Whether ``constraint`` is a ``dependent`` placeholder (not checkable)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """``@constraints.dependent_property``: a ``support`` computed from parameters."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    def __init__(self, base_constraint, reinterpreted_batch_ndims: int):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        return _all_last(self.base_constraint.check(value), self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self) -> str:
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _Real(Constraint):
    def check(self, value):
        return value == value     # False only for NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self) -> str:
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound <= value

    def __repr__(self) -> str:
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self) -> str:
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)

    def __repr__(self) -> str:
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        ok = value.shape[-2] == value.shape[-1]
        return _c.full(tuple(value.shape[:-2]), ok, dtype=_dt.bool)


class _Symmetric(_Square):
    def check(self, value):
        if value.shape[-2] != value.shape[-1]:
            return _Square.check(self, value)
        return _ew.isclose(value, value.mT, atol=1e-6).all(-1).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        sym = _Symmetric.check(self, value)
        if not bool(sym.all()):
            return sym
        return _linalg().eigvalsh(value).gt(0).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        sym = _Symmetric.check(self, value)
        if not bool(sym.all()):
            return sym
        return _linalg().eigvalsh(value).ge(0).all(-1)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).view(*value.shape[:-2], -1).min(-1)[0]


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = (value.tril() == value).view(*value.shape[:-2], -1).min(-1)[0]
        positive_diagonal = (value.diagonal(dim1=-2, dim2=-1) > 0).min(-1)[0]
        return lower & positive_diagonal


class _Cat(Constraint):
    """Constraints applied to consecutive pieces of ``dim`` (``constraints.cat``)."""

    def __init__(self, cseq, dim: int = 0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.cseq)
        self.dim = dim

    def check(self, value):
        checks, start = [], 0
        for constr, length in zip(self.cseq, self.lengths):
            checks.append(constr.check(value.narrow(self.dim, start, length)))
            start += length
        return _sh.cat(checks, self.dim)


class _Stack(Constraint):
    """Constraints applied to the slices of ``dim`` (``constraints.stack``)."""

    def __init__(self, cseq, dim: int = 0):
        self.cseq, self.dim = list(cseq), dim

    def check(self, value):
        return _sh.stack([c.check(value.select(self.dim, i)) for i, c in enumerate(self.cseq)], self.dim)


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack


def _linalg():
    from .. import linalg  # noqa: PLC0415  (dg.linalg loads on first use)

    return linalg
