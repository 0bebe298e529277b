"""dg.profiler: per-primitive forward/backward times, modules, tables, Chrome traces."""

from __future__ import annotations

import json

import pytest

import dyngraph as dg
from dyngraph.autograd import engine
from dyngraph.autograd.grad_mode import STATE


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
        self.fc1 = Lin(4, 16)
        self.fc2 = Lin(16, 1)

    def forward(self, x):
        return self.fc2(dg.tanh(self.fc1(x)))


def _step(net, x):
    loss = (net(x) ** 2).mean()
    loss.backward()
    return loss


def test_counts_forward_and_backward_per_primitive():
    net, x = Net(), dg.randn(8, 4)
    original = engine._run_node
    with dg.profiler.profile() as prof:
        for _ in range(3):
            _step(net, x)
    rows = {(r.name, r.cat): r for r in prof.key_averages()}
    assert rows[("matmul", "forward")].count == 6
    assert rows[("tanh", "forward")].count == 3
    assert rows[("MatmulBackward0", "backward")].count == 6
    assert rows[("TanhBackward0", "backward")].count == 3
    assert all(r.cpu_time_total > 0 for r in rows.values())
    # nothing stays installed after the block: no cost on the hot path
    assert STATE.interpreter is None and engine._run_node is original


def test_modules_and_table_sorting():
    net, x = Net(), dg.randn(8, 4)
    with dg.profiler.profile() as prof:
        _step(net, x)
    by_mod = {(r.name, r.cat, r.key[-1]) for r in prof.key_averages(group_by_module=True)}
    assert ("matmul", "forward", "fc1") in by_mod and ("matmul", "forward", "fc2") in by_mod
    assert ("tanh", "forward", "Net") in by_mod
    assert ("TanhBackward0", "backward", "Net") in by_mod
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=4)
    lines = table.splitlines()
    assert "Self CPU %" in lines[1] and "# of Calls" in lines[1]
    body = lines[3:7]
    assert len(body) == 4
    totals = sorted(prof.key_averages(), key=lambda r: r.cpu_time_total, reverse=True)
    assert body[0].startswith(totals[0].name)
    by_count = prof.key_averages().table(sort_by="count", row_limit=1).splitlines()[3]
    assert by_count.split()[0] in ("matmul", "add", "permute", "MatmulBackward0", "AddBackward0",
                                   "PermuteBackward0", "TransposeBackward0")
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="gpu_time")


def test_record_function_nests_and_self_time():
    x = dg.randn(64, 64, requires_grad=True)
    with dg.profiler.profile() as prof:
        with dg.profiler.record_function("outer"):
            y = (x @ x).sum()
            y.backward()
    rows = {r.name: r for r in prof.key_averages()}
    outer = rows["outer"]
    assert outer.cat == "user_annotation"
    inner = sum(r.cpu_time_total for r in rows.values() if r.name != "outer")
    assert outer.cpu_time_total >= inner
    assert outer.self_cpu_time_total == pytest.approx(outer.cpu_time_total - inner, rel=1e-6, abs=1e-3)
    # outside a profile record_function does nothing
    with dg.profiler.record_function("unused"):
        pass


def test_chrome_trace_format(tmp_path):
    net, x = Net(), dg.randn(8, 4)
    with dg.profiler.profile(record_shapes=True) as prof:
        with dg.profiler.record_function("step"):
            _step(net, x)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    evs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in evs} == {"forward", "backward", "user_annotation"}
    for e in evs:
        assert isinstance(e["ts"], float) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["name"]
    step = next(e for e in evs if e["name"] == "step")
    for e in evs:  # every op lies inside the user range
        assert step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 1e-3
    mm = next(e for e in evs if e["name"] == "matmul")
    assert mm["args"]["module"] in ("fc1", "fc2") and mm["args"]["input_shapes"]


def test_profile_composes_with_record_and_disabled():
    net, x = Net(), dg.randn(2, 4)
    with dg.viz.record(), dg.profiler.profile() as prof:
        y = net(x).sum()
    assert "source" in y.grad_fn.metadata
    assert any(r.name == "sum" for r in prof.key_averages())
    assert STATE.interpreter is None
    with dg.profiler.profile(enabled=False) as off:
        net(x)
    assert len(off.events()) == 0


def test_with_stack_and_unsupported_options(tmp_path):
    x = dg.randn(4, requires_grad=True)
    with dg.profiler.profile(with_stack=True) as prof:
        (x * 3).sum()  # STACK-MARK
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    evs = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    mul = next(e for e in evs if e["name"] == "mul")
    assert "STACK-MARK" in mul["args"]["source"] and "test_profiler.py" in mul["args"]["source"]
    with pytest.raises(NotImplementedError, match="schedule"):
        dg.profiler.profile(schedule=lambda step: None)
    with pytest.warns(UserWarning, match="profile_memory"):
        dg.profiler.profile(profile_memory=True)
