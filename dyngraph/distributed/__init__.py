"""Data-parallel training over MPI (``mpi4py``): collectives, DDP and a sampler.

Launch with the standard MPI launcher (the ``mpich`` wheel provides it)::

    mpiexec -n 2 python train.py

and in ``train.py``::

    import dyngraph as dg
    import dyngraph.distributed as dist

    dist.init_process_group()
    model = dist.DistributedDataParallel(Net())
    sampler = dist.DistributedSampler(dataset, shuffle=True, seed=0)

The API follows ``torch.distributed``: ``all_reduce``, ``broadcast``,
``all_gather``, ``reduce_scatter``, ``gather``, ``scatter`` and ``barrier`` on
tensors, each with ``async_op=True`` returning a handle with ``wait()``.
CPU tensors travel through MPI (zero-copy on the NumPy buffers); CuPy (GPU)
tensors through NCCL when CuPy is installed (see ``docs/distributed.md``).
"""

from __future__ import annotations

from .collectives import (
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    broadcast_object_list,
    destroy_process_group,
    gather,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    reduce,
    reduce_scatter,
    scatter,
)
from .ddp import DistributedDataParallel
from .sampler import DistributedSampler

__all__ = [
    "ReduceOp", "Work", "init_process_group", "destroy_process_group", "is_available",
    "is_initialized", "get_rank", "get_world_size", "barrier", "all_reduce", "reduce",
    "broadcast", "broadcast_object_list", "all_gather", "all_gather_into_tensor",
    "reduce_scatter", "gather", "scatter", "DistributedDataParallel", "DistributedSampler",
]
