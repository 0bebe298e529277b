"""``dg.Size``: the tuple subclass returned by ``Tensor.shape`` (like ``torch.Size``)."""

from __future__ import annotations

__all__ = ["Size"]


class Size(tuple):
    """A tuple of dimension sizes that prints as ``dyngraph.Size([2, 3])``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"dyngraph.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, item):
        r = tuple.__getitem__(self, item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))
