"""Whole-module checkpoints (issue 14): ``dg.save(model, f)`` / ``dg.load(f)`` with an allow-list,
no pickle, no ``__init__`` call, nothing imported that the file names."""

from __future__ import annotations

import io
import json
import struct
import sys
import zlib

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import serialization
from dyngraph.serialization import CheckpointError

INIT_CALLS = []


class Net(dg.nn.Module):
    """A user model: nested containers, an LSTM, BatchNorm, plain attributes, a tied weight."""

    def __init__(self, hidden: int = 5):
        super().__init__()
        INIT_CALLS.append(hidden)
        self.hidden = hidden
        self.scale = 0.5
        self.names = ("in", ["x", None], {"k": 1.5, 3: True})
        self.act = dg.nn.functional.tanh
        self.dtype_pref = dg.float32
        self.features = dg.nn.Sequential(
            dg.nn.Linear(3, 4), dg.nn.ReLU(), dg.nn.BatchNorm1d(4),
            dg.nn.Sequential(dg.nn.Linear(4, 4), dg.nn.Dropout(0.1)))
        self.lstm = dg.nn.LSTM(4, hidden, num_layers=2, batch_first=True)
        self.head = dg.nn.Linear(hidden, 4)
        self.head.weight = self.features[3][0].weight if hidden == 4 else self.head.weight
        self.tied = self.features[0]                      # the same submodule twice
        self.register_buffer("steps", dg.zeros((), dtype=dg.int64))
        self.register_buffer("cache", dg.ones(2), persistent=False)
        self.register_parameter("unused", None)
        self.extra = dg.nn.ModuleList([dg.nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):                 # x: (batch, time, 3)
        b, t, _ = x.shape
        h = self.features(x.reshape(b * t, 3)).reshape(b, t, 4)
        out, _ = self.lstm(h)
        return self.act(self.head(out)) * self.scale


def _trained_net(hidden=5):
    dg.manual_seed(0)
    net = Net(hidden)
    opt = dg.optim.SGD(net.parameters(), lr=0.1)
    x = dg.randn(2, 6, 3)
    for _ in range(3):                     # move BatchNorm's running statistics off their defaults
        opt.zero_grad()
        net(x).pow(2).mean().backward()
        opt.step()
    net.eval()
    return net, x


def _bytes(obj):
    buf = io.BytesIO()
    dg.save(obj, buf)
    return buf.getvalue()


def test_custom_module_round_trip(tmp_path):
    net, x = _trained_net()
    path = tmp_path / "net.safetensors"
    dg.save(net, path)
    INIT_CALLS.clear()
    with serialization.safe_globals([Net]):
        back = dg.load(path)
    assert INIT_CALLS == []                                   # __init__ was not run
    assert type(back) is Net and back is not net
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())
    sd, sd2 = net.state_dict(), back.state_dict()
    assert list(sd) == list(sd2)
    for k in sd:
        assert sd[k].dtype == sd2[k].dtype
        np.testing.assert_array_equal(sd[k].numpy(), sd2[k].numpy())
    assert back.hidden == 5 and back.scale == 0.5 and back.names == net.names
    assert back.act is dg.nn.functional.tanh and back.dtype_pref is dg.float32
    assert back.tied is back.features[0]
    assert [m.training for m in back.modules()] == [m.training for m in net.modules()] \
        and not back.training
    assert "cache" not in sd2 and back.cache.tolist() == [1.0, 1.0]
    assert back.unused is None and "unused" in back._parameters
    assert all(isinstance(p, dg.nn.Parameter) and p.requires_grad for p in back.parameters())
    # it trains: gradients reach every parameter that the forward uses
    back.train()
    back(x).sum().backward()
    assert back.features[0].weight.grad is not None and back.lstm.weight_hh_l1.grad is not None


def test_tied_parameters_stay_tied():
    net, x = _trained_net(hidden=4)
    assert net.head.weight is net.features[3][0].weight
    with serialization.safe_globals([Net]):
        back = dg.load(io.BytesIO(_bytes(net)))
    assert back.head.weight is back.features[3][0].weight
    assert len(list(back.parameters())) == len(list(net.parameters()))
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())


def test_without_allow_list_the_class_is_named():
    net, _ = _trained_net()
    data = _bytes(net)
    with pytest.raises(CheckpointError, match=r"'[\w.]*test_serialization_modules\.Net'.*add_safe_globals\(\[Net\]\)"):
        dg.load(io.BytesIO(data))
    assert serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)) == [f"{Net.__module__}.Net"]
    serialization.add_safe_globals([Net])
    try:
        assert Net in serialization.get_safe_globals()
        assert type(dg.load(io.BytesIO(data))) is Net
        assert serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)) == []
    finally:
        serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []
    with pytest.raises(CheckpointError, match="not an allowed global"):
        dg.load(io.BytesIO(data))


def test_dyngraph_classes_are_allowed_by_default():
    x = dg.randn(4, 2, 8)
    for m in (dg.nn.Sequential(dg.nn.Linear(8, 8), dg.nn.GELU()), dg.nn.LSTM(8, 3),
              dg.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), dg.nn.Conv1d(2, 3, 3)):
        m.eval()
        back = dg.load(io.BytesIO(_bytes(m)))
        assert type(back) is type(m)
        inp = x                            # (4, 2, 8): every module above reads this shape
        out, out2 = m(inp), back(inp)
        out, out2 = (out[0], out2[0]) if isinstance(out, tuple) else (out, out2)
        np.testing.assert_array_equal(out.detach().numpy(), out2.detach().numpy())


def test_module_inside_a_checkpoint_dict():
    net, x = _trained_net()
    opt = dg.optim.Adam(net.parameters())
    with serialization.safe_globals([Net]):
        back = dg.load(io.BytesIO(_bytes({"model": net, "optimizer": opt.state_dict(), "epoch": 4})))
    assert back["epoch"] == 4 and type(back["model"]) is Net
    opt2 = dg.optim.Adam(back["model"].parameters())
    opt2.load_state_dict(back["optimizer"])


def test_saved_under_another_name():
    net, x = _trained_net()
    saved_as = f"{Net.__module__}.Net"
    other = "old.place." + "M" * (len(saved_as) - 10)     # same length: the offsets stay valid
    data = _recheck(_bytes(net).replace(saved_as.encode(), other.encode()))
    with pytest.raises(CheckpointError, match=other):
        dg.load(io.BytesIO(data))
    with serialization.safe_globals([(Net, other)]):
        back = dg.load(io.BytesIO(data))
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())


def test_unsavable_module_state_is_refused_at_save():
    m = dg.nn.Linear(2, 2)
    m.register_forward_hook(lambda *a: None)
    with pytest.raises(TypeError, match="hooks are code"):
        dg.save(m, io.BytesIO())
    m2 = dg.nn.Linear(2, 2)
    m2.config = object()
    with pytest.raises(TypeError, match=r"obj\['config'\]"):
        dg.save(m2, io.BytesIO())
    opt = dg.optim.SGD(dg.nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"type SGD at obj\['opt'\].*save its .state_dict\(\) instead"):
        dg.save({"opt": opt}, io.BytesIO())
    m3 = dg.nn.Linear(2, 2)
    m3.forward = dg.nn.functional.relu
    with pytest.raises(TypeError, match="'forward' that replaces a method"):
        dg.save(m3, io.BytesIO())
    with pytest.raises(TypeError, match="not a class or function"):
        serialization.add_safe_globals([3])


def test_user_function_attribute_needs_allow_list():
    def my_act(x):
        return x * 2

    m = dg.nn.Linear(2, 2)
    m.act = my_act
    data = _bytes(m)
    with pytest.raises(CheckpointError, match="my_act"):
        dg.load(io.BytesIO(data))
    with serialization.safe_globals([my_act]):
        assert dg.load(io.BytesIO(data)).act is my_act


# -- crafted files: nothing named by the file is imported or called -------------------------------
PREFIX = b'{"__metadata__":{"dyngraph_check":"crc32:'


def _recheck(data: bytes) -> bytes:
    at = 8 + len(PREFIX)
    crc = zlib.crc32(data[:at] + b"00000000" + data[at + 8:])
    return data[:at] + f"{crc:08x}".encode() + data[at + 8:]


def _craft(root) -> bytes:
    meta = {"dyngraph_check": "crc32:00000000", "format": "pt",
            "dyngraph": json.dumps({"version": 2, "root": root})}
    raw = json.dumps({"__metadata__": meta}, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return _recheck(struct.pack("<Q", len(raw)) + raw)


def _module_node(cls_name, **over):
    node = {"M": cls_name, "id": 0, "training": True, "attrs": [], "params": [], "buffers": [], "modules": []}
    node.update(over)
    return node


@pytest.mark.parametrize("root,match", [
    (_module_node("os.system"), "'os.system', which is not an allowed global"),
    (_module_node("builtins.eval"), "'builtins.eval'"),
    (_module_node("subprocess.Popen"), "'subprocess.Popen'"),
    (_module_node("evil_module_xyz.Payload"), "'evil_module_xyz.Payload'"),
    ({"G": "os.system"}, "'os.system'"),
    ({"G": "builtins.__import__"}, "'builtins.__import__'"),
    ({"L": [{"G": "posix.system"}]}, "'posix.system'"),
    (_module_node("dyngraph.nn.linear.Linear", attrs=[["x", {"G": "os.system"}]]), "'os.system'"),
    (_module_node("dyngraph.nn.functional.relu"), "not a dyngraph Module subclass"),
    (_module_node("dyngraph.nn.linear.Linear", attrs=[["__class__", {"v": 1}]]), "not allowed"),
    (_module_node("dyngraph.nn.linear.Linear", attrs=[["_parameters", {"v": 1}]]), "not allowed"),
    (_module_node("dyngraph.nn.linear.Linear", params=[["a.b", None]]), "not allowed"),
    (_module_node("dyngraph.nn.linear.Linear", params=[["w", {"v": 1}]]), "not stored as a parameter"),
    (_module_node("dyngraph.nn.linear.Linear", modules=[["m", {"v": 1}]]), "not stored as a module"),
    (_module_node("dyngraph.nn.linear.Linear", buffers=[["b", None, "yes"]]), "malformed"),
    (_module_node("dyngraph.nn.linear.Linear", id=3), "out of sequence"),
    (_module_node("dyngraph.nn.linear.Linear", attrs=[["forward", {"G": "dyngraph.nn.functional.relu"}]]),
     "would replace the method/property Linear.forward"),
    (_module_node("dyngraph.nn.linear.Linear", attrs=[["extra_repr", {"v": 1}]]), "would replace"),
    (_module_node("dyngraph.nn.linear.Linear", training=1), "boolean"),
    (_module_node("dyngraph.nn.linear.Linear", code="print(1)"), "expected M, id"),
])
def test_crafted_module_files_refused_and_nothing_imported(root, match):
    before = set(sys.modules)
    with pytest.raises(CheckpointError, match="crafted.safetensors") as ei:
        f = io.BytesIO(_craft(root))
        f.name = "crafted.safetensors"
        dg.load(f)
    assert match in str(ei.value), str(ei.value)
    assert set(sys.modules) <= before
    assert "evil_module_xyz" not in sys.modules


def test_allow_listing_os_system_still_cannot_build_a_module():
    import os

    with serialization.safe_globals([os.system]):
        with pytest.raises(CheckpointError, match="not a dyngraph Module subclass"):
            dg.load(io.BytesIO(_craft(_module_node(f"{os.system.__module__}.system"))))


def test_cyclic_module_reference():
    m = dg.nn.Sequential(dg.nn.Linear(2, 2))
    m.parent_ref = [m]                    # a plain attribute pointing back at the module
    back = dg.load(io.BytesIO(_bytes(m)))
    assert back.parent_ref[0] is back


def test_safe_globals_blocks_nest_and_keep_other_additions():
    class A(dg.nn.Module):
        pass

    class B(dg.nn.Module):
        pass

    with serialization.safe_globals([A]):
        with serialization.safe_globals([B]):
            serialization.add_safe_globals([Net])
            assert serialization.get_safe_globals() == [A, B, Net]
        assert serialization.get_safe_globals() == [A, Net]
    assert serialization.get_safe_globals() == [Net]
    serialization.clear_safe_globals()


def test_weights_only_false_allows_modules_this_program_defined():
    """PyTorch's whole-model idiom: torch.load(path, weights_only=False)."""
    net, x = _trained_net()
    data = _bytes(net)
    with pytest.raises(CheckpointError, match="not an allowed global"):
        dg.load(io.BytesIO(data))
    back = dg.load(io.BytesIO(data), weights_only=False)
    assert type(back) is Net
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())


@pytest.mark.parametrize("root", [
    _module_node("os.system"), {"G": "os.system"}, _module_node("evil_module_xyz.Payload"),
    {"G": "builtins.eval"}, _module_node("dyngraph.nn.functional.relu"),
])
def test_weights_only_false_still_refuses_everything_else(root):
    before = set(sys.modules)
    f = io.BytesIO(_craft(root))
    f.name = "crafted.safetensors"
    with pytest.raises(CheckpointError, match="crafted.safetensors"):
        dg.load(f, weights_only=False)
    assert set(sys.modules) <= before


@pytest.mark.parametrize("name,fn", [
    ("dyngraph.ops.shape.pad", "pad"),             # the name written before dyngraph/surface existed
    ("dyngraph.surface.shape.pad", "pad"),         # the name written now
    ("dyngraph.ops.indexing.one_hot", "one_hot"),
    ("dyngraph.nn.functional.logsigmoid", "logsigmoid"),  # now defined in nn._functional_common
])
def test_functions_load_under_their_old_and_new_module_names(name, fn):
    root = _module_node("dyngraph.nn.flatten.Flatten", attrs=[["act", {"G": name}]])
    m = dg.load(io.BytesIO(_craft(root)), weights_only=False)
    assert m.act is getattr(dg.nn.functional, fn)
