"""``dg.utils.data``: the same objects as ``dg.data`` under PyTorch's import path
(``torch.utils.data.DataLoader`` → ``dg.utils.data.DataLoader``).

PyTorch's submodules exist too: ``dataloader``, ``sampler``, ``dataset``,
``distributed`` (``DistributedSampler``) and ``_utils.collate``, so
``from torch.utils.data.dataloader import default_collate`` ports.
"""

import importlib

from ...data import *  # noqa: F403
from ...data import __all__  # noqa: F401
from . import _utils, dataloader, dataset, sampler  # noqa: F401


def __getattr__(name):
    # ``distributed`` pulls in dyngraph.distributed (MPI bindings): imported on first use.
    if name in ("distributed", "DistributedSampler"):
        mod = importlib.import_module(".distributed", __name__)
        return mod if name == "distributed" else mod.DistributedSampler
    raise AttributeError(f"module 'dyngraph.utils.data' has no attribute {name!r}")
