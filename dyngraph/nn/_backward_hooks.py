"""Module full backward hooks, built from two identity nodes in the autograd graph.

``Module.__call__`` passes the tensor arguments of ``forward`` through one
identity node and the tensor outputs through another.  In backward, the output
node sees ``grad_output`` (backward pre-hooks run there and may replace it);
the input node then sees ``grad_input`` and runs the full backward hooks with
both, exactly when PyTorch does.  The nodes are custom: their ``prim`` has a
``backward_node`` method (see ``docs/internals.md``), so no primitive is added
to the registry for them.
"""

from __future__ import annotations

from ..autograd.graph import Node
from ..tensor import Tensor

__all__ = ["BackwardHook"]


class _IdentityWithCallback:
    """The ``prim`` of an identity node whose backward calls ``callback(grads, create_graph)``."""

    __slots__ = ("callback",)
    name = "backward_hook_function"
    differentiable = True
    vjp_rules = None  # the engine calls backward_node instead
    vjp_argnum = None

    def __init__(self, callback):
        self.callback = callback

    def backward_node(self, node, grads, create_graph):
        gs = tuple(grads) if node.n_out > 1 else (grads,)
        return list(self.callback(gs, create_graph))


def _identity(tensors, callback):
    """New tensors sharing the data of ``tensors``, routed through one callback node."""
    edges = tuple(((t, 0) if t._fn is None else (t._fn, t._nr)) if t._rg else None
                  for t in tensors)
    node = Node(_IdentityWithCallback(callback), {}, edges)
    node.n_out = len(tensors)
    node.out_meta = tuple((t._data.shape, t._data.dtype) for t in tensors)
    outs = []
    for i, t in enumerate(tensors):
        if not t._rg:
            outs.append(t)
            continue
        o = Tensor._make(t._data, True, node, i)
        vc = t._vc
        if vc is None:
            vc = t._vc = [0]
        o._vc = vc
        outs.append(o)
    return outs


def _wrap(gs, create_graph):
    if create_graph:
        return tuple(gs)
    return tuple(None if g is None else Tensor._make(g, False, None, 0) for g in gs)


def _unwrap(gs, create_graph):
    if create_graph:
        return tuple(gs)
    return tuple(None if g is None else (g._data if isinstance(g, Tensor) else g) for g in gs)


class BackwardHook:
    """Links the output-gradient and input-gradient events of one module call."""

    def __init__(self, module, hooks, pre_hooks):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs = None
        self.n_inputs = 0
        self.input_idx = None
        self.input_rg = None
        self.n_outputs = 0
        self.output_idx = None

    # -- inputs ---------------------------------------------------------------
    def setup_input_hook(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not any(args[i]._rg for i in idx):
            return args
        self.input_idx = idx
        self.input_rg = [args[i]._rg for i in idx]
        new = _identity([args[i] for i in idx], self._on_input_grads)
        out = list(args)
        for i, t in zip(idx, new, strict=True):
            out[i] = t
        return tuple(out)

    def _on_input_grads(self, grads, create_graph):
        grads = tuple(g if rg else None for g, rg in zip(grads, self.input_rg, strict=True))
        if self.grad_outputs is None:  # gradient did not come through the outputs
            return grads
        res = [None] * self.n_inputs
        for i, g in zip(self.input_idx, _wrap(grads, create_graph), strict=True):
            res[i] = g
        res = tuple(res)
        for hook in self.hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out) != len(res):
                raise RuntimeError(
                    f"Backward hook of {self.module._get_name()} returned an invalid number of "
                    f"grad_input, got {len(out)}, but expected {len(res)}")
            res = out
        self.grad_outputs = None
        return _unwrap([res[i] for i in self.input_idx], create_graph)

    # -- outputs --------------------------------------------------------------
    def setup_output_hook(self, result):
        is_tuple = isinstance(result, tuple)
        outs = result if is_tuple else (result,)
        idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor)]
        if not any(outs[i]._rg for i in idx):
            return result
        self.n_outputs = len(outs)
        self.output_idx = idx
        new = _identity([outs[i] for i in idx], self._on_output_grads)
        lst = list(outs)
        for i, t in zip(idx, new, strict=True):
            lst[i] = t
        return tuple(lst) if is_tuple else lst[0]

    def _on_output_grads(self, grads, create_graph):
        go = [None] * self.n_outputs
        for i, g in zip(self.output_idx, _wrap(grads, create_graph), strict=True):
            go[i] = g
        go = tuple(go)
        for hook in self.pre_hooks:
            new = hook(self.module, go)
            if new is None:
                continue
            new = tuple(new) if isinstance(new, (tuple, list)) else (new,)
            if len(new) != len(go):
                raise RuntimeError(
                    f"Backward pre hook of {self.module._get_name()} returned an invalid number "
                    f"of grad_output, got {len(new)}, but expected {len(go)}")
            go = new
        self.grad_outputs = go
        if self.input_idx is None:
            # No input requires grad: the full hooks fire now, with grad_input all None.
            gi = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, gi, go)
                if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should "
                        "always return None or None for all gradients.")
            self.grad_outputs = None
        return _unwrap([go[i] for i in self.output_idx], create_graph)
