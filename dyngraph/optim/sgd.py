"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

import numpy as np

from ..ops._util import compiled_kernels
from ._foreach import sgd_foreach
from .optimizer import Optimizer, _buffer, check_options, grad_of

__all__ = ["SGD"]

# The fused momentum update of dyngraph/_kernels.c, or None (not built, built before it, or
# DYNGRAPH_PURE_PYTHON: the NumPy lines in _step_group are the reference).
_K_SGD = compiled_kernels("sgd_momentum")
_FUSED_DT = (np.dtype(np.float32), np.dtype(np.float64))


def _fusable(d, g, buf, lr, momentum) -> bool:
    """The compiled momentum update applies: one float dtype, C-contiguous, plain-number
    hyperparameters.  Separate memory is the kernel's own test (it raises ValueError before
    writing anything; the caller then takes the NumPy lines): two ``np.may_share_memory``
    calls here were 3 of this function's 3.7 us per parameter."""
    return (type(lr) in (float, int) and type(momentum) in (float, int) and type(g) is np.ndarray
            and type(d) is np.ndarray
            and d.dtype in _FUSED_DT and g.dtype == d.dtype and buf.dtype == d.dtype
            and d.flags.c_contiguous and g.flags.c_contiguous and buf.flags.c_contiguous
            and g.shape == d.shape)


# The plain step p -= lr * g of dyngraph/_kernels.c (sgd_step), or None as above.
_K_STEP = _K_SGD if _K_SGD is not None and hasattr(_K_SGD, "sgd_step") else None


def _step_fusable(d, g, lr) -> bool:
    """The compiled plain step applies: one float dtype, C-contiguous, separate memory, a
    plain-number learning rate."""
    return (type(lr) in (float, int) and type(g) is np.ndarray and type(d) is np.ndarray
            and d.dtype in _FUSED_DT and g.dtype == d.dtype and d.flags.c_contiguous
            and g.flags.c_contiguous and g.shape == d.shape and not np.may_share_memory(g, d))


class SGD(Optimizer):
    """SGD with PyTorch's update rule::

        g = grad (+ weight_decay * p) (negated when maximize)
        buf = g at the first step, else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf      (when momentum != 0)
        p -= lr * g

    >>> opt = dg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    ``foreach=True`` updates a group through one flat array (fewer, larger NumPy
    calls: useful with many small parameters).
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None):
        check_options("SGD", lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening "
                             f"(got momentum={momentum}, dampening={dampening})")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _step_group(self, group, params):
        if group.get("foreach") and len(params) > 1:
            return sgd_foreach(self, group, params)
        lr = group["lr"]
        momentum = group["momentum"]
        dampening = group["dampening"]
        nesterov = group["nesterov"]
        state = self.state
        for p in params:
            d = p._data
            g = grad_of(p, group)
            if momentum != 0:
                st = state.get(p)
                if st is None:
                    st = state[p] = {}
                buf_t = st.get("momentum_buffer")
                if buf_t is None:
                    st["momentum_buffer"] = buf_t = _buffer(d)
                    np.copyto(buf_t._data, g)
                    buf = buf_t._data
                else:
                    buf = buf_t._data
                    if _K_SGD is not None and dampening == 0 and not nesterov and _fusable(d, g, buf, lr, momentum):
                        # one compiled pass over p, g and buf with the same roundings as the
                        # lines below (four NumPy passes and a temporary): ~3x faster
                        try:
                            _K_SGD.sgd_momentum(d, g, buf, lr, momentum)
                            continue
                        except ValueError:   # g shares memory with p or buf: the NumPy lines
                            pass
                    buf *= momentum
                    if dampening != 0:
                        buf += (1 - dampening) * g
                    else:
                        buf += g
                if nesterov:
                    upd = g + momentum * buf
                    upd *= lr
                    d -= upd
                else:
                    d -= lr * buf
            else:
                if g is p._grad._data:
                    if _K_STEP is not None and _step_fusable(d, g, lr):
                        # one compiled pass with the line below's roundings (same bits): no
                        # temporary `lr * g` (a fresh multi-MB array per large parameter)
                        _K_STEP.sgd_step(d, g, lr)
                    else:
                        d -= lr * g
                else:
                    g *= lr
                    d -= g
