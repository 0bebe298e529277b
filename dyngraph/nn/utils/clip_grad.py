"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_``."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import numpy as np

from ..._core.graph import bump_version
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "get_total_norm",
           "clip_grads_with_norm_"]


def _grads(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p._grad for p in parameters if p._grad is not None]


def get_total_norm(tensors: Iterable[Tensor], norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together (as one vector)."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._make(np.asarray(0.0, dtype=np.float32), False, None, 0)
    dtype = tensors[0]._data.dtype
    if math.isinf(norm_type):
        norms = [np.abs(t._data).max() if t._data.size else 0.0 for t in tensors]
        total = max(norms) if norm_type > 0 else min(norms)
    else:
        total = sum(float(np.sum(np.abs(t._data.astype(np.float64)) ** norm_type))
                    for t in tensors) ** (1.0 / norm_type)
    total_t = Tensor._make(np.asarray(total, dtype=dtype), False, None, 0)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
            "so it cannot be clipped. To disable this error and scale the gradients by the "
            "non-finite norm anyway, set `error_if_nonfinite=False`")
    return total_t


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale gradients by ``max_norm / (total_norm + 1e-6)`` when that is below 1."""
    grads = _grads(parameters)
    coef = float(max_norm) / (float(total_norm.item()) + 1e-6)
    if not coef >= 1.0:  # a nan/inf total norm scales by nan, as PyTorch
        for g in grads:
            g._data *= g._data.dtype.type(coef)
            bump_version(g)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Rescale gradients in place so their total norm is at most ``max_norm``.

    Returns the total norm before clipping (a 0-d tensor).

    >>> total = dg.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_`."""
    warnings.warn("`nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        np.clip(g._data, -clip_value, clip_value, out=g._data)
        bump_version(g)
