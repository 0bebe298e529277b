"""Adagrad (Duchi et al.), with learning-rate decay and weight decay."""

from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _buffer, check_options, grad_of

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad with PyTorch's update rule::

        clr = lr / (1 + (t - 1) * lr_decay);  s += g * g;  p -= clr * g / (sqrt(s) + eps)

    State is created for every parameter at construction (``sum`` starts at
    ``initial_accumulator_value``), as in PyTorch.

    >>> opt = dg.optim.Adagrad(model.parameters(), lr=1e-2, lr_decay=1e-4)
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10,
                 foreach: bool | None = None, *, maximize: bool = False, differentiable: bool = False,
                 fused: bool | None = None):
        check_options("Adagrad", lr=lr, eps=eps, weight_decay=weight_decay)
        if not lr_decay >= 0.0:
            raise ValueError(f"Adagrad: Invalid lr_decay value: {lr_decay}")
        if not initial_accumulator_value >= 0.0:
            raise ValueError(f"Adagrad: Invalid initial_accumulator_value value: {initial_accumulator_value}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": 0,
                                 "sum": _buffer(p._data, group["initial_accumulator_value"])}

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        if hasattr(self, "state"):
            group = self.param_groups[-1]
            for p in group["params"]:
                self.state.setdefault(p, {"step": 0,
                                          "sum": _buffer(p._data, group["initial_accumulator_value"])})

    def _step_group(self, group, params):
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        for p in params:
            st = self.state[p]
            st["step"] = step = st["step"] + 1
            g = grad_of(p, group)
            clr = lr / (1 + (step - 1) * lr_decay)
            s = st["sum"]._data
            s += np.multiply(g, g)
            std = np.asarray(np.sqrt(s))  # an array also for a 0-d parameter
            std += eps
            upd = np.divide(g, std, out=std)
            upd *= clr
            p._data -= upd
