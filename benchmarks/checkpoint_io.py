"""Save / load time of a checkpoint: dg.save / dg.load beside safetensors.numpy and torch.save/load.

    python benchmarks/checkpoint_io.py [--mb 200] [--repeat 5] [--dir /tmp]

Ten float32 tensors totalling ``--mb`` MB; medians of ``--repeat`` runs. dg.save fsyncs (the
atomic replace needs it), the others do not: the "save" column includes that.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import safetensors.numpy
import torch

import dyngraph as dg


def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    n = args.mb * 1024 * 1024 // 4 // 10
    rng = np.random.default_rng(0)
    arrays = {f"layer{i}.weight": rng.standard_normal(n, dtype=np.float32) for i in range(10)}
    tensors = {k: dg.tensor(v) for k, v in arrays.items()}
    torch_tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
    path = os.path.join(args.dir, "dyngraph-checkpoint-io.safetensors")
    rows = [
        ("dg.save / dg.load", lambda: dg.save(tensors, path), lambda: dg.load(path)),
        ("safetensors.numpy", lambda: safetensors.numpy.save_file(arrays, path),
         lambda: safetensors.numpy.load_file(path)),
        ("torch.save / torch.load", lambda: torch.save(torch_tensors, path + ".pt"),
         lambda: torch.load(path + ".pt")),
    ]
    print(f"{args.mb} MB in 10 tensors, median of {args.repeat}")
    print(f"{'':<26}{'save s':>10}{'load s':>10}")
    for name, save, load in rows:
        s = median_time(save, args.repeat)
        ld = median_time(load, args.repeat)
        print(f"{name:<26}{s:>10.3f}{ld:>10.3f}")
    os.unlink(path)
    os.unlink(path + ".pt")


if __name__ == "__main__":
    main()
