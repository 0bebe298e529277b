"""``torch.utils.data.distributed``: ``DistributedSampler`` under PyTorch's module path.

>>> from dyngraph.utils.data.distributed import DistributedSampler
"""

from __future__ import annotations

from ...distributed.sampler import DistributedSampler  # noqa: F401

__all__ = ["DistributedSampler"]
