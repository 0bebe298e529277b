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

from ..ops.registry import REGISTRY
from .autodiff import VJP_PREFIX, run_vjp
from .ir import Sym, Var, eval_sym, has_sym

__all__ = ["GuardFailure", "generate", "Program"]


class GuardFailure(Exception):  # noqa: N818
    """A guard checked during replay did not hold (the message says which)."""


def _arr(x):
    return x if type(x) is np.ndarray else np.asarray(x)


def _fail(msg):
    raise GuardFailure(msg)


def _shape_expr(shape) -> str:
    parts = []
    for d in shape:
        parts.append(f"({d.k}*s{d.c:+d})" if type(d) is Sym else str(int(d)))
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def generate(graph, name: str = "program"):
    """Compile ``graph`` to a Python function; returns ``(fn, source)``."""
    ns = {"np": np, "_arr": _arr, "_fail": _fail, "_ev": eval_sym}
    args = [f"v{v}" for v in graph.inputs + graph.captures]
    lines = [f"def {name}({', '.join(args)}):"]
    body = []
    if graph.dynamic:
        pos, dim = graph.dynamic[0]
        body.append(f"s = v{graph.inputs[pos]}.shape[{dim}]")
    for vid, arr in graph.constants.items():
        ns[f"v{vid}"] = arr
    consts = set(graph.constants)
    guards = {}
    for vid, kind, expected in graph.guards:
        guards.setdefault(vid, []).append((kind, expected))
    counter = [0]

    def lit(x):
        if type(x) is Var:
            return f"v{x.id}"
        if has_sym(x):
            k = f"_c{counter[0]}"
            counter[0] += 1
            ns[k] = x
            return f"_ev({k}, s)"
        if type(x) in (int, float, bool) or x is None:
            r = repr(x)
            if r in ("inf", "-inf", "nan"):
                k = f"_c{counter[0]}"
                counter[0] += 1
                ns[k] = x
                return k
            return r
        k = f"_c{counter[0]}"
        counter[0] += 1
        ns[k] = x
        return k

    for i, node in enumerate(graph.nodes):
        outs = ", ".join(f"v{o}" for o in node.outs)
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
            fname = f"_u_{emit[1]}"
            if emit[0] == "ufunc":
                from .passes.fusion import UFUNCS  # noqa: PLC0415

                fn, extra = UFUNCS[emit[1]]
                ns[fname] = fn
                odt = graph.values[node.outs[0]].dtype
                # Python scalars as 0-d arrays of the result dtype: same values, and NumPy
                # skips its (slow) scalar conversion on every call
                call_args = [lit(a) if type(a) is Var else lit(np.array(a, odt))
                             for a in list(node.args) + list(extra)]
            else:
                ns[fname] = np.matmul
                call_args = [lit(a) for a in node.args]
            if emit[2] is not None:
                call_args.append(f"out=v{emit[2]}")
            body.append(f"{outs} = {fname}({', '.join(call_args)})")
        elif node.op.startswith(VJP_PREFIX):
            ns["_vjp"] = run_vjp
            k = f"_p{i}"
            ns[k] = node.params
            call_args = [lit(a) for a in node.args]
            body.append(f"{outs} = _vjp({', '.join(call_args)}, **{k})")
        else:
            prim = REGISTRY[node.op]
            fname = f"_f_{node.op}"
            ns[fname] = prim.impl
            call_args = [lit(a) for a in node.args]
            if node.params:
                if has_sym(node.params):
                    k = f"_p{i}"
                    ns[k] = node.params
                    call_args.append(f"**_ev({k}, s)")
                else:
                    for pk, pv in node.params.items():
                        call_args.append(f"{pk}={lit(pv)}")
            call = f"{fname}({', '.join(call_args)})"
            if len(node.outs) == 1:
                body.append(f"{outs} = _arr({call})")
            else:
                body.append(f"{outs}, = {call}")
                for o in node.outs:
                    body.append(f"v{o} = _arr(v{o})")
        if node.check_shape:
            for o in node.outs:
                shp = graph.values[o].shape
                body.append(f"if v{o}.shape != {_shape_expr(shp)}: _fail('{node.op} produced shape '"
                            f" + str(v{o}.shape) + ', the graph expects ' + str({_shape_expr(shp)}))")
        for o in node.outs:
            for kind, expected in guards.get(o, ()):
                k = f"_g{counter[0]}"
                counter[0] += 1
                ns[k] = expected
                if kind == "bool":
                    test = f"bool(v{o}.reshape(())) != {k}"
                elif kind == "item":
                    test = f"v{o}.reshape(()).item() != {k}"
                else:
                    test = f"v{o}.tolist() != {k}"
                body.append(f"if {test}: _fail('guard {kind}(%{o}) == ' + repr({k}) + ' failed')")
        for f in getattr(node, "free", ()):
            if f not in consts:
                body.append(f"del v{f}")
    # guards on inputs / constants (rare: bool() of an input)
    ins = set(graph.inputs + graph.captures) | consts
    for vid in guards:
        if vid in ins:
            for kind, expected in guards[vid]:
                k = f"_g{counter[0]}"
                counter[0] += 1
                ns[k] = expected
                conv = {"bool": f"bool(v{vid}.reshape(()))", "item": f"v{vid}.reshape(()).item()",
                        "tolist": f"v{vid}.tolist()"}[kind]
                body.insert(1 if graph.dynamic else 0,
                            f"if {conv} != {k}: _fail('guard {kind}(%{vid}) failed')")
    rets = ", ".join("None" if v is None else f"v{v}" for v in graph.outputs)
    body.append(f"return ({rets}{',' if len(graph.outputs) == 1 else ''})")
    src = "\n".join(lines + ["    " + b for b in body]) + "\n"
    code = compile(src, f"<dyngraph.jit {name}>", "exec")
    exec(code, ns)  # noqa: S102 - our own generated straight-line code
    return ns[name], src


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
