"""``torch.nn.modules.fold``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.fold import Fold
"""

from __future__ import annotations

from ..conv import Fold, Unfold

__all__ = ['Fold', 'Unfold']
