"""List where dyngraph's ``grad_fn.name()`` differs from PyTorch's, over the op table.

For every differentiable record of ``tests/opinfo`` and each of its samples, runs the op
with torch and with dyngraph and prints the two node names; mismatches are mostly ops
that dyngraph builds from other primitives (``addmm`` is ``add`` of a ``matmul``) or
primitives that stand for several PyTorch functions (``matmul``: mm/mv/dot/bmm).

Run from the repository root::

    .venv/bin/python benchmarks/node_names.py            # mismatches and a count
    .venv/bin/python benchmarks/node_names.py --all      # every distinct pair
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dyngraph as dg
from tests.helpers import flat_outputs, to_lib
from tests.opinfo import all_ops


def _call(lib, op, sample, requires):
    args = [to_lib(lib, a, i in requires) for i, a in enumerate(sample.args)]
    kwargs = {k: to_lib(lib, v) for k, v in sample.kwargs.items()}
    return flat_outputs(op.fn(lib, *args, **kwargs))[0]


def _name(t):
    fn = getattr(t, "grad_fn", None)
    return None if fn is None else fn.name()


def compare():
    """Yield ``(record[sample], torch_name, dyngraph_name, primitive)``, each pair once."""
    seen = set()
    for op in all_ops():
        if not op.grad or op.skip_torch:
            continue
        dt = np.dtype("float64" if "float64" in op.dtypes else op.dtypes[0])
        for i, s in enumerate(op.samples(np.random.default_rng(0), dt)):
            req = set(op.grad_argnums) if op.grad_argnums is not None else {
                k for k, a in enumerate(s.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tn = _name(_call(torch, op, s, req))
            d = _call(dg, op, s, req)
            key = (op.name, tn, _name(d))
            if key not in seen:
                seen.add(key)
                prim = d.grad_fn.prim.name if d.grad_fn is not None else None
                yield f"{op.name}[{i}]", tn, _name(d), prim


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="print matching pairs too")
    ns = ap.parse_args()
    same = differ = 0
    for case, tn, dn, prim in compare():
        ok = tn == dn
        same += ok
        differ += not ok
        if ns.all or not ok:
            print(f"{'same' if ok else 'DIFF'}  {case:40s} torch={tn}  dyngraph={dn}  (primitive {prim})")
    print(f"{same} distinct (record, name) pairs agree, {differ} differ")


if __name__ == "__main__":
    main()
