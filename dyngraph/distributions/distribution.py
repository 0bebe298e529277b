"""``torch.distributions.Distribution``: the base class, argument validation and the helpers
the families share (``broadcast_all``, ``sum_rightmost``, NumPy views of parameters)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..size import Size
from ..tensor import Tensor
from . import constraints

__all__ = ["Distribution", "broadcast_all"]


def _dg():
    """The functions the distributions use, each from its defining module (built once, on
    first use: ``linalg`` and ``nn.functional`` load after this package)."""
    global _LIB
    if _LIB is None:
        from .. import creation, dtypes, linalg  # noqa: PLC0415  (these load after dg.distributions)
        from ..autograd.grad_mode import no_grad  # noqa: PLC0415  (these load after dg.distributions)
        from ..nn import functional  # noqa: PLC0415  (these load after dg.distributions)
        from ..surface import elementwise, shape  # noqa: PLC0415  (these load after dg.distributions)

        _LIB = SimpleNamespace(
            tensor=creation.tensor, from_numpy=creation.from_numpy, full=creation.full,
            full_like=creation.full_like, zeros=creation.zeros, zeros_like=creation.zeros_like,
            ones=creation.ones, arange=creation.arange, eye=creation.eye,
            get_default_dtype=dtypes.get_default_dtype, long=dtypes.long, no_grad=no_grad,
            stack=shape.stack, broadcast_shapes=shape.broadcast_shapes, where=elementwise.where,
            linalg=linalg, nn=SimpleNamespace(functional=functional))
    return _LIB


_LIB = None


def broadcast_all(*values):
    """Numbers become tensors of the default dtype (or of the tensors' dtype); all values are
    expanded to one broadcast shape (``torch.distributions.utils.broadcast_all``).

    >>> loc, scale = broadcast_all(0.0, dg.ones(3))
    """
    dg = _dg()
    tensors = [v for v in values if isinstance(v, Tensor)]
    for v in values:
        if not isinstance(v, (Tensor, int, float)):
            raise ValueError(f"Input arguments must all be instances of numbers.Number or torch.Tensor, "
                             f"got {type(v).__name__}")
    dtype = tensors[0].dtype if tensors else dg.get_default_dtype()
    if not dtype.is_floating_point:
        dtype = dg.get_default_dtype()
    out = [v if isinstance(v, Tensor) else dg.tensor(float(v), dtype=dtype) for v in values]
    shape = np.broadcast_shapes(*[tuple(v.shape) for v in out])
    return tuple(v if tuple(v.shape) == shape else v.expand(*shape) for v in out)


def sum_rightmost(value, dim: int):
    """Sum over the ``dim`` rightmost dims (none for ``dim == 0``)."""
    if dim == 0:
        return value
    return value.reshape(*value.shape[:-dim], -1).sum(-1)


def host(t) -> np.ndarray:
    """A NumPy copy of a tensor's values (for drawing samples with NumPy's generator)."""
    return np.asarray(t.detach().cpu().numpy())


def from_host(a: np.ndarray, like):
    """``a`` as a tensor with ``like``'s dtype and device."""
    dg = _dg()
    return dg.from_numpy(np.ascontiguousarray(a)).to(dtype=like.dtype, device=like.device)


class Distribution:
    """Base class of the distributions: ``batch_shape``, ``event_shape``, ``sample`` /
    ``rsample``, ``log_prob``, ``entropy``, ``mean``, ``variance``, ``stddev``, ``cdf``...

    Parameters are checked against ``arg_constraints`` and ``log_prob``'s value against
    ``support`` unless validation is off (``validate_args=False`` or
    ``Distribution.set_default_validate_args(False)``), as in PyTorch.

    >>> class Half(Distribution):
    ...     arg_constraints = {"scale": constraints.positive}
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True
    arg_constraints: dict = {}
    support = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for every distribution made afterwards."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            arg_constraints = self.arg_constraints
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), property):
                    continue    # a parameterisation that was not given (probs vs logits)
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {param} (Tensor of shape {tuple(value.shape)}) of distribution "
                        f"{self!r} to satisfy the constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> Size:
        if not isinstance(sample_shape, (tuple, list, Size)):
            sample_shape = (int(sample_shape),)
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {tuple(value.shape)} vs "
                             f"{tuple(self._event_shape)}.")
        try:
            np.broadcast_shapes(tuple(value.shape), tuple(self._batch_shape) + tuple(self._event_shape))
        except ValueError:
            raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {tuple(value.shape)} vs "
                             f"{tuple(self._batch_shape) + tuple(self._event_shape)}.") from None
        support = self.support
        if support is None or constraints.is_dependent(support):
            return
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be within "
                f"the support ({support!r}) of the distribution {self!r}, but found invalid values:\n{value}")

    def sample(self, sample_shape=()) -> Tensor:
        """A sample of shape ``sample_shape + batch_shape + event_shape`` (no gradient)."""
        dg = _dg()
        with dg.no_grad():
            return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape=()) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised rsample(); use sample()")

    def sample_n(self, n: int) -> Tensor:
        return self.sample((n,))

    def log_prob(self, value) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.log_prob")

    def cdf(self, value) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.cdf")

    def icdf(self, value) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.icdf")

    def entropy(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.entropy")

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.enumerate_support")

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        parts = []
        for k in names:
            v = self.__dict__[k]
            parts.append(f"{k}: {v.item() if v.numel() == 1 else Size(v.shape)}")
        return f"{type(self).__name__}({', '.join(parts)})"
