"""``torch.nn.modules.flatten``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.flatten import Flatten
"""

from __future__ import annotations

from ..flatten import Flatten, Unflatten

__all__ = ['Flatten', 'Unflatten']
