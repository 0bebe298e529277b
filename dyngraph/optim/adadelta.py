"""Adadelta (Zeiler)."""

from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _buffer, check_options, grad_of

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta with PyTorch's update rule::

        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta;  p -= lr * delta

    >>> opt = dg.optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        check_options("Adadelta", lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Adadelta: Invalid rho value: {rho}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        capturable=capturable, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        for p in params:
            d = p._data
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = {"step": 0, "square_avg": _buffer(d), "acc_delta": _buffer(d)}
            st["step"] += 1
            g = grad_of(p, group)
            v = st["square_avg"]._data
            u = st["acc_delta"]._data
            v *= rho
            tmp = np.asarray(np.multiply(g, g))  # an array also for a 0-d parameter
            tmp *= 1 - rho
            v += tmp
            std = np.add(v, eps, out=tmp)
            np.sqrt(std, out=std)
            delta = np.asarray(np.add(u, eps))
            np.sqrt(delta, out=delta)
            delta /= std
            delta *= g
            u *= rho
            sq = np.multiply(delta, delta, out=std)
            sq *= 1 - rho
            u += sq
            delta *= lr
            d -= delta
