"""Identity, Linear and Bilinear layers."""

from __future__ import annotations

import math

from .. import dtypes as _dt
from ..ops.nn import linear_p
from ..ops.registry import bind
from ..tensor import Tensor
from . import functional as F
from . import init
from ._factory import new_param
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear", "LazyLinear"]


class Identity(Module):
    """Returns its input unchanged (arguments are accepted and ignored)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``.

    Default initialisation as PyTorch: weight and bias from U(-1/sqrt(in_features),
    1/sqrt(in_features)).

    >>> dg.nn.Linear(4, 3)(dg.randn(2, 4)).shape
    dyngraph.Size([2, 3])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        for arg, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not hasattr(type(v), "__index__") or v < 0:
                raise ValueError(f"Linear: {arg} must be a non-negative int, got {v!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = new_param((out_features, in_features), device, dtype)
        if bias:
            self.bias = new_param((out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        # Hot path (one call per layer per step): two dict reads, one identity test on the
        # dtypes and one shape test before the linear primitive; the messages are built only
        # when a check fails.
        p = self._parameters
        try:
            w = p["weight"]
            b = p["bias"]
        except KeyError:  # a reparameterised weight (nn.utils.weight_norm) is a plain attribute
            w = p["weight"] if "weight" in p else self.weight
            b = p["bias"] if "bias" in p else self.bias
        try:
            d = input._data
        except AttributeError:  # (free until raised) a list, an ndarray...: PyTorch's message
            raise TypeError(f"linear(): argument 'input' (position 1) must be Tensor, not "
                            f"{type(input).__name__}") from None
        wd = w._data
        if d.dtype is not wd.dtype or not d.ndim or d.shape[-1] != wd.shape[1]:
            self._check_input(d, wd)
        return bind(linear_p, (input, w) if b is None else (input, w, b))

    def _check_input(self, d, wd) -> None:
        if not d.ndim or d.shape[-1] != self.in_features:
            raise RuntimeError(
                f"expected input with last dimension {self.in_features} (in_features), got "
                f"shape {list(d.shape)}")
        if d.dtype != wd.dtype:
            raise RuntimeError(
                f"input dtype {_dt.from_numpy_dtype(d.dtype)} does not match the layer's weight "
                f"dtype {_dt.from_numpy_dtype(wd.dtype)}; convert the input (x.to(dtype)) or the "
                "model (model.to(dtype))")

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class LazyLinear(Module):
    """Not supported: dyngraph has no lazy (shape-inferring) modules."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "LazyLinear is not supported by dyngraph: use nn.Linear(in_features, out_features)")


class Bilinear(Module):
    """``y = x1^T A x2 + b`` with ``weight`` of shape ``(out, in1, in2)``."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = new_param((out_features, in1_features, in2_features), device, dtype)
        if bias:
            self.bias = new_param((out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
