"""Run under mpiexec -n 2: rank 1 raises; the job must end (non-zero), not hang."""

import time

import dyngraph as dg
import dyngraph.distributed as dist

dist.init_process_group()
if dist.get_rank() == 1:
    time.sleep(0.5)
    raise ValueError("planted failure on rank 1")
t = dg.ones(3)
dist.all_reduce(t)  # rank 0 waits here for a rank that died
time.sleep(60)
