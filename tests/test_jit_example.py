"""The export/serve example end to end (small budget)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")


def test_export_digits_example(tmp_path):
    from dyngraph.examples import export_digits

    res = export_digits.main(["--epochs", "2", "--out", str(tmp_path)])
    assert res["accuracy"] > 0.7
    assert res["onnx_agrees"] == 1.0
    assert res["jit_agrees"] == 1.0
    assert res["server_imported_model_code"] == []
