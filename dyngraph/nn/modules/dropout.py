"""``torch.nn.modules.dropout``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.dropout import Dropout
"""

from __future__ import annotations

from ..dropout import (  # noqa: F401
    AlphaDropout,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    FeatureAlphaDropout,
    _DropoutNd,
)

__all__ = ['Dropout', 'Dropout1d', 'Dropout2d', 'Dropout3d', 'AlphaDropout', 'FeatureAlphaDropout']
