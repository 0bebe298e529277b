"""Run under mpiexec -n 2: rank 1 stalls; init_process_group(timeout=1 s) makes rank 0's
collective fail after ~1 s, and the job ends (rank 1 is still asleep)."""

import datetime
import time

import dyngraph as dg
import dyngraph.distributed as dist

dist.init_process_group(timeout=datetime.timedelta(seconds=1))
rank = dist.get_rank()
dist.barrier()
if rank == 1:
    time.sleep(120)                           # a stalled rank
t0 = time.perf_counter()
try:
    dist.all_reduce(dg.ones(5))
except RuntimeError as e:
    print(f"rank 0 raised after {time.perf_counter() - t0:.2f} s: {e}", flush=True)
try:
    dist.barrier()
except RuntimeError as e:
    print(f"rank 0 then: {e}", flush=True)
# Exiting normally after a failed collective aborts the job (MPI_Finalize would wait forever).
