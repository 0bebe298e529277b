"""``dg.nn.functional`` names for convolution, pooling and resampling (star-imported there).

>>> import dyngraph.nn.functional as F
>>> F.max_pool2d(dg.randn(1, 1, 4, 4), 2, return_indices=True)[1].shape
dyngraph.Size([1, 1, 2, 2])
"""

from __future__ import annotations

import warnings

from ..surface import elementwise as E
from ..surface.conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, fold, unfold
from ..surface.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
    max_unpool1d,
    max_unpool2d,
)
from ..surface.resampling import interpolate
from ..surface.shape import permute, reshape

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "max_pool1d",
    "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
    "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "unfold", "fold",
    "pixel_shuffle", "pixel_unshuffle", "max_unpool1d", "max_unpool2d", "lp_pool1d", "lp_pool2d",
]


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool2d(input, output_size, True)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (as in PyTorch)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input, upscale_factor: int):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r) (PyTorch's sub-pixel rearrangement)."""
    r = int(upscale_factor)
    shape = tuple(input.shape)
    if len(shape) < 3 or shape[-3] % (r * r):
        raise RuntimeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
            f"of upscale_factor, but input.size(-3)={shape[-3] if len(shape) >= 3 else None} is not "
            f"divisible by {r * r} (input shape {list(shape)})")
    lead, (c, h, w) = shape[:-3], shape[-3:]
    n = len(lead)
    x = reshape(input, lead + (c // (r * r), r, r, h, w))
    x = permute(x, *range(n), n, n + 3, n + 1, n + 4, n + 2)
    return reshape(x, lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor: int):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W): the inverse of :func:`pixel_shuffle`."""
    r = int(downscale_factor)
    shape = tuple(input.shape)
    if len(shape) < 3 or shape[-2] % r or shape[-1] % r:
        raise RuntimeError(
            f"pixel_unshuffle expects height and width to be divisible by downscale_factor={r}, "
            f"got input shape {list(shape)}")
    lead, (c, h, w) = shape[:-3], shape[-3:]
    n = len(lead)
    x = reshape(input, lead + (c, h // r, r, w // r, r))
    x = permute(x, *range(n), n, n + 2, n + 4, n + 1, n + 3)
    return reshape(x, lead + (c * r * r, h // r, w // r))


def _lp_pool(op, nd, input, norm_type, kernel_size, stride, ceil_mode):
    k = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * nd
    if len(k) != nd:
        raise ValueError(f"{op}: kernel_size must be an int or {nd} ints, got {kernel_size!r}")
    pool = avg_pool1d if nd == 1 else avg_pool2d
    avg = pool(input ** norm_type, tuple(k), stride, 0, ceil_mode)
    n = 1
    for v in k:
        n *= int(v)
    # PyTorch's form: sign(avg) * relu(|avg|) keeps odd powers of negative sums defined
    return (E.sign(avg) * E.relu(E.abs(avg)) * n) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
    """Power-average pooling: ``(sum over the window of x**p) ** (1/p)`` on (N, C, L) input.

    >>> F.lp_pool1d(dg.tensor([[[3., 4.]]]), 2, 2)
    tensor([[[5.]]])
    """
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
    """Power-average pooling over 2-d windows of an (N, C, H, W) input (see :func:`lp_pool1d`)."""
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)
