"""``torch.nn.modules.module``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.module import Module
"""

from __future__ import annotations

from ..module import Module

__all__ = ['Module']
