"""``torch.nn.modules.linear``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.linear import Identity
"""

from __future__ import annotations

from ..linear import Bilinear, Identity, LazyLinear, Linear
from ..transformer import NonDynamicallyQuantizableLinear

__all__ = ['Identity', 'Linear', 'Bilinear', 'LazyLinear', 'NonDynamicallyQuantizableLinear']
