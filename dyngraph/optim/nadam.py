"""NAdam (Adam with Nesterov momentum, Dozat), with momentum decay."""

from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _buffer, adam_moments_, check_options, grad_of

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam with PyTorch's update rule::

        mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay));  prod *= mu_t
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2**t)) + eps
        p -= lr * (1 - mu_t) / (1 - prod) * g / denom
        p -= lr * mu_{t+1} / (1 - prod * mu_{t+1}) * m / denom

    ``mu_product`` is kept as a Python float (float64).

    >>> opt = dg.optim.NAdam(model.parameters(), lr=2e-3, momentum_decay=4e-3)
    """

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        check_options("NAdam", lr=lr, eps=eps, weight_decay=weight_decay, betas=betas)
        if not momentum_decay >= 0.0:
            raise ValueError(f"NAdam: Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        foreach=foreach, maximize=maximize, capturable=capturable,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        momentum_decay = group["momentum_decay"]
        decoupled = group["decoupled_weight_decay"]
        for p in params:
            d = p._data
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = {"step": 0, "mu_product": 1.0, "exp_avg": _buffer(d),
                                      "exp_avg_sq": _buffer(d)}
            g = grad_of(p, group)
            st["step"] = step = st["step"] + 1
            bias_correction2 = 1 - beta2 ** step
            if wd != 0 and decoupled:
                d *= 1 - lr * wd
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            st["mu_product"] = mu_product = st["mu_product"] * mu
            m = st["exp_avg"]._data
            v = st["exp_avg_sq"]._data
            tmp = adam_moments_(m, v, g, beta1, beta2)
            denom = np.divide(v, bias_correction2, out=tmp)
            np.sqrt(denom, out=denom)
            denom += eps
            mu_product_next = mu_product * mu_next
            upd = np.asarray(np.divide(g, denom))  # an array also for a 0-d parameter
            upd *= -lr * (1.0 - mu) / (1.0 - mu_product)
            d += upd
            upd = np.divide(m, denom, out=upd)
            upd *= (-lr * mu_next) / (1.0 - mu_product_next)
            d += upd
