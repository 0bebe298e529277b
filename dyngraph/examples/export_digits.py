"""Train a digits CNN eagerly, export it (ONNX + dg.jit), serve it from another process.

    python -m dyngraph.examples.export_digits            # ~10 s
    python -m dyngraph.examples.export_digits --epochs 1 --out /tmp/digits

Steps: train a small CNN on scikit-learn's 8x8 digits in ordinary eager mode;
export it twice -- ``dg.onnx.export`` (checked with ``onnx.checker``) and
``dg.jit.trace(..., dynamic=["batch"]).save`` (JSON graph + safetensors
weights); then start ``serve_digits.py`` in a separate Python process, which
loads both files *without importing any model code* and writes the
predictions of onnxruntime and of ``dg.jit.load`` for the test images; finally
compare them with the eager model's predictions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import dyngraph as dg
from dyngraph import nn
from dyngraph.nn import functional as F


class DigitsCNN(nn.Module):
    """conv(1->8) relu pool, conv(8->16) relu pool, linear(64->10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def load_digits(seed: int = 0):
    """(x_train, y_train, x_test, y_test): float32 (N, 1, 8, 8) in [0, 1], int64 labels."""
    from sklearn.datasets import load_digits as _load  # noqa: PLC0415  (scikit-learn: optional dependency, imported on first use)

    d = _load()
    x = (d.images.astype(np.float32) / 16.0)[:, None]
    y = d.target.astype(np.int64)
    idx = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    return x[idx[:cut]], y[idx[:cut]], x[idx[cut:]], y[idx[cut:]]


def train(model, x, y, epochs: int, batch_size: int = 64, lr: float = 0.01, seed: int = 0):
    opt = dg.optim.Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total = 0.0
        for i in range(0, len(x), batch_size):
            b = order[i:i + batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(dg.tensor(x[b])), dg.tensor(y[b]))
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        print(f"epoch {epoch + 1}: loss {total / len(x):.4f}")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--out", default=None, help="folder for the exported files (default: temporary)")
    args = ap.parse_args(argv)
    dg.manual_seed(0)
    x_train, y_train, x_test, y_test = load_digits()
    model = DigitsCNN()
    t0 = time.perf_counter()
    train(model, x_train, y_train, args.epochs)
    print(f"trained in {time.perf_counter() - t0:.1f} s")
    model.eval()
    with dg.no_grad():
        eager_pred = model(dg.tensor(x_test)).numpy().argmax(1)
    print(f"eager test accuracy: {(eager_pred == y_test).mean():.3f}")

    out = args.out or tempfile.mkdtemp(prefix="dyngraph_digits_")
    os.makedirs(out, exist_ok=True)
    example = dg.tensor(x_test[:4])
    onnx_path = os.path.join(out, "digits.onnx")
    graph_path = os.path.join(out, "digits.dgraph")
    dg.onnx.export(model, (example,), onnx_path, input_names=["images"], output_names=["logits"],
                   dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    with dg.no_grad():
        dg.jit.trace(model, (example,), dynamic=["batch"]).save(graph_path)
    images = os.path.join(out, "test_images.npy")
    np.save(images, x_test)
    print(f"exported {onnx_path} and {graph_path}")

    # serve from a separate process that never imports the model code
    server = os.path.join(os.path.dirname(__file__), "serve_digits.py")
    preds_path = os.path.join(out, "predictions.json")
    subprocess.run([sys.executable, server, "--onnx", onnx_path, "--graph", graph_path,
                    "--images", images, "--out", preds_path], check=True)
    with open(preds_path) as f:
        served = json.load(f)
    onnx_pred = np.array(served["onnxruntime"])
    jit_pred = np.array(served["dg.jit.load"])
    result = {
        "accuracy": float((eager_pred == y_test).mean()),
        "onnx_agrees": float((onnx_pred == eager_pred).mean()),
        "jit_agrees": float((jit_pred == eager_pred).mean()),
        "server_imported_model_code": served["imported_model_code"],
    }
    print(f"onnxruntime agrees with eager on {result['onnx_agrees']:.1%} of the test images, "
          f"dg.jit.load on {result['jit_agrees']:.1%}")
    return result


if __name__ == "__main__":
    main()
