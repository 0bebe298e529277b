"""RMSprop (Hinton), with centering, momentum and weight decay."""

from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _buffer, check_options, grad_of, lerp_

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop with PyTorch's update rule::

        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - ga * ga) if centered (ga = lerp(ga, g, 1 - alpha)) else sqrt(v);  avg += eps
        buf = momentum * buf + g / avg;  p -= lr * buf      (momentum > 0)
        p -= lr * g / avg                                    (otherwise)

    >>> opt = dg.optim.RMSprop(model.parameters(), lr=1e-2, centered=True, momentum=0.9)
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        check_options("RMSprop", lr=lr, eps=eps, weight_decay=weight_decay, momentum=momentum)
        if not alpha >= 0.0:
            raise ValueError(f"RMSprop: Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        momentum, centered = group["momentum"], group["centered"]
        for p in params:
            d = p._data
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = {"step": 0, "square_avg": _buffer(d)}
                if momentum > 0:
                    st["momentum_buffer"] = _buffer(d)
                if centered:
                    st["grad_avg"] = _buffer(d)
            g = grad_of(p, group)
            st["step"] += 1
            v = st["square_avg"]._data
            v *= alpha
            tmp = np.asarray(np.multiply(g, g))  # an array also for a 0-d parameter
            tmp *= 1 - alpha
            v += tmp
            if centered:
                ga = st["grad_avg"]._data
                lerp_(ga, g, 1 - alpha)
                avg = np.multiply(ga, ga, out=tmp)
                np.subtract(v, avg, out=avg)
                np.sqrt(avg, out=avg)
            else:
                avg = np.sqrt(v, out=tmp)
            avg += eps
            if momentum > 0:
                buf = st["momentum_buffer"]._data
                buf *= momentum
                buf += np.divide(g, avg, out=avg)
                d -= lr * buf
            else:
                upd = np.divide(g, avg, out=avg)
                upd *= lr
                d -= upd
