"""Adam and AdamW (decoupled weight decay), with AMSGrad and maximize."""

from __future__ import annotations

import numpy as np

from ._foreach import adam_foreach
from .optimizer import Optimizer, _buffer, adam_moments_, check_options, grad_of

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam (Kingma & Ba) with PyTorch's update rule::

        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(max(v_max, v) if amsgrad else v) / sqrt(1 - beta2**t) + eps
        p -= lr / (1 - beta1**t) * m / denom

    ``weight_decay`` adds ``weight_decay * p`` to the gradient (L2), unless
    ``decoupled_weight_decay=True`` (AdamW), which scales ``p`` by
    ``1 - lr * weight_decay`` first.

    >>> opt = dg.optim.Adam(model.parameters(), lr=1e-3, amsgrad=True)
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False):
        check_options(type(self).__name__, lr=lr, eps=eps, weight_decay=weight_decay, betas=betas)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        if group.get("foreach") and len(params) > 1:
            return adam_foreach(self, group, params)
        lr = group["lr"]
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        wd = group["weight_decay"]
        amsgrad = group["amsgrad"]
        decoupled = group["decoupled_weight_decay"]
        state = self.state
        for p in params:
            d = p._data
            st = state.get(p)
            if st is None:
                st = state[p] = {"step": 0, "exp_avg": _buffer(d), "exp_avg_sq": _buffer(d)}
                if amsgrad:
                    st["max_exp_avg_sq"] = _buffer(d)
            g = grad_of(p, group)
            st["step"] = step = st["step"] + 1
            if wd != 0 and decoupled:
                d *= 1 - lr * wd
            m = st["exp_avg"]._data
            v = st["exp_avg_sq"]._data
            sq = adam_moments_(m, v, g, beta1, beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            step_size = lr / bias_correction1
            if amsgrad:
                vmax = st["max_exp_avg_sq"]._data
                np.maximum(vmax, v, out=vmax)
                denom = np.sqrt(vmax, out=sq)
            else:
                denom = np.sqrt(v, out=sq)
            denom /= bias_correction2_sqrt
            denom += eps
            upd = np.divide(m, denom, out=denom)
            upd *= step_size
            d -= upd


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam update.  Default ``weight_decay=1e-2`` as in PyTorch.

    >>> opt = dg.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    def _after_load(self) -> None:
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
