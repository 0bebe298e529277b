"""``torch.nn.parallel.distributed``: ``DistributedDataParallel`` (``dg.distributed``'s, over MPI)."""

from __future__ import annotations

from ...distributed.ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
