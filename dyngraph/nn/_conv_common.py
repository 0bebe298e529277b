"""Input checks shared by the convolution, pooling and upsampling layers."""

from __future__ import annotations

from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..tensor import Tensor


def check_spatial_input(layer, x, nd: int, channels: int | None = None) -> None:
    """Raise a loud error naming ``layer`` for non-tensors, integer dtypes, wrong rank or channels."""
    name = type(layer).__name__
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a dyngraph Tensor as input, got {type(x).__name__}")
    shape = list(x._data.shape)
    dims = ", ".join(["C" if channels is None else str(channels)] + ["H", "W"][2 - nd:] if nd <= 2
                     else ["D", "H", "W"])
    if x._data.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(
            f"{name}: expected a {nd + 2}-D input (N, {dims}) or a {nd + 1}-D unbatched input "
            f"({dims}), got a {x._data.ndim}-D input of shape {shape}")
    if not _is_float_dtype(x._data.dtype):
        raise RuntimeError(
            f"{name}: expected a floating-point input, got dtype {str(x.dtype).replace('dyngraph.', '')} "
            f"(shape {shape}); convert it with .float()")
    if channels is not None:
        c = x._data.shape[-nd - 1]
        if c != channels:
            raise RuntimeError(
                f"{name}: expected input with {channels} channels, i.e. shape (N, {dims}), but got "
                f"{c} channels (input shape {shape})")
