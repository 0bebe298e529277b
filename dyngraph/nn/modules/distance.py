"""``torch.nn.modules.distance``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.distance import PairwiseDistance
"""

from __future__ import annotations

from ..padding import CosineSimilarity, PairwiseDistance

__all__ = ['PairwiseDistance', 'CosineSimilarity']
