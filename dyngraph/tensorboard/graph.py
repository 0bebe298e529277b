"""Convert the live graph of one forward step into TensorBoard's ``GraphDef``.

Each primitive becomes a ``NodeDef`` named ``<module scope>/<op>_<n>`` (TensorBoard
folds names sharing a ``/``-prefix into one expandable box, so module paths
become scopes), with its inputs, ``_output_shapes`` and ``dtype`` attributes.
Parameters are ``Parameter`` nodes named by their path; other leaves and
constants are ``Input`` nodes.
"""

from __future__ import annotations

from ..autograd.grad_mode import enable_grad
from ..viz.extract import GraphView, as_outputs, dtype_name
from ..viz.record import record

__all__ = ["graph_def", "view_to_graph_def"]

_DT = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6,
       "int64": 9, "bool": 10, "float16": 19}


def _protos():
    from tensorboardX.proto import (  # noqa: PLC0415  (tensorboardX: optional dependency, imported on first use)
        attr_value_pb2,
        graph_pb2,
        node_def_pb2,
        tensor_shape_pb2,
        versions_pb2,
    )

    return attr_value_pb2, graph_pb2, node_def_pb2, tensor_shape_pb2, versions_pb2


def _scope(path: str | None) -> str:
    if not path:
        return ""
    return path.replace(".", "/") + "/"


def view_to_graph_def(view: GraphView, root_name: str = "model", inputs=()):
    """``GraphDef`` for a :class:`~dyngraph.viz.extract.GraphView`.

    ``inputs``: the model's input tensors; ops that saved one of them (it needs
    no gradient, so the graph has no edge for it) get an edge from an
    ``input/input_<i>`` node.
    """
    attr_value_pb2, graph_pb2, node_def_pb2, tensor_shape_pb2, versions_pb2 = _protos()

    def shape_attr(shapes):
        lst = attr_value_pb2.AttrValue.ListValue(shape=[
            tensor_shape_pb2.TensorShapeProto(
                dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=int(d)) for d in s])
            if s is not None else tensor_shape_pb2.TensorShapeProto(unknown_rank=True)
            for s in shapes])
        return attr_value_pb2.AttrValue(list=lst)

    def attrs(shapes, dtypes, extra=None):
        out = {"_output_shapes": shape_attr(shapes)}
        if dtypes and dtypes[0] is not None:
            out["dtype"] = attr_value_pb2.AttrValue(type=_DT.get(dtype_name(dtypes[0]), 0))
        for k, v in (extra or {}).items():
            out[k] = attr_value_pb2.AttrValue(s=str(v).encode())
        return out

    nodes = []
    leaf_names = []
    used = set()
    for j, leaf in enumerate(view.leaves):
        name = view.leaf_name(j)
        base = f"{root_name}/{name.replace('.', '/')}" if name else f"input/leaf_{j}"
        nm = base
        i = 1
        while nm in used:
            nm = f"{base}_{i}"
            i += 1
        used.add(nm)
        leaf_names.append(nm)
        a = leaf._data
        nodes.append(node_def_pb2.NodeDef(
            name=nm, op="Parameter" if name else "Input",
            attr=attrs([a.shape], [a.dtype])))
    input_names = {}
    for i, t in enumerate(inputs):
        if hasattr(t, "_data") and t not in view.leaf_index:
            input_names[t] = f"input/input_{i}"
            nodes.append(node_def_pb2.NodeDef(name=f"input/input_{i}", op="Input",
                                              attr=attrs([t._data.shape], [t._data.dtype])))
    n = len(view)
    names = [None] * n
    counter: dict = {}
    # producers first, so a node's inputs are named before it
    for k in range(n - 1, -1, -1):
        op = view.op_name(k)
        scope = _scope(view.module_of(k))
        key = scope + op
        c = counter.get(key, 0)
        counter[key] = c + 1
        names[k] = f"{root_name}/{scope}{op}_{c}"
    for k in range(n - 1, -1, -1):
        node = view.nodes[k]
        ins = []
        saved = node.saved if isinstance(node.saved, tuple) else ()
        for p, src in enumerate(view.inputs[k]):
            if src is None:
                t = saved[p] if p < len(saved) else None
                if t is not None and hasattr(t, "_data") and t in input_names:
                    ins.append(input_names[t])
                continue
            if src[0] == "n":
                ins.append(names[src[1]] if src[2] == 0 else f"{names[src[1]]}:{src[2]}")
            else:
                ins.append(leaf_names[src[1]])
        shapes, dtypes = [], []
        for nr in range(node.n_out):
            s = view.shapes.get((k, nr))
            shapes.append(None if s is None else s[0])
            dtypes.append(None if s is None else s[1])
        extra = {}
        info = view.info(k)
        if info.get("source"):
            extra["source"] = info["source"]
        if node.params:
            extra["params"] = ", ".join(f"{a}={b}" for a, b in node.params.items())
        nodes.append(node_def_pb2.NodeDef(name=names[k], op=view.op_name(k), input=ins,
                                          attr=attrs(shapes, dtypes, extra)))
    for o, r in enumerate(view.roots):
        if r is None:
            continue
        t = view.outputs[o]
        src = names[r[1]] if r[0] == "n" else leaf_names[r[1]]
        nodes.append(node_def_pb2.NodeDef(name=f"output/output_{o}", op="Output", input=[src],
                                          attr=attrs([t._data.shape], [t._data.dtype])))
    return graph_pb2.GraphDef(node=nodes, versions=versions_pb2.VersionDef(producer=22))


def graph_def(model, input_to_model=None):
    """Run ``model`` once (recording module scopes) and return the ``GraphDef`` of that step."""
    if input_to_model is None:
        args = ()
    elif isinstance(input_to_model, (tuple, list)):
        args = tuple(input_to_model)
    else:
        args = (input_to_model,)
    with enable_grad(), record():
        out = model(*args)
    outputs = as_outputs(out)
    if all(o._fn is None for o in outputs):
        raise RuntimeError(
            f"add_graph: the output of {type(model).__name__} has no graph (no parameter or input "
            "requires grad, or the model ran under no_grad): give the model parameters with "
            "requires_grad=True or pass an input with requires_grad=True")
    params = model.named_parameters() if hasattr(model, "named_parameters") else None
    view = GraphView(outputs, params)
    return view_to_graph_def(view, type(model).__name__, args)
