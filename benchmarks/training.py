"""Training steps, dyngraph vs PyTorch: time per step and peak memory.

Run:  .venv/bin/python benchmarks/training.py  [--rounds 15] [--threads 1] [--skip-memory]

Workloads (same thread count for both libraries, same initial weights and data):
- mlp: Linear 784-512-512-10 with ReLU, batch 128;
- cnn: conv 1->32 (3x3, pad 1), ReLU, max-pool 2, conv 32->64, ReLU, max-pool 2,
  Linear 3136->128, ReLU, Linear 128->10; batch 64 of 28x28.
One step = zero_grad, forward, cross-entropy, backward, SGD step (momentum 0.9).

Time: medians of interleaved rounds in one process (the machines are shared and
noisy; alternating the contenders exposes them to the same load).
Memory: peak RSS growth over the post-import, post-setup baseline during 50
steps, each library and workload in its own subprocess so they do not mix.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CLOCK = time.perf_counter   # --clock


def _set_threads(n: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)


def _weights(kind: str):
    import numpy as np

    rng = np.random.default_rng(0)

    def u(shape, fan_in):
        b = 1 / np.sqrt(fan_in)
        return rng.uniform(-b, b, shape).astype(np.float32)

    if kind == "mlp":
        w = [u((512, 784), 784), u(512, 784), u((512, 512), 512), u(512, 512), u((10, 512), 512), u(10, 512)]
        x = rng.standard_normal((128, 784)).astype(np.float32)
        y = rng.integers(0, 10, 128)
    else:
        w = [u((32, 1, 3, 3), 9), u(32, 9), u((64, 32, 3, 3), 288), u(64, 288), u((128, 3136), 3136),
             u(128, 3136), u((10, 128), 128), u(10, 128)]
        x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
        y = rng.integers(0, 10, 64)
    return w, x, y


def build(lib_name: str, kind: str):
    """Return ``step()`` for one library and workload (weights copied from the same arrays)."""
    w, x_np, y_np = _weights(kind)
    if lib_name == "torch":
        import torch as lib

        lib.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        mk = lambda a: lib.nn.Parameter(lib.from_numpy(a.copy()))
        x, y = lib.from_numpy(x_np), lib.from_numpy(y_np)
    else:
        import dyngraph as lib

        mk = lambda a: lib.nn.Parameter(lib.tensor(a.copy()))
        x, y = lib.tensor(x_np), lib.tensor(y_np)
    nn, F = lib.nn, lib.nn.functional
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        layers = [model[0], model[2], model[4]]
    else:
        model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
        layers = [model[0], model[3], model[7], model[9]]
    for layer, i in zip(layers, range(0, len(w), 2), strict=True):
        layer.weight = mk(w[i])
        layer.bias = mk(w[i + 1])
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def phases(clock):
        """One step, timed by phase: (zero_grad, forward + loss, backward, optimizer step)."""
        t0 = clock()
        opt.zero_grad()
        t1 = clock()
        loss = F.cross_entropy(model(x), y)
        t2 = clock()
        loss.backward()
        t3 = clock()
        opt.step()
        t4 = clock()
        return t1 - t0, t2 - t1, t3 - t2, t4 - t3

    step.phases = phases
    return step


def mlp_gemms():
    """The step's eight float32 GEMMs alone (same shapes and layouts as dyngraph's linear and its
    rules: three forward ``x @ W.T``, three weight gradients ``g.T @ x``, two input gradients
    ``g @ W``; the first layer's input gradient is not needed), for comparison with the step."""
    import numpy as np

    rng = np.random.default_rng(1)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    x, w1, w2, w3 = f(128, 784), f(512, 784), f(512, 512), f(10, 512)
    h1, h2, g1, g2, g3 = f(128, 512), f(128, 512), f(128, 512), f(128, 512), f(128, 10)

    def run():
        np.matmul(x, w1.T), np.matmul(h1, w2.T), np.matmul(h2, w3.T)
        np.matmul(g3.T, h2), np.matmul(g3, w3), np.matmul(g2.T, h1), np.matmul(g2, w2)
        np.matmul(g1.T, x)
    return run


def time_steps(kinds, rounds: int) -> dict:
    results = {}
    for kind in kinds:
        steps = {lib: build(lib, kind) for lib in ("dyngraph", "torch")}
        if kind == "mlp":
            steps["gemms"] = mlp_gemms()
        for fn in steps.values():          # warm-up (allocations, lazy imports, momentum buffers)
            for _ in range(3):
                fn()
        inner = 10 if kind == "mlp" else 3
        samples = {lib: [] for lib in steps}
        for _ in range(rounds):
            for lib, fn in steps.items():
                t0 = CLOCK()
                for _ in range(inner):
                    fn()
                samples[lib].append((CLOCK() - t0) / inner * 1e3)
        ratio = statistics.median(a / b for a, b in zip(samples["dyngraph"], samples["torch"], strict=True))
        results[kind] = {"dyngraph_ms": statistics.median(samples["dyngraph"]),
                         "torch_ms": statistics.median(samples["torch"]), "ratio": ratio}
        if "gemms" in samples:
            results[kind]["gemms_ms"] = statistics.median(samples["gemms"])
            # the GEMMs alone against PyTorch's whole step, round by round: the floor of the
            # ratio for dyngraph's step if everything but the eight products cost nothing
            results[kind]["gemms_ratio"] = statistics.median(
                a / b for a, b in zip(samples["gemms"], samples["torch"], strict=True))
    return results


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def memory_child(lib: str, kind: str, steps: int) -> None:
    """(subprocess) peak RSS growth during ``steps`` training steps, in MiB, printed as JSON.

    The kernel's high-water mark (VmHWM) is reset after the imports and the setup
    (writing 5 to /proc/self/clear_refs), so the peak includes transients inside a
    step (e.g. during backward), not just what is alive between steps.
    """
    if lib == "torch":
        import torch  # noqa: F401
    else:
        import dyngraph  # noqa: F401
    fn = build(lib, kind)
    base = _status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        exact = True
    except OSError:
        exact = False
    peak = base
    for _ in range(steps):
        fn()
        peak = max(peak, _status_kib("VmRSS"))
    if exact:
        peak = max(peak, _status_kib("VmHWM"))
    print(json.dumps({"growth_mib": (peak - base) / 1024, "hwm": exact}))


def measure_memory(kinds, steps: int) -> dict:
    out = {}
    for kind in kinds:
        for lib in ("dyngraph", "torch"):
            res = subprocess.run([sys.executable, __file__, "--memory-child", lib, kind, str(steps)],
                                 capture_output=True, text=True, env=os.environ.copy(), check=True)
            out[(kind, lib)] = json.loads(res.stdout.strip().splitlines()[-1])["growth_mib"]
    return out


PHASES = ("zero_grad", "forward+loss", "backward", "optimizer")


def time_phases(kinds, rounds: int) -> dict:
    """Medians per phase (ms), the two libraries alternated step by step (``--phases``)."""
    clock = time.thread_time if CLOCK is time.process_time else time.perf_counter
    results = {}
    for kind in kinds:
        steps = {lib: build(lib, kind) for lib in ("dyngraph", "torch")}
        for fn in steps.values():
            for _ in range(3):
                fn()
        samples = {lib: [[] for _ in PHASES] for lib in steps}
        for _ in range(rounds * 10):
            for lib, fn in steps.items():
                for i, t in enumerate(fn.phases(clock)):
                    samples[lib][i].append(t * 1e3)
        results[kind] = {lib: [statistics.median(v) for v in s] for lib, s in samples.items()}
    return results


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workloads", default="mlp,cnn")
    p.add_argument("--memory-steps", type=int, default=50)
    p.add_argument("--skip-memory", action="store_true")
    p.add_argument("--phases", action="store_true",
                   help="also time zero_grad / forward+loss / backward / optimizer step apart "
                        "(medians of rounds x 10 steps, the libraries alternated step by step; "
                        "thread CPU time with one thread)")
    p.add_argument("--memory-child", nargs=3, metavar=("LIB", "KIND", "STEPS"), help=argparse.SUPPRESS)
    p.add_argument("--clock", choices=("cpu", "wall"), default=None,
                   help="CPU time of the process (default with one thread: robust to other jobs) "
                        "or the wall clock (default with several threads)")
    args = p.parse_args(argv)
    _set_threads(args.threads)
    global CLOCK
    clock = args.clock or ("cpu" if args.threads == 1 else "wall")
    CLOCK = time.process_time if clock == "cpu" else time.perf_counter
    if args.memory_child:
        lib, kind, steps = args.memory_child
        memory_child(lib, kind, int(steps))
        return
    kinds = args.workloads.split(",")
    times = time_steps(kinds, args.rounds)
    mem = {} if args.skip_memory else measure_memory(kinds, args.memory_steps)
    print(f"training step, {args.threads} thread(s), median of {args.rounds} interleaved rounds")
    print(f"{'workload':<34} {'dyngraph ms':>12} {'torch ms':>10} {'ratio':>7}   {'dg mem MiB':>10} "
          f"{'torch mem MiB':>13}")
    names = {"mlp": "MLP 784-512-512-10, batch 128", "cnn": "CNN 2 conv + 2 linear, batch 64"}
    for kind in kinds:
        t = times[kind]
        m = (f"{mem[(kind, 'dyngraph')]:>10.1f} {mem[(kind, 'torch')]:>13.1f}" if mem else "")
        print(f"{names[kind]:<34} {t['dyngraph_ms']:>12.2f} {t['torch_ms']:>10.2f} {t['ratio']:>6.2f}x   {m}")
        if "gemms_ms" in t:
            print(f"{'  its 8 GEMMs alone (NumPy)':<34} {t['gemms_ms']:>12.2f} {'':>10} {t['gemms_ratio']:>6.2f}x")
    if args.phases:
        ph = time_phases(kinds, args.rounds)
        print(f"phases (median ms per step, {args.rounds * 10} alternated steps)")
        for kind in kinds:
            for i, name in enumerate(PHASES):
                d, t = ph[kind]["dyngraph"][i], ph[kind]["torch"][i]
                print(f"  {kind + ' ' + name:<32} {d:>12.2f} {t:>10.2f} {d / t if t else float('nan'):>6.2f}x")


if __name__ == "__main__":
    main()
