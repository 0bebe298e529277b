"""Run under mpiexec -n 2: rank 1 calls sys.exit(3) mid-training; rank 0 must fail, not hang."""

import sys
import time

import dyngraph as dg
import dyngraph.distributed as dist
import dyngraph.nn as nn

dist.init_process_group()
rank = dist.get_rank()
model = dist.DistributedDataParallel(nn.Linear(3, 1))
opt = dg.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    if rank == 1 and step == 2:
        print("rank 1 calls sys.exit(3)", flush=True)
        sys.exit(3)                           # SystemExit: no exception hook sees it
    opt.zero_grad()
    model(dg.ones(4, 3)).sum().backward()     # rank 0 waits here for rank 1's gradients
    opt.step()
print(f"rank {rank} finished 1000 steps without rank 1: wrong", flush=True)
time.sleep(60)
