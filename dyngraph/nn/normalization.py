"""Normalisation layers: LayerNorm, GroupNorm, BatchNorm1d/2d/3d, InstanceNorm, RMSNorm."""

from __future__ import annotations

import numpy as np

from .._core.graph import bump_version
from .._core.state import concrete
from . import functional as F
from ._factory import check_input, float_dtype, new_buffer, new_param
from .init import ones_, zeros_
from .module import Module

__all__ = ["LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "RMSNorm",
           "LocalResponseNorm"]



def _affine_parameters(module, shape, affine: bool, bias: bool, device, dtype) -> None:
    """Register ``weight`` (and ``bias``) of the given shape, or None when not affine."""
    module.register_parameter("weight", new_param(shape, device, dtype) if affine else None)
    module.register_parameter("bias", new_param(shape, device, dtype) if affine and bias else None)


def _reset_affine(module) -> None:
    """PyTorch's default: weight 1, bias 0."""
    if module.weight is not None:
        ones_(module.weight)
    if module.bias is not None:
        zeros_(module.bias)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dimensions, then scale and shift.

    >>> dg.nn.LayerNorm(4)(dg.randn(2, 4)).shape
    dyngraph.Size([2, 4])
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        check_input(input)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing dimensions."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = new_param(self.normalized_shape, device, dtype)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            ones_(self.weight)

    def forward(self, x):
        check_input(x)
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalise over groups of channels; ``num_channels`` must be divisible by ``num_groups``."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, (num_channels,), affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        check_input(input)
        if input.dim() < 2 or input.shape[1] != self.num_channels:
            raise RuntimeError(
                f"expected input of shape (N, {self.num_channels}, *), got {list(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _NormBase(Module):
    """Shared state of BatchNorm/InstanceNorm: affine parameters and running statistics."""

    _dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None, dtype=None,
                 *, bias: bool = True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = new_param((num_features,), device, dtype)
            if bias:
                self.bias = new_param((num_features,), device, dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            fd = float_dtype(dtype)
            self.register_buffer("running_mean", new_buffer(np.zeros(num_features, fd), device))
            self.register_buffer("running_var", new_buffer(np.ones(num_features, fd), device))
            self.register_buffer("num_batches_tracked",
                                 new_buffer(np.zeros((), np.int64), device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean._data[...] = 0
            self.running_var._data[...] = 1
            self.num_batches_tracked._data[...] = 0

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            ones_(self.weight)
            if self.bias is not None:
                zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        if input.dim() not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {input.dim()}D input of shape "
                             f"{list(input.shape)})")

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        # checkpoints from before num_batches_tracked existed: start counting at 0
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            state_dict[key] = np.zeros((), np.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input):
        check_input(input)
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise RuntimeError(  # PyTorch's class for this mistake
                f"expected {self.num_features} channels in dimension 1 (num_features), got "
                f"input of shape {list(input.shape)}")
        eaf = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            nbt = self.num_batches_tracked
            nbt._data[...] += 1
            bump_version(nbt)
            if self.momentum is None:  # cumulative moving average
                eaf = 1.0 / float(concrete(nbt, "BatchNorm(momentum=None): the step count"))
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(
            input, self.running_mean if use_running else None,
            self.running_var if use_running else None, self.weight, self.bias,
            bn_training, eaf, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)`` inputs."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)`` inputs."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``(N, C, D, H, W)`` inputs."""

    _dims = (5,)


class _InstanceNorm(_NormBase):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)

    def forward(self, input):
        check_input(input)
        self._check_input_dim(input)
        unbatched = input.dim() == self._dims[0]
        x = input.reshape(1, *input.shape) if unbatched else input
        use_stats = self.training or not self.track_running_stats
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            use_stats, 0.1 if self.momentum is None else self.momentum, self.eps)
        return y.reshape(*input.shape) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``(N, C, L)`` or ``(C, L)`` inputs."""

    _dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    _dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of 5-D (or unbatched 4-D) inputs."""

    _dims = (4, 5)


class LocalResponseNorm(Module):
    """Normalise each channel by its neighbours' energy."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
