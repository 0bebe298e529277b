"""Pooling layers: MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d, AdaptiveMaxPool1d/2d.

Arguments, defaults (``stride=None`` means ``kernel_size``) and reprs are PyTorch's.

>>> dg.nn.MaxPool2d(2)(dg.randn(1, 3, 8, 8)).shape
dyngraph.Size([1, 3, 4, 4])
"""

from __future__ import annotations

from ..surface import conv as C
from ..surface import pooling as P
from ..tensor import Tensor
from . import functional_conv as FC
from ._conv_common import check_spatial_input
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "MaxUnpool1d", "MaxUnpool2d",
           "LPPool1d", "LPPool2d"]


class _MaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return ("kernel_size={kernel_size}, stride={stride}, padding={padding}, "
                "dilation={dilation}, ceil_mode={ceil_mode}").format(**self.__dict__)

    def forward(self, input: Tensor):
        check_spatial_input(self, input, self._nd)
        return P._max_pool_nd(type(self).__name__.lower().replace("maxpool", "max_pool"), self._nd,
                              input, self.kernel_size, self.stride, self.padding, self.dilation,
                              self.ceil_mode, self.return_indices)


class MaxPool1d(_MaxPoolNd):
    """1-d max pooling (PyTorch's ``nn.MaxPool1d``)."""

    _nd = 1


class MaxPool2d(_MaxPoolNd):
    """2-d max pooling (PyTorch's ``nn.MaxPool2d``); ``return_indices`` for ``MaxUnpool``-style use.

    >>> dg.nn.MaxPool2d(2)
    MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    """

    _nd = 2


class AvgPool1d(Module):
    """1-d average pooling (PyTorch's ``nn.AvgPool1d``)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = C._tuple(kernel_size, 1, "kernel_size", "AvgPool1d")
        self.stride = C._tuple(stride if stride is not None else kernel_size, 1, "stride", "AvgPool1d")
        self.padding = C._tuple(padding, 1, "padding", "AvgPool1d")
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input: Tensor) -> Tensor:
        check_spatial_input(self, input, 1)
        return P.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(Module):
    """2-d average pooling (PyTorch's ``nn.AvgPool2d``), with ``divisor_override``.

    >>> dg.nn.AvgPool2d(2)
    AvgPool2d(kernel_size=2, stride=2, padding=0)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input: Tensor) -> Tensor:
        check_spatial_input(self, input, 2)
        return P.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _AdaptiveNd(Module):
    _nd = 2

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveNd):
    """Average pooling to a fixed output length (PyTorch's ``nn.AdaptiveAvgPool1d``)."""

    _nd = 1

    def forward(self, input: Tensor) -> Tensor:
        check_spatial_input(self, input, 1)
        return P.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptiveNd):
    """Average pooling to a fixed output size (PyTorch's ``nn.AdaptiveAvgPool2d``).

    >>> dg.nn.AdaptiveAvgPool2d((1, 1))(dg.randn(2, 8, 5, 7)).shape
    dyngraph.Size([2, 8, 1, 1])
    """

    def forward(self, input: Tensor) -> Tensor:
        check_spatial_input(self, input, 2)
        return P.adaptive_avg_pool2d(input, self.output_size)


class _AdaptiveMax(_AdaptiveNd):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__(output_size)
        self.return_indices = return_indices


class AdaptiveMaxPool1d(_AdaptiveMax):
    """Max pooling to a fixed output length (PyTorch's ``nn.AdaptiveMaxPool1d``)."""

    _nd = 1

    def forward(self, input: Tensor):
        check_spatial_input(self, input, 1)
        return P.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMax):
    """Max pooling to a fixed output size (PyTorch's ``nn.AdaptiveMaxPool2d``)."""

    def forward(self, input: Tensor):
        check_spatial_input(self, input, 2)
        return P.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class _MaxUnpoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        nd = self._nd
        name = type(self).__name__
        self.kernel_size = C._tuple(kernel_size, nd, "kernel_size", name)
        self.stride = C._tuple(stride if stride is not None else kernel_size, nd, "stride", name)
        self.padding = C._tuple(padding, nd, "padding", name)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        check_spatial_input(self, input, self._nd)
        return P._max_unpool_nd(type(self).__name__, self._nd, input, indices, self.kernel_size,
                                self.stride, self.padding, output_size)


class MaxUnpool1d(_MaxUnpoolNd):
    """Partial inverse of ``MaxPool1d`` (PyTorch's ``nn.MaxUnpool1d``)."""

    _nd = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """Partial inverse of ``MaxPool2d`` (PyTorch's ``nn.MaxUnpool2d``)."""

    _nd = 2


class _LPPoolNd(Module):
    _nd = 1

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")

    def forward(self, input: Tensor) -> Tensor:
        fn = FC.lp_pool1d if self._nd == 1 else FC.lp_pool2d
        return fn(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool1d(_LPPoolNd):
    """Power-average pooling over windows of length ``kernel_size`` (``F.lp_pool1d``)."""

    _nd = 1


class LPPool2d(_LPPoolNd):
    """Power-average pooling over 2-d windows (``F.lp_pool2d``)."""

    _nd = 2
