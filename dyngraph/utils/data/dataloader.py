"""``torch.utils.data.dataloader``: ``DataLoader`` and its helpers under PyTorch's module path.

>>> from dyngraph.utils.data.dataloader import DataLoader, default_collate
"""

from __future__ import annotations

from ...data.collate import default_collate, default_convert
from ...data.dataloader import DataLoader, WorkerInfo, get_worker_info  # noqa: F401
from ...data.dataloader import _BaseIter as _BaseDataLoaderIter  # noqa: F401
from ...data.dataloader import _MultiProcessIter as _MultiProcessingDataLoaderIter  # noqa: F401
from ...data.dataloader import _SingleProcessIter as _SingleProcessDataLoaderIter  # noqa: F401

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]
