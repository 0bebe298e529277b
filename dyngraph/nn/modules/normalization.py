"""``torch.nn.modules.normalization``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.normalization import LocalResponseNorm
"""

from __future__ import annotations

from ..normalization import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm

__all__ = ['LocalResponseNorm', 'LayerNorm', 'GroupNorm', 'RMSNorm']
