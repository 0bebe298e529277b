"""Saved graph files are data: crafted documents never run code, damage is caught at load.

Regression tests for issue 10, item 1: ``dg.jit.load`` used to paste strings from the file's
JSON into generated Python source.  Every field that reached the source is crafted here with a
payload that would create a marker file if it were ever executed; the loader must refuse the
file with a :class:`GraphFileError` naming it, whether or not the attacker re-computed the
checksum, and the marker must never appear.
"""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import dyngraph as dg
import dyngraph.nn as nn
from dyngraph.jit import executor
from dyngraph.jit.file_schema import GraphFileError
from dyngraph.jit.ir import Graph
from dyngraph.jit.serialize import _checksum


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A traced model with guards, params and a dynamic dim, saved once."""
    d = tmp_path_factory.mktemp("graphs")
    dg.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Softmax(dim=1), nn.Linear(4, 2))
    x = dg.randn(5, 3)
    path = d / "good.dgraph"
    dg.jit.trace(m, (x,)).save(path)
    with safe_open(str(path), framework="numpy") as f:
        doc = json.loads(f.metadata()["dyngraph.jit"])
    return path, doc, load_file(str(path)), m, x


def _write(path, doc, tensors, sign=True):
    raw = json.dumps(doc)
    meta = {"dyngraph.jit": raw}
    if sign:
        meta["dyngraph.jit.sha256"] = _checksum(raw, tensors)
    save_file(tensors, str(path), metadata=meta)


def _payload(marker):
    return f"0=open({str(marker)!r}, 'w')"


def _crafts(doc, marker):
    """(field, document) pairs: each puts a code payload where the old loader pasted strings."""
    evil = _payload(marker)
    out = []

    def craft(name, fn):
        d = copy.deepcopy(doc)
        fn(d["graph"] if name != "name" else d)
        out.append((name, d))

    craft("inputs", lambda g: g.__setitem__("inputs", [evil]))
    craft("outputs", lambda g: g.__setitem__("outputs", [evil]))
    craft("node outs", lambda g: g["nodes"][0].__setitem__("outs", [evil]))
    craft("param key", lambda g: g["nodes"][-1]["params"]["dict"].__setitem__(f"x=1;{evil}#", 1)
          if "dict" in g["nodes"][-1]["params"] else g["nodes"][-1].__setitem__(
              "params", {"dict": {f"x=1;{evil}#": 1}}))
    craft("guard kind", lambda g: g.__setitem__("guards", [[g["inputs"][0], evil, True]]))
    craft("dynamic dim", lambda g: g.__setitem__("dynamic", [[0, evil]]))
    craft("values key", lambda g: g["values"].__setitem__(evil, [{"tuple": []}, "<f4"]))
    craft("constants key", lambda g: g["constants"].__setitem__(evil, "weight.0"))
    craft("op name", lambda g: g["nodes"][0].__setitem__("op", f"linear;{evil}"))
    craft("name", lambda d: d.__setitem__("name", f"f():\n {evil}\ndef g"))
    craft("dtype", lambda g: g["values"].__setitem__(str(g["inputs"][0]), [{"tuple": [5, 3]}, "O"]))
    craft("float literal", lambda g: g["nodes"][0]["args"].append({"float": evil}))
    return out


@pytest.mark.parametrize("sign", [True, False], ids=["re-signed", "unsigned"])
def test_crafted_fields_are_refused_and_never_run(saved, tmp_path, sign):
    path, doc, tensors, _, x = saved
    marker = tmp_path / "PWNED"
    crafts = _crafts(doc, marker)
    assert len(crafts) == 12
    for field, evil_doc in crafts:
        p = tmp_path / "evil.dgraph"
        _write(p, evil_doc, tensors, sign=sign)
        with pytest.raises(GraphFileError, match="evil.dgraph"):
            dg.jit.load(p)
        assert not marker.exists(), f"code from field {field!r} ran"


def test_issue_repro_is_refused(saved, tmp_path):
    """The exact repro of the issue (unsigned, version 2 file)."""
    _, doc, tensors, _, _ = saved
    doc = copy.deepcopy(doc)
    doc["graph"]["inputs"] = ["0=__import__('os').system('echo PWNED at load')"]
    p = tmp_path / "evil.dgraph"
    save_file(tensors, str(p), metadata={"dyngraph.jit": json.dumps(doc)})
    with pytest.raises(GraphFileError, match="checksum"):
        dg.jit.load(p)


def test_version_1_files_still_load_with_a_warning(saved, tmp_path):
    path, doc, tensors, m, x = saved
    doc = copy.deepcopy(doc)
    doc["version"] = 1
    p = tmp_path / "v1.dgraph"
    _write(p, doc, tensors, sign=False)
    with pytest.warns(UserWarning, match="no checksum"):
        g = dg.jit.load(p)
    np.testing.assert_allclose(g(x).numpy(), m(x).detach().numpy(), rtol=1e-6)
    # schema validation applies to old files too
    doc["graph"]["outputs"] = ["1; import os"]
    _write(p, doc, tensors, sign=False)
    with pytest.warns(UserWarning), pytest.raises(GraphFileError, match="graph.outputs"):
        dg.jit.load(p)


def test_use_before_definition_and_unknown_params_are_refused(saved, tmp_path):
    _, doc, tensors, _, _ = saved
    p = tmp_path / "bad.dgraph"
    d = copy.deepcopy(doc)
    d["graph"]["nodes"][0]["args"][0] = {"v": 99999}
    _write(p, d, tensors)
    with pytest.raises(GraphFileError, match="used before it is defined"):
        dg.jit.load(p)
    d = copy.deepcopy(doc)
    d["graph"]["nodes"][1]["params"] = {"dict": {"no_such_param": 1}}
    _write(p, d, tensors)
    with pytest.raises(GraphFileError, match="no_such_param"):
        dg.jit.load(p)
    d = copy.deepcopy(doc)
    deep = 1
    for _ in range(100):
        deep = {"list": [deep]}
    d["graph"]["nodes"][0]["args"].append(deep)
    _write(p, d, tensors)
    with pytest.raises(GraphFileError, match="nested deeper"):
        dg.jit.load(p)


def test_bit_flips_never_give_silently_wrong_outputs(saved, tmp_path):
    """A bounded sample of single-bit flips over the whole file (header and weights)."""
    path, _, _, m, x = saved
    data = path.read_bytes()
    expected = m(x).detach().numpy()
    rng = random.Random(0)
    positions = sorted(rng.sample(range(len(data)), min(150, len(data))))
    silent = 0
    for pos in positions:
        flipped = bytearray(data)
        flipped[pos] ^= 1 << rng.randrange(8)
        p = tmp_path / "flip.dgraph"
        p.write_bytes(bytes(flipped))
        try:
            g = dg.jit.load(p)
        except GraphFileError as exc:
            assert "flip.dgraph" in str(exc)
            continue
        out = g(x).numpy()
        if not np.array_equal(out, expected):
            silent += 1
    assert silent == 0


def test_executor_refuses_non_integer_ids():
    """Second line of defence: even an unvalidated graph cannot put text into the source."""
    g = Graph(inputs=["0=__import__('os')"], outputs=[])
    with pytest.raises(TypeError, match="non-negative integers"):
        executor.generate(g)
    g = Graph(inputs=[0], outputs=[0], guards=[(0, "bool; import os", True)])
    g.new_value((), np.float32)
    with pytest.raises(ValueError, match="guard kind"):
        executor.generate(g)


def _optable_roundtrip(op, tmp_path):
    """Trace one op-table record, save it, load it: None if it cannot be saved, else a diff."""
    import warnings

    from tests.helpers import flat_outputs, to_lib

    sample = op.samples(np.random.default_rng(0), np.dtype("float64"))[0]
    pos = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
    args = [to_lib(dg, a) for a in sample.args]
    kwargs = {k: to_lib(dg, v) for k, v in sample.kwargs.items()}

    def fn(*tensors):
        full = list(args)
        for i, t in zip(pos, tensors):
            full[i] = t
        return op.fn(dg, *full, **kwargs)

    example = tuple(args[i] for i in pos)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            traced = dg.jit.trace(fn, example)
            traced.save(tmp_path / "op.dgraph")
        except Exception:
            return None
        loaded = dg.jit.load(tmp_path / "op.dgraph")   # whatever saves must load
        got = flat_outputs(loaded(*example))
        exp = flat_outputs(fn(*example))
    for a, b in zip(got, exp, strict=True):
        a = a.numpy() if isinstance(a, dg.Tensor) else np.asarray(a)
        b = b.detach().numpy() if isinstance(b, dg.Tensor) else np.asarray(b)
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True):
            return f"{op.name}: output differs after save/load"
    return ""


def test_every_saveable_op_table_graph_passes_the_schema(tmp_path):
    """The schema is strict, not wrong: every record whose trace saves loads back and agrees."""
    from tests.opinfo import all_ops

    ops = [op for op in all_ops() if "float64" in op.dtypes]
    results = [_optable_roundtrip(op, tmp_path) for op in ops]
    saved = [r for r in results if r is not None]
    assert len(saved) >= 0.8 * len(ops), f"only {len(saved)} of {len(ops)} records could be saved"
    assert [r for r in saved if r] == []
