"""Pooling primitives (1-d and 2-d, PyTorch semantics).

``max_pool`` returns values and PyTorch's flat indices, with a scatter/gather pair
(``pool_scatter``, ``pool_gather``) for its gradient; ``avg_pool`` has its adjoint
``avg_pool_adjoint``; ``adaptive_max_pool`` gathers per output window.  They share the
strided-window helpers of :mod:`dyngraph.ops.conv`.
"""

from __future__ import annotations

import itertools

import numpy as np

from ._util import compiled_kernels
from .conv import (
    _pad,
    _prod,
    _windows,
)
from .registry import primitive

# The compiled tiled pooling (dyngraph/_kernels.c: one pass per window in PyTorch's scan
# order, and the gradient's scatter), or None: the NumPy code below stays the reference.
# float32 (64, 32, 28, 28), MaxPool2d(2): forward ~8 ms in NumPy, backward ~3 ms.
_K_POOL = compiled_kernels("max_pool_tiled", "pool_scatter_tiled")
_POOL_DT = (np.dtype(np.float32), np.dtype(np.float64))


def _pool_out(size, k, s, p, d, ceil_mode):
    out = []
    for i in range(len(size)):
        num = size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1
        o = (-(-num // s[i]) if ceil_mode else num // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= size[i] + p[i]:
            o -= 1
        out.append(o)
    return tuple(out)


def _flat_index(out, kernel, stride, padding, dilation, in_size):
    """Flat input index (into prod(in_size)) for every (out..., kernel-offset) pair."""
    nd = len(out)
    idx = 0
    for i in range(nd):
        shape_o = [1] * (2 * nd)
        shape_o[i] = out[i]
        shape_k = [1] * (2 * nd)
        shape_k[nd + i] = kernel[i]
        pos = (np.arange(out[i]) * stride[i] - padding[i]).reshape(shape_o) + \
            (np.arange(kernel[i]) * dilation[i]).reshape(shape_k)
        idx = idx * in_size[i] + pos
    return np.broadcast_to(idx, tuple(out) + tuple(kernel)).reshape(tuple(out) + (-1,))


def _pool_name(kind: str, key: str):
    """PyTorch's pooling node names carry the number of spatial dims; its 1-d pooling runs
    as 2-d pooling on an unsqueezed input, so the node it returns is the final squeeze."""
    def name(params) -> str:
        n = len(params[key])
        return "SqueezeBackward1" if n == 1 else f"{kind}{n}D{'WithIndices' if kind == 'MaxPool' else ''}Backward0"
    return name


@primitive("max_pool", n_outputs=2, save_output=True, meta=True,
           torch_name=_pool_name("MaxPool", "kernel_size"))
def max_pool_p(x, kernel_size=(1,), stride=(1,), padding=(0,), dilation=(1,), ceil_mode=False):
    """Max pooling returning (values, flat indices into each input plane) like PyTorch."""
    nd = len(kernel_size)
    sp = x.shape[2:]
    out = _pool_out(sp, kernel_size, stride, padding, dilation, ceil_mode)
    if _tiled(nd, kernel_size, stride, padding, dilation, sp, out) and x.dtype.kind == "f":
        res = _max_pool_tiled(x, kernel_size, out)
        if res is not None:
            return res
    need = tuple((out[i] - 1) * stride[i] + dilation[i] * (kernel_size[i] - 1) + 1 for i in range(nd))
    extra = tuple(max(0, need[i] - (sp[i] + 2 * padding[i])) for i in range(nd))
    xp = _pad(x, tuple((p, p) for p in padding), -np.inf, extra)
    win = _windows(xp, kernel_size, stride, dilation, out, kernel_first=False)
    win = win.reshape(x.shape[:2] + tuple(out) + (-1,))
    arg = win.argmax(axis=-1)[..., None]
    vals = np.take_along_axis(win, arg, axis=-1)[..., 0]
    flat = _flat_index(out, kernel_size, stride, padding, dilation, sp)
    idx = np.take_along_axis(np.broadcast_to(flat, win.shape), arg, axis=-1)[..., 0]
    return vals, idx.astype(np.int64)


def _tiled(nd, kernel, stride, padding, dilation, size, out) -> bool:
    """2-d pooling whose windows tile the input (stride == kernel, no padding or dilation)."""
    return (nd == 2 and tuple(stride) == tuple(kernel) and not any(padding)
            and all(d == 1 for d in dilation)
            and all(out[i] * kernel[i] <= size[i] for i in range(2)))


def _max_pool_tiled(x, kernel, out):
    """Fast path of max pooling for tiling windows.

    The windows are laid out as ``kh*kw`` contiguous planes (one copy of the input),
    then reduced with ``kh*kw - 1`` vectorised comparisons: the first maximum wins,
    as in PyTorch's scan order.  Windows holding NaN go the general way (PyTorch
    returns the NaN and its index)."""
    kh, kw = kernel
    ho, wo = out
    n, c, _, w = x.shape
    if _K_POOL is not None and x.dtype in _POOL_DT and x.flags.c_contiguous:
        vals = np.empty((n, c, ho, wo), x.dtype)
        idx = np.empty((n, c, ho, wo), np.int64)
        if _K_POOL.max_pool_tiled(x, kh, kw, vals, idx):
            return vals, idx
        if np.isnan(x).any():
            return None     # NaN windows: the general path (as below)
    t = x[:, :, :ho * kh, :wo * kw].reshape(n, c, ho, kh, wo, kw)
    planes = np.ascontiguousarray(t.transpose(3, 5, 0, 1, 2, 4)).reshape(kh * kw, -1)
    best = planes[0].copy()
    arg = np.zeros(best.shape, np.int8)
    for j in range(1, kh * kw):
        v = planes[j]
        np.copyto(arg, j, where=v > best)
        np.maximum(best, v, out=best)
    if np.isnan(best).any():
        return None
    # flat plane index = window origin + offset of the winning element (a table look-up:
    # integer division over the whole output would cost more than the pooling itself)
    offsets = np.array([(j // kw) * w + j % kw for j in range(kh * kw)], np.int64)
    # (take on the flat array: NumPy's multi-dimensional take is ~8x slower)
    idx = _window_origins(ho, wo, kh, kw, w) + offsets.take(arg).reshape(n, c, ho, wo)
    return best.reshape(n, c, ho, wo), idx


def _window_origins(ho, wo, kh, kw, w):
    return (np.arange(ho, dtype=np.int64).reshape(ho, 1) * (kh * w)
            + np.arange(wo, dtype=np.int64).reshape(1, wo) * kw)


@primitive("pool_scatter", save_inputs=True, nondiff_argnums=(1,))
def pool_scatter_p(g, idx, in_size=(1,), window=None):
    """Adjoint of ``pool_gather``: add g[..., j] into plane position idx[..., j] (zeros elsewhere).

    ``window=(kh, kw)`` says the indices come from tiling 2-d windows (each input position
    in at most one window), which allows a scatter without ``bincount``."""
    if window is not None:
        return _scatter_tiled(g, idx, in_size, window)
    n, c = g.shape[:2]
    m = _prod(in_size)
    rows = n * c
    if rows == 0 or g.size == 0:
        return np.zeros((n, c) + tuple(in_size), dtype=g.dtype)
    base = (np.arange(rows, dtype=np.int64) * m).reshape((n, c) + (1,) * (idx.ndim - 2))
    flat = np.bincount((idx + base).ravel(), weights=g.ravel(), minlength=rows * m)
    return flat.astype(g.dtype, copy=False).reshape((n, c) + tuple(in_size))


def _scatter_tiled(g, idx, in_size, window):
    """Tiling windows never share an input position, so the scatter is a plain fancy-index
    assignment (no accumulation needed; ~2.5x faster than ``bincount``)."""
    n, c = g.shape[:2]
    m = _prod(in_size)
    if _K_POOL is not None and g.ndim == 4 and g.dtype in _POOL_DT and g.flags.c_contiguous \
            and idx.dtype == np.int64 and idx.flags.c_contiguous and len(in_size) == 2:
        out = np.zeros((n, c) + tuple(in_size), dtype=g.dtype)
        if _K_POOL.pool_scatter_tiled(g, idx, out):
            return out
    out = np.zeros(n * c * m, dtype=g.dtype)
    base = (np.arange(n * c, dtype=np.int64) * m).reshape((n, c) + (1,) * (idx.ndim - 2))
    out[(idx + base).ravel()] = g.ravel()
    return out.reshape((n, c) + tuple(in_size))


@primitive("pool_gather", save_inputs=True, nondiff_argnums=(1,))
def pool_gather_p(x, idx):
    """x[n, c].flat[idx[n, c, ...]]: values at PyTorch-style pooling indices."""
    n, c = x.shape[:2]
    flat = x.reshape(n, c, -1)
    return np.take_along_axis(flat, idx.reshape(n, c, -1), axis=-1).reshape(idx.shape)


def _max_pool_vjp(g, out, x, kernel_size, stride, padding, dilation, ceil_mode):
    in_size = tuple(x.shape[2:])
    nd = len(kernel_size)
    outsz = tuple(out[1].shape[2:])
    if _tiled(nd, kernel_size, stride, padding, dilation, in_size, outsz):
        return pool_scatter_p(g[0], out[1], in_size=in_size, window=tuple(kernel_size))
    return pool_scatter_p(g[0], out[1], in_size=in_size)


max_pool_p.defvjp(_max_pool_vjp)


pool_scatter_p.defvjp(lambda g, out, gy, idx, in_size, window=None: pool_gather_p(g, idx), None)


pool_gather_p.defvjp(lambda g, out, x, idx: pool_scatter_p(g, idx, in_size=tuple(x.shape[2:])), None)


def _avg_divisor(in_size, out, k, s, p, count_include_pad, divisor_override, dtype):
    if divisor_override:
        return np.asarray(float(divisor_override), dtype=dtype)
    div = np.ones((), dtype=np.float64)
    for i in range(len(out)):
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], in_size[i] + p[i])
        if count_include_pad:
            size = end - start
        else:
            size = np.minimum(end, in_size[i]) - np.maximum(start, 0)
        div = np.multiply.outer(div, size.astype(np.float64))
    return div.astype(dtype)


def _avg_geometry(in_size, k, s, p, ceil_mode):
    nd = len(k)
    out = _pool_out(in_size, k, s, p, (1,) * nd, ceil_mode)
    need = tuple((out[i] - 1) * s[i] + k[i] for i in range(nd))
    full = tuple(max(in_size[i] + 2 * p[i], need[i]) for i in range(nd))
    return out, full


def _kernel_slices(k, s, out):
    for off in itertools.product(*(range(kd) for kd in k)):
        yield tuple(slice(o, o + s[i] * (out[i] - 1) + 1, s[i]) for i, o in enumerate(off))


@primitive("avg_pool", meta=True,
           torch_name=_pool_name("AvgPool", "kernel_size"))
def avg_pool_p(x, kernel_size=(1,), stride=(1,), padding=(0,), ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Average pooling (PyTorch's divisor rules for padding and ceil_mode)."""
    sp = x.shape[2:]
    out, full = _avg_geometry(sp, kernel_size, stride, padding, ceil_mode)
    xp = _pad(x, tuple((q, q) for q in padding), 0.0,
              tuple(full[i] - sp[i] - 2 * padding[i] for i in range(len(sp))))
    acc = np.zeros(x.shape[:2] + out, dtype=x.dtype)
    for sl in _kernel_slices(kernel_size, stride, out):
        acc += xp[(slice(None), slice(None)) + sl]
    acc /= _avg_divisor(sp, out, kernel_size, stride, padding, count_include_pad, divisor_override,
                        x.dtype)
    return acc


@primitive("avg_pool_adjoint", meta=True)
def avg_pool_adjoint_p(g, kernel_size=(1,), stride=(1,), padding=(0,), ceil_mode=False,
                       count_include_pad=True, divisor_override=None, in_size=(1,)):
    """The transpose of ``avg_pool`` (spreads each output gradient over its window)."""
    out, full = _avg_geometry(in_size, kernel_size, stride, padding, ceil_mode)
    gd = g / _avg_divisor(in_size, out, kernel_size, stride, padding, count_include_pad,
                          divisor_override, g.dtype)
    buf = np.zeros(g.shape[:2] + full, dtype=g.dtype)
    for sl in _kernel_slices(kernel_size, stride, out):
        buf[(slice(None), slice(None)) + sl] += gd
    crop = tuple(slice(padding[i], padding[i] + in_size[i]) for i in range(len(in_size)))
    return np.ascontiguousarray(buf[(slice(None), slice(None)) + crop])


avg_pool_p.defvjp(lambda g, out, x, **kw: avg_pool_adjoint_p(g, in_size=tuple(x.shape[2:]), **kw))


avg_pool_adjoint_p.defvjp(
    lambda g, out, gy, in_size, **kw: avg_pool_p(g, **kw))


def _adaptive_bounds(n_in, n_out):
    o = np.arange(n_out)
    start = (o * n_in) // n_out
    end = -((-(o + 1) * n_in) // n_out)
    return start, end


@primitive("adaptive_max_pool", n_outputs=2, save_output=True, meta=True,
           torch_name=_pool_name("AdaptiveMaxPool", "output_size"))
def adaptive_max_pool_p(x, output_size=(1,)):
    """Max over PyTorch's adaptive windows; returns (values, flat plane indices)."""
    nd = len(output_size)
    sp = x.shape[2:]
    idx_dims = []
    for i in range(nd):
        start, end = _adaptive_bounds(sp[i], output_size[i])
        kmax = int((end - start).max()) if output_size[i] else 1
        # repeat the last valid position where a window is shorter: it cannot change the max
        pos = np.minimum(start[:, None] + np.arange(kmax), (end - 1)[:, None])
        idx_dims.append(pos)
    # flat index per (out..., kernel...) pair
    flat = 0
    for i in range(nd):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = idx_dims[i].shape
        flat = flat * sp[i] + idx_dims[i].reshape(shape)
    oshape = tuple(output_size)
    kshape = tuple(p.shape[1] for p in idx_dims)
    flat = np.broadcast_to(flat, oshape + kshape).reshape(oshape + (-1,))
    planes = x.reshape(x.shape[:2] + (-1,))
    win = planes[:, :, flat]  # (N, C, *out, kk)
    arg = win.argmax(axis=-1)[..., None]
    vals = np.take_along_axis(win, arg, axis=-1)[..., 0]
    idx = np.take_along_axis(np.broadcast_to(flat, win.shape), arg, axis=-1)[..., 0]
    return vals, idx.astype(np.int64)


adaptive_max_pool_p.defvjp(
    lambda g, out, x, output_size: pool_scatter_p(g[0], out[1], in_size=tuple(x.shape[2:])))


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_pooling():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)
    from .registry import REGISTRY as R  # noqa: PLC0415  (as above)

    R["max_pool"].defbatch(b.merge_leading(lambda prim, params, args: len(params["kernel_size"])))
    R["avg_pool"].defbatch(b.merge_leading(lambda prim, params, args: len(params["kernel_size"])))
    R["adaptive_max_pool"].defbatch(
        b.merge_leading(lambda prim, params, args: len(params["output_size"])))
    for name in ("pool_scatter", "pool_gather", "avg_pool_adjoint"):
        R[name].defbatch(fallback=b.BACKWARD_ONLY)


_defbatch_pooling()
