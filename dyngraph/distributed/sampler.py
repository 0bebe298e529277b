"""``DistributedSampler``: each rank iterates over its own share of a dataset."""

from __future__ import annotations

import math

import numpy as np

from . import collectives as C

__all__ = ["DistributedSampler"]


class DistributedSampler:
    """Split dataset indices across ranks (like ``torch.utils.data.DistributedSampler``).

    Every rank gets ``ceil(len / world)`` indices (the list is padded by
    repeating its start), or ``floor(len / world)`` with ``drop_last=True``.
    With ``shuffle=True`` the permutation depends on ``seed + epoch``: call
    ``set_epoch(e)`` at the start of each epoch so every epoch is shuffled
    differently but identically on all ranks.

    >>> sampler = DistributedSampler(ds, shuffle=True, seed=0)
    >>> loader = dg.data.DataLoader(ds, batch_size=32, sampler=sampler)
    >>> for epoch in range(3):
    ...     sampler.set_epoch(epoch)
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        self.dataset = dataset
        self.num_replicas = C.get_world_size() if num_replicas is None else num_replicas
        self.rank = C.get_rank() if rank is None else rank
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"DistributedSampler: invalid rank {self.rank}, should be in "
                             f"[0, {self.num_replicas - 1}]")
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % self.num_replicas:
            self.num_samples = n // self.num_replicas
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            rng = np.random.Generator(np.random.PCG64(self.seed + self.epoch))
            indices = rng.permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            while pad > 0:
                indices += indices[:pad]
                pad = self.total_size - len(indices)
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
