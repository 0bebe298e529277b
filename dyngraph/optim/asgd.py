"""ASGD: averaged stochastic gradient descent (Polyak-Ruppert averaging)."""

from __future__ import annotations

import numpy as np

from ..dtypes import float64, get_default_dtype
from .optimizer import Optimizer, _buffer, check_options, grad_of

__all__ = ["ASGD"]


def _scalar(value) -> float:
    """A state scalar (float, or a 0-d tensor/array from a loaded state dict) as a float."""
    data = getattr(value, "_data", value)
    return float(np.asarray(data))


class ASGD(Optimizer):
    """ASGD with PyTorch's update rule::

        g = grad (+ weight_decay * p) (negated when maximize)
        p *= 1 - lambd * eta;  p -= eta * g
        ax = p if mu == 1 else ax + mu * (p - ax)       # the running average
        eta = lr / (1 + lambd * lr * t) ** alpha;  mu = 1 / max(1, t - t0)

    The averaged parameters are in ``optimizer.state[p]["ax"]``.  Like PyTorch, ``eta`` and
    ``mu`` are kept at the scalar dtype (float32 unless the default dtype is float64).

    >>> opt = dg.optim.ASGD(model.parameters(), lr=0.01, t0=100)
    """

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        check_options("ASGD", lr=lr, weight_decay=weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        # PyTorch keeps eta and mu as scalar tensors of this dtype: round the same way
        scalar = np.float64 if get_default_dtype() is float64 else np.float32
        state = self.state
        for p in params:
            d = p._data
            st = state.get(p)
            if st is None:
                st = state[p] = {"step": 0, "eta": float(scalar(lr)), "mu": 1.0, "ax": _buffer(d)}
            g = grad_of(p, group)
            st["step"] = step = st["step"] + 1
            eta = _scalar(st["eta"])
            d *= 1 - lambd * eta
            d -= eta * g
            ax = st["ax"]._data
            if _scalar(st["mu"]) != 1:
                diff = np.subtract(d, ax)
                diff *= _scalar(st["mu"])
                ax += diff
            else:
                np.copyto(ax, d)
            st["eta"] = float(scalar(lr / ((1 + lambd * lr * step) ** alpha)))
            st["mu"] = float(scalar(1 / max(1, step - t0)))
