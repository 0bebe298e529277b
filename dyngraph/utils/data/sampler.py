"""``torch.utils.data.sampler``: the samplers under PyTorch's module path.

>>> from dyngraph.utils.data.sampler import RandomSampler, BatchSampler
"""

from __future__ import annotations

from ...data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
           "WeightedRandomSampler"]
