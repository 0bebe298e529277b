"""DataLoader fault injection: kill a worker (SIGKILL, as the OOM killer would) while it is sending
large batches, and stall a worker under ``timeout``; count hangs and time to the error, for
dyngraph and PyTorch.

Each case runs in a fresh child process with a hard wall-clock limit, so a hang is counted
instead of hanging this script.

    .venv/bin/python benchmarks/dataloader_faults.py                 # 14 kills + 3 stalls, both libraries
    .venv/bin/python benchmarks/dataloader_faults.py --runs 5 --mb 80 --lib dyngraph
    .venv/bin/python benchmarks/dataloader_faults.py --lib dyngraph --root /tmp/old   # an old checkout

Cases:
* ``kill``: a map-style dataset whose every sample is an ``--mb`` MB float32 tensor, two workers,
  ``batch_size=None``; the main process spends ``--consume-s`` per batch (default 0.05 s; the
  workers meanwhile sit blocked half-way through writing the next batch) and a thread SIGKILLs
  one worker at a random time in [0, 0.5] s after the first batch arrived.
  Reported: error (and seconds from the kill to the exception), hang (no exception within the
  limit), or finished (no error at all: a silent loss would show here).
* ``stall``: a worker sleeps in ``__getitem__``; ``timeout=1.5``.  Reported: seconds from
  ``next()`` to the exception (the ideal is 1.5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _child(lib: str, case: str, seed: int, mb: int, consume_s: float, root: str) -> None:
    import numpy as np

    if lib == "torch":
        import torch
        from torch.utils.data import DataLoader, Dataset

        def make(n):
            return torch.from_numpy(np.full(n, 1.0, np.float32))
    else:
        sys.path.insert(0, root)
        import dyngraph as dg
        from dyngraph.data import DataLoader, Dataset

        def make(n):
            return dg.tensor(np.full(n, 1.0, np.float32))

    n = mb * 1024 * 1024 // 4

    class BigData(Dataset):
        def __len__(self):
            return 40

        def __getitem__(self, i):
            return make(n)

    class Stalled(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            time.sleep(60)
            return make(4)

    out = {"lib": lib, "case": case}
    if case == "kill":
        loader = DataLoader(BigData(), batch_size=None, num_workers=2)
        it = iter(loader)
        workers = list(it._workers)
        rng = random.Random(seed)
        victim = rng.choice(workers).pid
        delay = rng.uniform(0.0, 0.5)
        killed_at = []

        def killer():
            time.sleep(delay)
            killed_at.append(time.perf_counter())
            os.kill(victim, signal.SIGKILL)

        try:
            next(it)     # transfers are under way from here on: start the clock for the kill
            threading.Thread(target=killer, daemon=True).start()
            for _ in it:
                time.sleep(consume_s)
            out["outcome"] = "finished"
        except RuntimeError as e:
            out["outcome"] = "error"
            out["after_kill_s"] = time.perf_counter() - killed_at[0] if killed_at else None
            out["message"] = str(e).splitlines()[0][:200]
            out["names_pid"] = str(victim) in str(e)
    else:
        loader = DataLoader(Stalled(), batch_size=None, num_workers=1, timeout=1.5)
        it = iter(loader)
        t0 = time.perf_counter()
        try:
            next(it)
            out["outcome"] = "finished"
        except RuntimeError as e:
            out["outcome"] = "error"
            out["message"] = str(e).splitlines()[0][:200]
        out["to_error_s"] = time.perf_counter() - t0
    print("RESULT " + json.dumps(out), flush=True)
    os._exit(0)     # do not wait on leftover workers: the measurement is done


def _run_case(lib, case, seed, mb, limit, consume_s, root=ROOT):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", lib, case, str(seed), "--mb", str(mb),
           "--consume-s", str(consume_s), "--root", root]
    # Output to files, not pipes: a worker left running after the child exits (PyTorch leaves a
    # stuck one behind) would keep a pipe open; the child's own exit is what is timed.
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        p = subprocess.Popen(cmd, stdout=so, stderr=se, text=True, start_new_session=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
        try:
            p.wait(timeout=limit)
            hang = False
        except subprocess.TimeoutExpired:
            hang = True
        try:
            os.killpg(p.pid, signal.SIGKILL)      # the child if it hangs, and leftover workers
        except ProcessLookupError:
            pass
        p.wait()
        so.seek(0)
        se.seek(0)
        out, err = so.read(), se.read()
    if hang:
        return {"lib": lib, "case": case, "outcome": "hang"}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    if "is killed by signal" in err:
        # PyTorch's SIGCHLD handler raises in whatever the main thread is doing, here outside
        # the measured try block: an error all the same, with no time taken
        return {"lib": lib, "case": case, "outcome": "error", "message": err.strip().splitlines()[-1][:200],
                "names_pid": True}
    return {"lib": lib, "case": case, "outcome": "crash", "stderr": err[-300:]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=3, metavar=("LIB", "CASE", "SEED"))
    ap.add_argument("--runs", type=int, default=14)
    ap.add_argument("--stalls", type=int, default=3)
    ap.add_argument("--mb", type=int, default=80)
    ap.add_argument("--limit", type=float, default=30.0, help="seconds before a case counts as a hang")
    ap.add_argument("--consume-s", type=float, default=0.05, help="main-process time per batch")
    ap.add_argument("--root", default=ROOT, help="where to import dyngraph from (e.g. an older checkout)")
    ap.add_argument("--lib", choices=["dyngraph", "torch", "both"], default="both")
    args = ap.parse_args()
    if args.child:
        lib, case, seed = args.child
        _child(lib, case, int(seed), args.mb, args.consume_s, args.root)
        return
    libs = ["dyngraph", "torch"] if args.lib == "both" else [args.lib]
    for lib in libs:
        kills = [_run_case(lib, "kill", s, args.mb, args.limit, args.consume_s, args.root) for s in range(args.runs)]
        stalls = [_run_case(lib, "stall", s, args.mb, args.limit, args.consume_s, args.root) for s in range(args.stalls)]
        counts = {k: sum(r["outcome"] == k for r in kills) for k in ("error", "hang", "finished", "crash")}
        t = sorted(r["after_kill_s"] for r in kills if r.get("after_kill_s") is not None)
        named = sum(bool(r.get("names_pid")) for r in kills)
        print(f"{lib:9s} kill x{args.runs} ({args.mb} MB batches): {counts}; pid named in {named}; "
              f"kill->error median {statistics.median(t):.2f} s, max {max(t):.2f} s" if t else
              f"{lib:9s} kill x{args.runs}: {counts}")
        msgs = sorted({r.get("message", "") for r in kills if r["outcome"] == "error"})
        for m in msgs[:3]:
            print(f"          message: {m}")
        s = [r["to_error_s"] for r in stalls if "to_error_s" in r]
        print(f"{lib:9s} stall x{args.stalls} (timeout=1.5): "
              f"{ {k: sum(r['outcome'] == k for r in stalls) for k in ('error', 'hang', 'finished')} }; "
              + (f"next()->error median {statistics.median(s):.2f} s, max {max(s):.2f} s" if s else ""))
        for r in kills + stalls:
            if r["outcome"] == "crash":
                print("          crash:", r.get("stderr"))


if __name__ == "__main__":
    main()
