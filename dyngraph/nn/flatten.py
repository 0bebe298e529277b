"""Shape layers: Flatten, Unflatten, ChannelShuffle."""

from __future__ import annotations

from ..surface.shape import reshape
from ..tensor import _wrap_dim
from .module import Module

__all__ = ["Flatten", "Unflatten", "ChannelShuffle"]


class Flatten(Module):
    """Flatten dimensions ``start_dim..end_dim`` into one (default: all but the batch)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        shape = input._data.shape
        if not shape:
            return reshape(input, 1)
        s = _wrap_dim(self.start_dim, len(shape), "flatten")
        e = _wrap_dim(self.end_dim, len(shape), "flatten")
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        n = 1
        for k in shape[s:e + 1]:
            n *= k
        return reshape(input, *shape[:s], n, *shape[e + 1:])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dimension ``dim`` into ``unflattened_size``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, str):
            raise NotImplementedError("Unflatten with a named dimension is not supported")
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        shape = input._data.shape
        d = _wrap_dim(self.dim, len(shape), "unflatten")
        return reshape(input, *shape[:d], *self.unflattened_size, *shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class ChannelShuffle(Module):
    """Split the channels (dim 1) into ``groups`` and interleave them (ShuffleNet):
    ``(N, g*k, ...) -> view (N, g, k, ...) -> transpose(1, 2) -> (N, k*g, ...)``."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        shape = tuple(input.shape)
        if len(shape) < 3 or shape[1] % self.groups:
            raise RuntimeError(
                f"ChannelShuffle: expected an input of at least 3 dims whose channels ({shape[1] if len(shape) > 1 else '?'}) "
                f"are divisible by groups={self.groups}, got shape {list(shape)}")
        g = self.groups
        x = reshape(input, shape[0], g, shape[1] // g, *shape[2:])
        return reshape(x.transpose(1, 2), *shape)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
