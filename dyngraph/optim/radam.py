"""RAdam: Adam with a rectified (variance-corrected) adaptive learning rate."""

from __future__ import annotations

import math

import numpy as np

from .optimizer import Optimizer, _buffer, adam_moments_, check_options, grad_of

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam (Liu et al.) with PyTorch's update rule::

        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        if rho_t > 5:  p -= lr * m / (1 - beta1**t) * sqrt(1 - beta2**t) / (sqrt(v) + eps) * r_t
        else:          p -= lr * m / (1 - beta1**t)
        r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))

    ``weight_decay`` is L2 (added to the gradient) unless ``decoupled_weight_decay=True``,
    which scales ``p`` by ``1 - lr * weight_decay`` first (as AdamW does).

    >>> opt = dg.optim.RAdam(model.parameters(), lr=1e-3)
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check_options("RAdam", lr=lr, eps=eps, weight_decay=weight_decay, betas=betas)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        lr = group["lr"]
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        wd = group["weight_decay"]
        decoupled = group["decoupled_weight_decay"]
        rho_inf = 2 / (1 - beta2) - 1
        state = self.state
        for p in params:
            d = p._data
            st = state.get(p)
            if st is None:
                st = state[p] = {"step": 0, "exp_avg": _buffer(d), "exp_avg_sq": _buffer(d)}
            g = grad_of(p, group)  # L2 decay folded in unless decoupled
            st["step"] = step = st["step"] + 1
            if wd != 0 and decoupled:
                d *= 1 - lr * wd
            m = st["exp_avg"]._data
            v = st["exp_avg_sq"]._data
            sq = adam_moments_(m, v, g, beta1, beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            upd = m / bias_correction1
            upd *= lr
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if rho_t > 5.0:
                # variance is tractable: rectified adaptive step
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                denom = np.sqrt(v, out=sq)
                denom += eps
                adaptive = np.divide(math.sqrt(bias_correction2), denom, out=denom)
                upd *= adaptive
                upd *= rect
            d -= upd
