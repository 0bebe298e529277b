"""Data-parallel benchmark: throughput, all-reduce bandwidth and overlap.

    .venv/bin/python benchmarks/distributed.py          # launches mpiexec -n 1 and -n 2 itself

Measures, for the MLP 784-512-512-10 training step (batch 128 per rank):
- samples/s with 1 and 2 ranks (DDP, SGD);
- all-reduce bandwidth (MPI Allreduce of float32 buffers of 1, 10 and 100 MB);
- the share of all-reduce time hidden behind backward by bucketed overlap:
  1 - (DDP backward - local backward) / (time of the same all-reduces alone).
On a 2-core machine both ranks share the cores, so 2-rank throughput measures
correctness of the overlap machinery more than scaling.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

WORKER = "--worker"


def worker() -> None:
    import numpy as np

    import dyngraph as dg
    import dyngraph.distributed as dist
    from dyngraph import nn

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = dist.collectives._comm()
    from mpi4py import MPI

    dg.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    model = dist.DistributedDataParallel(net, bucket_cap_mb=1.0)
    opt = dg.optim.SGD(model.parameters(), lr=0.01)
    x = dg.randn(128, 784)
    y = dg.randint(0, 10, (128,))

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    comm.Barrier()
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)

    # backward with and without communication
    def backward_time(sync: bool) -> float:
        ts = []
        for _ in range(10):
            loss = nn.functional.cross_entropy(model(x) if sync else net(x), y)
            comm.Barrier()
            t0 = time.perf_counter()
            loss.backward()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    bw_sync = backward_time(True)
    bw_local = backward_time(False)
    waits = []
    for _ in range(10):
        loss = nn.functional.cross_entropy(model(x), y)
        comm.Barrier()
        loss.backward()
        waits.append(model.last_wait_s)
    # the rank that finishes backward last waits only for the communication tail that
    # could not overlap with its backward: take the minimum over ranks
    tail = comm.allreduce(statistics.median(waits), op=MPI.MIN)
    bufs = [b.buffer.copy() for b in model._buckets]
    ts = []
    for _ in range(10):
        comm.Barrier()
        t0 = time.perf_counter()
        reqs = [comm.Iallreduce(MPI.IN_PLACE, b, op=MPI.SUM) for b in bufs]
        MPI.Request.Waitall(reqs)
        ts.append(time.perf_counter() - t0)
    ar = statistics.median(ts)

    bandwidth = {}
    for mb in (1, 10, 100):
        buf = np.ones(mb * 1024 * 1024 // 4, np.float32)
        ts = []
        for _ in range(5 if mb < 100 else 3):
            comm.Barrier()
            t0 = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            ts.append(time.perf_counter() - t0)
        bandwidth[mb] = mb / statistics.median(ts)
    if rank == 0:
        print(json.dumps({"world": world, "samples_per_s": world * 128 / step_s, "step_ms": step_s * 1e3,
                          "backward_sync_ms": bw_sync * 1e3, "backward_local_ms": bw_local * 1e3,
                          "allreduce_alone_ms": ar * 1e3, "tail_wait_ms": tail * 1e3,
                          "bandwidth_MBps": bandwidth}))


def main() -> None:
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("mpiexec not found: pip install mpi4py mpich")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    results = {}
    for n in (1, 2):
        out = subprocess.run([mpiexec, "-n", str(n), sys.executable, __file__, WORKER], env=env,
                             capture_output=True, text=True, check=True).stdout
        results[n] = json.loads(out.strip().splitlines()[-1])
    one, two = results[1], results[2]
    print("MLP 784-512-512-10, batch 128 per rank, SGD, DDP (bucket 1 MB)")
    print(f"  1 rank : {one['samples_per_s']:8.0f} samples/s  (step {one['step_ms']:.1f} ms)")
    print(f"  2 ranks: {two['samples_per_s']:8.0f} samples/s  (step {two['step_ms']:.1f} ms)")
    for mb, v in two["bandwidth_MBps"].items():
        print(f"  all-reduce {mb:>3} MB (2 ranks): {v:8.0f} MB/s")
    hidden = 1.0 - two["tail_wait_ms"] / two["allreduce_alone_ms"] if two["allreduce_alone_ms"] > 0 else float("nan")
    print(f"  backward: local {two['backward_local_ms']:.2f} ms, with DDP {two['backward_sync_ms']:.2f} ms "
          f"(includes waiting for the slower rank)")
    print(f"  all-reduces alone {two['allreduce_alone_ms']:.2f} ms; wait after backward on the last rank "
          f"{two['tail_wait_ms']:.2f} ms -> {max(0.0, min(1.0, hidden)) * 100:.0f}% of communication hidden "
          "behind backward")


if __name__ == "__main__":
    if WORKER in sys.argv:
        worker()
    else:
        main()
