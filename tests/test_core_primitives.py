"""Every fact about a primitive sits on the primitive, and every primitive is covered."""

import numpy as np

import dyngraph as dg
from dyngraph._core.interpreter import Interpreter, interpreting
from dyngraph.jit.passes.fusion import UFUNCS
from dyngraph.onnx.lowering import LOWERINGS, UNSUPPORTED
from dyngraph.ops.registry import REGISTRY
from tests.opinfo import all_ops


def test_every_primitive_has_an_onnx_lowering_or_a_stated_reason():
    names = set(REGISTRY)
    missing = names - set(LOWERINGS) - set(UNSUPPORTED)
    assert not missing, f"primitives with neither an ONNX lowering nor an UNSUPPORTED entry: {sorted(missing)}"
    both = set(LOWERINGS) & set(UNSUPPORTED)
    assert not both, f"listed as unsupported but lowered: {sorted(both)}"
    stale = set(UNSUPPORTED) - names
    assert not stale, f"UNSUPPORTED names no primitive: {sorted(stale)}"


class _Seen(Interpreter):
    observer = True

    def __init__(self):
        self.names = set()

    def process(self, prim, args, params):
        self.names.add(prim.name)
        return self.process_below(prim, args, params)


def _reached(op, seen):
    dt = np.dtype(op.dtypes[-1])
    sample = op.samples(np.random.default_rng(0), dt)[0]
    args = [dg.tensor(a, requires_grad=op.grad and a.dtype.kind == "f")
            if isinstance(a, np.ndarray) else a for a in sample.args]
    with interpreting(seen):
        out = op.fn(dg, *args, **sample.kwargs)
        outs = out if isinstance(out, (tuple, list)) else [out]
        diff = [o for o in outs if isinstance(o, dg.Tensor) and o.requires_grad]
        ins = [a for a in args if isinstance(a, dg.Tensor) and a.requires_grad]
        if op.grad and diff and ins:
            # create_graph: the rules run on Tensors, so backward-only primitives bind too
            total = sum(o.sum() for o in diff)
            dg.autograd.grad(total, ins, create_graph=op.gradgrad, allow_unused=True)


def test_every_primitive_is_reached_by_an_op_table_record():
    seen = _Seen()
    for op in all_ops():
        _reached(op, seen)
    missing = set(REGISTRY) - seen.names
    assert not missing, f"primitives no record of tests/opinfo reaches: {sorted(missing)}"


def test_fusion_reads_ufunc_flags_from_the_primitives():
    table = dict(UFUNCS)
    assert table == {name: p.ufunc for name, p in REGISTRY.items() if p.ufunc is not None}
    assert table["add"] == (np.add, ()) and table["relu"] == (np.maximum, (0.0,))
    rng = np.random.default_rng(0)
    for name, (fn, extra) in table.items():
        # the ufunc form computes what the primitive's impl computes
        args = [rng.uniform(0.1, 0.9, (2, 3)) for _ in range(fn.nin - len(extra))]
        np.testing.assert_allclose(fn(*args, *extra), REGISTRY[name].impl(*args), err_msg=name)


def test_purity_flags():
    assert all(p.pure == (not p.random) for p in REGISTRY.values())
    assert not any(p.random for p in REGISTRY.values())   # random draws happen outside primitives
