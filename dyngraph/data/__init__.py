"""Data loading (``torch.utils.data``'s surface): datasets, samplers, collation, DataLoader.

>>> from dyngraph.data import DataLoader, TensorDataset
>>> loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, num_workers=2)
"""

from . import datasets, transforms
from .collate import default_collate, default_convert
from .dataloader import DataLoader, WorkerInfo, get_worker_info
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "StackDataset", "Subset", "ConcatDataset", "ChainDataset",
    "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
    "WeightedRandomSampler", "BatchSampler", "default_collate", "default_convert", "DataLoader",
    "get_worker_info", "WorkerInfo", "datasets", "transforms",
]
