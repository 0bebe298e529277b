"""Padding layers (``ZeroPad2d``, ``ConstantPad1d``, ``ReflectionPad2d``,
``ReplicationPad3d``, ``CircularPad1d``...) and the distance layers
``CosineSimilarity`` / ``PairwiseDistance``: thin modules over ``F.pad``,
``F.cosine_similarity`` and ``F.pairwise_distance``.

>>> dg.nn.ReflectionPad2d((1, 1, 2, 0))(dg.ones(1, 1, 3, 3)).shape
dyngraph.Size([1, 1, 5, 5])
"""

from __future__ import annotations

from ..ops.shape import pad
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

    def forward(self, input):  # noqa: A002
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
    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


def _make(name, base, n, mode, doc, zero=False):
    if zero:
        def __init__(self, padding):
            base.__init__(self, padding, 0.0)
    elif base is _ConstantPadNd:
        def __init__(self, padding, value: float):
            base.__init__(self, padding, value)
    else:
        def __init__(self, padding):
            base.__init__(self, padding)
    attrs = {"_n": n, "_mode": mode, "__init__": __init__, "__doc__": doc, "__module__": __name__}
    if zero:
        attrs["extra_repr"] = _PadNd.extra_repr
    return type(name, (base,), attrs)


_SIDES = {1: "(left, right)", 2: "(left, right, top, bottom)",
          3: "(left, right, top, bottom, front, back)"}
for _n in (1, 2, 3):
    _d = f"{_n}d"
    globals()[f"ZeroPad{_d}"] = _make(f"ZeroPad{_d}", _ConstantPadNd, _n, "constant",
                                      f"Pad the last {_n} dims with zeros; padding: int or {_SIDES[_n]}.",
                                      zero=True)
    globals()[f"ConstantPad{_d}"] = _make(f"ConstantPad{_d}", _ConstantPadNd, _n, "constant",
                                          f"Pad the last {_n} dims with ``value``; padding: int or {_SIDES[_n]}.")
    globals()[f"ReflectionPad{_d}"] = _make(f"ReflectionPad{_d}", _PadNd, _n, "reflect",
                                            f"Reflect the last {_n} dims at the border; padding: int or {_SIDES[_n]}.")
    globals()[f"ReplicationPad{_d}"] = _make(f"ReplicationPad{_d}", _PadNd, _n, "replicate",
                                             f"Repeat the border values of the last {_n} dims; padding: int or {_SIDES[_n]}.")
    globals()[f"CircularPad{_d}"] = _make(f"CircularPad{_d}", _PadNd, _n, "circular",
                                          f"Wrap the last {_n} dims around; padding: int or {_SIDES[_n]}.")


class CosineSimilarity(Module):
    """Cosine similarity of ``x1`` and ``x2`` along ``dim`` (``F.cosine_similarity``)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        from .functional import cosine_similarity  # noqa: PLC0415

        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` over the last dimension (``F.pairwise_distance``)."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        from .functional import pairwise_distance  # noqa: PLC0415

        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
