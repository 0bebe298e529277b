"""End to end: the flagship digits demo, and a Fashion-MNIST MLP on a small budget."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.examples import digits as demo

FMNIST = "/usr/share/datasets/fashion-mnist"


@pytest.fixture(autouse=True)
def _one_blas_thread():
    # The suite runs in parallel on 2 shared cores: multi-threaded BLAS on tiny GEMMs
    # then oversubscribes the CPU and runs 10-50x slower. One thread keeps the budget.
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1):
        yield


@pytest.mark.slow
def test_digits_cnn_demo(tmp_path):
    out = io.StringIO()
    path = tmp_path / "digits.safetensors"
    result = demo.train(demo.parse_args(["--checkpoint", str(path), "--quiet"]), out=out)
    text = out.getvalue()
    assert result["accuracy"] >= 0.97, text
    assert result["identical"] and result["max_diff"] == 0.0
    assert "test accuracy:" in text and "predictions identical: True" in text
    ckpt = dg.load(path)
    assert set(ckpt) == {"model", "optimizer", "scheduler", "epoch", "test_accuracy", "config"}
    assert ckpt["epoch"] == 12 and ckpt["test_accuracy"] == result["accuracy"]
    assert ckpt["optimizer"]["state"][0]["step"] == 12 * 45          # 1438 images / batch 32 = 45 steps
    model = demo.make_model("cnn", 8)
    model.load_state_dict(ckpt["model"])
    test = dg.data.datasets.digits("test")
    acc = (demo.predict(model, test.data).argmax(1) == test.targets.numpy()).mean()
    assert acc == result["accuracy"]


def test_demo_progress_bar_and_options(tmp_path):
    out = io.StringIO()
    result = demo.train(demo.parse_args(["--epochs", "1", "--batch-size", "256", "--lr", "0.02", "--seed", "3",
                                         "--model", "mlp", "--checkpoint", str(tmp_path / "c.st")]), out=out)
    text = out.getvalue()
    assert "epoch 1/1" in text and "loss=" in text and "acc=" in text      # the live tqdm bar
    assert "MLP" in text and result["identical"]
    args = demo.parse_args(["--dataset", "fashion-mnist"])
    assert args.epochs == demo.DEFAULTS["fashion-mnist"]["epochs"] and args.model == "cnn"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(FMNIST), reason="Fashion-MNIST not installed: "
                    "apt-get install dataset-fashion-mnist (puts IDX files in /usr/share/datasets/fashion-mnist)")
def test_fashion_mnist_mlp_small_budget(tmp_path):
    result = demo.train(demo.parse_args(["--dataset", "fashion-mnist", "--model", "mlp", "--epochs", "2",
                                         "--train-size", "20000", "--batch-size", "64", "--lr", "0.003",
                                         "--quiet", "--checkpoint", str(tmp_path / "f.st")]), out=io.StringIO())
    assert result["accuracy"] >= 0.85, result
    assert np.isfinite(result["seconds"])
