"""``torch.nn.modules.conv``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.conv import Conv1d
"""

from __future__ import annotations

from ..conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, _ConvNd  # noqa: F401

__all__ = ['Conv1d', 'Conv2d', 'Conv3d', 'ConvTranspose1d', 'ConvTranspose2d']
