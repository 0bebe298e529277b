"""``torch.nn.modules.instancenorm``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.instancenorm import InstanceNorm1d
"""

from __future__ import annotations

from ..normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, _InstanceNorm  # noqa: F401

__all__ = ['InstanceNorm1d', 'InstanceNorm2d', 'InstanceNorm3d']
