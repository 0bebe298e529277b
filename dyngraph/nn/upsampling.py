"""Upsample, UpsamplingNearest2d and UpsamplingBilinear2d (PyTorch's resize layers).

>>> dg.nn.Upsample(scale_factor=2, mode='bilinear')(dg.randn(1, 3, 4, 4)).shape
dyngraph.Size([1, 3, 8, 8])
"""

from __future__ import annotations

from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..surface.resampling import interpolate
from ..tensor import Tensor
from .functional_conv import pixel_shuffle, pixel_unshuffle
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle"]


class Upsample(Module):
    """Resize with ``nearest``, ``nearest-exact``, ``linear`` or ``bilinear`` interpolation.

    Give exactly one of ``size`` and ``scale_factor``.

    >>> dg.nn.Upsample(scale_factor=2)
    Upsample(scale_factor=2.0, mode='nearest')
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self.name}: expected a dyngraph Tensor, got {type(input).__name__}")
        if input._data.ndim not in (3, 4):
            raise RuntimeError(
                f"{self.name}: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got shape "
                f"{list(input.shape)}")
        if not _is_float_dtype(input._data.dtype):
            raise RuntimeError(
                f"{self.name}: expected a floating-point input, got dtype "
                f"{str(input.dtype).replace('dyngraph.', '')}; convert it with .float()")
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = "scale_factor=" + repr(self.scale_factor)
        else:
            info = "size=" + repr(self.size)
        return info + ", mode=" + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    """``Upsample(mode='nearest')`` for 4-D inputs."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(mode='bilinear', align_corners=True)`` for 4-D inputs."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """Rearrange (*, C * r^2, H, W) into (*, C, H * r, W * r) (sub-pixel convolution upsampling)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """The inverse of :class:`PixelShuffle`."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
