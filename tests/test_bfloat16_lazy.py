"""ml_dtypes (bfloat16's NumPy type) is imported on first use of bfloat16, not with dyngraph
(its import is most of ``import dyngraph``: ~0.7-0.9 s).  Each check runs in a fresh process:
what is imported, and that bfloat16 arrays that reach dyngraph after a late import of
ml_dtypes still compute the PyTorch way (in float32, rounded once), in the compiled bind too."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_import_does_not_load_ml_dtypes():
    assert _run("import sys, dyngraph as dg; t = dg.ones(3) * 2; print('ml_dtypes' in sys.modules)") == "False"


def test_first_use_of_bfloat16_loads_it():
    code = ("import sys, dyngraph as dg\n"
            "x = dg.tensor([1.5, 2.25]).to(dg.bfloat16)\n"
            "print('ml_dtypes' in sys.modules, x.dtype, x.is_floating_point(), float((x * 2).sum()))")
    assert _run(code) == "True dyngraph.bfloat16 True 7.5"


@pytest.mark.parametrize("first", ["dyngraph", "ml_dtypes"])
def test_arrays_made_after_a_late_import_compute_in_float32(first):
    """An add of two bfloat16 arrays: ml_dtypes' own loop rounds the same as float32 here, so
    a product whose bfloat16 rounding differs is used: 3 values whose float32 dot product
    rounds once (dyngraph/PyTorch) against rounding each partial sum (ml_dtypes' loop)."""
    second = "ml_dtypes" if first == "dyngraph" else "dyngraph"
    code = (f"import {first}\nimport {second}\nimport numpy as np, ml_dtypes, dyngraph as dg\n"
            "a = np.array([1.0, 2.0 ** -8, 2.0 ** -8], ml_dtypes.bfloat16)\n"
            "t = dg.from_numpy(a)\n"
            "s = dg.sum(t)\n"
            "ref = np.float32(a.astype(np.float32).sum()).astype(ml_dtypes.bfloat16)\n"
            "print(s.dtype, float(s) == float(ref), dg.is_floating_point(t))")
    assert _run(code) == "dyngraph.bfloat16 True True"


def test_safetensors_bf16_and_names_load_it(tmp_path):
    path = tmp_path / "bf.safetensors"
    code = ("import sys, dyngraph as dg\n"
            f"dg.save({{'w': dg.tensor([1.0, 2.0]).to('bfloat16')}}, {str(path)!r})\n")
    _run(code)
    code = ("import sys, dyngraph as dg\n"
            f"d = dg.load({str(path)!r})\n"
            "print('ml_dtypes' in sys.modules, d['w'].dtype, d['w'].tolist())")
    assert _run(code) == "True dyngraph.bfloat16 [1.0, 2.0]"
