"""dg.viz: drawing the live graph, recording annotations, collapsing, diffing."""

from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.autograd.grad_mode import STATE

pytest.importorskip("graphviz")

HAVE_DOT = shutil.which("dot") is not None


class Lin(dg.nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.weight = dg.nn.Parameter(dg.randn(o, i) * 0.3)
        self.bias = dg.nn.Parameter(dg.zeros(o))

    def forward(self, x):
        return x @ self.weight.mT + self.bias


class MLP(dg.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Lin(4, 8)
        self.fc2 = Lin(8, 2)

    def forward(self, x):
        return self.fc2(dg.tanh(self.fc1(x)))


class Cell(dg.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = dg.nn.Parameter(dg.randn(n, n) * 0.1)

    def forward(self, h, x):
        return dg.tanh(h @ self.w + x)


class Loop(dg.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.cell = Cell(n)

    def forward(self, xs):
        h = xs[0]
        for t in range(1, xs.shape[0]):
            h = self.cell(h, xs[t])
        return h


def test_draw_small_graph_labels_shapes_params():
    dg.manual_seed(0)
    m = MLP()
    y = m(dg.randn(3, 4))
    loss = (y * y).mean()
    d = dg.viz.draw(loss, params=dict(m.named_parameters()))
    src = d.source
    for op in ("matmul", "add", "tanh", "mul", "mean"):
        assert f'label="{op}\\n' in src
    assert "(3, 8) float32" in src  # an intermediate shape derived from the live graph
    assert "fc1.weight\\n(8, 4) float32" in src and "fc2.bias\\n(2) float32" in src
    assert "#add8e6" in src  # parameters are blue
    assert "saved tensor\\n(3, 4) float32" in src  # x is saved by matmul although it needs no grad
    assert 'label="output\\n() float32"' in src
    # one box per primitive: count node statements of ops
    view = dg.viz.GraphView(loss, m)
    assert src.count('style="rounded,filled"') == len(view) == 9


def test_draw_params_accepts_module_and_pairs():
    m = MLP()
    y = m(dg.randn(2, 4)).sum()
    assert "fc1.weight" in dg.viz.draw(y, params=m).source
    assert "fc1.weight" in dg.viz.draw(y, params=m.named_parameters()).source
    with pytest.raises(TypeError, match="Tensor"):
        dg.viz.draw(3.0)
    with pytest.raises(ValueError, match="no autograd graph"):
        dg.viz.draw(dg.randn(3) * 2)


def test_record_annotates_source_module_and_shapes():
    m = MLP()
    with dg.viz.record():
        y = m(dg.randn(3, 4))
        loss = y.sum()  # MARK-LOSS
    info = loss.grad_fn.metadata
    assert info["shape"] == () and info["dtype"] == "float32"
    assert info["source"].startswith(__file__) and "MARK-LOSS" in info["source"]
    mods = {n.metadata.get("module") for _, n in dg.autograd.graph.walk(loss)
            if isinstance(n, dg.autograd.graph.Node)}
    assert {"fc1", "fc2", ""} <= mods
    assert STATE.interpreter is None  # recording leaves nothing behind
    d = dg.viz.draw(loss, params=m, group_by_module=True)
    assert 'subgraph "cluster_fc1"' in d.source and 'subgraph "cluster_fc2"' in d.source
    # walk lists the creating line of every node
    lines = [n.metadata.get("source") for _, n in dg.autograd.graph.walk(loss)
             if isinstance(n, dg.autograd.graph.Node)]
    assert all(s and ".py:" in s for s in lines)


def test_record_source_toggle():
    x = dg.randn(3, requires_grad=True)
    with dg.viz.record_source(True):
        y = (x * 2).sum()
    assert "y = (x * 2).sum()" in y.grad_fn.metadata["source"]
    z = (x * 3).sum()
    assert "source" not in z.grad_fn.metadata
    assert not dg.viz.is_recording()


def test_group_by_module_without_record_infers_from_params():
    m = MLP()
    loss = m(dg.randn(3, 4)).sum()
    src = dg.viz.draw(loss, params=m, group_by_module=True).source
    assert 'subgraph "cluster_fc1"' in src


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz `dot` not installed (apt-get install graphviz)")
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_render_formats(tmp_path, fmt):
    m = MLP()
    loss = m(dg.randn(3, 4)).sum()
    out = dg.viz.draw(loss, params=m).render(str(tmp_path / f"g.{fmt}"))
    assert out == str(tmp_path / f"g.{fmt}")
    data = open(out, "rb").read()
    assert (b"<svg" in data) if fmt == "svg" else data.startswith(b"\x89PNG")
    assert not os.path.exists(tmp_path / "g")  # the DOT source file is cleaned up


def test_render_without_dot_explains_install(tmp_path, monkeypatch):
    m = MLP()
    d = dg.viz.draw(m(dg.randn(3, 4)).sum(), params=m)
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` anywhere
    assert d.source.startswith("digraph")
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        d.render(str(tmp_path / "g.svg"))


def test_collapse_100k_node_chain_is_fast():
    W = dg.randn(4, 4, requires_grad=True)
    b = dg.zeros(4, requires_grad=True)
    h = dg.randn(2, 4)
    limit = sys.getrecursionlimit()
    for _ in range(25_000):
        h = dg.tanh(h @ W + b) * 0.5
    loss = h.sum()
    t0 = time.perf_counter()
    d = dg.viz.draw(loss, params={"W": W, "b": b})
    elapsed = time.perf_counter() - t0
    assert sys.getrecursionlimit() == limit  # nothing raised the limit to cope
    assert elapsed < 20, f"drawing 100k nodes took {elapsed:.1f}s"
    (g,) = d.groups
    assert g.label == "matmul→add→tanh→mul ×24 999"
    assert len(g.members) == 4 * 24_999
    assert d.source.count("\n") < 60  # a handful of boxes, not 100k
    assert "recurrent ×24 998" in d.source and 'label="×24 999"' in d.source


def test_collapse_repeated_module_calls():
    dg.manual_seed(0)
    model = Loop(5)
    xs = dg.randn(60, 2, 5)
    with dg.viz.record():
        h = model(xs)
    d = dg.viz.draw(h.sum(), params=model)
    labels = [g.label for g in d.groups]
    assert any(lab.startswith("Cell ×") for lab in labels), labels
    g = d.groups[0]
    assert g.count >= 50 and "cell:" in g.detail
    # without the recording the structural detector still finds the per-step repetition
    h2 = model(xs)
    d2 = dg.viz.draw(h2.sum(), params=model)
    assert d2.groups and d2.groups[0].count >= 50


def test_max_nodes_truncates_with_note():
    x = dg.randn(3, requires_grad=True)
    ys = [dg.exp(x * float(i)) for i in range(50)]
    d = dg.viz.draw(dg.stack(ys).sum(), max_nodes=20, collapse=False)
    assert "more nodes not drawn" in d.source
    assert d.source.count('style="rounded,filled"') == 20


def _deep(x, W1, Wh, Wo, depth):
    h = dg.relu(x @ W1)
    for _ in range(depth):
        h = dg.relu(h @ Wh)
    return ((h @ Wo) ** 2).mean()


def test_diff_finds_inserted_layer():
    dg.manual_seed(1)
    W1, Wh, Wo = (dg.randn(*s, requires_grad=True) for s in ((4, 8), (8, 8), (8, 1)))
    P = {"inp": W1, "hidden": Wh, "out": Wo}
    a = _deep(dg.randn(3, 4), W1, Wh, Wo, 2)
    b = _deep(dg.randn(3, 4), W1, Wh, Wo, 3)
    res = dg.viz.diff(a, b, params=P)
    assert sorted(res.b.op_name(j) for j in res.added_nodes) == ["matmul", "relu"]
    assert res.removed_nodes == []
    assert len(res.removed_edges) == 1 and len(res.added_edges) == 4
    text = str(res)
    assert "nodes only in b (2)" in text and "+ hidden -> matmul" in text
    pic = res.draw().source
    assert "+ relu" in pic and "#d62728" in pic  # added node, removed edge highlighted
    back = dg.viz.diff(b, a, params=P)
    assert len(back.removed_nodes) == 2 and back.added_nodes == []


def test_diff_identical_and_shape_changes():
    W1, Wh, Wo = (dg.randn(*s, requires_grad=True) for s in ((4, 8), (8, 8), (8, 1)))
    a = _deep(dg.randn(3, 4), W1, Wh, Wo, 1)
    b = _deep(dg.randn(3, 4), W1, Wh, Wo, 1)
    same = dg.viz.diff(a, b)
    assert same.identical and "same structure" in str(same)
    c = _deep(dg.randn(5, 4), W1, Wh, Wo, 1)
    res = dg.viz.diff(a, c)
    assert not res.added_nodes and not res.removed_nodes
    assert any("(3, 8) float32 -> (5, 8) float32" in f"{s[2]} -> {s[3]}" for s in res.shape_changes)


def test_graph_view_shapes_without_recording():
    x = dg.randn(3, 4, requires_grad=True)
    y = dg.sigmoid(x @ dg.randn(4, 6)).sum(dim=0)
    v = dg.viz.GraphView(y)
    k = v.index[y.grad_fn]
    assert v.describe_shape(k) == "(6) float32"
    assert all(v.describe_shape(i) != "?" for i in range(len(v)))
    assert np.shape(v.leaves[0]._data) == (3, 4)


def test_record_passes_interpreter_hooks_through():
    """An interpreter underneath keeps seeing the hooks (on_concrete...) through observers."""
    from dyngraph._core.interpreter import Interpreter, interpreting

    seen = []
    values = []

    class Under(Interpreter):
        def process(self, prim, args, params):
            seen.append(prim.name)
            return self.process_below(prim, args, params)

        def on_concrete(self, t, why):
            values.append(why)
            return super().on_concrete(t, why)

    under = Under()
    with interpreting(under):
        with dg.viz.record(), dg.profiler.profile():
            x = dg.randn(3, requires_grad=True)
            assert bool((x * 2).sum() < 100)
            assert STATE.interpreter is not under
        assert STATE.interpreter is under
    assert STATE.interpreter is None
    assert "mul" in seen and "sum" in seen and values == ["bool"]


def test_saved_tensor_drawn_once_for_all_users():
    x = dg.randn(3, 4)  # needs no grad: no edge, but both matmuls save it
    w1 = dg.randn(4, 2, requires_grad=True)
    w2 = dg.randn(4, 2, requires_grad=True)
    src = dg.viz.draw((x @ w1 + x @ w2).sum()).source
    assert src.count("saved tensor") == 1
    assert src.count('s0 -> n') == 2


def test_collapse_parallel_branches():
    w = dg.randn(4, requires_grad=True)
    xs = dg.randn(300, 4)
    out = dg.stack([dg.tanh(dg.exp(xs[i] * w)).sum() for i in range(300)]).mean()
    d = dg.viz.draw(out, params={"w": w})
    assert sorted(g.label for g in d.groups) == ["exp ×300", "mul ×300", "sum ×300", "tanh ×300"]
    assert 'label="×300"' in d.source and d.source.count("box3d") == 4
