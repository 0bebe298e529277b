"""``torch.nn.modules.upsampling``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.upsampling import Upsample
"""

from __future__ import annotations

from ..upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ['Upsample', 'UpsamplingNearest2d', 'UpsamplingBilinear2d']
