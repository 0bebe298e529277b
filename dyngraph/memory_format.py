"""``dg.contiguous_format``, ``dg.preserve_format``, ``dg.channels_last``...: PyTorch's
memory-format tokens, accepted wherever PyTorch takes ``memory_format=``
(``zeros_like``, ``clone``, ``contiguous``, ``Module.to``).

dyngraph stores every tensor as a NumPy array in its logical (row-major) layout, so
the tokens select nothing; they exist so code that passes them ports unchanged.

>>> dg.zeros_like(x, memory_format=dg.preserve_format).shape == x.shape
True
"""

from __future__ import annotations

__all__ = ["memory_format", "contiguous_format", "preserve_format", "channels_last",
           "channels_last_3d"]


class memory_format:  # noqa: N801  (PyTorch's name)
    """A memory-format token (compared by identity, printed as ``dyngraph.<name>``)."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"dyngraph.{self._name}"

    def __reduce__(self):
        return self._name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
