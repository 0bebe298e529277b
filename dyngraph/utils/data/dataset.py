"""``torch.utils.data.dataset``: the dataset classes under PyTorch's module path.

>>> from dyngraph.utils.data.dataset import Dataset, TensorDataset, random_split
"""

from __future__ import annotations

from ...data.dataset import (  # noqa: F401
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    T_co,
    TensorDataset,
    random_split,
)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset",
           "Subset", "random_split"]
