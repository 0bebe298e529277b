"""dg.save / dg.load: round trips, PyTorch interop, atomic writes, corrupted and pickle files."""

from __future__ import annotations

import io
import math
import os
import pickle

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import dyngraph as dg
from dyngraph import serialization


class TwoLayer(dg.nn.Module):
    """A small model built from Parameters only (mirrors torch's Linear naming)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(1)
        self.fc1 = dg.nn.Module()
        self.fc1.weight = dg.nn.Parameter(dg.tensor(rng.standard_normal((4, 3)).astype(np.float32)))
        self.fc1.bias = dg.nn.Parameter(dg.tensor(rng.standard_normal(4).astype(np.float32)))
        self.fc2 = dg.nn.Module()
        self.fc2.weight = dg.nn.Parameter(dg.tensor(rng.standard_normal((2, 4)).astype(np.float32)))
        self.fc2.bias = dg.nn.Parameter(dg.tensor(rng.standard_normal(2).astype(np.float32)))


def _torch_model():
    return torch.nn.Sequential()


def _torch_twolayer():
    m = torch.nn.Module()
    m.fc1 = torch.nn.Linear(3, 4)
    m.fc2 = torch.nn.Linear(4, 2)
    return m


def _eq(a, b):
    np.testing.assert_array_equal(np.asarray(a.detach().numpy() if isinstance(a, dg.Tensor) else a),
                                  np.asarray(b.detach().numpy() if isinstance(b, dg.Tensor) else b))


def test_round_trip_nested(tmp_path):
    w = dg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    obj = {
        "model": {"fc.weight": w, "fc.bias": dg.tensor([1, 2], dtype=dg.int64)},
        "optimizer": {"state": {0: {"step": 3, "exp_avg": dg.zeros(2, 3)}},
                      "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0], "nesterov": False}]},
        "epoch": 7, "name": "run-1", "best": float("inf"), "nan": float("nan"), "none": None,
        "flags": [True, False], "array": np.array([[1, 2]], dtype=np.uint8), "scalar": dg.tensor(2.5),
        (1, "a"): "tuple key", 2.5: "float key", "empty": dg.zeros(0, 4), "bool": dg.tensor([True, False]),
        "half": dg.ones(3, dtype=dg.float16), "i32": dg.tensor([1], dtype=dg.int32),
    }
    path = tmp_path / "ckpt.safetensors"
    dg.save(obj, path)
    back = dg.load(path)
    assert list(back) == list(obj)
    _eq(back["model"]["fc.weight"], w)
    assert back["model"]["fc.weight"].requires_grad and back["model"]["fc.weight"].dtype == dg.float64
    assert back["model"]["fc.bias"].dtype == dg.int64
    assert back["optimizer"]["state"][0]["step"] == 3 and 0 in back["optimizer"]["state"]
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert back["epoch"] == 7 and back["name"] == "run-1" and back["none"] is None
    assert back["best"] == math.inf and math.isnan(back["nan"]) and back["flags"] == [True, False]
    assert isinstance(back["array"], np.ndarray) and back["array"].dtype == np.uint8
    assert back["scalar"].shape == () and back["scalar"].item() == 2.5
    assert back[(1, "a")] == "tuple key" and back[2.5] == "float key"
    assert tuple(back["empty"].shape) == (0, 4)
    assert back["bool"].dtype == dg.bool and back["half"].dtype == dg.float16
    assert back["i32"].dtype == dg.int32
    # loaded tensors own writable memory
    back["optimizer"]["state"][0]["exp_avg"].add_(1)


def test_shared_tensors_stored_once(tmp_path):
    t = dg.ones(1000)
    dg.save({"a": t, "b": t, "c": [t]}, tmp_path / "s.safetensors")
    assert os.path.getsize(tmp_path / "s.safetensors") < 1000 * 4 + 2000
    back = dg.load(tmp_path / "s.safetensors")
    assert back["a"] is back["b"] or np.shares_memory(back["a"].numpy(), back["b"].numpy())


def test_file_objects():
    buf = io.BytesIO()
    dg.save({"x": dg.arange(5)}, buf)
    buf.seek(0)
    assert dg.load(buf)["x"].tolist() == [0, 1, 2, 3, 4]


def test_model_state_dict_round_trip(tmp_path):
    m = TwoLayer()
    dg.save(m.state_dict(), tmp_path / "m.safetensors")
    m2 = TwoLayer()
    with dg.no_grad():
        for p in m2.parameters():
            p.zero_()
    m2.load_state_dict(dg.load(tmp_path / "m.safetensors"))
    for (k1, v1), (k2, v2) in zip(m.state_dict().items(), m2.state_dict().items(), strict=True):
        assert k1 == k2
        _eq(v1, v2)


def test_pytorch_file_loads_into_dyngraph_model(tmp_path):
    tm = _torch_twolayer()
    save_file(tm.state_dict(), str(tmp_path / "torch.safetensors"))
    m = TwoLayer()
    sd = dg.load(tmp_path / "torch.safetensors")
    assert set(sd) == set(tm.state_dict())
    m.load_state_dict(sd)
    for k, v in tm.state_dict().items():
        _eq(m.state_dict()[k], v.numpy())


def test_dyngraph_file_loads_into_pytorch_model(tmp_path):
    m = TwoLayer()
    dg.save(m.state_dict(), tmp_path / "dg.safetensors")
    tm = _torch_twolayer()
    tm.load_state_dict(load_file(str(tmp_path / "dg.safetensors")))
    for k, v in m.state_dict().items():
        _eq(v, tm.state_dict()[k].numpy())


def test_nested_checkpoint_is_readable_by_safetensors(tmp_path):
    dg.save({"model": {"w": dg.ones(2)}, "opt": {"state": {0: {"m": dg.zeros(2)}}}, "epoch": 1},
            tmp_path / "c.safetensors")
    flat = load_file(str(tmp_path / "c.safetensors"))
    assert set(flat) == {"model.w", "opt.state.0.m"}


def test_unsupported_objects_rejected_without_touching_file(tmp_path):
    path = tmp_path / "c.safetensors"
    dg.save({"a": dg.ones(2)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match=r"type object at obj\['fn'\].*never pickles"):
        dg.save({"fn": object()}, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.safetensors"]   # no temporary left behind


def test_atomic_write_survives_failure_mid_write(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    dg.save({"w": dg.ones(100), "epoch": 1}, path)
    before = path.read_bytes()
    calls = {"n": 0}
    real = serialization._write_bytes

    def failing(fh, data):
        calls["n"] += 1
        if calls["n"] == 2:          # header written, then half of the first tensor, then "crash"
            fh.write(bytes(data)[: len(bytes(data)) // 2])
            raise OSError("disk full (simulated)")
        real(fh, data)

    monkeypatch.setattr(serialization, "_write_bytes", failing)
    with pytest.raises(OSError, match="simulated"):
        dg.save({"w": dg.zeros(100), "epoch": 2}, path)
    assert path.read_bytes() == before
    assert dg.load(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.safetensors"]


def test_truncated_files_rejected(tmp_path):
    path = tmp_path / "c.safetensors"
    dg.save({"w": dg.arange(50, dtype=dg.float32), "n": 3}, path)
    data = path.read_bytes()
    for cut in (0, 5, 12, len(data) // 2, len(data) - 1):
        bad = tmp_path / f"cut{cut}.safetensors"
        bad.write_bytes(data[:cut])
        with pytest.raises(serialization.CheckpointError, match=rf"cut{cut}\.safetensors.*(truncated|short|corrupt)"):
            dg.load(bad)


def test_corrupted_files_rejected(tmp_path):
    path = tmp_path / "c.safetensors"
    dg.save({"w": dg.arange(50, dtype=dg.float32)}, path)
    data = bytearray(path.read_bytes())
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF            # a bit flip inside the tensor data
    (tmp_path / "flip.safetensors").write_bytes(bytes(flipped))
    with pytest.raises(serialization.CheckpointError, match="flip.safetensors.*checksum"):
        dg.load(tmp_path / "flip.safetensors")
    header = bytearray(data)
    header[9] = ord("#")            # break the JSON header
    (tmp_path / "head.safetensors").write_bytes(bytes(header))
    with pytest.raises(serialization.CheckpointError, match="head.safetensors.*not valid JSON"):
        dg.load(tmp_path / "head.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(serialization.CheckpointError, match="junk.safetensors"):
        dg.load(tmp_path / "junk.safetensors")
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        dg.load(tmp_path / "missing.safetensors")


def test_loading_failure_changes_nothing(tmp_path):
    m = TwoLayer()
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(serialization.CheckpointError):
        m.load_state_dict(dg.load(tmp_path / "bad.safetensors"))
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_pickle_content_rejected(tmp_path):
    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"w": _Evil()}))
    with pytest.raises(serialization.CheckpointError, match="evil.pt.*pickle.*arbitrary code"):
        dg.load(tmp_path / "evil.pt")
    torch.save({"w": torch.ones(2)}, tmp_path / "torch.pt")
    with pytest.raises(serialization.CheckpointError, match="torch.pt.*pickle"):
        dg.load(tmp_path / "torch.pt")


def test_optimizer_checkpoint_resume(tmp_path):
    """Save model + optimizer + scheduler state mid-training, reload, continue: identical run."""
    def make():
        w = dg.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
        opt = dg.optim.Adam([w], lr=0.05, amsgrad=True)
        sched = dg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        return w, opt, sched

    def train(w, opt, sched, n):
        for _ in range(n):
            opt.zero_grad()
            ((w * w * w).sum() + w.sum()).backward()
            opt.step()
            sched.step()

    w, opt, sched = make()
    train(w, opt, sched, 8)
    w1, opt1, sched1 = make()
    train(w1, opt1, sched1, 4)
    dg.save({"w": w1, "opt": opt1.state_dict(), "sched": sched1.state_dict(), "epoch": 4}, tmp_path / "r.st")
    ck = dg.load(tmp_path / "r.st")
    w2, opt2, sched2 = make()
    with dg.no_grad():
        w2.copy_(ck["w"])
    opt2.load_state_dict(ck["opt"])
    sched2.load_state_dict(ck["sched"])
    train(w2, opt2, sched2, 4)
    np.testing.assert_array_equal(w2.detach().numpy(), w.detach().numpy())
