"""dg.tensorboard.SummaryWriter, read back with TensorBoard's own event reader and server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import dyngraph as dg

pytest.importorskip("tensorboardX")
ea_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
EventAccumulator = ea_mod.EventAccumulator


class Lin(dg.nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.weight = dg.nn.Parameter(dg.randn(o, i))
        self.bias = dg.nn.Parameter(dg.zeros(o))

    def forward(self, x):
        return x @ self.weight.mT + self.bias


class Net(dg.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Lin(4, 8)
        self.head = Lin(8, 3)

    def forward(self, x):
        return self.head(dg.relu(self.enc(x)))


def _load(path):
    acc = EventAccumulator(str(path), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    return acc


def test_scalars_histogram_image_text(tmp_path):
    with dg.tensorboard.SummaryWriter(log_dir=str(tmp_path), flush_secs=1) as w:
        for i in range(5):
            w.add_scalar("train/loss", dg.tensor(1.0 / (i + 1)), i)
        w.add_histogram("weights", dg.randn(1000), global_step=3)
        w.add_histogram("uniform", np.linspace(0, 1, 101), 0, bins=10)
        w.add_image("chw", np.random.rand(3, 8, 10), 0)
        w.add_image("hwc", (np.random.rand(6, 7, 3) * 255).astype(np.uint8), 0, dataformats="HWC")
        w.add_image("gray", np.random.rand(5, 9), 0, dataformats="HW")
        w.add_text("notes", "hello **world**", 0)
    acc = _load(tmp_path)
    loss = acc.Scalars("train/loss")
    assert [e.step for e in loss] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose([e.value for e in loss], [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5], rtol=1e-6)
    h = acc.Histograms("weights")[0]
    assert h.step == 3 and h.histogram_value.num == 1000
    assert sum(h.histogram_value.bucket) == 1000
    u = acc.Histograms("uniform")[0].histogram_value
    assert u.min == 0 and u.max == 1 and sum(u.bucket) == 101
    im = acc.Images("chw")[0]
    assert (im.width, im.height) == (10, 8) and im.encoded_image_string.startswith(b"\x89PNG")
    assert (acc.Images("hwc")[0].width, acc.Images("gray")[0].width) == (7, 9)
    text = acc.Tensors("notes/text_summary")[0]
    assert text.tensor_proto.string_val[0] == b"hello **world**"


def test_image_errors_name_the_problem(tmp_path):
    with dg.tensorboard.SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match="dataformats"):
            w.add_image("x", np.zeros((3, 4, 5)), 0, dataformats="HW")
        with pytest.raises(ValueError, match="one element"):
            w.add_scalar("x", np.zeros(3), 0)


def test_add_scalars_and_hparams(tmp_path):
    with dg.tensorboard.SummaryWriter(str(tmp_path)) as w:
        for i in range(3):
            w.add_scalars("acc", {"train": 0.5 + i / 10, "val": 0.4 + i / 10}, i)
        w.add_hparams({"lr": 0.1, "opt": "sgd", "bs": 32}, {"hparam/accuracy": 0.9},
                      hparam_domain_discrete={"opt": ["sgd", "adam"]}, run_name="trial0")
    train = _load(tmp_path / "acc_train").Scalars("acc")
    np.testing.assert_allclose([e.value for e in train], [0.5, 0.6, 0.7], rtol=1e-6)
    hp = _load(tmp_path / "trial0")
    assert hp.Scalars("hparam/accuracy")[0].value == pytest.approx(0.9)
    assert "_hparams_/experiment" in hp.summary_metadata


def test_add_graph_from_one_dynamic_step(tmp_path):
    net = Net()
    with dg.tensorboard.SummaryWriter(str(tmp_path)) as w:
        w.add_graph(net, dg.randn(2, 4))
    g = _load(tmp_path).Graph()
    nodes = {n.name: n for n in g.node}
    assert nodes["Net/enc/weight"].op == "Parameter"
    mm = [n for n in g.node if n.name.startswith("Net/enc/matmul")]
    assert mm and list(mm[0].input) == ["input/input_0", "Net/enc/permute_0"]
    assert nodes["input/input_0"].op == "Input"
    relu = nodes["Net/relu_0"]
    assert relu.input == ["Net/enc/add_0"]
    dims = [d.size for d in relu.attr["_output_shapes"].list.shape[0].dim]
    assert dims == [2, 8]
    assert nodes["output/output_0"].input == ["Net/head/add_0"]


def test_add_graph_without_grad_is_an_error(tmp_path):
    class Plain(dg.nn.Module):
        def forward(self, x):
            return x * 2

    with dg.tensorboard.SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(RuntimeError, match="no graph"):
            w.add_graph(Plain(), dg.randn(2))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


def test_tensorboard_server_shows_the_run(tmp_path):
    """Start `tensorboard` on 127.0.0.1, read the run list and scalars over HTTP, stop it."""
    tb = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    if not os.path.exists(tb):
        pytest.skip("the tensorboard program is not installed (pip install tensorboard)")
    run = tmp_path / "exp1"
    with dg.tensorboard.SummaryWriter(str(run)) as w:
        for i in range(4):
            w.add_scalar("loss", 10.0 - i, i)
        w.add_graph(Net(), dg.randn(2, 4))
    port = _free_port()
    proc = subprocess.Popen(
        [tb, "--logdir", str(tmp_path), "--host", "127.0.0.1", "--port", str(port),
         "--reload_interval", "1", "--load_fast", "false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        runs = None
        while time.monotonic() < deadline:
            try:
                runs = _get(f"{base}/data/runs")
                if "exp1" in runs:
                    tags = _get(f"{base}/data/plugin/scalars/tags")
                    if "loss" in tags.get("exp1", {}):
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"tensorboard exited early with code {proc.returncode}")
            time.sleep(0.5)
        else:
            pytest.fail(f"tensorboard did not show run exp1 within 60 s (runs: {runs})")
        assert "exp1" in runs
        data = _get(f"{base}/data/plugin/scalars/scalars?run=exp1&tag=loss")
        assert [row[1] for row in data] == [0, 1, 2, 3]
        assert [row[2] for row in data] == [10.0, 9.0, 8.0, 7.0]
        # the Graphs tab parses and serves the GraphDef made from the live graph
        assert _get(f"{base}/data/plugin/graphs/info")["exp1"]["run_graph"] is True
        with urllib.request.urlopen(
                f"{base}/data/plugin/graphs/graph?run=exp1&conceptual=false", timeout=10) as r:
            pbtxt = r.read().decode()
        assert 'name: "Net/enc/matmul_0"' in pbtxt and 'op: "Parameter"' in pbtxt
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
