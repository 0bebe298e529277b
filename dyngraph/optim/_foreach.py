"""``foreach=True`` paths: update a whole parameter group with a few large array operations.

The group's state buffers live in one flat array per kind; each parameter's
state entry is a view into it (so ``state_dict()`` looks the same as without
foreach).  Per step, the gradients are gathered into one flat array (one copy),
the update is computed flat, and each parameter receives its slice.  This
trades one gather and one scatter per parameter for the ~10 elementwise calls
per parameter of the plain path: it pays off for many small parameters.
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .optimizer import grad_of


def _layout(params):
    sizes = [p._data.size for p in params]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return sizes, offsets


def _flat_state(opt, params, names, dtype, init_from=None):
    """Flat buffers for ``names``; per-parameter state entries become views into them."""
    sizes, offsets = _layout(params)
    states = [opt.state.get(p) for p in params]
    flats = {}
    for name in names:
        first = states[0].get(name) if states[0] else None
        if first is not None:
            base = first._data.base
            if (base is not None and base.ndim == 1 and base.size == offsets[-1]
                    and all(s is not None and s[name]._data.base is base for s in states)):
                flats[name] = base
                continue
        flat = np.zeros(offsets[-1], dtype=dtype)
        for i, (p, s) in enumerate(zip(params, states, strict=False)):
            view = flat[offsets[i]:offsets[i + 1]].reshape(p._data.shape)
            if s is not None and s.get(name) is not None:
                np.copyto(view, s[name]._data)
            elif init_from is not None and name == init_from[0]:
                np.copyto(view, init_from[1][i])
            if s is None:
                s = states[i] = opt.state[p] = {}
            s[name] = Tensor._make(view, False, None, 0)
        flats[name] = flat
    return flats, offsets, states


def _gather_grads(params, group):
    return np.concatenate([grad_of(p, group).ravel() for p in params])


def _scatter_sub(params, offsets, upd):
    for i, p in enumerate(params):
        d = p._data
        d -= upd[offsets[i]:offsets[i + 1]].reshape(d.shape)


def sgd_foreach(opt, group, params):
    lr, momentum, dampening, nesterov = group["lr"], group["momentum"], group["dampening"], group["nesterov"]
    g = _gather_grads(params, group)
    if momentum != 0:
        fresh = any(opt.state.get(p, {}).get("momentum_buffer") is None for p in params)
        if fresh and not all(opt.state.get(p, {}).get("momentum_buffer") is None for p in params):
            # Mixed history (some parameters had no gradient before): use the plain path.
            group = dict(group, foreach=False)
            return type(opt)._step_group(opt, group, params)
        flats, offsets, _ = _flat_state(opt, params, ["momentum_buffer"], g.dtype)
        buf = flats["momentum_buffer"]
        if fresh:
            np.copyto(buf, g)
        else:
            buf *= momentum
            buf += (1 - dampening) * g if dampening != 0 else g
        if nesterov:
            g += momentum * buf
        else:
            g = buf.copy()
    else:
        _, offsets = _layout(params)
    g *= lr
    _scatter_sub(params, offsets, g)


def adam_foreach(opt, group, params):
    steps = {opt.state[p]["step"] if p in opt.state else 0 for p in params}
    if len(steps) != 1:
        return type(opt)._step_group(opt, dict(group, foreach=False), params)
    lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
    beta1, beta2 = group["betas"]
    names = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group["amsgrad"] else [])
    g = _gather_grads(params, group)
    flats, offsets, states = _flat_state(opt, params, names, g.dtype)
    step = steps.pop() + 1
    for s in states:
        s["step"] = step
    if wd != 0 and group["decoupled_weight_decay"]:
        for p in params:
            p._data *= 1 - lr * wd
    m, v = flats["exp_avg"], flats["exp_avg_sq"]
    tmp = np.subtract(g, m)
    tmp *= 1 - beta1
    m += tmp
    v *= beta2
    np.multiply(g, g, out=tmp)
    tmp *= 1 - beta2
    v += tmp
    if group["amsgrad"]:
        vmax = flats["max_exp_avg_sq"]
        np.maximum(vmax, v, out=vmax)
        denom = np.sqrt(vmax, out=tmp)
    else:
        denom = np.sqrt(v, out=tmp)
    denom /= (1 - beta2 ** step) ** 0.5
    denom += eps
    upd = np.divide(m, denom, out=denom)
    upd *= lr / (1 - beta1 ** step)
    _scatter_sub(params, offsets, upd)
