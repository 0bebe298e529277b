"""The PyTorch surface of resampling: ``interpolate`` (nearest / nearest-exact gathers,
linear / bilinear / bicubic as separable interpolation matrices).

The primitives are in :mod:`dyngraph.ops.resampling`.
"""

from __future__ import annotations

import math

import numpy as np

from ..ops.conv import (
    _size,
)
from ..ops.registry import bind
from ..ops.resampling import (
    upsample_nearest_p,
)
from ..tensor import Tensor
from ._args import as_tensor_arg
from .conv import (
    _check_float,
    _tuple,
)
from .linalg import matmul
from .pooling import _adaptive_avg_nd
from .shape import transpose


def _nearest_index(n_in, n_out, scale, exact):
    # PyTorch computes the source index in float32 (``floorf(dst * scale)``): do the same
    o = np.arange(n_out)
    s = np.float32((n_in / n_out) if scale is None else 1.0 / scale)
    if n_out == n_in and not exact:
        src = o
    elif exact:
        src = np.floor(((o + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(o.astype(np.float32) * s)
    return tuple(int(v) for v in np.minimum(src, n_in - 1).astype(np.int64))


def _linear_matrix(n_in, n_out, scale, align_corners, dtype):
    o = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = o * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        s = (n_in / n_out) if scale is None else 1.0 / scale
        src = np.maximum((o + 0.5) * s - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam1 = src - i0
    lam0 = 1.0 - lam1
    m = np.zeros((n_out, n_in), dtype=np.float64)
    rows = np.arange(n_out)
    np.add.at(m, (rows, i0), lam0)
    np.add.at(m, (rows, i1), lam1)
    return Tensor._make(m.astype(dtype), False, None, 0)


def _cubic_matrix(n_in, n_out, scale, align_corners, dtype):
    """PyTorch's bicubic weights (cubic convolution, A = -0.75, borders clamped) as a matrix."""
    a = -0.75
    o = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = o * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        s = (n_in / n_out) if scale is None else 1.0 / scale
        src = (o + 0.5) * s - 0.5          # no clamping at 0 for cubic, as in PyTorch
    i0 = np.floor(src).astype(np.int64)
    t = src - i0

    def near(x):   # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):    # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    coeffs = (far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t))
    m = np.zeros((n_out, n_in), dtype=np.float64)
    rows = np.arange(n_out)
    for k, c in enumerate(coeffs):
        np.add.at(m, (rows, np.clip(i0 - 1 + k, 0, n_in - 1)), c)
    return Tensor._make(m.astype(dtype), False, None, 0)


_MODES = {"nearest": 0, "nearest-exact": 0, "area": 0, "linear": 1, "bilinear": 2, "bicubic": 2,
          "trilinear": 3}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize ``(N, C, L)`` / ``(N, C, H, W)`` / ``(N, C, D, H, W)`` inputs; PyTorch's index
    and weight rules.

    Modes: ``'nearest'``, ``'nearest-exact'``, ``'area'`` (not 5-D), ``'linear'`` (3-D input),
    ``'bilinear'`` and ``'bicubic'`` (4-D input), ``'trilinear'`` (5-D input), with
    ``align_corners`` both ways.

    >>> dg.nn.functional.interpolate(dg.randn(1, 3, 4, 4), scale_factor=2, mode='bilinear').shape
    dyngraph.Size([1, 3, 8, 8])
    """
    op = "interpolate"
    input = as_tensor_arg(input, op)
    if mode not in _MODES:
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported; use one of {sorted(_MODES)}")
    nd = input._data.ndim - 2
    if nd not in (1, 2, 3):
        raise NotImplementedError(
            f"{op}: expected a 3-D (N, C, L), 4-D (N, C, H, W) or 5-D (N, C, D, H, W) input, got "
            f"shape {list(input.shape)}")
    if nd == 3 and mode == "area":
        raise NotImplementedError(f"{op}: mode 'area' is not supported for 5-D input "
                                  f"(shape {list(input.shape)}); there is no 3-D adaptive pooling")
    if _MODES[mode] and _MODES[mode] != nd:
        raise NotImplementedError(
            f"{op}: mode {mode!r} needs a {_MODES[mode] + 2}-D input, got a {nd + 2}-D input of "
            f"shape {list(input.shape)}")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError(
            f"{op}: align_corners option can only be set with the interpolating modes: linear | "
            "bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError(f"{op}: antialias=True is not supported")
    _check_float(op, input)
    sp = _size(input)[2:]
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size or scale_factor should be defined")
    if size is not None:
        out = _tuple(size, nd, "size", op)
        scales = (None,) * nd
    else:
        sf = scale_factor if isinstance(scale_factor, (list, tuple)) else (scale_factor,) * nd
        if len(sf) != nd:
            raise ValueError(f"{op}: scale_factor must have {nd} elements, got {scale_factor!r}")
        out = tuple(int(math.floor(float(sp[i]) * float(sf[i]))) for i in range(nd))
        scales = (None,) * nd if recompute_scale_factor else tuple(float(v) for v in sf)
    if any(o <= 0 for o in out):
        raise ValueError(f"{op}: output size {list(out)} must be positive (input {list(input.shape)})")
    if mode == "area":   # PyTorch: adaptive average pooling to the output size
        return _adaptive_avg_nd("interpolate", nd, input, out)
    if mode.startswith("nearest"):
        index = tuple(_nearest_index(sp[i], out[i], scales[i], mode == "nearest-exact") for i in range(nd))
        return bind(upsample_nearest_p, (input,), {"index": index})

    ac = bool(align_corners)
    dt = input._data.dtype
    make = _cubic_matrix if mode == "bicubic" else _linear_matrix
    y = matmul(input, transpose(make(sp[-1], out[-1], scales[-1], ac, dt), 0, 1))
    if nd >= 2:
        y = matmul(make(sp[-2], out[-2], scales[-2], ac, dt), y)
    if nd == 3:  # depth: bring it next to the end, weight it like the height, move it back
        y = transpose(matmul(make(sp[0], out[0], scales[0], ac, dt), transpose(y, 2, 3)), 2, 3)
    return y
