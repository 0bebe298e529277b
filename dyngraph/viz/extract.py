"""A flat, read-only view of the live autograd graph behind some tensors.

Drawing, diffing and the TensorBoard exporter all start here.  The view is
built iteratively (graphs of 100k+ nodes are normal for RNNs) and holds the
nodes in *root-first topological order*: every node comes after all of its
consumers, so a pass over ``nodes`` visits outputs before inputs, and a pass
over ``reversed(nodes)`` visits producers first.

Output shapes and dtypes are not stored on a :class:`~dyngraph.autograd.graph.Node`
(the output Tensor is not held, to avoid cycles); the view derives them from
what *is* there: the output tensors themselves, the recording context's
annotations, saved outputs, multi-output metadata and the saved inputs /
input metadata of each consumer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..autograd.graph import FREED, Node
from ..tensor import Tensor

__all__ = ["GraphView", "as_outputs", "param_names", "fmt_shape", "dtype_name"]


def as_outputs(output) -> list:
    """Normalise ``output`` (a Tensor, or a list/tuple/dict of them) to a list of Tensors."""
    if isinstance(output, Tensor):
        return [output]
    if isinstance(output, Mapping):
        output = list(output.values())
    outs = []
    stack = [output]
    while stack:
        o = stack.pop()
        if isinstance(o, Tensor):
            outs.append(o)
        elif isinstance(o, Mapping):
            stack.extend(reversed(list(o.values())))
        elif isinstance(o, (list, tuple)):
            stack.extend(reversed(o))
    if not outs:
        raise TypeError(
            f"expected a Tensor or a (nested) list/tuple/dict of Tensors, got {type(output).__name__}")
    return outs


def param_names(params) -> dict:
    """``{tensor: name}`` (identity keys) from a dict, an iterable of ``(name, tensor)`` or a Module."""
    if params is None:
        return {}
    if hasattr(params, "named_parameters") and callable(params.named_parameters):
        params = params.named_parameters()
    if isinstance(params, Mapping):
        items = params.items()
    elif isinstance(params, Iterable):
        items = list(params)
    else:
        raise TypeError(f"params must be a dict name -> Tensor, got {type(params).__name__}")
    names = {}
    for item in items:
        try:
            name, t = item
        except (TypeError, ValueError):
            raise TypeError("params must map names to Tensors (e.g. dict(model.named_parameters()))") from None
        names.setdefault(t, str(name))
    return names


_SAME_SHAPE = frozenset(
    "relu tanh sigmoid exp log neg sqrt rsqrt abs sin cos gelu silu elu leaky_relu softplus "
    "log1p expm1 erf reciprocal square sign clone contiguous hardtanh relu6 selu celu "
    "mish hardswish hardsigmoid logsigmoid dropout".split())
_DTYPE_NAMES: dict = {}


def dtype_name(dtype) -> str:
    """``float32`` for a NumPy dtype (cached: ``str(dtype)`` is slow in bulk)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def fmt_shape(shape) -> str:
    if shape is None:
        return "?"
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


class GraphView:
    """The graph behind ``outputs``, flattened.

    Attributes:
        nodes: graph nodes, root-first topological order.
        index: ``node -> position in nodes``.
        leaves: leaf tensors reached through edges (in discovery order).
        leaf_index: ``leaf tensor -> position in leaves``.
        inputs: per node, one entry per edge: ``None``, ``("n", j, output_nr)`` for
            node ``j`` or ``("l", k, 0)`` for leaf ``k``.
        consumers: per node, the positions of the nodes using one of its outputs.
        leaf_consumers: per leaf, the positions of nodes using it.
        shapes: ``(node_pos, output_nr) -> (shape, dtype)`` where known.
        roots: per output tensor, ``("n", j, nr)``, ``("l", k, 0)`` or ``None``
            (a tensor that is not part of any graph).
        names: ``{tensor: name}`` of known parameters.
    """

    def __init__(self, outputs, params=None):
        self.outputs = as_outputs(outputs)
        self.names = param_names(params)
        nodes: list = []
        pos: dict = {}  # node -> discovery position (nodes hash by identity)
        leaves: list = []
        leaf_pos: dict = {}
        stack = []
        for t in self.outputs:
            fn = t._fn
            if fn is not None and fn not in pos:
                pos[fn] = len(nodes)
                nodes.append(fn)
                stack.append(fn)
            elif fn is None and t._rg and t not in leaf_pos:
                leaf_pos[t] = len(leaves)
                leaves.append(t)
        # discovery (iterative DFS); raw[i] = per edge (kind, position, output_nr) or None
        raw = []
        n_consumers = []
        _Node = Node
        while stack:
            node = stack.pop()
            ins = []
            for e in node.edges:
                if e is None:
                    ins.append(None)
                    continue
                c = e[0]
                if type(c) is _Node:
                    j = pos.get(c)
                    if j is None:
                        j = pos[c] = len(nodes)
                        nodes.append(c)
                        stack.append(c)
                    ins.append((1, j, e[1]))
                else:
                    j = leaf_pos.get(c)
                    if j is None:
                        j = leaf_pos[c] = len(leaves)
                        leaves.append(c)
                    ins.append((0, j, 0))
            raw.append((pos[node], ins))
        n = len(nodes)
        raw_inputs = [None] * n
        for i, ins in raw:
            raw_inputs[i] = ins
        del raw
        n_consumers = [0] * n
        for ins in raw_inputs:
            for src in ins:
                if src is not None and src[0]:
                    n_consumers[src[1]] += 1
        # Kahn's algorithm, root-first: a node is emitted once all its consumers are
        order = []
        ready = [i for i in range(n) if n_consumers[i] == 0]
        ready.reverse()
        while ready:
            i = ready.pop()
            order.append(i)
            for src in reversed(raw_inputs[i]):
                if src is not None and src[0]:
                    j = src[1]
                    left = n_consumers[j] - 1
                    n_consumers[j] = left
                    if left == 0:
                        ready.append(j)
        new_pos = [0] * n
        for k, i in enumerate(order):
            new_pos[i] = k
        self.nodes = [nodes[i] for i in order]
        self.index = {nd: k for k, nd in enumerate(self.nodes)}
        self.leaves = leaves
        self.leaf_index = leaf_pos
        inputs = self.inputs = []
        consumers = self.consumers = [[] for _ in range(n)]
        leaf_consumers = self.leaf_consumers = [[] for _ in leaves]
        for k, i in enumerate(order):
            ins = []
            for src in raw_inputs[i]:
                if src is None:
                    ins.append(None)
                elif src[0]:
                    j = new_pos[src[1]]
                    ins.append(("n", j, src[2]))
                    consumers[j].append(k)
                else:
                    ins.append(("l", src[1], 0))
                    leaf_consumers[src[1]].append(k)
            inputs.append(ins)
        self.roots = []
        for t in self.outputs:
            if t._fn is not None:
                self.roots.append(("n", self.index[t._fn], t._nr))
            elif t in leaf_pos:
                self.roots.append(("l", leaf_pos[t], 0))
            else:
                self.roots.append(None)
        self._shapes()

    def __len__(self) -> int:
        return len(self.nodes)

    # -- shapes -------------------------------------------------------------------
    def _shapes(self):
        shapes: dict = {}
        for t, r in zip(self.outputs, self.roots, strict=True):
            if r is not None and r[0] == "n":
                shapes[(r[1], r[2])] = (t._data.shape, t._data.dtype)
        for k, node in enumerate(self.nodes):
            info = node.info
            if type(info) is dict and "shape" in info and (k, 0) not in shapes:
                shapes[(k, 0)] = (info["shape"], info["dtype"])
            if node.out_meta is not None:
                for nr, (s, d) in enumerate(node.out_meta):
                    shapes.setdefault((k, nr), (s, d))
            out = node.out
            if out is not None and node.n_out == 1 and hasattr(out, "shape"):
                shapes.setdefault((k, 0), (out.shape, out.dtype))
            saved = node.saved
            meta = node.in_meta
            if saved is FREED:
                saved = None
            if saved is None and meta is None:
                continue
            for p, src in enumerate(self.inputs[k]):
                if src is None or src[0] != "n":
                    continue
                key = (src[1], src[2])
                if key in shapes:
                    continue
                if saved is not None and p < len(saved) and isinstance(saved[p], Tensor):
                    a = saved[p]._data
                    shapes[key] = (a.shape, a.dtype)
                elif meta is not None and p < len(meta) and meta[p] is not None:
                    shapes[key] = (meta[p].shape, meta[p].dtype)
        # Shape-preserving unary ops (their rules keep the output, not the input):
        # the input has the output's shape and dtype.  Root-first order sees consumers first.
        for k in range(len(self.nodes)):
            ins = self.inputs[k]
            if len(ins) != 1 or ins[0] is None or ins[0][0] != "n":
                continue
            if self.op_name(k) not in _SAME_SHAPE or (k, 0) not in shapes:
                continue
            shapes.setdefault((ins[0][1], ins[0][2]), shapes[(k, 0)])
        self.shapes = shapes

    # -- labels -------------------------------------------------------------------
    def op_name(self, k: int) -> str:
        prim = self.nodes[k].prim
        name = getattr(prim, "name", None)
        return name if type(name) is str else self.nodes[k].name()

    def info(self, k: int) -> dict:
        info = self.nodes[k].info
        return info if type(info) is dict else {}

    def leaf_name(self, j: int) -> str | None:
        return self.names.get(self.leaves[j])

    def leaf_shape(self, j: int):
        a = self.leaves[j]._data
        return a.shape, a.dtype

    def module_of(self, k: int) -> str | None:
        """The recorded module path of node ``k``; else inferred from the parameters it uses."""
        info = self.info(k)
        if "module" in info:
            return info["module"]
        mods = set()
        for src in self.inputs[k]:
            if src is not None and src[0] == "l":
                name = self.leaf_name(src[1])
                if name is not None:
                    mods.add(name.rpartition(".")[0])
        if len(mods) == 1:
            return mods.pop()
        return None

    def describe_shape(self, k: int) -> str:
        """``"(4, 8) float32"``, one entry per output for multi-output nodes, ``"?"`` when unknown."""
        node = self.nodes[k]
        parts = []
        for nr in range(node.n_out):
            s = self.shapes.get((k, nr))
            parts.append("?" if s is None else f"{fmt_shape(s[0])} {dtype_name(s[1])}")
        return parts[0] if len(parts) == 1 else " | ".join(parts)
