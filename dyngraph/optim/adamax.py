"""Adamax (Adam with the infinity norm)."""

from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _buffer, check_options, grad_of, lerp_

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax with PyTorch's update rule::

        m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps)
        p -= lr / (1 - beta1**t) * m / u

    >>> opt = dg.optim.Adamax(model.parameters(), lr=2e-3)
    """

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        check_options("Adamax", lr=lr, eps=eps, weight_decay=weight_decay, betas=betas)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        for p in params:
            d = p._data
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = {"step": 0, "exp_avg": _buffer(d), "exp_inf": _buffer(d)}
            g = grad_of(p, group)
            st["step"] = step = st["step"] + 1
            m = st["exp_avg"]._data
            u = st["exp_inf"]._data
            lerp_(m, g, 1 - beta1)
            u *= beta2
            tmp = np.asarray(np.abs(g))  # an array also for a 0-d parameter
            tmp += eps
            np.maximum(u, tmp, out=u)
            clr = lr / (1 - beta1 ** step)
            upd = np.divide(m, u, out=tmp)
            upd *= clr
            d -= upd
