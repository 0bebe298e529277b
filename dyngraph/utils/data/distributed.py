"""``torch.utils.data.distributed``: ``DistributedSampler`` under PyTorch's module path.

>>> from dyngraph.utils.data.distributed import DistributedSampler
"""

from __future__ import annotations

from ...distributed.sampler import DistributedSampler

__all__ = ["DistributedSampler"]
