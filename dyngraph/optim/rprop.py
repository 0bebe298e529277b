"""Rprop: resilient backpropagation (sign-based steps with per-element adaptive sizes)."""

from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _buffer, check_options

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Rprop with PyTorch's update rule, per element::

        s = sign(g * g_prev)
        step_size *= etaplus if s > 0, etaminus if s < 0, 1 if s == 0;  clamp to step_sizes
        g = 0 where s < 0 (and the step is skipped there)
        p -= sign(g) * step_size;  g_prev = g

    The step sizes start at ``lr``.  There is no weight decay, as in PyTorch.

    >>> opt = dg.optim.Rprop(model.parameters(), lr=0.01, etas=(0.5, 1.2), step_sizes=(1e-6, 50))
    """

    def __init__(self, params, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False):
        check_options("Rprop", lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Rprop: Invalid eta values: {etas[0]}, {etas[1]} (need 0 < etaminus < 1 < etaplus)")
        defaults = dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        state = self.state
        for p in params:
            d = p._data
            g = p._grad._data
            if group["maximize"]:
                g = np.negative(g)
            st = state.get(p)
            if st is None:
                st = state[p] = {"step": 0, "prev": _buffer(d), "step_size": _buffer(d, group["lr"])}
            st["step"] += 1
            prev = st["prev"]._data
            size = st["step_size"]._data
            sign = np.sign(g * prev)
            factor = np.where(sign > 0, etaplus, np.where(sign < 0, etaminus, 1.0)).astype(d.dtype, copy=False)
            size *= factor
            np.clip(size, lo, hi, out=size)
            # after a sign change the gradient is forgotten: no step, and no sign memory
            g = np.where(sign < 0, 0, g).astype(d.dtype, copy=False)
            upd = np.sign(g)
            upd *= size
            d -= upd
            np.copyto(prev, g)
