"""Padding layers (``ZeroPad2d``, ``ConstantPad1d``, ``ReflectionPad2d``,
``ReplicationPad3d``, ``CircularPad1d``...) and the distance layers
``CosineSimilarity`` / ``PairwiseDistance``: thin modules over ``F.pad``,
``F.cosine_similarity`` and ``F.pairwise_distance``.

>>> dg.nn.ReflectionPad2d((1, 1, 2, 0))(dg.ones(1, 1, 3, 3)).shape
dyngraph.Size([1, 1, 5, 5])
"""

from __future__ import annotations

from ..surface.shape import pad
from .functional import cosine_similarity, pairwise_distance
from .module import Module

__all__ = [
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
    "CosineSimilarity", "PairwiseDistance",
]


def _padding_tuple(padding, n: int, name: str) -> tuple:
    """An int pads every side; a tuple gives (left, right[, top, bottom[, front, back]])."""
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    padding = tuple(int(p) for p in padding)
    if len(padding) != 2 * n:
        raise ValueError(f"{name}: padding must be an int or a tuple of {2 * n} ints, got {padding}")
    return padding


class _PadNd(Module):
    _n = 1
    _mode = "constant"

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        self.padding = _padding_tuple(padding, self._n, type(self).__name__)
        self.value = value

    def forward(self, input):
        if input.ndim not in (self._n + 1, self._n + 2):
            raise ValueError(
                f"{type(self).__name__}: expected a {self._n + 1}-D (unbatched) or {self._n + 2}-D "
                f"(batched) input, got shape {list(input.shape)}")
        if self._mode == "constant":
            return pad(input, self.padding, mode="constant", value=self.value)
        return pad(input, self.padding, mode=self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding, value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_PadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ZeroPad1d(_ZeroPadNd):
    """Pad the last 1 dim(s) with zeros; ``padding``: an int or (left, right)."""

    _n = 1


class ConstantPad1d(_ConstantPadNd):
    """Pad the last 1 dim(s) with ``value``; ``padding``: an int or (left, right)."""

    _n = 1


class ReflectionPad1d(_PadNd):
    """Reflect the last 1 dim(s) at the border; ``padding``: an int or (left, right)."""

    _n, _mode = 1, "reflect"


class ReplicationPad1d(_PadNd):
    """Repeat the border values of the last 1 dim(s); ``padding``: an int or (left, right)."""

    _n, _mode = 1, "replicate"


class CircularPad1d(_PadNd):
    """Wrap the last 1 dim(s) around; ``padding``: an int or (left, right)."""

    _n, _mode = 1, "circular"


class ZeroPad2d(_ZeroPadNd):
    """Pad the last 2 dim(s) with zeros; ``padding``: an int or (left, right, top, bottom)."""

    _n = 2


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dim(s) with ``value``; ``padding``: an int or (left, right, top, bottom)."""

    _n = 2


class ReflectionPad2d(_PadNd):
    """Reflect the last 2 dim(s) at the border; ``padding``: an int or (left, right, top, bottom)."""

    _n, _mode = 2, "reflect"


class ReplicationPad2d(_PadNd):
    """Repeat the border values of the last 2 dim(s); ``padding``: an int or (left, right, top, bottom)."""

    _n, _mode = 2, "replicate"


class CircularPad2d(_PadNd):
    """Wrap the last 2 dim(s) around; ``padding``: an int or (left, right, top, bottom)."""

    _n, _mode = 2, "circular"


class ZeroPad3d(_ZeroPadNd):
    """Pad the last 3 dim(s) with zeros; ``padding``: an int or (left, right, top, bottom, front, back)."""

    _n = 3


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dim(s) with ``value``; ``padding``: an int or (left, right, top, bottom, front, back)."""

    _n = 3


class ReflectionPad3d(_PadNd):
    """Reflect the last 3 dim(s) at the border; ``padding``: an int or (left, right, top, bottom, front, back)."""

    _n, _mode = 3, "reflect"


class ReplicationPad3d(_PadNd):
    """Repeat the border values of the last 3 dim(s); ``padding``: an int or (left, right, top, bottom, front, back)."""

    _n, _mode = 3, "replicate"


class CircularPad3d(_PadNd):
    """Wrap the last 3 dim(s) around; ``padding``: an int or (left, right, top, bottom, front, back)."""

    _n, _mode = 3, "circular"


class CosineSimilarity(Module):
    """Cosine similarity of ``x1`` and ``x2`` along ``dim`` (``F.cosine_similarity``)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` over the last dimension (``F.pairwise_distance``)."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
