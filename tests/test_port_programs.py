"""Ordinary PyTorch programs (``tests/port/``) run unchanged against dyngraph.

Each program is a function ``run(torch, shared)`` written once; this test runs it with
``torch`` and with ``dyngraph`` (the import is the only difference) and compares every
recorded number: losses at every step, final parameters, outputs.  Tolerance is set per
program (``RTOL``): float64 programs 1e-9 relative, float32 ones ~1e-5.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

import dyngraph
import tests.port as port_pkg
from tests.port import Shared

torch = pytest.importorskip("torch")

PROGRAMS = sorted(m.name for m in pkgutil.iter_modules(port_pkg.__path__) if m.name.startswith("p"))

# Programs that hit a gap in a file this suite may not change: {name: reason}.
XFAIL: dict[str, str] = {}


def _compare(a, b, rtol: float, atol: float, where: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {a.keys()} vs {b}"
        for k in a:
            _compare(a[k], b[k], rtol, atol, f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _compare(x, y, rtol, atol, f"{where}[{i}]")
    elif isinstance(a, (bool, str, type(None))):
        assert a == b, f"{where}: torch {a!r} vs dyngraph {b!r}"
    elif isinstance(a, int):
        assert isinstance(b, int) and not isinstance(b, bool) and a == b, f"{where}: {a!r} vs {b!r}"
    elif isinstance(a, float):
        assert isinstance(b, float), f"{where}: torch float {a!r} vs dyngraph {type(b).__name__}"
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=where)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{where}: torch ndarray vs dyngraph {type(b).__name__}"
        assert a.shape == b.shape, f"{where}: shape {a.shape} vs {b.shape}"
        assert a.dtype == b.dtype, f"{where}: dtype {a.dtype} vs {b.dtype}"
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(b, a, err_msg=where)
    else:
        raise TypeError(f"{where}: programs must return plain data, got {type(a).__name__}")


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_matches_torch(name, tmp_path, monkeypatch):
    if name in XFAIL:
        pytest.xfail(XFAIL[name])
    monkeypatch.chdir(tmp_path)  # programs that save checkpoints write here
    prog = importlib.import_module(f"tests.port.{name}")
    shared = Shared()
    torch.manual_seed(0)
    expected = prog.run(torch, shared)
    dyngraph.manual_seed(0)
    got = prog.run(dyngraph, Shared(shared.store))
    rtol = getattr(prog, "RTOL", 1e-9)
    atol = getattr(prog, "ATOL", rtol * 1e-3)
    _compare(expected, got, rtol, atol, name)
