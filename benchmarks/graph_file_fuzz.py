"""Adversarial sweep over saved graph files (``dg.jit.load``): the full version of the suite's sample.

Cases, on a traced model with params, a softmax and a dynamic batch dim:

* every single-bit flip of the file (header, JSON document, weights) -- unsigned: the
  checksum must catch them;
* every truncation length;
* every leaf of the JSON document replaced by each of a list of hostile values (code
  payloads, wrong types, huge numbers, deep nesting), **re-signed** with a valid checksum,
  so that the schema check, not the checksum, has to refuse them.

Each case is classified: refused with a ``GraphFileError`` naming the file (good); loaded
and gives the same output (good); loaded and gives a different output (silent wrong
result); raised anything else (crash / unclear error); ran the payload (code execution);
took longer than ``--hang`` seconds (hang).

    .venv/bin/python benchmarks/graph_file_fuzz.py            # full sweep
    .venv/bin/python benchmarks/graph_file_fuzz.py --quick    # every 7th position only
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import time
from collections import Counter

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import dyngraph as dg
from dyngraph.jit.file_schema import GraphFileError
from dyngraph.jit.serialize import _checksum


def _hostile(marker: str) -> list:
    code = f"0=open({marker!r}, 'w')"
    deep = 1
    for _ in range(200):
        deep = {"list": [deep]}
    return [code, f"x;{code}#", "__builtins__", "O", -1, 2**62, 1.5, True, None, [], {}, [code],
            {"v": code}, {"dtype": "O"}, {"float": code}, {"sym": [code, 0]}, deep, "\x00" * 10_000]


def _leaves(x, path=()):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _leaves(v, path + (i,))
    yield path


def _set(doc, path, value):
    d = copy.deepcopy(doc)
    if not path:
        return value
    node = d
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="sample every 7th byte/leaf")
    ap.add_argument("--hang", type=float, default=5.0, help="seconds after which a load counts as a hang")
    args = ap.parse_args()
    step = 7 if args.quick else 1

    tmp = tempfile.mkdtemp(prefix="dgraph-fuzz-")
    marker = os.path.join(tmp, "PWNED")
    dg.manual_seed(0)
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Softmax(dim=1), dg.nn.Linear(4, 2))
    x = dg.randn(5, 3)
    good = os.path.join(tmp, "good.dgraph")
    dg.jit.trace(model, (x,)).save(good)
    expected = model(x).detach().numpy()
    data = open(good, "rb").read()
    with safe_open(good, framework="numpy") as f:
        doc = json.loads(f.metadata()["dyngraph.jit"])
    tensors = load_file(good)
    path = os.path.join(tmp, "case.dgraph")
    tally: dict[str, Counter] = {}
    examples: dict[str, str] = {}

    def run(family: str, what: str = "") -> None:
        t0 = time.perf_counter()
        try:
            g = dg.jit.load(path)
            out = g(x).numpy()
            kind = "same output" if np.array_equal(out, expected) else "SILENT WRONG RESULT"
            if family == "re-signed field" and kind != "same output":
                # with a valid checksum the attacker can write any graph: a different output
                # is a different, valid graph, as long as it runs through the checked path
                kind = "another valid graph"
            if kind != "same output":
                examples.setdefault(kind, f"{family}: {what}"[:200])
        except GraphFileError as exc:
            kind = "refused, names the file" if "case.dgraph" in str(exc) else "UNCLEAR ERROR"
        except (RuntimeError, ValueError, TypeError) as exc:
            # errors of a graph that passed validation: they must name the file (replay) or
            # the graph (input checks)
            kind = ("clear error at call" if "case.dgraph" in str(exc) or "Sequential" in str(exc)
                    else "UNCLEAR ERROR")
        except Exception as exc:
            kind = f"CRASH {type(exc).__name__}"
            examples.setdefault(kind, f"{family} {what}: {exc}"[:300])
        if time.perf_counter() - t0 > args.hang:
            kind = "HANG"
        if os.path.exists(marker):
            kind = "CODE EXECUTED"
            os.unlink(marker)
        tally.setdefault(family, Counter())[kind] += 1

    for pos in range(0, len(data), step):
        for bit in range(8):
            b = bytearray(data)
            b[pos] ^= 1 << bit
            open(path, "wb").write(bytes(b))
            run("bit flip")
    for n in range(0, len(data), step):
        open(path, "wb").write(data[:n])
        run("truncation")
    for i, leaf in enumerate(_leaves(doc)):
        if i % step:
            continue
        for value in _hostile(marker):
            raw = json.dumps(_set(doc, leaf, value))
            save_file(tensors, path, metadata={"dyngraph.jit": raw,
                                               "dyngraph.jit.sha256": _checksum(raw, tensors)})
            run("re-signed field", f"{leaf} = {str(value)[:60]}")

    total = Counter()
    for family, c in tally.items():
        print(f"{family:16s} {sum(c.values()):6d} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
        total.update(c)
    bad = {k: v for k, v in total.items() if k.isupper() or k.split()[0].isupper()}
    print(f"{'total':16s} {sum(total.values()):6d} cases; failures: {bad or 'none'}")
    for k, e in examples.items():
        print(f"  e.g. {k}: {e}")


if __name__ == "__main__":
    main()
