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

import hashlib
import json
import os
import warnings

import numpy as np
from safetensors.numpy import save as safetensors_bytes

from .. import dtypes as _dt
from .._core.state import STATE
from .._safetensors_header import CheckpointError, read
from ..serialization import write_file
from ..tensor import Tensor
from .executor import Program
from .file_schema import GraphFileError, read_graph_document
from .ir import Graph, Sym, Var
from .passes import optimize
from .tracer import unflatten

__all__ = ["save", "load", "LoadedGraph", "GraphFileError", "FORMAT_VERSION"]

# 2: the document and every tensor are covered by a SHA-256 checksum
FORMAT_VERSION = 2
_KEY = "dyngraph.jit"
_SUM_KEY = "dyngraph.jit.sha256"


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
        return {"dtype": np.dtype(_dt.to_numpy_dtype(x)).str}
    raise TypeError(f"cannot save a graph param of type {type(x).__name__} ({x!r}): params must be "
                    "plain data (numbers, strings, tuples, dtypes)")


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


# ---------------------------------------------------------------------------
# save / load
# ---------------------------------------------------------------------------

def save(traced, path) -> None:
    """Save a :class:`~dyngraph.jit.ScriptedGraph` (its forward program and current weights)."""
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
    raw = json.dumps(doc)
    blob = safetensors_bytes(tensors, metadata={_KEY: raw, _SUM_KEY: _checksum(raw, tensors)})
    write_file(path, (blob, []))   # atomic replace, symlinks, devices: as dg.save


def _checksum(raw_doc: str, tensors: dict) -> str:
    """SHA-256 over the JSON document and every tensor's name, dtype, shape and bytes."""
    h = hashlib.sha256()
    h.update(raw_doc.encode("utf-8"))
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        h.update(f"\0{name}\0{arr.dtype.str}\0{list(arr.shape)}\0".encode())
        h.update(memoryview(arr.reshape(-1).view(np.uint8)))
    return h.hexdigest()


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
        try:
            outs = self.program.fwd(*arrays)
        except Exception as exc:  # the graph came from a file: say which one failed, and where
            raise RuntimeError(f"{self.name} (loaded from {self.path}): running the saved graph "
                               f"failed: {type(exc).__name__}: {exc}") from exc
        return unflatten(self.out_spec, [Tensor._make(np.asarray(o), False, None, 0) for o in outs])


def load(path) -> LoadedGraph:
    """Load a graph saved by ``ScriptedGraph.save``; no code from the file is ever run.

    The safetensors container, a SHA-256 checksum over the graph document and
    every tensor, and the document's schema (:mod:`.file_schema`) are all
    checked before anything is built; any failure raises
    :class:`GraphFileError` (a ``ValueError``) naming the file.

    >>> g = dg.jit.load("model.dgraph")    # doctest: +SKIP
    >>> y = g(x)                           # doctest: +SKIP
    """
    where = os.fspath(path)
    if not os.path.exists(where):
        raise FileNotFoundError(f"dg.jit.load: no such file: {where}")
    if not os.path.isfile(where):
        raise GraphFileError(f"dg.jit.load: {where} is not a regular file")
    try:
        container = read(where)   # bounded header, the safetensors layout rules, then the data
    except CheckpointError as exc:
        reason = str(exc).split(": ", 2)[-1].split("; the file was not loaded")[0]
        raise GraphFileError(f"dg.jit.load: {where} is not a valid saved graph (corrupt or truncated "
                             f"safetensors file: {reason})") from exc
    meta = container.metadata
    tensors = {k: container.array(k) for k in container.entries}
    raw = meta.get(_KEY)
    if raw is None:
        raise GraphFileError(f"dg.jit.load: {where} is a safetensors file but holds no dyngraph graph "
                             f"(metadata key {_KEY!r} missing; was it written by ScriptedGraph.save?)")
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise GraphFileError(f"dg.jit.load: {where}: the graph description is not valid JSON "
                             f"({exc})") from exc
    if type(doc) is not dict or doc.get("format") != "dyngraph.jit":
        fmt = doc.get("format") if type(doc) is dict else None
        raise GraphFileError(f"dg.jit.load: {where}: unknown format {fmt!r}")
    version = doc.get("version")
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION:
        raise GraphFileError(f"dg.jit.load: {where}: format version {version!r} is not one this "
                             f"dyngraph reads (1..{FORMAT_VERSION})")
    stored = meta.get(_SUM_KEY)
    if version >= 2:
        if stored is None or stored != _checksum(raw, tensors):
            raise GraphFileError(f"dg.jit.load: {where}: checksum mismatch: the file was modified or "
                                 "damaged after it was saved")
    else:
        warnings.warn(f"dg.jit.load: {where} was saved in format version 1, which has no checksum: "
                      "damage to its weights cannot be detected; save it again to add one",
                      stacklevel=2)
    graph, spec, name = read_graph_document(doc, tensors, where)
    return LoadedGraph(graph, spec, name, where)
