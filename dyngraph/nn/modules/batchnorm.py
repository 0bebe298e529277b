"""``torch.nn.modules.batchnorm``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.batchnorm import BatchNorm1d
"""

from __future__ import annotations

from ..normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm, _NormBase  # noqa: F401

__all__ = ['BatchNorm1d', 'BatchNorm2d', 'BatchNorm3d']
