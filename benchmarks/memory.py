"""Peak memory of memory-heavy primitives: conv2d (tiled im2col) and random sampling.

dyngraph's arrays are NumPy arrays, which NumPy reports to ``tracemalloc``: the peak
above the baseline during one call is what the call allocated at most at once.  PyTorch's
CPU allocator is not traced, so its figure is the growth of the peak resident set size
(``ru_maxrss``) of a fresh process around the same call (coarser, includes page-ins).

    .venv/bin/python benchmarks/memory.py            # all cases
    .venv/bin/python benchmarks/memory.py --quick    # the small conv only, no PyTorch
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

import dyngraph as dg

CONV_CASES = {
    # name: (input shape, weight shape, padding)
    "conv2d 7x7, 16 MiB input": ((1, 16, 512, 512), (16, 16, 7, 7), 3),
    "conv2d 3x3, ResNet block": ((8, 64, 56, 56), (64, 64, 3, 3), 1),
    "conv2d 11x11, (1,64,1024,1024), 1 out channel": ((1, 64, 1024, 1024), (1, 64, 11, 11), 5),
}
RANDOM_CASES = ["randn", "rand", "normal_", "uniform_", "kaiming_uniform_"]
RANDOM_SHAPE = (4096, 4096)  # 64 MiB in float32


def _dg_peak(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak / 2**20, dt


def _dg_conv(case, backward):
    xs, ws, pad = CONV_CASES[case]
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal(xs, dtype=np.float32), requires_grad=backward)
    w = dg.tensor(rng.standard_normal(ws, dtype=np.float32) * 0.01, requires_grad=backward)

    def run():
        y = dg.conv2d(x, w, padding=pad)
        if backward:
            y.backward(dg.ones_like(y))

    return _dg_peak(run)


def _dg_random(case):
    w = dg.empty(*RANDOM_SHAPE)
    fns = {"randn": lambda: dg.randn(*RANDOM_SHAPE), "rand": lambda: dg.rand(*RANDOM_SHAPE),
           "normal_": lambda: w.normal_(0, 0.02), "uniform_": lambda: w.uniform_(-1, 1),
           "kaiming_uniform_": lambda: dg.nn.init.kaiming_uniform_(w, a=5 ** 0.5)}
    return _dg_peak(fns[case])


_TORCH_CHILD = """
import json, resource, sys, time, torch
kind, case, backward = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
spec = json.loads(sys.argv[4])
torch.manual_seed(0)
if kind == "conv":
    xs, ws, pad = spec
    x = torch.randn(*xs, requires_grad=backward); w = (torch.randn(*ws) * 0.01).requires_grad_(backward)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    y = torch.nn.functional.conv2d(x, w, padding=pad)
    if backward:
        y.backward(torch.ones_like(y))
else:
    w = torch.empty(*spec)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    {"randn": lambda: torch.randn(*spec), "rand": lambda: torch.rand(*spec),
     "normal_": lambda: w.normal_(0, 0.02), "uniform_": lambda: w.uniform_(-1, 1),
     "kaiming_uniform_": lambda: torch.nn.init.kaiming_uniform_(w, a=5 ** 0.5)}[case]()
dt = time.perf_counter() - t0
print(json.dumps([(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024, dt]))
"""


def _torch(kind, case, backward, spec):
    out = subprocess.run([sys.executable, "-c", _TORCH_CHILD, kind, case, "1" if backward else "0",
                          json.dumps(spec)], capture_output=True, text=True, timeout=600)
    if out.returncode:
        return None
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the 16 MiB conv only, without PyTorch")
    args = ap.parse_args()
    rows = []
    cases = ["conv2d 7x7, 16 MiB input"] if args.quick else list(CONV_CASES)
    for case in cases:
        for backward in (False, True):
            if "11x11" in case and backward:
                continue  # minutes of col2im on 2 cores; the forward shows the bound
            peak, dt = _dg_conv(case, backward)
            ref = None if args.quick else _torch("conv", case, backward, CONV_CASES[case])
            rows.append((case + (" fwd+bwd" if backward else " fwd"), peak, dt, ref))
    if not args.quick:
        for case in RANDOM_CASES:
            peak, dt = _dg_random(case)
            rows.append((f"{case} {RANDOM_SHAPE} float32 (64 MiB)", peak, dt,
                         _torch("random", case, False, list(RANDOM_SHAPE))))
    print(f"{'case':52s} {'dyngraph peak':>14s} {'time':>8s} {'PyTorch RSS+':>13s} {'time':>8s}")
    for name, peak, dt, ref in rows:
        r = "" if ref is None else f"{ref[0]:10.0f} MiB {ref[1]:7.2f}s"
        print(f"{name:52s} {peak:10.0f} MiB {dt:7.2f}s {r}")
    print(f"(python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"ru_maxrss unit: KiB on Linux; {resource.getpagesize()} B pages)")


if __name__ == "__main__":
    main()
