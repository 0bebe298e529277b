"""Run under mpiexec -n 2: ranks that finish at different times end the job normally (exit 0):
rank 1's exit notice arrives while rank 0 is still working, and nothing fails."""

import time

import numpy as np

import dyngraph as dg
import dyngraph.distributed as dist
from dyngraph.distributed import collectives as C

dist.init_process_group()
rank = dist.get_rank()
t = dg.full((1000,), 7.0) if rank == 1 else dg.zeros(1000)
dist.broadcast(t, src=1)                  # the last collective; then rank 1 leaves
np.testing.assert_array_equal(t.numpy(), np.full(1000, 7.0))
if rank == 0:
    end = time.monotonic() + 30           # rank 0 goes on working (no more collectives)
    while C._peer_exit_notice() != 1:
        assert time.monotonic() < end, "rank 1 never sent its exit notice"
        time.sleep(0.05)
    print("rank 0 saw rank 1's exit notice while still working", flush=True)
    time.sleep(0.5)
print(f"exit_ok OK rank {rank}", flush=True)
