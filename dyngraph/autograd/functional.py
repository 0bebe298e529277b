"""Higher-level differentiation of functions: vjp, jvp, jacobian, hessian, hvp, vhp.

The same surface as ``torch.autograd.functional``.  Everything is built on
reverse mode (``autograd.grad``):

* ``vjp(f, x, v)``  = vᵀ J, one backward pass.
* ``jvp(f, x, v)``  = J v, by the *double-vjp trick*: ``g(u) = uᵀ J`` is linear
  in a dummy cotangent ``u``, so differentiating ``g(u)·v`` with respect to
  ``u`` gives ``J v``.  It needs the vjp rules themselves to be differentiable,
  which every registry rule is (they are written with dyngraph operations), so
  forward mode works for every op that has a rule, and for custom Functions
  whose ``backward`` is written with dyngraph operations.
* ``jacobian`` stacks one vjp per output element; ``hessian`` is the jacobian
  of the jacobian; ``vhp`` = vᵀ H (double backward); ``hvp`` = H v, equal to
  ``vhp`` because the Hessian of a twice continuously differentiable function
  is symmetric.

>>> f = lambda x: (x ** 3).sum()
>>> x = dg.tensor([1.0, 2.0])
>>> dg.autograd.functional.hessian(f, x)
tensor([[ 6.,  0.],
        [ 0., 12.]])
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..creation import zeros, zeros_like
from ..surface.shape import reshape, stack
from ..tensor import Tensor
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


# -- argument handling (PyTorch's conventions) --------------------------------

def _as_tuple(x, arg_name: str, fn_name: str):
    if isinstance(x, Tensor):
        return False, (x,)
    if isinstance(x, (tuple, list)):
        for i, el in enumerate(x):
            if not isinstance(el, Tensor):
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                    f"Tensors but the value at index {i} has type {type(el).__name__}.")
        return True, tuple(x)
    raise TypeError(
        f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
        f"the given {arg_name} has type {type(x).__name__}.")


def _unpack(res, is_tuple):
    return res if is_tuple else res[0]


def _prepare_inputs(inputs, create_graph):
    """Fresh tensors that require grad (linked to the originals when create_graph)."""
    out = []
    for x in inputs:
        if create_graph and x.requires_grad:
            out.append(x.reshape(x.shape))  # a differentiable alias: grads reach x too
        else:
            out.append(x.detach().requires_grad_(x.is_floating_point()))
    return tuple(out)


def _finish(results, create_graph):
    """Detach results unless the caller asked for a differentiable answer."""
    if create_graph:
        return results
    if isinstance(results, Tensor):
        return results.detach()
    if isinstance(results, tuple):
        return tuple(_finish(r, False) for r in results)
    return results


def _check_v(v, others, fn_name, what="outputs"):
    if len(v) != len(others):
        raise RuntimeError(
            f"v has invalid size: expected {len(others)} tensors (one per {what[:-1]}) but got "
            f"{len(v)} in {fn_name}")
    for i, (a, b) in enumerate(zip(v, others, strict=True)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(
                f"Mismatch in shape: v[{i}] has shape {list(a.shape)} but the corresponding "
                f"{what[:-1]} has shape {list(b.shape)} ({fn_name})")


def _grad(outputs, inputs, grad_outputs, create_graph, retain_graph=True):
    from . import grad  # noqa: PLC0415  (autograd/__init__ defines grad and imports this module)

    outs, gouts = [], []
    for o, g in zip(outputs, grad_outputs, strict=True):
        if o.requires_grad:
            outs.append(o)
            gouts.append(g)
    if not outs:
        return (None,) * len(inputs)
    return grad(outs, inputs, gouts, retain_graph=retain_graph, create_graph=create_graph,
                allow_unused=True)


def _fill_zeros(grads, refs, strict, create_graph, fn_name, stage):
    res = []
    for i, (g, r) in enumerate(zip(grads, refs, strict=True)):
        if g is None:
            if strict:
                if stage == "back":
                    raise RuntimeError(
                        f"The output of the user-provided function is independent of input {i}. "
                        f"This is not allowed in strict mode ({fn_name}).")
                if stage == "double_back":
                    raise RuntimeError(
                        f"The jacobian of the user-provided function is independent of input "
                        f"{i}. This is not allowed in strict mode ({fn_name}).")
                raise RuntimeError(
                    f"The gradient with respect to input {i} is independent of the inputs of "
                    f"the user-provided function. This is not allowed in strict mode ({fn_name}).")
            g = zeros_like(r)
        elif strict and create_graph and not g.requires_grad and stage != "back_trick":
            raise RuntimeError(
                f"The jacobian of the user-provided function is independent of input {i}. This "
                f"is not allowed in strict mode when create_graph=True ({fn_name}).")
        res.append(g)
    return tuple(res)


def _call(func, inputs, fn_name):
    with enable_grad():
        out = func(*inputs)
    is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", fn_name)
    return is_tuple, outs



def _const(arr):
    return Tensor._make(arr, False, None, 0)


def _stack(rows):
    """Stack equally shaped tensors along a new first dim (differentiably)."""
    return stack(rows)


# -- public functions ------------------------------------------------------------

def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """Return ``(func(inputs), vᵀ J)``.

    ``v`` may be omitted when ``func`` returns a single-element tensor.

    >>> out, g = dg.autograd.functional.vjp(lambda x: x ** 2, dg.tensor([1., 2.]),
    ...                                     dg.tensor([1., 1.]))   # g = [2., 4.]
    """
    in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prepare_inputs(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, "vjp")
    if v is not None:
        _, v = _as_tuple(v, "v", "vjp")
        _check_v(v, outputs, "vjp")
    else:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the user-provided function returns a single "
                "Tensor with a single element.")
        v = (None,)
    grads = _grad(outputs, inputs, v, create_graph)
    grads = _fill_zeros(grads, inputs, strict, create_graph, "vjp", "back")
    return (_finish(_unpack(outputs, out_tuple), create_graph),
            _finish(_unpack(grads, in_tuple), create_graph))


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """Return ``(func(inputs), J v)`` (forward-mode product, computed by the double-vjp trick).

    ``v`` may be omitted when ``inputs`` is a single-element tensor.

    >>> out, t = dg.autograd.functional.jvp(dg.sin, dg.tensor([0., 1.]), dg.tensor([1., 1.]))
    >>> # t == cos(x)
    """
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    if v is not None:
        _, v = _as_tuple(v, "v", "jvp")
        _check_v(v, inputs, "jvp", "inputs")
    else:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to the user-provided function is a "
                "single Tensor with a single element.")
        v = (None,)
    inputs = _prepare_inputs(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, "jvp")
    # u: dummy cotangents.  g(u) = uᵀJ is linear in u, so d(g(u)·v)/du = J v.
    dummies = tuple(zeros_like(o).requires_grad_(True) if o.is_floating_point() else None
                    for o in outputs)
    with enable_grad():
        diff = [(o, u) for o, u in zip(outputs, dummies, strict=True) if u is not None and o.requires_grad]
        if diff:
            g_u = _grad([o for o, _ in diff], inputs, [u for _, u in diff], create_graph=True)
        else:
            g_u = (None,) * len(inputs)
        g_u = _fill_zeros(g_u, inputs, strict, create_graph, "jvp", "back_trick")
    from . import grad  # noqa: PLC0415  (autograd/__init__ defines grad and imports this module)

    pairs = [(g, vi) for g, vi in zip(g_u, v, strict=True) if g.requires_grad]
    live = [u for u in dummies if u is not None]
    if pairs and live:
        res = grad([g for g, _ in pairs], live,
                   [vi if vi is not None else None for _, vi in pairs],
                   create_graph=create_graph, allow_unused=True)
    else:
        res = (None,) * len(live)
    it = iter(res)
    full = tuple(next(it) if u is not None else None for u in dummies)
    jv = _fill_zeros(full, outputs, strict, create_graph, "jvp", "double_back")
    return (_finish(_unpack(outputs, out_tuple), create_graph),
            _finish(_unpack(jv, out_tuple), create_graph))


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: shape ``output.shape + input.shape``.

    Tuples of inputs/outputs give tuples (of tuples): ``J[i][j]`` is output i
    with respect to input j.  ``vectorize`` is accepted and ignored (one
    backward per output element).

    >>> dg.autograd.functional.jacobian(lambda x: x ** 2, dg.tensor([1., 2.]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f'Expected strategy to be either "forward-mode" or "reverse-mode", got {strategy!r}')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError(
            "jacobian: `strategy='forward-mode'` requires `vectorize=True` (as in PyTorch)")
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _prepare_inputs(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, "jacobian")
    jac = []
    for i, out in enumerate(outputs):
        n = out.numel()
        rows = [[] for _ in inputs]
        for k in range(n):
            if out.requires_grad:
                onehot = np.zeros(n, out._data.dtype)
                onehot[k] = 1
                seed = _const(onehot.reshape(out._data.shape))
                g = _grad((out,), inputs, (seed,), create_graph)
            else:
                g = (None,) * len(inputs)
            for j, (gj, x) in enumerate(zip(g, inputs, strict=True)):
                if gj is None:
                    if strict:
                        raise RuntimeError(
                            f"Output {i} of the user-provided function is independent of input "
                            f"{j}. This is not allowed in strict mode.")
                    gj = zeros(tuple(x.shape), dtype=x.dtype)
                rows[j].append(gj)
        blocks = []
        for j, x in enumerate(inputs):
            shape = tuple(out.shape) + tuple(x.shape)
            if n == 0 or x.numel() == 0:
                blocks.append(zeros(shape, dtype=x.dtype))
            else:
                blocks.append(reshape(_stack(rows[j]), shape))
        jac.append(tuple(blocks))
    jac = tuple(jac)
    jac = _finish(jac, create_graph)
    if out_tuple:
        return jac if in_tuple else tuple(b[0] for b in jac)
    return jac[0] if in_tuple else jac[0][0]


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``: shape ``input.shape + input.shape``.

    >>> dg.autograd.functional.hessian(lambda x: (x ** 3).sum(), dg.tensor([1., 2.]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def scalar_func(*inp):
        out = func(*inp)
        is_tuple, t = _as_tuple(out, "outputs of the user-provided function", "hessian")
        if is_tuple or len(t) != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if t[0].numel() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single "
                f"element (it has shape {list(t[0].shape)})")
        return t[0].reshape(())

    def jac_func(*inp):
        return jacobian(scalar_func, inp, create_graph=True, strict=strict)

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   strategy=outer_jacobian_strategy)
    if not in_tuple:
        return res[0][0]
    return res


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """Return ``(func(inputs), vᵀ H)`` for a scalar ``func`` (double backward).

    >>> out, r = dg.autograd.functional.vhp(lambda x: (x ** 3).sum(), dg.tensor([1., 2.]),
    ...                                     dg.tensor([1., 0.]))   # r = [6., 0.]
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """Return ``(func(inputs), H v)`` for a scalar ``func``.

    The Hessian is symmetric for twice continuously differentiable functions,
    so ``H v`` is computed as ``vᵀ H`` (one double backward).
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func, inputs, v, create_graph, strict, name):
    in_tuple, inputs = _as_tuple(inputs, "inputs", name)
    if v is not None:
        _, v = _as_tuple(v, "v", name)
        _check_v(v, inputs, name, "inputs")
    else:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to the user-provided function is a "
                "single Tensor with a single element.")
        v = (None,)
    inputs = _prepare_inputs(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, name)
    if out_tuple or len(outputs) != 1:
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single element")
    with enable_grad():
        jac = _grad(outputs, inputs, (None,), create_graph=True)
        jac = _fill_zeros(jac, inputs, strict, create_graph, name, "back")
    pairs = [(j, vi) for j, vi in zip(jac, v, strict=True) if j.requires_grad]
    if pairs:
        res = _grad([j for j, _ in pairs], inputs, [vi for _, vi in pairs], create_graph)
    else:
        res = (None,) * len(inputs)
    res = _fill_zeros(res, inputs, strict, create_graph, name, "double_back")
    return (_finish(outputs[0], create_graph), _finish(_unpack(res, in_tuple), create_graph))

