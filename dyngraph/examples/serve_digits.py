"""Serve the exported digits model: predictions from onnxruntime and from dg.jit.load.

Run by ``export_digits.py`` in a separate process.  It needs only NumPy,
onnxruntime and dyngraph's graph loader -- no model class, no ``dyngraph.nn``::

    python serve_digits.py --onnx digits.onnx --graph digits.dgraph --images x.npy --out p.json
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    images = np.load(args.images)

    import onnxruntime as ort  # noqa: PLC0415  (onnxruntime: optional dependency, imported on first use)

    sess = ort.InferenceSession(args.onnx, providers=["CPUExecutionProvider"])
    onnx_logits = sess.run(None, {"images": images})[0]

    from dyngraph import jit  # noqa: PLC0415  (the graph loader only)

    graph = jit.load(args.graph)
    jit_logits = graph(images).numpy()
    imported = sorted(m for m in sys.modules
                      if m.startswith(("dyngraph.nn", "dyngraph.examples.export_digits")))
    with open(args.out, "w") as f:
        json.dump({"onnxruntime": onnx_logits.argmax(1).tolist(),
                   "dg.jit.load": jit_logits.argmax(1).tolist(),
                   "max_logit_difference": float(np.abs(onnx_logits - jit_logits).max()),
                   "imported_model_code": imported}, f)


if __name__ == "__main__":
    main()
