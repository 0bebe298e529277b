"""Saving static graphs (JSON IR + safetensors, no pickle) and loading them without model code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dyngraph as dg
import dyngraph.nn as nn
from dyngraph.jit.serialize import _checksum


def _model():
    dg.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 3), nn.LogSoftmax(dim=1)).double()


def test_save_load_roundtrip(tmp_path):
    m = _model()
    x = dg.randn(4, 6, dtype=dg.float64)
    path = tmp_path / "m.dgraph"
    dg.jit.trace(m, (x,)).save(path)
    g = dg.jit.load(path)
    np.testing.assert_allclose(g(x).numpy(), m(x).detach().numpy(), rtol=1e-12, atol=1e-12)
    assert "linear" in str(g)
    with pytest.raises(ValueError, match="shape"):
        g(dg.randn(5, 6, dtype=dg.float64))


def test_file_is_safetensors_with_json_graph(tmp_path):
    from safetensors import safe_open

    path = tmp_path / "m.dgraph"
    dg.jit.trace(_model(), (dg.randn(2, 6, dtype=dg.float64),)).save(path)
    with safe_open(str(path), framework="numpy") as f:
        doc = json.loads(f.metadata()["dyngraph.jit"])
        assert {"weight.0", "weight.1"} <= set(f.keys())
    assert doc["format"] == "dyngraph.jit" and doc["graph"]["nodes"]
    assert b"pickle" not in path.read_bytes()[:200]


def test_load_in_a_process_without_model_code(tmp_path):
    m = _model()
    x = dg.randn(3, 6, dtype=dg.float64)
    path = tmp_path / "m.dgraph"
    dg.jit.trace(m, (x,)).save(path)
    np.save(tmp_path / "x.npy", x.numpy())
    script = textwrap.dedent(f"""
        import numpy as np, sys
        import dyngraph.jit as jit
        g = jit.load({str(path)!r})
        y = g(np.load({str(tmp_path / 'x.npy')!r}))
        np.save({str(tmp_path / 'y.npy')!r}, y.numpy())
        assert 'dyngraph.nn' not in sys.modules, 'model code was imported'
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), m(x).detach().numpy(), rtol=1e-12)


def test_dynamic_batch_graph_saves_symbolic_shapes(tmp_path):
    m = _model()
    cm = dg.compile(m, dynamic=["batch"])
    cm(dg.randn(4, 6, dtype=dg.float64))
    v = next(iter(cm.variants.values()))
    from dyngraph.jit.scripted import ScriptedGraph

    path = tmp_path / "dyn.dgraph"
    ScriptedGraph(m, v, None).save(path)
    g = dg.jit.load(path)
    for b in (2, 9):
        x = dg.randn(b, 6, dtype=dg.float64)
        np.testing.assert_allclose(g(x).numpy(), m(x).detach().numpy(), rtol=1e-12, atol=1e-12)


def test_corrupt_and_truncated_files_give_clear_errors(tmp_path):
    path = tmp_path / "m.dgraph"
    dg.jit.trace(_model(), (dg.randn(2, 6, dtype=dg.float64),)).save(path)
    data = path.read_bytes()
    trunc = tmp_path / "trunc.dgraph"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="trunc.dgraph"):
        dg.jit.load(trunc)
    garbage = tmp_path / "garbage.dgraph"
    garbage.write_bytes(b"\x00\x01not a graph at all")
    with pytest.raises(ValueError, match="garbage.dgraph"):
        dg.jit.load(garbage)
    with pytest.raises(FileNotFoundError, match="missing.dgraph"):
        dg.jit.load(tmp_path / "missing.dgraph")


def test_plain_safetensors_file_is_rejected(tmp_path):
    from safetensors.numpy import save_file

    p = tmp_path / "weights.safetensors"
    save_file({"w": np.zeros(3)}, str(p))
    with pytest.raises(ValueError, match="holds no dyngraph graph"):
        dg.jit.load(p)


def test_unknown_primitive_is_named(tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    path = tmp_path / "m.dgraph"
    dg.jit.trace(_model(), (dg.randn(2, 6, dtype=dg.float64),)).save(path)
    with safe_open(str(path), framework="numpy") as f:
        doc = json.loads(f.metadata()["dyngraph.jit"])
    doc["graph"]["nodes"][0]["op"] = "frobnicate"
    tensors = load_file(str(path))
    raw = json.dumps(doc)   # re-signed, so the schema check (not the checksum) must name the op
    save_file(tensors, str(path), metadata={"dyngraph.jit": raw,
                                            "dyngraph.jit.sha256": _checksum(raw, tensors)})
    with pytest.raises(ValueError, match="frobnicate"):
        dg.jit.load(path)
