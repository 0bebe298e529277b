"""``dg.onnx.export``: capture a model with the tracer and lower the graph to ONNX."""

from __future__ import annotations

import os
import warnings

import numpy as np

from ..autograd.grad_mode import no_grad
from ..jit.ir import Var
from ..jit.passes import constant_folding, cse, dce
from ..jit.tracer import capture, flatten
from ..tensor import Tensor
from .lowering import LOWERINGS, UNSUPPORTED, UnsupportedPrimitiveError

__all__ = ["export"]


class _Ctx:
    """Builds the ONNX node list for one captured graph."""

    def __init__(self, graph, opset, dynamic_batch, names):
        from onnx import helper  # noqa: PLC0415  (onnx: optional dependency, imported on first use)

        self.helper = helper
        self.graph = graph
        self.opset = opset
        self.dynamic_batch = dynamic_batch
        self.names = dict(names)
        self.nodes = []
        self.inits = []
        self.n = 0
        self.uses = {}
        for node in graph.nodes:
            for v in node.var_args():
                self.uses[v] = self.uses.get(v, 0) + 1
        for v in graph.outputs:
            self.uses[v] = self.uses.get(v, 0) + 1

    def used(self, vid) -> bool:
        return self.uses.get(vid, 0) > 0

    def info(self, arg):
        return self.graph.values[arg.id if type(arg) is Var else arg]

    def name(self, vid) -> str:
        n = self.names.get(vid)
        if n is None:
            n = self.names[vid] = f"v{vid}"
        return n

    def tmp(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def onnx_dtype(self, dt) -> int:
        return self.helper.np_dtype_to_tensor_dtype(np.dtype(dt))

    def const(self, arr, name=None) -> str:
        from onnx import numpy_helper  # noqa: PLC0415  (onnx: optional dependency, imported on first use)

        name = name or f"c{len(self.inits)}_{self.tmp()}"
        self.inits.append(numpy_helper.from_array(np.array(arr, order="C"), name))
        return name

    def scalar(self, value, node) -> str:
        """A 0-d constant with the dtype of the node's first tensor argument."""
        dt = None
        for a in node.args:
            if type(a) is Var:
                dt = self.info(a).dtype
                break
        if dt is None or dt.kind == "b":
            dt = self.graph.values[node.outs[0]].dtype
        return self.const(np.array(value, dtype=dt))

    def arg(self, node, i) -> str:
        a = node.args[i]
        if type(a) is Var:
            return self.name(a.id)
        if a is None:
            return ""
        return self.scalar(a, node)

    def out(self, node, k=0) -> str:
        return self.name(node.outs[k])

    def add(self, op_type, inputs, outputs=None, **attrs):
        if outputs is None:
            outputs = [self.tmp()]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), list(outputs), **attrs))
        return outputs[0] if len(outputs) == 1 else outputs


def export(model, args, f, *, input_names=None, output_names=None, dynamic_axes=None,
           opset_version: int = 17, do_constant_folding: bool = True, verbose: bool = False):
    """Export ``model(*args)`` to the ONNX file ``f`` (returns the ``onnx.ModelProto``).

    The model is captured once with the example ``args`` (no gradients); every
    primitive it ran is lowered through :data:`dyngraph.onnx.LOWERINGS`.  Control
    flow is fixed by the example: if the model made data-dependent decisions
    (``if x.sum() > 0``), a warning says the export holds only the branch taken.

    >>> dg.onnx.export(model, (x,), "m.onnx", input_names=["x"], output_names=["y"],
    ...                dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    """
    import onnx  # noqa: PLC0415  (onnx: optional dependency, imported on first use)
    from onnx import helper  # noqa: PLC0415  (onnx: optional dependency, imported on first use)

    if isinstance(args, (Tensor, np.ndarray)):
        args = (args,)
    args = tuple(Tensor._make(np.asarray(a), False, None, 0) if isinstance(a, np.ndarray) else a
                 for a in args)
    name = getattr(model, "__name__", type(model).__name__)
    with no_grad():
        cap = capture(model, args, {}, build_backward=False)
    if cap.reason is not None:
        hint = (" (call model.eval() first if it uses dropout)" if "random" in cap.reason else "")
        raise RuntimeError(f"dg.onnx.export({name}): the model cannot be captured: {cap.reason}{hint}")
    if cap.effects:
        raise RuntimeError(f"dg.onnx.export({name}): the model modifies tensors in place "
                           "(buffers, .grad); only pure forward computations can be exported")
    g = cap.fwd
    g.outputs = g.outputs[:cap.n_user_outputs]
    if g.guards:
        shown = ", ".join(f"{k}(%{v}) == {e!r}" for v, k, e in g.guards[:4])
        warnings.warn(
            f"dg.onnx.export({name}): the model made {len(g.guards)} data-dependent decision(s) "
            f"({shown}); the exported graph contains only the branch taken for the example "
            "inputs", stacklevel=2)
    # captured tensors become initializers (named after module parameters when possible)
    pnames = {}
    if hasattr(model, "named_parameters"):
        for pn, p in model.named_parameters():
            pnames[id(p)] = pn
        if hasattr(model, "named_buffers"):
            for bn, b in model.named_buffers():
                pnames[id(b)] = bn
    cap_names = {}
    for vid, ref in zip(g.captures, cap.capture_refs, strict=True):
        t = ref()
        g.constants[vid] = t._data
        cap_names[vid] = pnames.get(id(t), f"weight_{vid}")
    g.captures = []
    cse(g)
    if do_constant_folding:
        constant_folding(g)
    dce(g)
    leaves: list = []
    flatten((args, {}), leaves)
    n_in = len(g.inputs)
    input_names = list(input_names or [f"input_{i}" for i in range(n_in)])
    if len(input_names) != n_in:
        raise ValueError(f"dg.onnx.export: {len(input_names)} input_names for {n_in} tensor inputs")
    output_names = list(output_names or [f"output_{i}" for i in range(len(g.outputs))])
    if len(output_names) != len(g.outputs):
        raise ValueError(f"dg.onnx.export: {len(output_names)} output_names for {len(g.outputs)} outputs")
    dynamic_axes = dynamic_axes or {}
    names = {vid: nm for vid, nm in zip(g.inputs, input_names, strict=True)}
    ctx = _Ctx(g, opset_version, bool(dynamic_axes), names)
    for vid, arr in g.constants.items():
        if ctx.used(vid):
            ctx.const(np.asarray(arr), ctx.name(vid) if vid not in cap_names else cap_names[vid])
            if vid in cap_names:
                ctx.names[vid] = cap_names[vid]
    for node in g.nodes:
        fn = LOWERINGS.get(node.op)
        if fn is None:
            why = UNSUPPORTED.get(node.op)
            raise UnsupportedPrimitiveError(
                f"dg.onnx.export({name}): primitive {node.op!r} has no ONNX lowering"
                + (f" ({why})" if why else "") + " (add one to dyngraph.onnx.LOWERINGS with "
                "@dyngraph.onnx.lowering)")
        fn(ctx, node)
    # outputs: an output that is an input or constant needs an Identity to get its own name
    out_nodes = []
    for vid, oname in zip(g.outputs, output_names, strict=True):
        ctx.nodes.append(helper.make_node("Identity", [ctx.name(vid)], [oname]))
        out_nodes.append((vid, oname))

    def vinfo(vid, nm):
        info = g.values[vid]
        dims = list(info.shape)
        for d, label in (dynamic_axes.get(nm) or {}).items() if isinstance(dynamic_axes.get(nm), dict) \
                else ((d, f"{nm}_dim{d}") for d in (dynamic_axes.get(nm) or [])):
            dims[d] = label
        return helper.make_tensor_value_info(nm, ctx.onnx_dtype(info.dtype), dims)

    graph = helper.make_graph(
        ctx.nodes, name, [vinfo(v, n) for v, n in zip(g.inputs, input_names, strict=True)],
        [vinfo(v, n) for v, n in out_nodes], initializer=ctx.inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                              producer_name="dyngraph")
    proto.ir_version = min(proto.ir_version, 9)
    onnx.checker.check_model(proto, full_check=True)
    if f is not None:
        if hasattr(f, "write"):
            f.write(proto.SerializeToString())
        else:
            onnx.save(proto, os.fspath(f))
    if verbose:
        print(helper.printable_graph(graph))
    return proto
