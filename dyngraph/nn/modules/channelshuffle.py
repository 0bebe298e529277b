"""``torch.nn.modules.channelshuffle``: PyTorch's module path for these layers (defined elsewhere in ``dg.nn``).

>>> from dyngraph.nn.modules.channelshuffle import ChannelShuffle
"""

from __future__ import annotations

from ..flatten import ChannelShuffle

__all__ = ['ChannelShuffle']
