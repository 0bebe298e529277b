"""Saving and loading static graphs: one safetensors file, JSON IR in its metadata.

The file holds every captured weight and constant as a safetensors tensor and
the graph itself (nodes, params, shapes, dtypes, inputs, outputs) as JSON under
the metadata key ``dyngraph.jit``.  No pickle anywhere: loading runs no code
from the file, only primitives looked up by name in this dyngraph's registry.

>>> dg.jit.trace(model, (x,)).save("model.dgraph")
>>> g = dg.jit.load("model.dgraph")       # no model code needed
>>> y = g(x)
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..ops.registry import REGISTRY
from ..tensor import Tensor
from .executor import Program
from .ir import Graph, Node, Sym, ValueInfo, Var
from .passes import optimize

__all__ = ["save", "load", "LoadedGraph", "FORMAT_VERSION"]

FORMAT_VERSION = 1
_KEY = "dyngraph.jit"


# ---------------------------------------------------------------------------
# plain data <-> JSON
# ---------------------------------------------------------------------------

def _enc(x):
    if type(x) is Var:
        return {"v": x.id}
    if type(x) is Sym:
        return {"sym": [x.k, x.c]}
    if x is None or isinstance(x, (bool, str)):
        return x
    if x is Ellipsis:
        return {"ellipsis": True}
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            return {"float": repr(x)}
        return x
    if isinstance(x, np.dtype):
        return {"dtype": x.str if x.kind != "b" else "bool"}
    if isinstance(x, type) and issubclass(x, np.generic):
        return {"dtype": np.dtype(x).str}
    if isinstance(x, np.generic):
        return _enc(x.item())
    if isinstance(x, tuple):
        return {"tuple": [_enc(e) for e in x]}
    if isinstance(x, list):
        return {"list": [_enc(e) for e in x]}
    if isinstance(x, dict):
        return {"dict": {str(k): _enc(v) for k, v in x.items()}}
    if hasattr(x, "numpy_dtype") or type(x).__name__ == "dtype":
        from .. import dtypes as _dt  # noqa: PLC0415

        return {"dtype": np.dtype(_dt.to_numpy_dtype(x)).str}
    raise TypeError(f"cannot save a graph param of type {type(x).__name__} ({x!r}): params must be "
                    "plain data (numbers, strings, tuples, dtypes)")


def _dec(x):
    if isinstance(x, dict):
        if "v" in x:
            return Var(x["v"])
        if "ellipsis" in x:
            return Ellipsis
        if "sym" in x:
            return Sym(*x["sym"])
        if "float" in x:
            return float(x["float"])
        if "dtype" in x:
            return np.dtype(x["dtype"])
        if "tuple" in x:
            return tuple(_dec(e) for e in x["tuple"])
        if "list" in x:
            return [_dec(e) for e in x["list"]]
        if "dict" in x:
            return {k: _dec(v) for k, v in x["dict"].items()}
        raise ValueError(f"unknown encoded value {x!r}")
    return x


def _graph_to_json(g: Graph, tensors: dict, prefix: str) -> dict:
    consts = {}
    for vid, arr in g.constants.items():
        name = f"{prefix}const.{vid}"
        tensors[name] = np.array(arr, order="C")
        consts[str(vid)] = name
    return {
        "inputs": g.inputs,
        "captures": g.captures,
        "constants": consts,
        "outputs": g.outputs,
        "values": {str(v): [_enc(tuple(i.shape)), i.dtype.str if i.dtype.kind != "b" else "bool"]
                   for v, i in g.values.items()},
        "nodes": [{"op": n.op, "args": [_enc(a) for a in n.args], "params": _enc(n.params),
                   "outs": list(n.outs), "check_shape": n.check_shape} for n in g.nodes],
        "guards": [[vid, kind, _enc(exp)] for vid, kind, exp in g.guards],
        "dynamic": [list(d) for d in g.dynamic],
    }


def _graph_from_json(d: dict, tensors: dict, where: str) -> Graph:
    g = Graph()
    g.inputs = list(d["inputs"])
    g.captures = []
    g.outputs = list(d["outputs"])
    for v, (shape, dt) in d["values"].items():
        g.values[int(v)] = ValueInfo(_dec(shape), np.dtype(dt))
    for v, name in d["constants"].items():
        if name not in tensors:
            raise ValueError(f"{where}: the graph refers to tensor {name!r} which the file lacks")
        g.constants[int(v)] = tensors[name]
    for n in d["nodes"]:
        if n["op"] not in REGISTRY and n["op"].split(":", 1)[-1] not in REGISTRY:
            raise ValueError(f"{where}: the graph uses primitive {n['op']!r}, which this version "
                             "of dyngraph does not define")
        g.nodes.append(Node(n["op"], tuple(_dec(a) for a in n["args"]), _dec(n["params"]),
                            tuple(n["outs"]), check_shape=bool(n.get("check_shape"))))
    g.guards = [(vid, kind, _dec(exp)) for vid, kind, exp in d.get("guards", [])]
    g.dynamic = [tuple(x) for x in d.get("dynamic", [])]
    g._next = max(g.values, default=-1) + 1
    return g


# ---------------------------------------------------------------------------
# save / load
# ---------------------------------------------------------------------------

def save(traced, path) -> None:
    """Save a :class:`~dyngraph.jit.ScriptedGraph` (its forward program and current weights)."""
    from safetensors.numpy import save_file  # noqa: PLC0415

    v = traced.variant
    cap = v.cap
    fwd = cap.fwd
    tensors: dict = {}
    # captured tensors are stored by value (their current data) as constants
    frozen = Graph(inputs=list(fwd.inputs), captures=[], constants=dict(fwd.constants),
                   nodes=fwd.nodes, outputs=fwd.outputs[:cap.n_user_outputs], values=fwd.values,
                   guards=fwd.guards, dynamic=fwd.dynamic)
    weight_names = {}
    for j, (vid, (ref, _, is_grad)) in enumerate(zip(fwd.captures, v.cap_info, strict=False)):
        t = ref()
        if t is None:
            raise RuntimeError(f"cannot save {traced.name}: a captured tensor was freed")
        if is_grad:
            t = t._grad
        frozen.constants[vid] = t._data
        weight_names[vid] = f"weight.{j}"
    doc = {
        "format": "dyngraph.jit", "version": FORMAT_VERSION, "name": traced.name,
        "graph": _graph_to_json(frozen, tensors, ""),
        "out_spec": _spec_to_json(cap.out_spec),
        "n_inputs": len(fwd.inputs),
    }
    for vid, wname in weight_names.items():
        old = doc["graph"]["constants"][str(vid)]
        tensors[wname] = tensors.pop(old)
        doc["graph"]["constants"][str(vid)] = wname
    for k, arr in list(tensors.items()):
        if arr.dtype.kind == "b":
            tensors[k] = arr
    save_file(tensors, os.fspath(path), metadata={_KEY: json.dumps(doc)})


def _spec_to_json(spec):
    kind = spec[0]
    if kind == "T":
        return ["T", spec[1]]
    if kind == "C":
        try:
            json.dumps(spec[1])
        except TypeError:
            return ["C", None]
        return ["C", spec[1]]
    if kind in ("L", "U"):
        return [kind, [_spec_to_json(s) for s in spec[1]]]
    if kind == "D":
        return ["D", [[k, _spec_to_json(s)] for k, s in spec[1]]]
    return ["U", [_spec_to_json(s) for s in spec[1]]]


def _spec_from_json(spec):
    kind = spec[0]
    if kind in ("T", "C"):
        return (kind, spec[1])
    if kind == "D":
        return ("D", tuple((k, _spec_from_json(s)) for k, s in spec[1]))
    return (kind, tuple(_spec_from_json(s) for s in spec[1]))


class LoadedGraph:
    """A graph loaded from a file: ``g(*inputs)`` runs it (inputs: Tensors or arrays)."""

    def __init__(self, graph: Graph, out_spec, name: str, path: str):
        self.graph = graph
        self.name = name
        self.path = path
        self.out_spec = out_spec
        optimize(graph)
        self.program = Program(graph)

    @property
    def code(self) -> str:
        return self.program.source

    def __str__(self) -> str:
        return str(self.graph)

    def __call__(self, *inputs):
        from ..autograd.grad_mode import STATE  # noqa: PLC0415
        from .tracer import unflatten  # noqa: PLC0415

        interp = STATE.interpreter
        if interp is not None and hasattr(interp, "stop"):
            interp.stop(f"the loaded graph {self.name} cannot be captured inside another graph")

        arrays = []
        for i, (x, vid) in enumerate(zip(inputs, self.graph.inputs, strict=False)):
            a = x._data if isinstance(x, Tensor) else np.asarray(x)
            info = self.graph.values[vid]
            if a.dtype != info.dtype:
                raise TypeError(f"{self.name}: input {i} has dtype {a.dtype}, the graph expects {info.dtype}")
            dyn = {d for p, d in self.graph.dynamic if p == i}
            want = tuple(info.shape)
            if len(a.shape) != len(want) or any(
                    d not in dyn and type(w) is int and w != n for d, (w, n) in enumerate(zip(want, a.shape, strict=False))):
                raise ValueError(f"{self.name}: input {i} has shape {tuple(a.shape)}, the graph expects "
                                 f"{want}")
            arrays.append(a)
        if len(inputs) != len(self.graph.inputs):
            raise TypeError(f"{self.name}: expected {len(self.graph.inputs)} inputs, got {len(inputs)}")
        outs = self.program.fwd(*arrays)
        return unflatten(self.out_spec, [Tensor._make(np.asarray(o), False, None, 0) for o in outs])


def load(path) -> LoadedGraph:
    """Load a graph saved by ``ScriptedGraph.save`` (clear errors for damaged files)."""
    from safetensors import (
        SafetensorError,  # noqa: PLC0415
        safe_open,  # noqa: PLC0415
    )
    from safetensors.numpy import load_file  # noqa: PLC0415

    where = os.fspath(path)
    if not os.path.exists(where):
        raise FileNotFoundError(f"dg.jit.load: no such file: {where}")
    try:
        with safe_open(where, framework="numpy") as f:
            meta = f.metadata() or {}
        tensors = load_file(where)
    except (SafetensorError, OSError, ValueError) as exc:
        raise ValueError(f"dg.jit.load: {where} is not a valid saved graph (corrupt or truncated "
                         f"safetensors file: {exc})") from exc
    raw = meta.get(_KEY)
    if raw is None:
        raise ValueError(f"dg.jit.load: {where} is a safetensors file but holds no dyngraph graph "
                         f"(metadata key {_KEY!r} missing; was it written by ScriptedGraph.save?)")
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"dg.jit.load: {where}: the graph description is not valid JSON ({exc})") from exc
    if doc.get("format") != "dyngraph.jit":
        raise ValueError(f"dg.jit.load: {where}: unknown format {doc.get('format')!r}")
    if doc.get("version", 0) > FORMAT_VERSION:
        raise ValueError(f"dg.jit.load: {where}: format version {doc['version']} is newer than this "
                         f"dyngraph supports ({FORMAT_VERSION})")
    try:
        graph = _graph_from_json(doc["graph"], tensors, where)
        spec = _spec_from_json(doc["out_spec"])
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"dg.jit.load: {where}: the graph description is incomplete ({exc!r})") from exc
    return LoadedGraph(graph, spec, doc.get("name", "graph"), where)
