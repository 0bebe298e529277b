"""Turn a :class:`~dyngraph.jit.ir.Graph` into one straight-line Python function.

The generated function takes the input and captured arrays, calls each
node's primitive ``impl`` (or, for fused nodes, the NumPy ufunc with an
``out=`` buffer), checks data-dependent guards right after the value they
read is computed, deletes buffers after their last use, and returns the
output arrays.  No Tensor or autograd Node is created per op; the source is
kept on the program (``program.source``) for inspection.
"""

from __future__ import annotations

import numpy as np

from ..ops._util import quiet_fp
from ..ops.registry import REGISTRY
from .autodiff import VJP_PREFIX, run_vjp
from .ir import Sym, Var, eval_sym, has_sym
from .passes.fusion import UFUNCS

__all__ = ["GuardFailure", "generate", "Program"]


class GuardFailure(Exception):  # noqa: N818
    """A guard checked during replay did not hold (the message says which)."""


def _arr(x):
    return x if type(x) is np.ndarray else np.asarray(x)


def _fail(msg):
    raise GuardFailure(msg)


def _vid(v) -> str:
    """The source name of SSA value ``v``.

    Only integers ever reach the generated source: names, strings and every other
    value are held in the function's namespace and referenced by a generated
    name.  (Graphs come from capture or from files; a file is validated by
    :mod:`.serialize`, and this check is the second line of defence.)
    """
    if type(v) is not int or v < 0:
        raise TypeError(f"graph value ids must be non-negative integers, got {v!r}")
    return f"v{v}"


def _int(x) -> str:
    if type(x) is not int:
        raise TypeError(f"expected an integer in the graph, got {x!r}")
    return str(x)


def _shape_expr(shape) -> str:
    parts = []
    for d in shape:
        parts.append(f"({_int(d.k)}*s{d.c:+d})" if type(d) is Sym else _int(int(d)))
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


# guard kind -> expression converting the guarded array to the recorded Python value
_GUARD_READ = {"bool": "bool({}.reshape(()))", "item": "{}.reshape(()).item()", "tolist": "{}.tolist()"}


def generate(graph, name: str = "program"):
    """Compile ``graph`` to a Python function; returns ``(fn, source)``.

    The source holds only generated identifiers, integers and fixed templates;
    every op name, param key and literal lives in the namespace (``_c``/``_p``/``_f``
    entries), so nothing a graph carries is ever parsed as code.
    """
    if not name.isidentifier():
        raise ValueError(f"program name {name!r} is not an identifier")
    ns = {"np": np, "_arr": _arr, "_fail": _fail, "_ev": eval_sym}
    args = [_vid(v) for v in graph.inputs + graph.captures]
    lines = [f"def {name}({', '.join(args)}):"]
    body = []
    if graph.dynamic:
        pos, dim = graph.dynamic[0]
        body.append(f"s = {_vid(graph.inputs[int(pos)])}.shape[{_int(dim)}]")
    for vid, arr in graph.constants.items():
        ns[_vid(vid)] = arr
    consts = set(graph.constants)
    guards = {}
    for vid, kind, expected in graph.guards:
        if kind not in _GUARD_READ:
            raise ValueError(f"unknown guard kind {kind!r}")
        guards.setdefault(vid, []).append((kind, expected))
    counter = [0]

    def const(x) -> str:
        k = f"_c{counter[0]}"
        counter[0] += 1
        ns[k] = x
        return k

    def lit(x):
        if type(x) is Var:
            return _vid(x.id)
        if has_sym(x):
            return f"_ev({const(x)}, s)"
        if type(x) is bool or x is None:
            return repr(x)
        if type(x) is int:
            return _int(x)
        return const(x)

    for i, node in enumerate(graph.nodes):
        outs = ", ".join(_vid(o) for o in node.outs)
        emit = node.emit
        if emit is not None and emit[0] == "view":
            x = lit(node.args[0])
            pv = node.params[next(iter(node.params))]
            if node.op == "permute" and tuple(pv) == (1, 0):
                body.append(f"{outs} = {x}.T")
            elif node.op == "permute":
                body.append(f"{outs} = {x}.transpose({lit(tuple(pv))})")
            elif node.op == "reshape":
                body.append(f"{outs} = {x}.reshape({lit(pv)})")
            else:
                ns["_bt"] = np.broadcast_to
                body.append(f"{outs} = _bt({x}, {lit(pv)})")
        elif emit is not None:
            fname = f"_u{i}"
            if emit[0] == "ufunc":
                fn, extra = UFUNCS[emit[1]]
                ns[fname] = fn
                odt = graph.values[node.outs[0]].dtype
                # Python scalars as 0-d arrays of the result dtype: same values, and NumPy
                # skips its (slow) scalar conversion on every call
                call_args = [lit(a) if type(a) is Var else const(np.array(a, odt))
                             for a in list(node.args) + list(extra)]
            else:
                ns[fname] = np.matmul
                call_args = [lit(a) for a in node.args]
            if emit[2] is not None:
                call_args.append(f"out={_vid(emit[2])}")
            body.append(f"{outs} = {fname}({', '.join(call_args)})")
        elif node.op.startswith(VJP_PREFIX):
            ns["_vjp"] = run_vjp
            k = f"_p{i}"
            ns[k] = dict(node.params)
            call_args = [lit(a) for a in node.args]
            body.append(f"{outs} = _vjp({', '.join(call_args)}, **{k})")
        else:
            prim = REGISTRY[node.op]
            fname = f"_f{i}"
            ns[fname] = prim.impl
            call_args = [lit(a) for a in node.args]
            if node.params:
                # params travel as one namespace dict: their keys never reach the source
                k = f"_p{i}"
                ns[k] = dict(node.params)
                call_args.append(f"**_ev({k}, s)" if has_sym(node.params) else f"**{k}")
            call = f"{fname}({', '.join(call_args)})"
            if len(node.outs) == 1:
                body.append(f"{outs} = _arr({call})")
            else:
                body.append(f"{outs}, = {call}")
                for o in node.outs:
                    body.append(f"{_vid(o)} = _arr({_vid(o)})")
        if node.check_shape:
            opname = const(node.op)
            for o in node.outs:
                shp = _shape_expr(graph.values[o].shape)
                body.append(f"if {_vid(o)}.shape != {shp}: _fail({opname} + ' produced shape '"
                            f" + str({_vid(o)}.shape) + ', the graph expects ' + str({shp}))")
        for o in node.outs:
            for kind, expected in guards.get(o, ()):
                k = const(expected)
                test = _GUARD_READ[kind].format(_vid(o)) + f" != {k}"
                body.append(f"if {test}: _fail('guard {kind}(%{_int(o)}) == ' + repr({k}) + ' failed')")
        for f in getattr(node, "free", ()):
            if f not in consts:
                body.append(f"del {_vid(f)}")
    # guards on inputs / constants (rare: bool() of an input)
    ins = set(graph.inputs + graph.captures) | consts
    for vid in guards:
        if vid in ins:
            for kind, expected in guards[vid]:
                k = const(expected)
                conv = _GUARD_READ[kind].format(_vid(vid))
                body.insert(1 if graph.dynamic else 0,
                            f"if {conv} != {k}: _fail('guard {kind}(%{_int(vid)}) failed')")
    rets = ", ".join("None" if v is None else _vid(v) for v in graph.outputs)
    body.append(f"return ({rets}{',' if len(graph.outputs) == 1 else ''})")
    src = "\n".join(lines + ["    " + b for b in body]) + "\n"
    code = compile(src, f"<dyngraph.jit {name}>", "exec")
    exec(code, ns)
    # the program calls ufuncs directly (not the primitives' quiet impls): silence NumPy's FP
    # warnings once around the whole program, as eager and PyTorch are silent
    return quiet_fp(ns[name]), src


class Program:
    """A compiled forward (and optionally backward) program with its sources."""

    def __init__(self, fwd_graph, bwd_graph=None):
        self.fwd_graph = fwd_graph
        self.bwd_graph = bwd_graph
        self.fwd, self.fwd_source = generate(fwd_graph, "forward")
        self.bwd, self.bwd_source = (generate(bwd_graph, "backward") if bwd_graph is not None
                                     else (None, ""))

    @property
    def source(self) -> str:
        return self.fwd_source + ("\n" + self.bwd_source if self.bwd_source else "")
