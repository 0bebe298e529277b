"""dg.backends.speedups and the one import-time warning when the C accelerator is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imports dyngraph in a fresh interpreter (optionally with the accelerator made unimportable,
# as for a source tree on PYTHONPATH without the built extension) and reports what it saw.
PROBE = r"""
import json, sys, warnings
if sys.argv[1] == "missing":
    sys.modules["dyngraph._speedups"] = None   # any import of it raises ImportError
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import dyngraph as dg
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
ours = [str(w.message) for w in caught if w.category.__name__ == "SpeedupsWarning"]
print(json.dumps({"warnings": ours, "available": dg.backends.speedups.is_available(),
                  "enabled": dg.backends.speedups.is_enabled(), "grad": x.grad.tolist()}))
"""


def _probe(mode, **env):
    full = {k: v for k, v in os.environ.items()
            if k not in ("DYNGRAPH_PURE_PYTHON", "DYNGRAPH_NO_SPEEDUPS_WARNING")}
    full.update(env)
    full["PYTHONPATH"] = ROOT
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         env=full, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_missing_accelerator_warns_once_and_names_the_build():
    r = _probe("missing")
    assert r["available"] is False and r["enabled"] is False
    assert r["grad"] == [2.0, 4.0]               # pure Python still computes
    assert len(r["warnings"]) == 1
    msg = r["warnings"][0]
    assert "pip install -e ." in msg and "DYNGRAPH_NO_SPEEDUPS_WARNING=1" in msg
    assert "DYNGRAPH_PURE_PYTHON=1" in msg


@pytest.mark.parametrize("env", [{"DYNGRAPH_NO_SPEEDUPS_WARNING": "1"},
                                 {"DYNGRAPH_PURE_PYTHON": "1"}])
def test_missing_accelerator_warning_silenced(env):
    r = _probe("missing", **env)
    assert r["warnings"] == [] and r["available"] is False and r["enabled"] is False


def test_status_with_the_built_accelerator():
    import importlib.util

    built = importlib.util.find_spec("dyngraph._speedups") is not None
    r = _probe("normal")
    assert r["warnings"] == [] if built else len(r["warnings"]) == 1
    assert r["available"] is built and r["enabled"] is built
    r = _probe("normal", DYNGRAPH_PURE_PYTHON="1")
    assert r["available"] is built and r["enabled"] is False and r["warnings"] == []
