"""Run under mpiexec -n 2: ranks take different branches (dynamic graph) without hanging."""

import numpy as np

import dyngraph as dg
import dyngraph.distributed as dist
import dyngraph.nn as nn

dist.init_process_group()
rank, world = dist.get_rank(), dist.get_world_size()


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x, use_a):
        h = self.a(x) if use_a else self.b(x)
        return self.head(h.tanh())


for find_unused in (False, True):
    dg.manual_seed(0)
    model = dist.DistributedDataParallel(Branchy().double(), find_unused_parameters=find_unused,
                                         bucket_cap_mb=0.0001)
    x = dg.ones(2, 4, dtype=dg.float64) * (rank + 1)
    out = model(x, use_a=(rank == 0))
    out.sum().backward()
    # a is used only on rank 0, b only on rank 1: both get the average (their grad / world)
    ga = model.module.a.weight.grad.numpy()
    gb = model.module.b.weight.grad.numpy()
    ref = dg.tensor(ga.copy())
    dist.all_reduce(ref, op=dist.ReduceOp.MAX)
    np.testing.assert_allclose(ref.numpy(), ga)
    assert np.abs(ga).sum() > 0 and np.abs(gb).sum() > 0
print(f"branches OK rank {rank}")
