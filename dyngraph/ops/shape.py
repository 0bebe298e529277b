"""Shape primitives: reshape/view, expand, permute/transpose, and friends.

Most of these are views in PyTorch and NumPy alike (``is_view=True``): the
output shares memory with the input and its version counter.
"""

from __future__ import annotations

import numpy as np

from ..size import Size
from ..tensor import Tensor, _wrap_dim
from ._util import install
from .registry import bind, primitive

__all__ = ["reshape", "expand", "broadcast_to", "permute", "transpose", "swapaxes", "t"]


def _infer_shape(shape, numel: int, op: str) -> tuple:
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise RuntimeError(f"{op}: only one dimension can be inferred (got shape {list(shape)})")
    if -1 in shape:
        rest = 1
        for s in shape:
            if s != -1:
                rest *= s
        if rest == 0 or numel % rest:
            raise RuntimeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // rest if s == -1 else s for s in shape)
    n = 1
    for s in shape:
        n *= s
    if n != numel:
        raise RuntimeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _shape_args(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        return tuple(shape[0])
    return tuple(int(s) for s in shape)


@primitive("reshape", meta=True, is_view=True)
def reshape_p(x, shape=()):
    return x.reshape(shape)


reshape_p.defvjp(lambda g, out, x, shape=(): reshape_p(g, shape=tuple(x.shape)))


def reshape(input, *shape):  # noqa: A002
    """A tensor with the same data and a new shape (one dimension may be -1)."""
    shape = _infer_shape(_shape_args(shape), input._data.size, "reshape")
    if shape == input._data.shape:
        return bind(reshape_p, (input,), {"shape": shape}) if input._rg else _alias(input)
    return bind(reshape_p, (input,), {"shape": shape})


def _alias(t: Tensor) -> Tensor:
    return bind(reshape_p, (t,), {"shape": t._data.shape})


@primitive("expand", meta=True, is_view=True)
def expand_p(x, shape=()):
    return np.broadcast_to(x, shape)


expand_p.defvjp(lambda g, out, x, shape=(): _sum_to(g, tuple(x.shape)))


def _sum_to(g, shape):
    from .reduction import sum_to_shape_p  # noqa: PLC0415

    return sum_to_shape_p(g, shape=shape)


def expand(input, *sizes):  # noqa: A002
    """Broadcast to a larger shape without copying (-1 keeps a dimension)."""
    sizes = _shape_args(sizes)
    old = input._data.shape
    if len(sizes) < len(old):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(old)})")
    lead = len(sizes) - len(old)
    shape = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            s = old[i - lead]
        elif i >= lead and old[i - lead] not in (1, s):
            raise RuntimeError(
                f"expand: the expanded size of the tensor ({s}) must match the existing size "
                f"({old[i - lead]}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                f"Tensor sizes: {list(old)}")
        shape.append(s)
    return bind(expand_p, (input,), {"shape": tuple(shape)})


def broadcast_to(input, shape):  # noqa: A002
    return expand(input, tuple(shape))


def expand_as(input, other):  # noqa: A002
    return expand(input, tuple(other.shape))


@primitive("permute", is_view=True)
def permute_p(x, dims=()):
    return x.transpose(dims)


permute_p.defvjp(lambda g, out, x, dims=(): permute_p(g, dims=tuple(int(i) for i in np.argsort(dims))))


def permute(input, *dims):  # noqa: A002
    """Reorder dimensions: ``x.permute(2, 0, 1)``."""
    dims = _shape_args(dims)
    n = input._data.ndim
    if len(dims) != n:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {n} is not equal "
            f"to len(dims) = {len(dims)}")
    dims = tuple(_wrap_dim(d, n, "permute") for d in dims)
    if len(set(dims)) != n:
        raise RuntimeError(f"permute: repeated dim in {list(dims)}")
    return bind(permute_p, (input,), {"dims": dims})


def transpose(input, dim0: int, dim1: int):  # noqa: A002
    """Swap two dimensions."""
    n = input._data.ndim
    if n == 0:
        return _alias(input)
    d0, d1 = _wrap_dim(dim0, n, "transpose"), _wrap_dim(dim1, n, "transpose")
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return bind(permute_p, (input,), {"dims": tuple(dims)})


swapaxes = swapdims = transpose


def t(input):  # noqa: A002
    """Transpose a matrix (0-d and 1-d tensors are returned as they are)."""
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input._data.ndim}D")
    return transpose(input, 0, 1) if input._data.ndim == 2 else _alias(input)


def _reshape_method(self, *shape):
    return reshape(self, *shape)


def _T(self):  # noqa: N802
    n = self._data.ndim
    return bind(permute_p, (self,), {"dims": tuple(range(n - 1, -1, -1))}) if n >= 2 else self


def _mT(self):  # noqa: N802
    if self._data.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return transpose(self, -2, -1)


install({
    "reshape": _reshape_method, "view": _reshape_method, "expand": expand,
    "expand_as": expand_as, "broadcast_to": broadcast_to, "permute": permute,
    "transpose": transpose, "swapaxes": transpose, "swapdims": transpose, "t": t,
    "T": property(_T), "mT": property(_mT), "mH": property(_mT), "H": property(_T),
    "reshape_as": lambda self, other: reshape(self, tuple(other.shape)),
    "view_as": lambda self, other: reshape(self, tuple(other.shape)),
})
