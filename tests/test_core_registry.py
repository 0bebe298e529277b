"""The primitive registry is complete after ``import dyngraph`` alone."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import dyngraph as dg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_lstm_graph_loads_in_a_fresh_process_after_only_import_dyngraph(tmp_path):
    path = str(tmp_path / "lstm.dgjit")
    dg.manual_seed(0)
    m = dg.nn.LSTM(4, 5, num_layers=2, batch_first=True)
    x = dg.randn(2, 3, 4)
    traced = dg.jit.trace(lambda t: m(t)[0], (x,))
    dg.jit.save(traced, path)
    np.save(str(tmp_path / "x.npy"), x.numpy())
    np.save(str(tmp_path / "y.npy"), m(x)[0].detach().numpy())
    out = _run(f"""
        import sys
        import numpy as np
        import dyngraph as dg
        # nothing of dyngraph.nn was needed to register the LSTM primitives
        assert "dyngraph.nn.rnn" not in sys.modules
        f = dg.jit.load({path!r})
        y = f(dg.tensor(np.load({str(tmp_path / "x.npy")!r})))
        print(float(np.abs(y.numpy() - np.load({str(tmp_path / "y.npy")!r})).max()))
    """)
    assert float(out.strip().splitlines()[-1]) < 1e-6


def test_registry_after_import_equals_registry_after_importing_everything():
    out = _run("""
        import importlib, json, pkgutil
        import dyngraph
        from dyngraph.ops.registry import REGISTRY
        first = sorted(REGISTRY)
        skip = ("dyngraph.examples", "dyngraph.run_torch")   # programs, not library modules
        for info in pkgutil.walk_packages(dyngraph.__path__, "dyngraph."):
            if info.name.startswith(skip) or ".__main__" in info.name:
                continue
            try:
                importlib.import_module(info.name)
            except ImportError as exc:      # optional extras (cupy, mpi4py...) not installed
                if "dyngraph" in str(exc):
                    raise
        print(json.dumps([first, sorted(REGISTRY)]))
    """)
    first, everything = json.loads(out.strip().splitlines()[-1])
    assert set(everything) - set(first) == set(), "primitives registered only by a later import"
    assert first == everything
