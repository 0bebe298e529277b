"""``torch.nn.parallel``: ``DistributedDataParallel`` (over MPI, see ``dg.distributed``) and
``DataParallel`` (a pass-through on dyngraph's one device).

>>> from dyngraph.nn.parallel import DistributedDataParallel as DDP
>>> dg.nn.parallel.DataParallel(dg.nn.Linear(2, 2))(dg.ones(1, 2)).shape
dyngraph.Size([1, 2])
"""

from __future__ import annotations

import importlib

from .data_parallel import DataParallel, data_parallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]


def __getattr__(name):
    # The MPI wrapper is imported on first use: ``import dg.nn`` stays light.
    if name in ("DistributedDataParallel", "distributed"):
        mod = importlib.import_module(".distributed", __name__)
        return mod if name == "distributed" else mod.DistributedDataParallel
    raise AttributeError(f"module 'dyngraph.nn.parallel' has no attribute {name!r}")
