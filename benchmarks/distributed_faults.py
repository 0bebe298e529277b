"""Two-rank fault cases: how long until a broken distributed job fails, dyngraph (mpiexec) vs
PyTorch (torchrun, gloo); and what the safety checks cost per collective.

    .venv/bin/python benchmarks/distributed_faults.py              # both libraries, then the overhead
    .venv/bin/python benchmarks/distributed_faults.py --lib dyngraph --no-overhead

Cases (each job runs with a hard wall-clock limit; "hang" means it was still running then):
* ``ddp_models``: DDP over different models on the two ranks (Linear(4, 4) vs Linear(4, 5)).
* ``exit3``: rank 1 calls ``sys.exit(3)`` after two training steps; rank 0 goes on training.
* ``stall``: rank 1 sleeps 120 s; ``init_process_group(timeout=2 s)``; rank 0 calls all_reduce.
* ``shapes``: all_reduce of (2, 3) on rank 0 and (3, 2) on rank 1 (same element count).
* ``counts``: all_reduce of 4 elements on rank 0 and 5 on rank 1.
Reported per case: the outcome (error raised / job failed / hang / silent: finished without an
error), seconds from the fault to the error (or to the job's end), and the first error line.

Overhead: median latency of ``all_reduce`` (float32, 1 KiB / 1 MiB / 16 MiB) with the collective
metadata check on and off, against a plain blocking mpi4py ``Allreduce``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DG_PRELUDE = """
import datetime, json, sys, time
import dyngraph as dg
import dyngraph.distributed as dist
import dyngraph.nn as nn
CASE = sys.argv[1]
dist.init_process_group(timeout=datetime.timedelta(seconds=2 if CASE == "stall" else 1800))
rank = dist.get_rank()
ones = dg.ones
DDP = dist.DistributedDataParallel
all_reduce = dist.all_reduce
barrier = dist.barrier
def sgd(params): return dg.optim.SGD(params, lr=0.1)
"""

TORCH_PRELUDE = """
import datetime, json, sys, time
import torch
import torch.distributed as dist
import torch.nn as nn
CASE = sys.argv[1]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2 if CASE == "stall" else 1800))
rank = dist.get_rank()
ones = torch.ones
DDP = nn.parallel.DistributedDataParallel
all_reduce = dist.all_reduce
barrier = dist.barrier
def sgd(params): return torch.optim.SGD(params, lr=0.1)
"""

CASES = """
def mark(kind, **kw):
    print(kind + " " + json.dumps(dict(t=time.time(), rank=rank, **kw)), flush=True)

barrier()
try:
    if CASE == "ddp_models":
        mark("FAULT")
        DDP(nn.Linear(4, 4 + rank))
    elif CASE == "exit3":
        model = DDP(nn.Linear(3, 1))
        opt = sgd(model.parameters())
        for step in range(100000):
            if rank == 1 and step == 2:
                mark("FAULT")
                sys.exit(3)
            opt.zero_grad()
            model(ones(4, 3)).sum().backward()
            opt.step()
    elif CASE == "stall":
        if rank == 1:
            time.sleep(120)
        mark("FAULT")
        all_reduce(ones(5))
    elif CASE == "shapes":
        mark("FAULT")
        t = ones((2, 3) if rank == 0 else (3, 2))
        all_reduce(t)
    elif CASE == "counts":
        mark("FAULT")
        all_reduce(ones(4 + rank))
    mark("DONE")
except Exception as e:
    mark("ERROR", msg=str(e).splitlines()[0][:240] if str(e) else type(e).__name__)
    raise
"""


def _launcher(lib):
    if lib == "dyngraph":
        exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
        return [exe, "-n", "2", sys.executable]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
            str(29500 + os.getpid() % 1000)]


def run_case(lib: str, case: str, limit: float) -> dict:
    src = (DG_PRELUDE if lib == "dyngraph" else TORCH_PRELUDE) + CASES
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(textwrap.dedent(src))
        path = f.name
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    p = subprocess.Popen(_launcher(lib) + [path, case], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    hang = False
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        hang = True
    end = time.time()
    os.unlink(path)
    events = {}
    dec = json.JSONDecoder()
    # the two ranks share stdout, so their lines may interleave: find each marker anywhere
    for m in re.finditer(r"(FAULT|ERROR|DONE) (?=\{)", out):
        try:
            obj, _ = dec.raw_decode(out, m.end())
        except json.JSONDecodeError:
            continue
        events.setdefault(m.group(1), []).append(obj)
    fault = min((e["t"] for e in events.get("FAULT", [])), default=None)
    errors = events.get("ERROR", [])
    if hang:
        outcome = "hang"
    elif errors:
        outcome = "error raised"
    elif p.returncode != 0:
        outcome = "job failed"
    else:
        outcome = "silent (no error)"
    first_err = min((e["t"] for e in errors), default=None)
    t_err = None if fault is None else ((first_err if first_err is not None else end) - fault)
    msg = errors[0]["msg"] if errors else ""
    if not msg and p.returncode not in (0, None) and not hang:
        tail = [ln for ln in err.splitlines() if "Error" in ln or "error" in ln]
        msg = tail[-1][:240] if tail else f"exit code {p.returncode}"
    return {"lib": lib, "case": case, "outcome": outcome, "to_error_s": t_err, "rc": p.returncode,
            "ranks_raising": sorted({e["rank"] for e in errors}), "message": msg}


def overhead() -> None:
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    src = textwrap.dedent("""
        import statistics, time, json
        import numpy as np
        from mpi4py import MPI
        import dyngraph as dg
        import dyngraph.distributed as dist
        from dyngraph.distributed import collectives as C
        dist.init_process_group()
        comm = MPI.COMM_WORLD
        res = {}
        for kb in (1, 1024, 16384):
            t = dg.ones(kb * 256)
            reps = 400 if kb == 1 else (60 if kb == 1024 else 10)
            row = {}
            for label in ("mpi4py Allreduce", "check off", "check on"):
                C._GROUP.check = label == "check on"
                ts = []
                for _ in range(reps):
                    comm.Barrier()
                    t0 = time.perf_counter()
                    if label == "mpi4py Allreduce":
                        comm.Allreduce(MPI.IN_PLACE, t._data)
                    else:
                        dist.all_reduce(t)
                    ts.append(time.perf_counter() - t0)
                row[label] = statistics.median(ts) * 1e6
            res[kb] = row
        if dist.get_rank() == 0:
            print("RES " + json.dumps(res))
    """)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
        path = f.name
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    out = subprocess.run([exe, "-n", "2", sys.executable, path], capture_output=True, text=True, env=env,
                         timeout=600).stdout
    os.unlink(path)
    res = json.loads([ln for ln in out.splitlines() if ln.startswith("RES ")][0][4:])
    print("all_reduce latency, 2 ranks, median microseconds:")
    for kb, row in res.items():
        size = f"{int(kb)} KiB" if int(kb) < 1024 else f"{int(kb) // 1024} MiB"
        print(f"  {size:>7}: " + ", ".join(f"{k} {v:.0f}" for k, v in row.items())
              + f"  (check on / mpi4py = {row['check on'] / row['mpi4py Allreduce']:.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=["dyngraph", "torch", "both"], default="both")
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--no-overhead", action="store_true")
    ap.add_argument("--cases", default="ddp_models,exit3,stall,shapes,counts")
    args = ap.parse_args()
    libs = ["dyngraph", "torch"] if args.lib == "both" else [args.lib]
    for case in filter(None, args.cases.split(",")):
        for lib in libs:
            r = run_case(lib, case, args.limit)
            t = "-" if r["to_error_s"] is None else f"{r['to_error_s']:.2f} s"
            print(f"{case:10s} {lib:8s} {r['outcome']:18s} fault->error {t:>8s}  rc={r['rc']} "
                  f"raised on ranks {r['ranks_raising']}: {r['message'][:150]}", flush=True)
    if not args.no_overhead:
        overhead()


if __name__ == "__main__":
    main()
