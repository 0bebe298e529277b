"""The schema of a saved graph's JSON document, checked field by field before use.

A ``.dgraph`` file is untrusted input.  :func:`read_graph_document` turns its
JSON document into a :class:`~dyngraph.jit.ir.Graph` only after checking every
field against a fixed schema:

* value ids are non-negative integers (never strings), each defined exactly
  once (an input, a constant or a node output) before it is used;
* ops are keys of this dyngraph's primitive registry (``vjp:NAME`` names a
  registered primitive's backward rule);
* params are plain data (numbers, strings, tuples, lists, dicts, dtypes from a
  fixed table, size symbols) with identifier keys that the primitive accepts;
* guard kinds, dtypes and output-structure kinds come from fixed sets;
* nesting depth, string lengths and counts are bounded.

Nothing from the document is looked up as an attribute, imported, evaluated
or pasted into source text; the executor generates code from the validated,
re-built values (integers and generated names only, see
:func:`dyngraph.jit.executor.generate`).

>>> graph, out_spec, name = read_graph_document(doc, tensors, "model.dgraph")  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import re

import numpy as np

from ..ops.registry import REGISTRY
from .autodiff import VJP_PREFIX
from .ir import Graph, Node, Sym, ValueInfo, Var

__all__ = ["GraphFileError", "read_graph_document"]

_MAX_DEPTH = 32
_MAX_STR = 512
_MAX_ID = 2**31 - 1
_MAX_ITEMS = 10_000_000
_MAX_DIM = 2**40
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
_NAME = re.compile(r"[A-Za-z_<>][A-Za-z0-9_.<>\- ]{0,199}\Z")
_GUARD_KINDS = frozenset({"bool", "item", "tolist"})
_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
# the only dtypes a graph may name: NumPy's numeric and boolean types
_DTYPES = {np.dtype(t).str: np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128)}
_DTYPES["bool"] = np.dtype(bool)
_DTYPES[np.dtype(bool).str] = np.dtype(bool)


class GraphFileError(ValueError):
    """A saved graph file is damaged, crafted or from an incompatible version.

    The message names the file and the offending field.
    """


class _Reader:
    """Validating decoder for one document; ``fail`` raises :class:`GraphFileError`."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, field: str, msg: str):
        raise GraphFileError(f"dg.jit.load: {self.where}: {field}: {msg}")

    # -- scalars ---------------------------------------------------------------
    def vid(self, x, field: str) -> int:
        if type(x) is not int or not 0 <= x <= _MAX_ID:
            self.fail(field, f"value ids must be non-negative integers, got {_show(x)}")
        return x

    def int_(self, x, field: str) -> int:
        if type(x) is not int:
            self.fail(field, f"expected an integer, got {_show(x)}")
        return x

    def list_(self, x, field: str) -> list:
        if type(x) is not list or len(x) > _MAX_ITEMS:
            self.fail(field, f"expected a list, got {_show(x)}")
        return x

    def dict_(self, x, field: str) -> dict:
        if type(x) is not dict:
            self.fail(field, f"expected an object, got {_show(x)}")
        return x

    def key_id(self, k, field: str) -> int:
        """A value id written as a JSON object key: decimal digits only."""
        if type(k) is not str or not k.isdigit() or not k.isascii() or len(k) > 10:
            self.fail(field, f"value ids must be decimal integers, got key {_show(k)}")
        return self.vid(int(k), field)

    def dtype(self, x, field: str) -> np.dtype:
        if type(x) is not str or x not in _DTYPES:
            self.fail(field, f"unknown dtype {_show(x)} (allowed: {sorted(_DTYPES)})")
        return _DTYPES[x]

    # -- encoded values (params, literal arguments) ----------------------------
    def value(self, x, field: str, depth: int = 0):
        if depth > _MAX_DEPTH:
            self.fail(field, f"nested deeper than {_MAX_DEPTH} levels")
        t = type(x)
        if x is None or t is bool or t is int or t is float:
            return x
        if t is str:
            if len(x) > _MAX_STR:
                self.fail(field, f"string longer than {_MAX_STR} characters")
            return x
        if t is not dict or len(x) != 1:
            self.fail(field, f"unexpected value {_show(x)}")
        (tag, body), = x.items()
        if tag == "v":
            return Var(self.vid(body, field))
        if tag == "ellipsis":
            if body is not True:
                self.fail(field, "malformed ellipsis")
            return Ellipsis
        if tag == "sym":
            if type(body) is not list or len(body) != 2:
                self.fail(field, f"a size symbol is [k, c], got {_show(body)}")
            return Sym(self.int_(body[0], field), self.int_(body[1], field))
        if tag == "float":
            if body not in _NONFINITE:
                self.fail(field, f"only nan/inf/-inf are spelled as strings, got {_show(body)}")
            return _NONFINITE[body]
        if tag == "dtype":
            return self.dtype(body, field)
        if tag in ("tuple", "list"):
            items = [self.value(e, field, depth + 1) for e in self.list_(body, field)]
            return tuple(items) if tag == "tuple" else items
        if tag == "dict":
            out = {}
            for k, v in self.dict_(body, field).items():
                if len(k) > _MAX_STR:
                    self.fail(field, "dictionary key too long")
                out[k] = self.value(v, field, depth + 1)
            return out
        self.fail(field, f"unknown value tag {_show(tag)}")

    def shape(self, x, field: str) -> tuple:
        dims = self.value(x, field)
        if type(dims) is not tuple or len(dims) > 64 or not all(
                (type(d) is int and 0 <= d <= _MAX_DIM) or type(d) is Sym for d in dims):
            self.fail(field, f"a shape is a tuple of integers in [0, 2**40] or size symbols, got {_show(x)}")
        return dims

    def arg(self, x, field: str):
        """A positional argument: a value reference or a number (never text)."""
        a = self.value(x, field)
        if not (type(a) in (Var, int, float, bool) or a is None or
                (type(a) is tuple and all(type(e) in (int, float, bool) for e in a))):
            self.fail(field, f"arguments are value references or numbers, got {_show(x)}")
        return a

    def params(self, x, op: str, field: str) -> dict:
        ps = self.value(x, field)
        if type(ps) is not dict:
            self.fail(field, f"params must be an object, got {_show(x)}")
        bad = [k for k in ps if not _IDENT.match(k)]
        if bad:
            self.fail(field, f"param names must be identifiers, got {_show(bad[0])}")
        accepted = _accepted_params(op)
        if accepted is not None:
            unknown = sorted(set(ps) - accepted)
            if unknown:
                self.fail(field, f"primitive {op!r} takes no param {unknown[0]!r}")
        return ps

    # -- output structure --------------------------------------------------------
    def spec(self, x, n_outputs: int, field: str = "out_spec", depth: int = 0):
        if depth > _MAX_DEPTH:
            self.fail(field, f"nested deeper than {_MAX_DEPTH} levels")
        if type(x) is not list or len(x) != 2 or type(x[0]) is not str:
            self.fail(field, f"malformed output structure {_show(x)}")
        kind, body = x
        if kind == "T":
            if type(body) is not int or not 0 <= body < n_outputs:
                self.fail(field, f"output index {_show(body)} out of range (the graph has {n_outputs})")
            return ("T", body)
        if kind == "C":
            return ("C", self.plain(body, field, depth + 1))
        if kind in ("L", "U"):
            return (kind, tuple(self.spec(s, n_outputs, field, depth + 1) for s in self.list_(body, field)))
        if kind == "D":
            items = []
            for item in self.list_(body, field):
                if type(item) is not list or len(item) != 2 or type(item[0]) not in (str, int):
                    self.fail(field, f"malformed dict entry {_show(item)}")
                items.append((item[0], self.spec(item[1], n_outputs, field, depth + 1)))
            return ("D", tuple(items))
        self.fail(field, f"unknown output kind {_show(kind)}")

    def plain(self, x, field: str, depth: int):
        """A JSON constant returned as is (numbers, strings, lists, objects)."""
        if depth > _MAX_DEPTH:
            self.fail(field, f"nested deeper than {_MAX_DEPTH} levels")
        if x is None or type(x) in (bool, int, float):
            return x
        if type(x) is str:
            if len(x) > _MAX_STR:
                self.fail(field, f"string longer than {_MAX_STR} characters")
            return x
        if type(x) is list:
            return [self.plain(e, field, depth + 1) for e in x]
        if type(x) is dict:
            return {k: self.plain(v, field, depth + 1) for k, v in x.items()}
        self.fail(field, f"unexpected constant {_show(x)}")


def _accepted_params(op: str) -> set | None:
    """Keyword names the primitive's impl accepts, or None when it takes ``**kwargs``."""
    fn = REGISTRY[op].impl
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return {name for name, p in sig.parameters.items()
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}


def _check_call(r: _Reader, op: str, args: tuple, params: dict, field: str) -> None:
    """The node's arguments and params fit the primitive's impl signature."""
    try:
        sig = inspect.signature(REGISTRY[op].impl)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*args, **params)
    except TypeError as exc:
        r.fail(field, f"arguments do not fit primitive {op!r}: {exc}")


_VJP_PARAMS = {"prim", "argnum", "n_g", "n_out", "kinds", "params"}


def _show(x) -> str:
    r = repr(x)
    return r if len(r) <= 80 else r[:77] + "..."


def read_graph_document(doc, tensors: dict, where: str):
    """Validate a saved graph's JSON document; return ``(graph, out_spec, name)``.

    ``tensors`` maps the file's tensor names to arrays.  Raises
    :class:`GraphFileError` naming ``where`` and the field for anything outside
    the schema.
    """
    r = _Reader(where)
    doc = r.dict_(doc, "document")
    name = doc.get("name", "graph")
    if type(name) is not str or not _NAME.match(name):
        r.fail("name", f"graph names are short identifiers, got {_show(name)}")
    d = r.dict_(doc.get("graph"), "graph")
    known = {"inputs", "captures", "constants", "outputs", "values", "nodes", "guards", "dynamic"}
    extra = sorted(set(d) - known)
    if extra:
        r.fail("graph", f"unknown field {extra[0]!r}")
    g = Graph()
    for k, entry in r.dict_(d.get("values"), "graph.values").items():
        vid = r.key_id(k, "graph.values")
        if type(entry) is not list or len(entry) != 2:
            r.fail(f"graph.values[{vid}]", "expected [shape, dtype]")
        g.values[vid] = ValueInfo(r.shape(entry[0], f"graph.values[{vid}].shape"),
                                  r.dtype(entry[1], f"graph.values[{vid}].dtype"))
    defined: set = set()

    def define(vid: int, field: str) -> None:
        if vid in defined:
            r.fail(field, f"value %{vid} is defined twice")
        if vid not in g.values:
            r.fail(field, f"value %{vid} has no shape/dtype entry in graph.values")
        defined.add(vid)

    def use(x, field: str) -> None:
        if type(x) is Var and x.id not in defined:
            r.fail(field, f"value %{x.id} is used before it is defined")

    g.inputs = [r.vid(v, "graph.inputs") for v in r.list_(d.get("inputs"), "graph.inputs")]
    for v in g.inputs:
        define(v, "graph.inputs")
    if r.list_(d.get("captures", []), "graph.captures"):
        r.fail("graph.captures", "a saved graph holds its weights as constants, not captures")
    for k, tname in r.dict_(d.get("constants", {}), "graph.constants").items():
        vid = r.key_id(k, "graph.constants")
        if type(tname) is not str or tname not in tensors:
            r.fail(f"graph.constants[{vid}]", f"refers to tensor {_show(tname)}, which the file lacks")
        define(vid, f"graph.constants[{vid}]")
        arr = tensors[tname]
        info = g.values[vid]
        if arr.dtype != info.dtype or tuple(arr.shape) != info.shape:
            r.fail(f"graph.constants[{vid}]", f"tensor {tname!r} is {arr.dtype}{list(arr.shape)}, the "
                   f"graph declares {info.dtype}{list(info.shape)}")
        g.constants[vid] = arr
    for i, n in enumerate(r.list_(d.get("nodes"), "graph.nodes")):
        field = f"graph.nodes[{i}]"
        n = r.dict_(n, field)
        op = n.get("op")
        if type(op) is not str:
            r.fail(field, f"op must be a string, got {_show(op)}")
        base = op[len(VJP_PREFIX):] if op.startswith(VJP_PREFIX) else op
        if base not in REGISTRY:
            r.fail(field, f"the graph uses primitive {op!r}, which this version of dyngraph does not define")
        args = tuple(r.arg(a, f"{field}.args") for a in r.list_(n.get("args"), f"{field}.args"))
        if not op.startswith(VJP_PREFIX):
            params = r.params(n.get("params", {"dict": {}}), op, f"{field}.params")
            _check_call(r, op, args, params, field)
        else:
            params = r.value(n.get("params"), f"{field}.params")
            if type(params) is not dict or set(params) - _VJP_PARAMS or params.get("prim") not in REGISTRY:
                r.fail(f"{field}.params", "malformed backward-rule params")
        for a in args:
            use(a, f"{field}.args")
        _walk_vars(params, lambda v, f=f"{field}.params": use(v, f))
        outs = tuple(r.vid(o, f"{field}.outs") for o in r.list_(n.get("outs"), f"{field}.outs"))
        if not outs:
            r.fail(f"{field}.outs", "a node has at least one output")
        for o in outs:
            define(o, f"{field}.outs")
        check = n.get("check_shape", False)
        if type(check) is not bool:
            r.fail(f"{field}.check_shape", "expected true or false")
        g.nodes.append(Node(op, args, params, outs, check_shape=check))
    for o in r.list_(d.get("outputs"), "graph.outputs"):
        if o is not None and r.vid(o, "graph.outputs") not in defined:
            r.fail("graph.outputs", f"value %{o} is returned but never defined")
        g.outputs.append(o)
    for j, guard in enumerate(r.list_(d.get("guards", []), "graph.guards")):
        if type(guard) is not list or len(guard) != 3:
            r.fail(f"graph.guards[{j}]", "expected [value id, kind, expected value]")
        vid, kind, expected = guard
        if r.vid(vid, f"graph.guards[{j}]") not in defined:
            r.fail(f"graph.guards[{j}]", f"guards value %{vid}, which is never defined")
        if kind not in _GUARD_KINDS:
            r.fail(f"graph.guards[{j}]", f"unknown guard kind {_show(kind)} (allowed: {sorted(_GUARD_KINDS)})")
        g.guards.append((vid, kind, r.value(expected, f"graph.guards[{j}]")))
    for j, dyn in enumerate(r.list_(d.get("dynamic", []), "graph.dynamic")):
        if type(dyn) is not list or len(dyn) != 2:
            r.fail(f"graph.dynamic[{j}]", "expected [input position, dim]")
        pos, dim = r.int_(dyn[0], "graph.dynamic"), r.int_(dyn[1], "graph.dynamic")
        if not 0 <= pos < len(g.inputs) or not 0 <= dim < len(g.values[g.inputs[pos]].shape):
            r.fail(f"graph.dynamic[{j}]", f"input {pos} dim {dim} does not exist")
        g.dynamic.append((pos, dim))
    g._next = max(g.values, default=-1) + 1
    n_inputs = doc.get("n_inputs", len(g.inputs))
    if n_inputs != len(g.inputs):
        r.fail("n_inputs", f"{_show(n_inputs)} does not match the graph's {len(g.inputs)} inputs")
    spec = r.spec(doc.get("out_spec"), len(g.outputs))
    return g, spec, name


def _walk_vars(x, fn) -> None:
    if type(x) is Var:
        fn(x)
    elif isinstance(x, (tuple, list)):
        for e in x:
            _walk_vars(e, fn)
    elif isinstance(x, dict):
        for e in x.values():
            _walk_vars(e, fn)
