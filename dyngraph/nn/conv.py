"""Convolution layers: Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d.

Parameter names, shapes, defaults and default initialisation are PyTorch's:
``weight`` is ``(out_channels, in_channels/groups, *kernel_size)``
(transposed: ``(in_channels, out_channels/groups, *kernel_size)``), filled by
``kaiming_uniform_(a=sqrt(5))``; ``bias`` from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

>>> conv = dg.nn.Conv2d(3, 16, 3, padding=1)
>>> conv(dg.randn(8, 3, 32, 32)).shape
dyngraph.Size([8, 16, 32, 32])
"""

from __future__ import annotations

import math

from ..surface import conv as C
from ..surface.shape import pad as _pad
from ..tensor import Tensor
from . import init
from ._conv_common import check_spatial_input
from ._factory import new_param
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "Unfold", "Fold"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(v, n):
    if isinstance(v, (list, tuple)):
        return tuple(int(a) for a in v)
    return (int(v),) * n


class _ConvNd(Module):
    _nd = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", output_padding=0, device=None,
                 dtype=None):
        super().__init__()
        name = type(self).__name__
        nd = self._nd
        for arg, v in (("in_channels", in_channels), ("out_channels", out_channels)):
            if isinstance(v, bool) or not hasattr(type(v), "__index__") or v < 0:
                raise ValueError(f"{name}: {arg} must be a non-negative int, got {v!r}")
        for arg, v in (("kernel_size", kernel_size), ("stride", stride), ("dilation", dilation)):
            if any(a <= 0 for a in _ntuple(v, nd)):
                raise ValueError(f"{name}: {arg} must be positive, got {arg}={v!r}"
                                 + (" (PyTorch: kernel size should be greater than zero)"
                                    if arg == "kernel_size" else ""))
        if not isinstance(padding, str) and any(a < 0 for a in _ntuple(padding, nd)):
            raise ValueError(f"{name}: padding must be non-negative, got padding={padding!r}")
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"{name}: padding_mode must be one of {list(_PADDING_MODES)}, but got "
                f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, nd)
        self.stride = _ntuple(stride, nd)
        self.dilation = _ntuple(dilation, nd)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of ['valid', 'same']")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, nd)
        self.output_padding = _ntuple(output_padding, nd)
        self.groups = groups
        self.padding_mode = padding_mode
        self.transposed = self._transposed
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = new_param(shape, device, dtype)
        if bias:
            self.bias = new_param((out_channels,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _check(self, x: Tensor, w: Tensor) -> None:
        # w is the weight forward reads once: a parametrized weight is computed on each read
        check_spatial_input(self, x, self._nd, self.in_channels)
        if x._data.dtype != w._data.dtype:
            raise RuntimeError(
                f"{type(self).__name__}: input dtype {str(x.dtype).replace('dyngraph.', '')} does not "
                f"match the weight dtype {str(w.dtype).replace('dyngraph.', '')}; convert the input "
                "(x.to(dtype)) or the layer (layer.to(dtype))")

    def _explicit_pad(self, x: Tensor) -> Tensor:
        """Non-zero padding modes pad first (PyTorch's order: last dim first)."""
        nd = self._nd
        if isinstance(self.padding, str):
            if self.padding == "valid":
                return x
            pads = []
            for i in range(nd):
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                pads.append((total // 2, total - total // 2))
        else:
            pads = [(p, p) for p in self.padding]
        flat = []
        for lo, hi in reversed(pads):
            flat += [lo, hi]
        return _pad(x, tuple(flat), mode=self.padding_mode)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        nd = self._nd
        if self.padding != (0,) * nd:
            s += ", padding={padding}"
        if self.dilation != (1,) * nd:
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * nd:
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__, bias=self.bias)


class _Conv(_ConvNd):
    _fn = staticmethod(C.conv2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, 0, device, dtype)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias) -> Tensor:
        if self.padding_mode != "zeros":
            return C._conv_nd(type(self).__name__.lower(), self._nd, self._explicit_pad(input),
                              weight, bias, self.stride, 0, self.dilation, self.groups)
        return C._conv_nd(type(self).__name__.lower(), self._nd, input, weight, bias, self.stride,
                          self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        weight = self.weight
        self._check(input, weight)
        return self._conv_forward(input, weight, self.bias)


class Conv1d(_Conv):
    """1-d convolution over ``(N, C_in, L)`` inputs (PyTorch's ``nn.Conv1d``)."""

    _nd = 1


class Conv2d(_Conv):
    """2-d convolution over ``(N, C_in, H, W)`` inputs (PyTorch's ``nn.Conv2d``).

    >>> dg.nn.Conv2d(1, 4, 3)
    Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1))
    """

    _nd = 2


class Conv3d(_Conv):
    """3-d convolution over ``(N, C_in, D, H, W)`` inputs (PyTorch's ``nn.Conv3d``)."""

    _nd = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(
                f'Only "zeros" padding mode is supported for {type(self).__name__}, got {padding_mode!r}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, output_padding, device, dtype)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        weight = self.weight
        self._check(input, weight)
        return C._conv_transpose_nd(
            type(self).__name__.replace("ConvTranspose", "conv_transpose").lower(), self._nd, input,
            weight, self.bias, self.stride, self.padding,
            self.output_padding, self.groups, self.dilation, output_size)


class ConvTranspose1d(_ConvTranspose):
    """1-d transposed convolution (PyTorch's ``nn.ConvTranspose1d``)."""

    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    """2-d transposed convolution (PyTorch's ``nn.ConvTranspose2d``).

    >>> dg.nn.ConvTranspose2d(4, 2, 3, stride=2)(dg.randn(1, 4, 5, 5)).shape
    dyngraph.Size([1, 2, 11, 11])
    """

    _nd = 2


class Unfold(Module):
    """Extract sliding local blocks (im2col), PyTorch's ``nn.Unfold``."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return C.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return ("kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}").format(**self.__dict__)


class Fold(Module):
    """Combine sliding local blocks into an image, summing overlaps (col2im), ``nn.Fold``."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return C.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, "
                "padding={padding}, stride={stride}").format(**self.__dict__)
