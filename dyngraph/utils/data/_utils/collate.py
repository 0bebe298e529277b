"""``torch.utils.data._utils.collate``: ``default_collate`` / ``default_convert``.

>>> from dyngraph.utils.data._utils.collate import default_collate
"""

from __future__ import annotations

from ....data.collate import default_collate, default_convert

__all__ = ["default_collate", "default_convert"]
