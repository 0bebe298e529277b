"""``torch.utils.hooks``: ``RemovableHandle``, the handle ``Module.register_*_hook`` returns.

>>> h = dg.nn.Linear(2, 2).register_forward_hook(lambda m, i, o: None)
>>> isinstance(h, dg.utils.hooks.RemovableHandle)
True
"""

from __future__ import annotations

from ..nn.module import RemovableHandle

__all__ = ["RemovableHandle"]
