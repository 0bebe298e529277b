"""``draw``: the live autograd graph as a Graphviz picture.

No tracing step: :func:`draw` reads the graph that the forward pass left
behind (``t.grad_fn`` and its edges).  One box per primitive with its name,
output shape and dtype; parameters in blue with their module path; other
leaves in yellow; tensors a node saved for backward in orange; the outputs
in green.  Large graphs are collapsed (repeated structure becomes one
``box3d`` node, ``"LSTMCell ×500"``) and cut at ``max_nodes``.
"""

from __future__ import annotations

import os

from .collapse import find_groups, fmt_count
from .extract import GraphView, dtype_name, fmt_shape

__all__ = ["draw", "Drawing", "STYLE"]

STYLE = {
    "op": {"shape": "box", "style": "rounded,filled", "fillcolor": "#e8e8e8", "fontsize": "10"},
    "param": {"shape": "box", "style": "filled", "fillcolor": "#add8e6", "fontsize": "10"},
    "leaf": {"shape": "box", "style": "filled", "fillcolor": "#fff3b0", "fontsize": "10"},
    "saved": {"shape": "box", "style": "filled,dashed", "fillcolor": "#ffcc80", "fontsize": "9"},
    "output": {"shape": "box", "style": "filled", "fillcolor": "#c5e1a5", "fontsize": "10"},
    "group": {"shape": "box3d", "style": "filled", "fillcolor": "#d7c4f0", "fontsize": "11"},
    "more": {"shape": "note", "style": "filled", "fillcolor": "#ffffff", "fontsize": "10"},
    "added": {"color": "#1b9e3a", "fontcolor": "#1b7e2a", "penwidth": "2.5"},
    "removed": {"color": "#d62728", "fontcolor": "#b51717", "penwidth": "2.5", "style": "dashed"},
}

_INSTALL_HINT = (
    "install Graphviz's `dot` program: `apt-get install graphviz` (Debian/Ubuntu), "
    "`brew install graphviz` (macOS) or `conda install graphviz`; the DOT text is in `.source` "
    "and can be rendered anywhere")


def _q(s) -> str:
    """Quote a DOT ID/label: escape backslashes and quotes, turn newlines into ``\\n``."""
    s = str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def _attrs(d: dict) -> str:
    return "[" + " ".join(f"{k}={_q(v)}" for k, v in d.items()) + "]"


def _digraph_class():
    try:
        import graphviz  # noqa: PLC0415  (graphviz: optional dependency, imported on first use)
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "dyngraph.viz needs the `graphviz` Python package: pip install graphviz "
            "(or pip install 'dyngraph[viz]')") from exc
    return graphviz


class _DrawingMixin:
    def render(self, filename=None, directory=None, view=False, cleanup=True, format=None,
               **kwargs):
        """Write the picture; ``format`` (svg/png/pdf...) defaults to ``filename``'s suffix.

        ``render("graph.svg")`` writes ``graph.svg``; ``render("graph", format="png")``
        writes ``graph.png``.  Returns the path written.
        """
        gv = _digraph_class()
        if filename is not None:
            filename = os.fspath(filename)
            if directory is not None:
                filename = os.path.join(directory, filename)
            root, ext = os.path.splitext(filename)
            if format is None and ext[1:] in gv.FORMATS:
                format = ext[1:]
            format = format or "svg"
            outfile = filename if ext[1:] == format else f"{filename}.{format}"
            try:
                return super().render(outfile=outfile, view=view, cleanup=cleanup, format=format,
                                      **kwargs)
            except gv.ExecutableNotFound as exc:
                raise RuntimeError(f"cannot render {outfile!r}: {_INSTALL_HINT}") from exc
        try:
            return super().render(directory=directory, view=view, cleanup=cleanup, format=format,
                                  **kwargs)
        except gv.ExecutableNotFound as exc:
            raise RuntimeError(f"cannot render: {_INSTALL_HINT}") from exc

    def pipe(self, format=None, *args, **kwargs):
        gv = _digraph_class()
        try:
            return super().pipe(format, *args, **kwargs)
        except gv.ExecutableNotFound as exc:
            raise RuntimeError(f"cannot render: {_INSTALL_HINT}") from exc


_DRAWING = None


def Drawing(**kwargs):
    """A ``graphviz.Digraph`` whose render errors say how to install ``dot``."""
    global _DRAWING
    if _DRAWING is None:
        gv = _digraph_class()
        _DRAWING = type("Drawing", (_DrawingMixin, gv.Digraph), {"__module__": __name__})
    return _DRAWING(**kwargs)


def _new_drawing(name="dyngraph", graph_attr=None) -> object:
    ga = {"rankdir": "TB", "fontname": "Helvetica", "nodesep": "0.25", "ranksep": "0.35"}
    ga.update(graph_attr or {})
    d = Drawing(name=name, graph_attr=ga,
                node_attr={"fontname": "Helvetica"}, edge_attr={"fontname": "Helvetica",
                                                                "fontsize": "9"})
    return d


def _leaf_label(view, j):
    shape, dtype = view.leaf_shape(j)
    name = view.leaf_name(j)
    return (name if name is not None else "leaf"), f"{fmt_shape(shape)} {dtype_name(dtype)}"


def _cluster_tree(paths):
    """Sorted list of module paths including all their ancestors ('' excluded)."""
    full = set()
    for p in paths:
        parts = p.split(".")
        for i in range(1, len(parts) + 1):
            full.add(".".join(parts[:i]))
    return sorted(full)


def draw(output, params=None, group_by_module: bool = False, max_nodes: int = 400,
         collapse: bool = True, show_saved: bool = True, min_repeat: int = 3,
         collapse_above: int = 60, graph_attr: dict | None = None, name: str = "dyngraph"):
    """Draw the graph behind ``output`` (a Tensor or a list/tuple/dict of Tensors).

    Args:
        output: the tensor(s) whose graph to draw, e.g. the loss.
        params: names for parameters: ``dict(model.named_parameters())``, an
            iterable of ``(name, tensor)`` or the model itself.
        group_by_module: draw a cluster per module (from :func:`dg.viz.record`
            annotations, else inferred from the parameters each op uses).
        max_nodes: at most this many boxes; the rest is summarised in one note.
        collapse: replace repeated structure by one ``box3d`` per run
            (``"LSTMCell ×500"``) when the graph has more than ``collapse_above`` nodes.
        show_saved: mark tensors saved for backward (orange).
        min_repeat: fewest repetitions worth collapsing.

    Returns:
        a ``graphviz.Digraph``: ``.source`` is the DOT text; ``.render("g.svg")``
        writes a picture (needs Graphviz's ``dot``).

    >>> y = model(x)
    >>> dg.viz.draw(y, params=dict(model.named_parameters())).render("model.svg")
    """
    view = GraphView(output, params)
    if all(r is None for r in view.roots):
        shapes = ", ".join(str(list(t.shape)) for t in view.outputs)
        raise ValueError(
            f"draw: the output (shape {shapes}) has no autograd graph: it was computed from "
            "tensors that do not require grad, or under no_grad(). Give the model parameters "
            "(or an input) requires_grad=True and run the forward pass with grad enabled.")
    groups = find_groups(view, min_repeat) if collapse and len(view) > collapse_above else []
    return _build(view, groups, group_by_module=group_by_module, max_nodes=max_nodes,
                  show_saved=show_saved, graph_attr=graph_attr, name=name)


def _build(view, groups, *, group_by_module, max_nodes, show_saved, graph_attr, name,
           node_marks=None, edge_marks=None, leaf_marks=None):
    """Emit DOT for ``view`` with ``groups`` collapsed.  Marks highlight diff results."""
    gmap = {}
    gblock = {}
    for gi, grp in enumerate(groups):
        for b, blk in enumerate(grp.blocks):
            for k in blk:
                gmap[k] = gi
                gblock[k] = b
    n = len(view)
    # drawable items in root-first order: ("n", k) for plain nodes, ("g", gi) for groups
    order = []
    placed_groups = set()
    for k in range(n):
        gi = gmap.get(k)
        if gi is None:
            order.append(("n", k))
        elif gi not in placed_groups:
            placed_groups.add(gi)
            order.append(("g", gi))
    hidden = 0
    if len(order) > max_nodes:
        hidden_items = order[max_nodes:]
        hidden = sum(len(groups[i].members) if kind == "g" else 1 for kind, i in hidden_items)
        order = order[:max_nodes]
    shown_n = {i for kind, i in order if kind == "n"}
    shown_g = {i for kind, i in order if kind == "g"}

    def rep(k):
        gi = gmap.get(k)
        if gi is not None:
            return f"g{gi}" if gi in shown_g else None
        return f"n{k}" if k in shown_n else None

    node_marks = node_marks or {}
    edge_marks = edge_marks or {}
    leaf_marks = leaf_marks or {}
    lines = []  # (cluster path or None, DOT statement)
    modules = {}

    for kind, i in order:
        if kind == "n":
            k = i
            node = view.nodes[k]
            label = f"{view.op_name(k)}\n{view.describe_shape(k)}"
            attrs = dict(STYLE["op"])
            if show_saved and node.out is not None:
                attrs["fillcolor"] = "#e8e8e8"
                attrs["color"] = "#e08000"
                label += "\n(saves output)"
            src = view.info(k).get("source")
            if src:
                attrs["tooltip"] = src
            mark = node_marks.get(k)
            if mark:
                attrs.update(STYLE[mark])
                label = ("+ " if mark == "added" else "− ") + label
            attrs["label"] = label
            mod = view.module_of(k) if group_by_module else None
            if mod:
                modules.setdefault(mod, None)
            lines.append((mod, f"n{k} {_attrs(attrs)}"))
        else:
            grp = groups[i]
            s = view.shapes.get((grp.head, 0))
            shp = "" if s is None else f"\n{fmt_shape(s[0])} {dtype_name(s[1])}"
            attrs = dict(STYLE["group"])
            attrs["label"] = f"{grp.label}\n{grp.detail}{shp}"
            lines.append((None, f"g{i} {_attrs(attrs)}"))

    # leaves: parameters and other leaf tensors; parameters nest in their module cluster
    leaf_edges: dict = {}
    for j in range(len(view.leaves)):
        for c in view.leaf_consumers[j]:
            r = rep(c)
            if r is not None:
                leaf_edges[(j, r)] = leaf_edges.get((j, r), 0) + 1
    used_leaves = sorted({j for j, _ in leaf_edges})
    for j in used_leaves:
        nm, shape = _leaf_label(view, j)
        is_param = view.leaf_name(j) is not None
        attrs = dict(STYLE["param" if is_param else "leaf"])
        attrs["label"] = f"{nm}\n{shape}"
        mark = leaf_marks.get(j)
        if mark:
            attrs.update(STYLE[mark])
        mod = nm.rpartition(".")[0] if (group_by_module and is_param) else None
        if mod:
            modules.setdefault(mod, None)
        lines.append((mod or None, f"l{j} {_attrs(attrs)}"))

    edges = []
    counts: dict = {}
    saved_edges = set()
    for kind, i in order:
        members = [i] if kind == "n" else sorted(groups[i].members)
        for k in members:
            node = view.nodes[k]
            saved = node.saved if show_saved and isinstance(node.saved, tuple) else None
            dst = f"n{k}" if kind == "n" else f"g{i}"
            for p, src in enumerate(view.inputs[k]):
                if src is None or src[0] != "n":
                    continue
                r = rep(src[1])
                if r is None or (r == dst and gblock.get(src[1]) == gblock.get(k)):
                    continue  # not drawn, or an edge inside one repetition of a group
                key = (r, dst)
                counts[key] = counts.get(key, 0) + 1
                if saved is not None and p < len(saved):
                    saved_edges.add(key)
    for (a, b), c in counts.items():
        attrs = {}
        if a == b:
            attrs["label"] = f"recurrent ×{fmt_count(c)}" if c > 1 else "recurrent"
        elif c > 1:
            attrs["label"] = f"×{fmt_count(c)}"
        if (a, b) in saved_edges:
            attrs["color"] = "#e08000"
        mark = edge_marks.get((a, b))
        if mark:
            attrs.update({kk: v for kk, v in STYLE[mark].items() if kk != "fontcolor"})
        edges.append(f"{a} -> {b} {_attrs(attrs) if attrs else ''}".rstrip())
    for (j, r), c in leaf_edges.items():
        attrs = {"label": f"×{fmt_count(c)}"} if c > 1 else {}
        mark = edge_marks.get((f"l{j}", r))
        if mark:
            attrs.update({kk: v for kk, v in STYLE[mark].items() if kk != "fontcolor"})
        edges.append(f"l{j} -> {r} {_attrs(attrs) if attrs else ''}".rstrip())

    # saved tensors that are not drawn otherwise (inputs that need no gradient); one box
    # per tensor object, however many ops saved it
    if show_saved:
        saved_ids: dict = {}
        for kind, i in order:
            if kind != "n":
                continue
            node = view.nodes[i]
            saved = node.saved
            if not isinstance(saved, tuple):
                continue
            for p, t in enumerate(saved):
                src = view.inputs[i][p] if p < len(view.inputs[i]) else None
                if src is not None or not hasattr(t, "_data"):
                    continue
                sid = saved_ids.get(t)
                if sid is None:
                    sid = saved_ids[t] = f"s{len(saved_ids)}"
                    a = t._data
                    attrs = dict(STYLE["saved"])
                    attrs["label"] = f"saved tensor\n{fmt_shape(a.shape)} {dtype_name(a.dtype)}"
                    lines.append((None, f"{sid} {_attrs(attrs)}"))
                edges.append(f'{sid} -> n{i} [style="dashed" color="#e08000"]')

    # outputs
    for o, r in enumerate(view.roots):
        if r is None:
            continue
        rr = rep(r[1]) if r[0] == "n" else f"l{r[1]}"
        if rr is None:
            continue
        t = view.outputs[o]
        attrs = dict(STYLE["output"])
        nm = "output" if len(view.roots) == 1 else f"output {o}"
        attrs["label"] = f"{nm}\n{fmt_shape(t._data.shape)} {t._data.dtype}"
        lines.append((None, f"out{o} {_attrs(attrs)}"))
        edges.append(f"{rr} -> out{o}")

    if hidden:
        attrs = dict(STYLE["more"])
        attrs["label"] = (f"… {fmt_count(hidden)} more nodes not drawn\n"
                          f"(max_nodes={max_nodes}; pass collapse=True or a larger max_nodes)")
        lines.append((None, f"more {_attrs(attrs)}"))

    d = _new_drawing(name, graph_attr)
    body = d.body
    plain = [stmt for mod, stmt in lines if not mod]
    for stmt in plain:
        body.append(f"\t{stmt}\n")
    if modules:
        by_mod: dict = {}
        for mod, stmt in lines:
            if mod:
                by_mod.setdefault(mod, []).append(stmt)
        # nested clusters opened/closed with an explicit stack (paths sorted, parents first)
        stack: list = []
        for path in _cluster_tree(by_mod):
            while stack and not path.startswith(stack[-1] + "."):
                stack.pop()
                body.append("\t}\n")
            stack.append(path)
            cid = "cluster_" + path.replace(".", "__")
            body.append(f"\tsubgraph {_q(cid)} {{\n")
            body.append(f'\t\tlabel={_q(path)} style="rounded,dashed" color="#7f7f7f" fontsize="10"\n')
            for stmt in by_mod.get(path, ()):
                body.append(f"\t\t{stmt}\n")
        for _ in stack:
            body.append("\t}\n")
    for e in edges:
        body.append(f"\t{e}\n")
    d.groups = groups  # what was collapsed (labels and node counts), for callers and tests
    return d
