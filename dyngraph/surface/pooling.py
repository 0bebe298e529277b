"""The PyTorch surface of pooling: ``max_pool1d``/``2d`` (with indices), ``max_unpool``,
``avg_pool``, adaptive average and max pooling.

The primitives are in :mod:`dyngraph.ops.pooling`; the shared argument helpers
(``_tuple``, ``_batchify``...) are the convolution surface's.
"""

from __future__ import annotations

import numpy as np

from ..ops.conv import (
    _prod,
    _size,
)
from ..ops.pooling import (
    _adaptive_bounds,
    _pool_out,
    adaptive_max_pool_p,
    avg_pool_p,
    max_pool_p,
    pool_scatter_p,
)
from ..ops.registry import bind
from ..tensor import Tensor
from ._args import as_tensor_arg
from .conv import (
    _batchify,
    _check_float,
    _tuple,
    _unbatch,
)
from .linalg import matmul
from .shape import transpose

__all__ = [
    "max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
    "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
    "adaptive_max_pool2d",
]


def _max_pool_nd(op, nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    input = as_tensor_arg(input, op)
    _check_float(op, input)
    input, added = _batchify(op, input, nd)
    k = _tuple(kernel_size, nd, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _tuple(stride, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    d = _tuple(dilation, nd, "dilation", op)
    if any(v < 1 for v in k + s + d):
        raise RuntimeError(f"{op}: kernel_size, stride and dilation must be positive "
                           f"(kernel_size={k}, stride={s}, dilation={d})")
    for i in range(nd):
        if p[i] < 0 or p[i] > k[i] // 2:
            raise RuntimeError(
                f"{op}: pad should be at most half of effective kernel size, but got pad={p[i]}, "
                f"kernel_size={k[i]} and dilation={d[i]}")
    out = _pool_out(_size(input)[2:], k, s, p, d, ceil_mode)
    if any(o <= 0 for o in out):
        raise RuntimeError(
            f"{op}: given input size {list(input.shape)}, the calculated output size "
            f"{list(out)} is too small")
    vals, idx = bind(max_pool_p, (input,), {"kernel_size": k, "stride": s, "padding": p,
                                            "dilation": d, "ceil_mode": bool(ceil_mode)})
    vals, idx = _unbatch(vals, added), _unbatch(idx, added)
    return (vals, idx) if return_indices else vals


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling over ``(N, C, L)``; ``return_indices=True`` also returns the argmax positions."""
    return _max_pool_nd("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                        return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling over ``(N, C, H, W)``.

    >>> dg.max_pool2d(dg.randn(1, 1, 4, 4), 2).shape
    dyngraph.Size([1, 1, 2, 2])
    """
    return _max_pool_nd("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                        return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _max_unpool_nd(op, nd, input, indices, kernel_size, stride, padding, output_size):
    input = as_tensor_arg(input, op)
    indices = as_tensor_arg(indices, op)
    _check_float(op, input)
    if indices._data.dtype.kind not in "iu":
        raise RuntimeError(f"{op}: indices must be an integer tensor, got {indices.dtype}")
    if _size(indices) != _size(input):
        raise RuntimeError(
            f"{op}: Expected shape of indices to be same as that of the input tensor "
            f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    input, added = _batchify(op, input, nd)
    indices, _ = _batchify(op, indices, nd)
    k = _tuple(kernel_size, nd, "kernel_size", op)
    s = k if stride is None else _tuple(stride, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    sp = _size(input)[2:]
    default = tuple((sp[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(nd))
    if output_size is None:
        out = default
    else:
        out = tuple(int(v) for v in tuple(output_size)[-nd:])
        for i in range(nd):
            if not default[i] - s[i] < out[i] < default[i] + s[i]:
                raise ValueError(
                    f"{op}: invalid output_size {list(out)} (dim {i} must be between "
                    f"{default[i] - s[i] + 1} and {default[i] + s[i] - 1})")
    idx = indices._data
    if idx.size and (idx.min() < 0 or idx.max() >= _prod(out)):
        raise RuntimeError(
            f"{op}: Found an invalid max index: {int(idx.max())} (output volumes are of size "
            f"{'x'.join(map(str, out))})")
    y = bind(pool_scatter_p, (input, indices), {"in_size": out})
    return _unbatch(y, added)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of :func:`max_pool1d`: values go back to their argmax positions."""
    return _max_unpool_nd("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of :func:`max_pool2d` (zeros elsewhere).

    >>> v, i = dg.max_pool2d(dg.randn(1, 1, 4, 4), 2, return_indices=True)
    >>> dg.nn.functional.max_unpool2d(v, i, 2).shape
    dyngraph.Size([1, 1, 4, 4])
    """
    return _max_unpool_nd("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def _avg_pool_nd(op, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override):
    input = as_tensor_arg(input, op)
    _check_float(op, input)
    input, added = _batchify(op, input, nd)
    k = _tuple(kernel_size, nd, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _tuple(stride, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    if any(v < 1 for v in k + s):
        raise RuntimeError(f"{op}: kernel_size and stride must be positive (kernel_size={k}, stride={s})")
    for i in range(nd):
        if p[i] < 0 or p[i] > k[i] // 2:
            raise RuntimeError(
                f"{op}: pad should be at most half of kernel size, but got pad={p[i]} and "
                f"kernel_size={k[i]}")
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError(f"{op}: divisor must be not zero")
    out = _pool_out(_size(input)[2:], k, s, p, (1,) * nd, ceil_mode)
    if any(o <= 0 for o in out):
        raise RuntimeError(
            f"{op}: given input size {list(input.shape)}, the calculated output size "
            f"{list(out)} is too small")
    params = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": bool(ceil_mode),
              "count_include_pad": bool(count_include_pad),
              "divisor_override": None if divisor_override is None else int(divisor_override)}
    return _unbatch(bind(avg_pool_p, (input,), params), added)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling over ``(N, C, L)``."""
    return _avg_pool_nd("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pooling over ``(N, C, H, W)``.

    >>> dg.avg_pool2d(dg.ones(1, 1, 4, 4), 2)
    tensor([[[[1., 1.],
              [1., 1.]]]])
    """
    return _avg_pool_nd("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override)


def _adaptive_size(op, input, output_size, nd):
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != nd:
            raise ValueError(f"{op}: output_size must have {nd} elements, got {output_size!r}")
        sizes = tuple(input._data.shape[-nd + i] if v is None else int(v) for i, v in enumerate(output_size))
    else:
        sizes = (int(output_size),) * nd
    if any(v < 0 for v in sizes):
        raise ValueError(f"{op}: output_size must be non-negative, got {sizes}")
    for i in range(nd):
        if input._data.shape[-nd + i] == 0:
            raise RuntimeError(f"{op}: expected input with non-zero spatial sizes, got {list(input.shape)}")
    return sizes


def _pool_matrix(n_in, n_out, dtype):
    start, end = _adaptive_bounds(n_in, n_out)
    m = np.zeros((n_out, n_in), dtype=np.float64)
    for o in range(n_out):  # n_out is a small spatial size: this builds a constant matrix
        m[o, start[o]:end[o]] = 1.0 / (end[o] - start[o])
    return Tensor._make(m.astype(dtype), False, None, 0)


def _adaptive_avg_nd(op, nd, input, output_size):
    input = as_tensor_arg(input, op)
    _check_float(op, input)
    input, added = _batchify(op, input, nd)
    sizes = _adaptive_size(op, input, output_size, nd)
    sp = _size(input)[2:]
    if all(sp[i] % sizes[i] == 0 for i in range(nd)) and all(sizes):
        k = tuple(sp[i] // sizes[i] for i in range(nd))
        params = {"kernel_size": k, "stride": k, "padding": (0,) * nd, "ceil_mode": False,
                  "count_include_pad": True, "divisor_override": None}
        return _unbatch(bind(avg_pool_p, (input,), params), added)
    dt = input._data.dtype
    y = input
    # separable: pool the last dim with P_w^T, then (2-d) the height with P_h
    y = matmul(y, transpose(_pool_matrix(sp[-1], sizes[-1], dt), 0, 1))
    if nd == 2:
        y = matmul(_pool_matrix(sp[0], sizes[0], dt), y)
    return _unbatch(y, added)


def adaptive_avg_pool1d(input, output_size):
    """Average pooling to a fixed output length (windows as PyTorch computes them)."""
    return _adaptive_avg_nd("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed output size; ``None`` keeps that dimension.

    >>> dg.adaptive_avg_pool2d(dg.randn(2, 3, 7, 9), (1, 1)).shape
    dyngraph.Size([2, 3, 1, 1])
    """
    return _adaptive_avg_nd("adaptive_avg_pool2d", 2, input, output_size)


def _adaptive_max_nd(op, nd, input, output_size, return_indices):
    input = as_tensor_arg(input, op)
    _check_float(op, input)
    input, added = _batchify(op, input, nd)
    sizes = _adaptive_size(op, input, output_size, nd)
    vals, idx = bind(adaptive_max_pool_p, (input,), {"output_size": sizes})
    vals, idx = _unbatch(vals, added), _unbatch(idx, added)
    return (vals, idx) if return_indices else vals


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling to a fixed output length."""
    return _adaptive_max_nd("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed output size; ``return_indices=True`` also returns argmax positions."""
    return _adaptive_max_nd("adaptive_max_pool2d", 2, input, output_size, return_indices)
