"""The static-graph IR: SSA values, nodes that apply one registered primitive, graphs.

A :class:`Graph` is a straight-line program.  Every value is produced once
(by an input, a captured tensor, a constant, or a node) and has a recorded
shape and dtype.  A :class:`Node` applies ``REGISTRY[op].impl`` to its
arguments (``Var`` references or plain Python literals) with plain-data
``params``; promotion has already been made explicit at capture time (as
``cast`` nodes), so replay calls ``impl`` directly.

Dimensions and params that depend on a dynamic input dimension are stored as
:class:`Sym` (``k * s + c`` for the graph's size symbol ``s``).

Example::

    >>> g = dg.jit.trace(lambda x: (x * 2).tanh(), (dg.ones(3),)).graph
    >>> print(g)          # one line per node
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Var", "Sym", "Node", "Graph", "ValueInfo", "subst", "eval_sym"]


class Var:
    """A reference to an SSA value (by integer id) inside a node's arguments."""

    __slots__ = ("id",)

    def __init__(self, vid: int):
        self.id = vid

    def __repr__(self) -> str:
        return f"%{self.id}"

    def __eq__(self, other) -> bool:
        return type(other) is Var and other.id == self.id

    def __hash__(self) -> int:
        return hash(("Var", self.id))


class Sym:
    """``k * s + c``: an integer that depends on the graph's dynamic size ``s``."""

    __slots__ = ("k", "c")

    def __init__(self, k: int, c: int):
        self.k = int(k)
        self.c = int(c)

    def __call__(self, s: int) -> int:
        return self.k * s + self.c

    def __repr__(self) -> str:
        k = "s" if self.k == 1 else f"{self.k}*s"
        return k if self.c == 0 else f"({k}{self.c:+d})"

    def __eq__(self, other) -> bool:
        return type(other) is Sym and other.k == self.k and other.c == self.c

    def __hash__(self) -> int:
        return hash(("Sym", self.k, self.c))


def has_sym(x) -> bool:
    if type(x) is Sym:
        return True
    if isinstance(x, (tuple, list)):
        return any(has_sym(e) for e in x)
    if isinstance(x, dict):
        return any(has_sym(v) for v in x.values())
    return False


def eval_sym(x, s: int):
    """Replace every :class:`Sym` inside ``x`` (tuples, lists, dicts) by its value at ``s``."""
    if type(x) is Sym:
        return x(s)
    if isinstance(x, tuple):
        return tuple(eval_sym(e, s) for e in x)
    if isinstance(x, list):
        return [eval_sym(e, s) for e in x]
    if isinstance(x, dict):
        return {k: eval_sym(v, s) for k, v in x.items()}
    return x


def subst(args, mapping: dict):
    """Rename the ``Var`` references in ``args`` through ``mapping`` (id -> id)."""
    return tuple(Var(mapping.get(a.id, a.id)) if type(a) is Var else a for a in args)


@dataclass
class ValueInfo:
    shape: tuple
    dtype: np.dtype


@dataclass
class Node:
    """``outs = REGISTRY[op].impl(*args, **params)``."""

    op: str
    args: tuple
    params: dict
    outs: tuple
    # filled by passes: how the executor emits this node
    emit: Any = None
    check_shape: bool = False
    # capture-time autograd facts: which outputs / arguments required grad (eager graph)
    out_rg: tuple = ()
    arg_rg: tuple = ()

    def var_args(self):
        return [a.id for a in self.args if type(a) is Var]

    def __str__(self) -> str:
        outs = ", ".join(f"%{o}" for o in self.outs)
        args = ", ".join(repr(a) if type(a) is Var else _short(a) for a in self.args)
        ps = ", ".join(f"{k}={_short(v)}" for k, v in self.params.items())
        return f"{outs} = {self.op}({args}{', ' if args and ps else ''}{ps})"


def _short(v) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}"
    if isinstance(v, np.dtype):
        return str(v)
    return repr(v)


@dataclass
class Graph:
    """A straight-line program over SSA values.

    ``inputs`` are the flattened tensor arguments; ``captures`` the tensors
    read by reference (parameters, buffers); ``constants`` values fixed at
    capture time; ``outputs`` what the program returns.
    """

    inputs: list = field(default_factory=list)
    captures: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    values: dict = field(default_factory=dict)
    # (vid, kind, expected) checked right after vid is computed: kind in bool/item/tolist
    guards: list = field(default_factory=list)
    # input dims that follow the size symbol: [(input position, dim)]
    dynamic: list = field(default_factory=list)
    _next: int = 0

    def new_value(self, shape, dtype) -> int:
        vid = self._next
        self._next += 1
        self.values[vid] = ValueInfo(tuple(shape), np.dtype(dtype))
        return vid

    def producers(self) -> dict:
        return {o: n for n in self.nodes for o in n.outs}

    def __str__(self) -> str:
        lines = []
        ins = ", ".join(f"%{v}: {self._ty(v)}" for v in self.inputs)
        lines.append(f"graph({ins}):")
        for v in self.captures:
            lines.append(f"  %{v}: {self._ty(v)} = capture")
        for v, a in self.constants.items():
            lines.append(f"  %{v}: {self._ty(v)} = constant {_short(a)}")
        for n in self.nodes:
            lines.append(f"  {n}")
        for vid, kind, expected in self.guards:
            lines.append(f"  guard {kind}(%{vid}) == {expected!r}")
        lines.append("  return " + ", ".join(f"%{o}" for o in self.outputs))
        return "\n".join(lines)

    def _ty(self, v) -> str:
        info = self.values.get(v)
        if info is None:
            return "?"
        return f"{info.dtype}{list(info.shape)}"

    code = property(__str__)
