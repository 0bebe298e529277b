"""``dg.nn.functional`` names for convolution, pooling and resampling (star-imported there).

>>> import dyngraph.nn.functional as F
>>> F.max_pool2d(dg.randn(1, 1, 4, 4), 2, return_indices=True)[1].shape
dyngraph.Size([1, 1, 2, 2])
"""

from __future__ import annotations

import warnings

from ..ops.conv import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    interpolate,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
)

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "max_pool1d",
    "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
    "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "interpolate", "upsample", "upsample_nearest", "upsample_bilinear",
]


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):  # noqa: A002
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):  # noqa: A002
    return adaptive_max_pool2d(input, output_size, True)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    """Deprecated alias of :func:`interpolate` (as in PyTorch)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
