"""``diff``: what changed between the graphs of two forward passes.

A define-by-run model may build a different graph on every call (a loop ran
once more, a branch went the other way, a sequence was longer).  :func:`diff`
matches the two graphs structurally and reports the nodes and edges found in
only one of them, and the nodes whose output shape changed.

Matching, in two passes, both linear and iterative:

1. **bottom-up** ("computes the same thing"): a node's key hashes its op,
   its params and the keys of its inputs (parameters by name, other leaves by
   shape/dtype).  Equal keys match.
2. **top-down** ("sits at the same place"): for what is left, a node's key
   hashes the key of its first consumer, the input slot it feeds and its op,
   starting from the outputs.  This pairs the layers *after* an insertion
   (the loss of both passes) so the report shows the inserted part only.
"""

from __future__ import annotations

from .collapse import fmt_count
from .dot import STYLE, _attrs, _new_drawing, _q
from .extract import GraphView, dtype_name, fmt_shape

__all__ = ["diff", "GraphDiff"]

_LIST_LIMIT = 25


def _params_key(params):
    if not params:
        return 0
    try:
        return hash(tuple(sorted(params.items())))
    except TypeError:
        return hash(repr(sorted(params.items(), key=lambda kv: kv[0])))


def _leaf_key(view, j):
    name = view.leaf_name(j)
    if name is not None:
        return ("param", name)
    shape, dtype = view.leaf_shape(j)
    return ("leaf", tuple(shape), dtype_name(dtype))


def _bottom_up(view):
    n = len(view)
    h = [0] * n
    leaf_keys = [hash(_leaf_key(view, j)) for j in range(len(view.leaves))]
    for k in range(n - 1, -1, -1):
        ins = []
        for src in view.inputs[k]:
            if src is None:
                ins.append(0)
            elif src[0] == "n":
                ins.append(hash((h[src[1]], src[2])))
            else:
                ins.append(leaf_keys[src[1]])
        h[k] = hash((view.op_name(k), _params_key(view.nodes[k].params), tuple(ins)))
    return h


def _top_down(view):
    n = len(view)
    td = [None] * n
    parent = [None] * n
    for o, r in enumerate(view.roots):
        if r is not None and r[0] == "n" and td[r[1]] is None:
            td[r[1]] = hash(("root", o, r[2], view.op_name(r[1])))
    for k in range(n):
        if td[k] is None:  # a node reachable only from nodes not drawn (cannot happen) or a root
            td[k] = hash(("orphan", view.op_name(k)))
        for p, src in enumerate(view.inputs[k]):
            if src is not None and src[0] == "n" and td[src[1]] is None:
                j = src[1]
                td[j] = hash((td[k], p, src[2], view.op_name(j)))
                parent[j] = k
    return td, parent


def _match(va, vb):
    """Pairs ``{a_pos: b_pos}`` from bottom-up then top-down keys."""
    ha, hb = _bottom_up(va), _bottom_up(vb)
    buckets: dict = {}
    for k, key in enumerate(hb):
        buckets.setdefault(key, []).append(k)
    a2b = {}
    used_b = set()
    for k, key in enumerate(ha):
        lst = buckets.get(key)
        if lst:
            j = lst.pop(0)
            a2b[k] = j
            used_b.add(j)
    tda, _ = _top_down(va)
    tdb, _ = _top_down(vb)
    buckets = {}
    for j, key in enumerate(tdb):
        if j not in used_b:
            buckets.setdefault((key, vb.op_name(j)), []).append(j)
    for k, key in enumerate(tda):
        if k in a2b:
            continue
        lst = buckets.get((key, va.op_name(k)))
        if lst:
            j = lst.pop(0)
            a2b[k] = j
            used_b.add(j)
    return a2b


class GraphDiff:
    """The result of :func:`diff`.

    Attributes:
        added_nodes / removed_nodes: node positions only in ``b`` / only in ``a``.
        added_edges / removed_edges: ``(producer, consumer, input_slot)`` descriptions.
        shape_changes: ``(a_pos, b_pos, a_shape, b_shape)`` for matched nodes.
        text: the report (also ``str(result)``).
    """

    def __init__(self, va, vb, a2b, max_nodes=400):
        self.a, self.b = va, vb
        self.a2b = a2b
        b2a = {j: k for k, j in a2b.items()}
        self.b2a = b2a
        self.removed_nodes = [k for k in range(len(va)) if k not in a2b]
        self.added_nodes = [j for j in range(len(vb)) if j not in b2a]
        ea = self._edges(va, lambda k: ("m", a2b[k]) if k in a2b else ("a", k))
        eb = self._edges(vb, lambda j: ("m", j) if j in b2a else ("b", j))
        self.removed_edges = sorted(ea - eb, key=repr)
        self.added_edges = sorted(eb - ea, key=repr)
        self.common_edges = ea & eb
        self.shape_changes = []
        for k, j in sorted(a2b.items()):
            sa, sb = va.describe_shape(k), vb.describe_shape(j)
            if sa != sb and "?" not in (sa, sb):
                self.shape_changes.append((k, j, sa, sb))
        self.max_nodes = max_nodes
        self.text = self._text()

    @staticmethod
    def _edges(view, key):
        out = set()
        for k in range(len(view)):
            ck = key(k)
            for p, src in enumerate(view.inputs[k]):
                if src is None:
                    continue
                if src[0] == "n":
                    out.add((key(src[1]), ck, p))
                else:
                    out.add((("leaf", _leaf_key(view, src[1])), ck, p))
        return out

    @property
    def identical(self) -> bool:
        """True when no node, edge or shape differs."""
        return not (self.added_nodes or self.removed_nodes or self.added_edges
                    or self.removed_edges or self.shape_changes)

    # -- text ----------------------------------------------------------------------
    def _where(self, view, k) -> str:
        info = view.info(k)
        if info.get("source"):
            return "  at " + info["source"].split(": ", 1)[0].rsplit("/", 1)[-1]
        users = []
        c = k
        for _ in range(3):
            cs = view.consumers[c]
            if not cs:
                break
            c = cs[0]
            users.append(view.op_name(c))
        return ("  feeds " + " → ".join(users)) if users else "  (output)"

    def _node_line(self, view, k, sign) -> str:
        return f"  {sign} {view.op_name(k)} {view.describe_shape(k)}{self._where(view, k)}"

    def _edge_name(self, key, side):
        kind, k = key[0], key[1]
        if kind == "leaf":
            return k[1] if k[0] == "param" else f"leaf{fmt_shape(k[1])}"
        view = self.a if kind == "a" else self.b
        return view.op_name(k)

    def _text(self) -> str:
        a, b = self.a, self.b
        lines = [f"graph diff: a has {len(a)} nodes, b has {len(b)} nodes, "
                 f"{len(self.a2b)} matched"]
        if self.identical:
            lines.append("the two graphs have the same structure and shapes")
            return "\n".join(lines)

        def listing(title, items, fmt):
            lines.append(f"{title} ({len(items)}):")
            for it in items[:_LIST_LIMIT]:
                lines.append(fmt(it))
            if len(items) > _LIST_LIMIT:
                lines.append(f"  ... and {len(items) - _LIST_LIMIT} more")

        if self.added_nodes:
            listing("nodes only in b", self.added_nodes, lambda j: self._node_line(b, j, "+"))
        if self.removed_nodes:
            listing("nodes only in a", self.removed_nodes, lambda k: self._node_line(a, k, "-"))
        if self.shape_changes:
            listing("shape changes", self.shape_changes,
                    lambda c: f"  ~ {a.op_name(c[0])}: {c[2]} -> {c[3]}")
        for title, edges, sign in (("edges only in b", self.added_edges, "+"),
                                   ("edges only in a", self.removed_edges, "-")):
            if edges:
                listing(title, edges, lambda e, s=sign: (
                    f"  {s} {self._edge_name(e[0], s)} -> {self._edge_name(e[1], s)}"
                    f" (input {e[2]})"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return (f"GraphDiff(+{len(self.added_nodes)} nodes, -{len(self.removed_nodes)} nodes, "
                f"+{len(self.added_edges)} edges, -{len(self.removed_edges)} edges, "
                f"{len(self.shape_changes)} shape changes)")

    # -- picture -------------------------------------------------------------------
    def draw(self, context: int = 1, max_nodes: int | None = None):
        """A Digraph of the union: common nodes grey, only-in-b green ``+``, only-in-a red ``−``.

        Large graphs show only the changed nodes and ``context`` hops around them.
        """
        max_nodes = max_nodes or self.max_nodes
        a, b = self.a, self.b
        # union vertices: ("m", j) matched (drawn from b), ("b", j) added, ("a", k) removed
        edges = [(e, "common") for e in self.common_edges]
        edges += [(e, "added") for e in self.added_edges]
        edges += [(e, "removed") for e in self.removed_edges]
        verts = {("m", j) for j in self.b2a} | {("b", j) for j in self.added_nodes} | {
            ("a", k) for k in self.removed_nodes}
        changed = {("b", j) for j in self.added_nodes} | {("a", k) for k in self.removed_nodes}
        changed |= {("m", c[1]) for c in self.shape_changes}
        for e, kind in edges:
            if kind != "common":
                changed.update(v for v in e[:2] if v[0] != "leaf")
        if len(verts) > max_nodes:
            keep = set(changed)
            adj: dict = {}
            for e, _ in edges:
                adj.setdefault(e[0], []).append(e[1])
                adj.setdefault(e[1], []).append(e[0])
            frontier = set(keep)
            for _ in range(context):
                nxt = set()
                for v in frontier:
                    nxt.update(adj.get(v, ()))
                frontier = nxt - keep
                keep |= frontier
            verts = {v for v in verts if v in keep}
            if len(verts) > max_nodes:
                verts = set(sorted(verts, key=lambda v: (v not in changed, repr(v)))[:max_nodes])
        d = _new_drawing("diff")
        body = d.body
        changed_shape = {c[1]: c for c in self.shape_changes}
        ids = {}
        for v in sorted(verts, key=repr):
            kind, k = v
            view = a if kind == "a" else b
            vid = ids[v] = f"{kind}{k}"
            attrs = dict(STYLE["op"])
            label = f"{view.op_name(k)}\n{view.describe_shape(k)}"
            if kind == "b":
                attrs.update(STYLE["added"])
                label = "+ " + label
            elif kind == "a":
                attrs.update(STYLE["removed"])
                attrs["style"] = "rounded,filled,dashed"
                label = "− " + label
            elif k in changed_shape:
                c = changed_shape[k]
                label = f"{view.op_name(k)}\n{c[2]} → {c[3]}"
                attrs["color"] = "#e08000"
                attrs["penwidth"] = "2"
            attrs["label"] = label
            body.append(f"\t{vid} {_attrs(attrs)}\n")
        leaf_ids = {}
        for e, kind in edges:
            src, dst, p = e
            if dst not in ids:
                continue
            if src[0] == "leaf":
                if src not in leaf_ids:
                    lk = src[1]
                    lid = leaf_ids[src] = f"leaf{len(leaf_ids)}"
                    attrs = dict(STYLE["param" if lk[0] == "param" else "leaf"])
                    attrs["label"] = lk[1] if lk[0] == "param" else f"leaf\n{fmt_shape(lk[1])} {lk[2]}"
                    body.append(f"\t{lid} {_attrs(attrs)}\n")
                s = leaf_ids[src]
            elif src in ids:
                s = ids[src]
            else:
                continue
            attrs = {}
            if kind != "common":
                attrs = {kk: v for kk, v in STYLE[kind].items() if kk != "fontcolor"}
            body.append(f"\t{s} -> {ids[dst]} {_attrs(attrs) if attrs else ''}\n")
        hidden = len(self.a2b) + len(self.added_nodes) + len(self.removed_nodes) - len(ids)
        if hidden > 0:
            attrs = dict(STYLE["more"])
            attrs["label"] = f"… {fmt_count(hidden)} unchanged nodes not drawn"
            body.append(f"\tmore {_attrs(attrs)}\n")
        body.append(f"\tlabel={_q(repr(self))} labelloc=t fontsize=11\n")
        return d


def diff(a, b, params=None, max_nodes: int = 400) -> GraphDiff:
    """Compare the graphs behind ``a`` and ``b`` (outputs of two forward passes).

    >>> d = dg.viz.diff(model(x_short), model(x_long), params=model)
    >>> print(d)                # nodes/edges only in one of them, shape changes
    >>> d.draw().render("diff.svg")

    ``params`` names parameters (``dict(model.named_parameters())`` or the model),
    so that uses of the same parameter match by name.
    """
    va = GraphView(a, params)
    vb = GraphView(b, params)
    return GraphDiff(va, vb, _match(va, vb), max_nodes=max_nodes)
