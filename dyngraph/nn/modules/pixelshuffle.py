"""``torch.nn.modules.pixelshuffle``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.pixelshuffle import PixelShuffle
"""

from __future__ import annotations

from ..upsampling import PixelShuffle, PixelUnshuffle

__all__ = ['PixelShuffle', 'PixelUnshuffle']
