"""Adam and AdamW (decoupled weight decay), with AMSGrad and maximize."""

from __future__ import annotations

import numpy as np

from ..ops._util import compiled_kernels
from ._foreach import adam_foreach
from .optimizer import Optimizer, _buffer, adam_moments_, check_options, grad_of

__all__ = ["Adam", "AdamW"]

# The fused update of dyngraph/_kernels.c (adam_step), or None: the NumPy lines stay the
# reference (the pure-Python pass, AMSGrad, other dtypes and layouts).
_K_ADAM = compiled_kernels("adam_step")
_FUSED_DT = (np.dtype(np.float32), np.dtype(np.float64))
_NUMBERS = (float, int)


def _fusable(d, g, m, v, lr, beta1, beta2, eps) -> bool:
    """The compiled step applies: plain-number hyperparameters, one float dtype, C-contiguous
    arrays of one shape (separate memory is the kernel's own test)."""
    return (type(lr) in _NUMBERS and type(beta1) in _NUMBERS and type(beta2) in _NUMBERS
            and type(eps) in _NUMBERS and type(d) is np.ndarray and type(g) is np.ndarray
            and d.dtype in _FUSED_DT and g.dtype == d.dtype and m.dtype == d.dtype
            and v.dtype == d.dtype and g.shape == d.shape and m.shape == d.shape
            and d.flags.c_contiguous and g.flags.c_contiguous and m.flags.c_contiguous
            and v.flags.c_contiguous)


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
            bias_correction1 = 1 - beta1 ** step
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            step_size = lr / bias_correction1
            if not amsgrad and _K_ADAM is not None and _fusable(d, g, m, v, lr, beta1, beta2, eps):
                # one compiled pass over p, g, m, v with the same roundings as the NumPy lines
                # below (twelve passes and two temporaries)
                try:
                    _K_ADAM.adam_step(d, g, m, v, 1 - beta1, beta2, 1 - beta2,
                                      bias_correction2_sqrt, eps, step_size)
                    continue
                except ValueError:   # g shares memory with p, m or v: the NumPy lines
                    pass
            sq = adam_moments_(m, v, g, beta1, beta2)
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
