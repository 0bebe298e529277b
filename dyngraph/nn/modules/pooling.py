"""``torch.nn.modules.pooling``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.pooling import MaxPool1d
"""

from __future__ import annotations

from ..pooling import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    LPPool1d,
    LPPool2d,
    MaxPool1d,
    MaxPool2d,
    MaxUnpool1d,
    MaxUnpool2d,
    _LPPoolNd,
    _MaxPoolNd,
    _MaxUnpoolNd,
)

__all__ = ['MaxPool1d', 'MaxPool2d', 'MaxUnpool1d', 'MaxUnpool2d', 'AvgPool1d', 'AvgPool2d', 'LPPool1d', 'LPPool2d', 'AdaptiveMaxPool1d', 'AdaptiveMaxPool2d', 'AdaptiveAvgPool1d', 'AdaptiveAvgPool2d']
