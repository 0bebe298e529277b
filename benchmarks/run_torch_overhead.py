"""What the ``python -m dyngraph.run_torch`` import hook costs a training script.

Each port script runs in this process twice per repeat: unchanged through
``dyngraph.run_torch.run_path`` (``torch`` is the alias module), and as a copy whose
``import torch...`` lines are rewritten to import dyngraph directly.  Both do identical
work, so the ratio is the alias's cost.  Medians of ``--repeats`` runs, CPU time
(``time.process_time``) so other processes on the machine do not count.

    .venv/bin/python benchmarks/run_torch_overhead.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import statistics
import sys
import tempfile
import time

import dyngraph  # imported once, outside the timings
from dyngraph import run_torch

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "tests", "port", "scripts")
CASES = [
    ("s03_makemore.py", ["--type", "transformer", "--sampler", "ordered", "--max-steps", "20"]),
    ("s02_char_gpt.py", ["--temperature", "0", "--max-iters", "20"]),
    ("s04_gcn_sparse.py", ["--dropout", "0", "--epochs", "30"]),
]


def _direct_copy(path: str, folder: str) -> str:
    """The script with `import torch[.x] [as y]` / `from torch[.x] import` pointing at dyngraph."""
    src = open(path).read()
    src = re.sub(r"^import torch(\.[\w.]+)? as (\w+)$", r"import dyngraph\1 as \2", src, flags=re.M)
    src = re.sub(r"^import torch(\.[\w.]+)?$", r"import dyngraph\1\nimport dyngraph as torch", src, flags=re.M)
    src = re.sub(r"^from torch(\.[\w.]+)? import", r"from dyngraph\1 import", src, flags=re.M)
    out = os.path.join(folder, os.path.basename(path))
    with open(out, "w") as f:
        f.write(src)
    return out


def _time(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        print(f"{'script':<22} {'runner (s)':>11} {'direct (s)':>11} {'ratio':>7}")
        for name, argv in CASES:
            path = os.path.join(SCRIPTS, name)
            direct = _direct_copy(path, tmp)
            runs = {"runner": [], "direct": []}

            def run_direct(direct=direct, argv=argv):
                old = sys.argv
                sys.argv = [direct, *argv]
                try:
                    runpy.run_path(direct, run_name="__main__")
                finally:
                    sys.argv = old

            for _ in range(args.repeats):
                dyngraph.manual_seed(0)
                runs["runner"].append(_time(lambda path=path, argv=argv: run_torch.run_path(path, argv)))
                dyngraph.manual_seed(0)
                runs["direct"].append(_time(run_direct))
            r, d = statistics.median(runs["runner"]), statistics.median(runs["direct"])
            print(f"{name:<22} {r:>11.3f} {d:>11.3f} {r / d:>7.3f}")


if __name__ == "__main__":
    main()
