"""``dg.nn.init``: in-place parameter initialisation with PyTorch's names and bounds.

Every function fills its tensor in place without recording a graph (as under
``no_grad``) and returns it.  Random values come from dyngraph's generator
(``dg.manual_seed`` or ``generator=``): same distributions as PyTorch,
different numbers.

>>> w = dg.empty(3, 5)
>>> dg.nn.init.kaiming_uniform_(w, a=math.sqrt(5))   # nn.Linear's default
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import random as _random
from .._core.graph import bump_version
from ..random import rng_of
from ..tensor import Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
    "kaiming_normal_", "orthogonal_", "sparse_", "uniform", "normal", "constant",
    "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal",
]


def _write(tensor: Tensor, values) -> Tensor:
    """Store ``values`` into ``tensor``'s buffer (keeping memory shared with views)."""
    data = tensor._data
    if data.flags.writeable:
        data[...] = values
    else:
        tensor._data = np.array(np.broadcast_to(values, data.shape), dtype=data.dtype)
    return _bump(tensor)


def _bump(tensor: Tensor) -> Tensor:
    """Advance the version counter: the buffer was rewritten in place."""
    bump_version(tensor)
    return tensor


def _sample(tensor: Tensor, draw, p0: float, p1: float, generator) -> Tensor:
    """Fill ``tensor`` with ``draw`` samples: straight into its buffer when NumPy can
    (float32/float64, contiguous: no temporary), else through one array of its dtype.
    The samples are drawn in float32 for float32 tensors (no float64 intermediate)."""
    data = tensor._data
    if data.flags.writeable and data.flags.c_contiguous and isinstance(data, np.ndarray) \
            and data.dtype in (np.float32, np.float64):
        draw(None, None, p0, p1, generator, out=data)
        return _bump(tensor)
    return _write(tensor, draw(data.shape, data.dtype, p0, p1, generator))


def _check(tensor, op: str) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init.{op}: expected a dyngraph Tensor, got {type(tensor).__name__}")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (``relu`` -> sqrt(2), ``tanh`` -> 5/3, ...).

    >>> dg.nn.init.calculate_gain("leaky_relu", 0.2)
    1.3867504905630728
    """
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    dim = tensor.dim()
    if dim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.shape[1]
    num_output_fmaps = tensor.shape[0]
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return num_input_fmaps * receptive, num_output_fmaps * receptive


def _calculate_correct_fan(tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with values from U(a, b)."""
    _check(tensor, "uniform_")
    return _sample(tensor, _random.uniform, a, b, generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with values from N(mean, std^2)."""
    _check(tensor, "normal_")
    return _sample(tensor, _random.normal, mean, std, generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with N(mean, std^2) values truncated to [a, b] (inverse-CDF sampling)."""
    _check(tensor, "trunc_normal_")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    # rejection sampling: exact truncated normal without scipy's erfinv
    rng = rng_of(generator)
    n = tensor._data.size
    vals = np.empty(0)
    while vals.size < n:
        draw = rng.normal(mean, std, size=max(2 * (n - vals.size), 16))
        vals = np.concatenate([vals, draw[(draw >= a) & (draw <= b)]])
    vals = vals[:n].reshape(tensor._data.shape)
    return _write(tensor, vals)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    _check(tensor, "constant_")
    return _write(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor._data.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3/4/5-D convolution weight with the Dirac delta (identity convolution)."""
    d = tensor.dim()
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor._data.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    vals = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for k in range(min_dim):
            vals[(g * out_per_group + k, k) + centre] = 1
    return _write(tensor, vals)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))`` (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """U(-bound, bound) with ``bound = gain * sqrt(3 / fan)`` (He)."""
    if 0 in tensor._data.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """N(0, std^2) with ``std = gain / sqrt(fan)`` (He)."""
    if 0 in tensor._data.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(fan), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix (QR of a Gaussian matrix, sign-corrected), times ``gain``."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor._data.shape[0]
    cols = tensor.numel() // rows
    flat = rng_of(generator).normal(0.0, 1.0, size=(rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, (gain * q).reshape(tensor._data.shape))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-D matrix with a fraction ``sparsity`` of each column zero, the rest N(0, std^2)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor._data.shape
    rng = rng_of(generator)
    vals = rng.normal(0.0, std, size=(rows, cols))
    n_zero = int(math.ceil(sparsity * rows))
    for c in range(cols):
        vals[rng.permutation(rows)[:n_zero], c] = 0
    return _write(tensor, vals)


def _deprecated(fn):
    def old(*args, **kwargs):
        warnings.warn(f"`nn.init.{fn.__name__[:-1]}` is now deprecated in favor of "
                      f"`nn.init.{fn.__name__}`.", FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)

    old.__name__ = fn.__name__[:-1]
    return old


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
