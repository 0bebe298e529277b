"""``torch.nn.modules.sparse``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.sparse import Embedding
"""

from __future__ import annotations

from ..sparse import Embedding, EmbeddingBag

__all__ = ['Embedding', 'EmbeddingBag']
