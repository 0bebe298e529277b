"""Reverse-mode automatic differentiation: ``backward``, ``grad`` and friends."""

from __future__ import annotations

import numpy as np

from ..creation import tensor, zeros_like
from ..tensor import Tensor
from .engine import run_backward
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled"]


def _as_list(x) -> list:
    if isinstance(x, Tensor):
        return [x]
    if x is None:
        return [None]
    return list(x)


def _make_grads(outputs, grad_outputs, create_graph):
    grads = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if out._data.size != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs: output {i} has "
                    f"shape {list(out.shape)}; pass gradient= (backward) or grad_outputs= "
                    "(autograd.grad) with a tensor of that shape")
            g = Tensor._make(np.ones(out._data.shape, out._data.dtype), False, None, 0)
        elif not isinstance(g, Tensor):
            g = tensor(g, dtype=out.dtype)
        if tuple(g.shape) != tuple(out.shape):
            if g._data.size == out._data.size == 1 or g._data.ndim == 0 and out._data.size == 1:
                g = Tensor._make(g._data.reshape(out._data.shape), g._rg, None, 0) if not g._rg else g.reshape(out.shape)
            else:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {list(g.shape)} and "
                    f"output[{i}] has a shape of {list(out.shape)}.")
        grads.append(g)
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of graph leaves.

    >>> loss.backward()                         # same as dg.autograd.backward(loss)
    >>> dg.autograd.backward([y1, y2], [g1, g2])
    """
    outputs = _as_list(tensors)
    grads = _as_list(grad_tensors) if grad_tensors is not None else [None] * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(grads)} gradients for {len(outputs)} tensors")
    if retain_graph is None:
        retain_graph = create_graph
    grads = _make_grads(outputs, grads, create_graph)
    if inputs is not None:
        inputs = _as_list(inputs)
        if not inputs:
            raise RuntimeError("backward: 'inputs' argument to backward() cannot be empty")
    run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` (no ``.grad`` touched).

    >>> x = dg.tensor(2.0, requires_grad=True)
    >>> (dx,) = dg.autograd.grad(x ** 3, x, create_graph=True)   # 12
    >>> (dxx,) = dg.autograd.grad(dx, x)                         # 12 (= 6x)
    """
    single = isinstance(inputs, Tensor)
    outs = _as_list(outputs)
    ins = _as_list(inputs)
    if grad_outputs is None:
        gouts = [None] * len(outs)
    else:
        gouts = _as_list(grad_outputs)
    if len(gouts) != len(outs):
        raise RuntimeError(f"grad_outputs has {len(gouts)} entries for {len(outs)} outputs")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    gouts = _make_grads(outs, gouts, create_graph)
    result = run_backward(outs, gouts, retain_graph, create_graph, inputs=ins,
                          accumulate=False, allow_unused=allow_unused)
    if materialize_grads:
        result = [zeros_like(t) if r is None else r for r, t in zip(result, ins)]
    _ = single
    return tuple(result)


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """Accumulate d(self)/d(leaf) into each leaf's ``.grad``.

    ``gradient`` is required unless ``self`` holds one element.

    >>> (x * x).sum().backward()
    """
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


# Tensor.backward lives with the engine (autograd sits above tensor.py)
_tensor_backward.__name__ = _tensor_backward.__qualname__ = "backward"
Tensor.backward = _tensor_backward

from . import forward_ad, functional, graph  # noqa: E402
from .anomaly import detect_anomaly, set_detect_anomaly  # noqa: E402
from .function import Function, FunctionCtx, InplaceFunction, once_differentiable  # noqa: E402
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402
from .variable import Variable  # noqa: E402

__all__ += ["Function", "FunctionCtx", "InplaceFunction", "once_differentiable", "functional",
            "gradcheck", "gradgradcheck", "GradcheckError", "detect_anomaly",
            "set_detect_anomaly", "graph", "forward_ad", "Variable"]
