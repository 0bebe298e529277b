"""``torch.types``: type aliases for annotations (``Number``, ``Device``, ``_size``...).

>>> from dyngraph.types import Number
>>> isinstance(2.5, Number.__args__)
True
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO

from .backend import device as _device
from .dtypes import dtype as _dtype
from .size import Size
from .tensor import Tensor

__all__ = ["Number", "Device", "FileLike", "Size", "Tensor", "_size", "_dtype", "_device", "_int", "_float",
           "_bool", "_complex", "_TensorOrTensors"]

_int, _float, _bool, _complex = int, float, bool, complex
Number = int | float | bool
_Number = (int, float, bool)
Device = _device | str | int | None
_size = Size | list[int] | tuple[int, ...]
_TensorOrTensors = Tensor | Sequence[Tensor]
FileLike = str | os.PathLike | IO[bytes]
