"""``dg.func`` (``torch.func``): function transforms over dyngraph's autograd.

* ``functional_call(module, params, args)`` runs a module with substituted
  parameters/buffers (restored afterwards);
* ``grad`` / ``grad_and_value`` turn a scalar function into its gradient function
  (composable: ``grad(grad(f))``);
* ``vmap`` maps a function over a batch dimension.  dyngraph has no batching rules,
  so ``vmap`` calls the function once per batch element and stacks the results:
  the same values as PyTorch's ``vmap``, at Python-loop speed (fine for per-sample
  gradients of small models, slow for big batches);
* ``jacrev`` / ``hessian`` via :mod:`dyngraph.autograd.functional`; ``jacfwd`` gives the same
  Jacobian (computed in reverse mode);
* ``vjp`` / ``jvp``: vector-Jacobian and Jacobian-vector products (``jvp`` by the
  double-backward identity, so the function needs second-order gradients).

>>> per_sample = dg.func.vmap(dg.func.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .autograd import grad as _autograd_grad
from .autograd.functional import hessian as _hessian
from .autograd.functional import jacobian
from .autograd.grad_mode import enable_grad
from .surface.shape import stack
from .tensor import Tensor

__all__ = ["functional_call", "grad", "grad_and_value", "vmap", "jacrev", "jacfwd", "hessian", "vjp", "jvp"]


# -- functional_call -------------------------------------------------------------------

def _resolve(module, name: str):
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """Call ``module(*args, **kwargs)`` with the named tensors of
    ``parameter_and_buffer_dicts`` (a dict, or a tuple of dicts) in place of the
    module's own parameters/buffers; the originals are restored afterwards."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        dicts = (dicts,)
    values: dict[str, Any] = {}
    for d in dicts:
        for k, v in d.items():
            if k in values:
                raise ValueError(f"functional_call: {k!r} appeared in more than one of the dicts")
            values[k] = v
    if strict:
        expected = {n for n, _ in module.named_parameters()} | {n for n, _ in module.named_buffers()}
        missing, unexpected = sorted(expected - set(values)), sorted(set(values) - expected)
        if missing or unexpected:
            raise RuntimeError(f"functional_call: missing keys {missing}, unexpected keys {unexpected}")
    saved = []
    try:
        for name, value in values.items():
            owner, leaf = _resolve(module, name)
            for table in (owner._parameters, owner._buffers):
                if leaf in table:
                    saved.append((table, leaf, table[leaf]))
                    table[leaf] = value
                    break
            else:
                raise AttributeError(f"functional_call: {type(module).__name__} has no parameter or "
                                     f"buffer named {name!r}")
        if not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for table, leaf, old in reversed(saved):
            table[leaf] = old


# -- pytrees (tensors inside tuples/lists/dicts) -----------------------------------------

def _tree_map(fn, tree):
    if isinstance(tree, Tensor):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: _tree_map(fn, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_tree_map(fn, v) for v in tree)
    return tree


def _tree_leaves(tree) -> list:
    out: list = []
    _tree_map(out.append, tree)
    return out


def _rebuild(tree, leaves_iter):
    return _tree_map(lambda _: next(leaves_iter), tree)


# -- grad ----------------------------------------------------------------------------

def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """``f -> (x -> (grad f(x), f(x)))`` for scalar ``f``; ``argnums`` selects the
    differentiated arguments (an int or a tuple); each may be a tensor or a pytree
    (e.g. a dict of parameters)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        args = list(args)
        originals = {i: args[i] for i in nums}
        nested = any(t.requires_grad for i in nums for t in _tree_leaves(args[i]))
        with enable_grad():
            for i in nums:
                # a view keeps the link to an outer transform's graph; a fresh leaf otherwise
                args[i] = _tree_map(lambda t: t.view_as(t) if t.requires_grad
                                    else t.detach().requires_grad_(True), args[i])
            out = func(*args, **kwargs)
            value, aux = (out if has_aux else (out, None))
            if not isinstance(value, Tensor) or value.numel() != 1:
                raise RuntimeError("grad: the function must return a single-element tensor, got "
                                   f"{type(value).__name__}{'' if not isinstance(value, Tensor) else list(value.shape)}")
            inputs = [t for i in nums for t in _tree_leaves(args[i])]
            grads = _autograd_grad(value, inputs, create_graph=True, allow_unused=True)
        grads = [g if g is not None else t.detach() * 0.0 for g, t in zip(grads, inputs, strict=True)]
        if not nested:
            grads = [g.detach() for g in grads]
            value = value.detach()
        it = iter(grads)
        per_arg = tuple(_rebuild(originals[i], it) for i in nums)
        g_out = per_arg[0] if isinstance(argnums, int) else per_arg
        return (g_out, (value, aux)) if has_aux else (g_out, value)
    return wrapper


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """``f -> grad f`` for scalar ``f`` (``(grad, aux)`` with ``has_aux=True``)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g
    return wrapper


# -- vmap ----------------------------------------------------------------------------

def vmap(func: Callable, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None) -> Callable:
    """Map ``func`` over dimension ``in_dims`` of its inputs (an int for all arguments,
    or one entry per argument, ``None`` = not mapped); outputs are stacked along
    ``out_dims``.  Implemented as a loop over the batch (see the module doc)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        dims = (in_dims,) * len(args) if not isinstance(in_dims, (tuple, list)) else tuple(in_dims)
        if len(dims) != len(args):
            raise ValueError(f"vmap: in_dims has {len(dims)} entries but the function got {len(args)} "
                             "positional arguments")
        sizes = {t.shape[d] for a, d in zip(args, dims, strict=True) if d is not None
                 for t in _tree_leaves(a)}
        if len(sizes) != 1:
            raise ValueError(f"vmap: expected all mapped inputs to have the same size along the mapped "
                             f"dimension, got sizes {sorted(sizes)}")
        n = sizes.pop()
        results = []
        for b in range(n):
            call = [a if d is None else _tree_map(lambda t, d=d, b=b: t.select(d, b), a)
                    for a, d in zip(args, dims, strict=True)]
            results.append(func(*call, **kwargs))
        first = results[0]
        leaves = [_tree_leaves(r) for r in results]
        od = out_dims
        stacked = [stack([lv[k] for lv in leaves], od if isinstance(od, int) else 0)
                   for k in range(len(leaves[0]))]
        return _rebuild(first, iter(stacked))
    return wrapper


# -- Jacobians -----------------------------------------------------------------------

def jacrev(func: Callable, argnums: int = 0) -> Callable:
    """``f -> (x -> Jacobian of f at x)`` with respect to argument ``argnums``."""
    def wrapper(*args):
        args = list(args)

        def f(x):
            call = list(args)
            call[argnums] = x
            return func(*call)
        return jacobian(f, args[argnums])
    return wrapper


def hessian(func: Callable, argnums: int = 0) -> Callable:
    """``f -> (x -> Hessian of scalar f at x)`` with respect to argument ``argnums``."""
    def wrapper(*args):
        args = list(args)

        def f(x):
            call = list(args)
            call[argnums] = x
            return func(*call)
        return _hessian(f, args[argnums])
    return wrapper


# -- vjp / jvp -----------------------------------------------------------------------

def vjp(func: Callable, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)`` where ``vjp_fn(cotangents)`` returns the cotangents
    pulled back to each primal (a tuple, one entry per primal), as ``torch.func.vjp``.

    >>> out, vjp_fn = dg.func.vjp(torch.sin, x)
    >>> (g,) = vjp_fn(dg.ones_like(out))            # cos(x)
    """
    nested = any(t.requires_grad for p in primals for t in _tree_leaves(p))
    with enable_grad():
        inputs = [_tree_map(lambda t: t.view_as(t) if t.requires_grad else t.detach().requires_grad_(True), p)
                  for p in primals]
        out = func(*inputs)
    value, aux = (out if has_aux else (out, None))
    outs = _tree_leaves(value)
    leaves = [t for p in inputs for t in _tree_leaves(p)]

    def vjp_fn(*cotangents):
        cots = _tree_leaves(cotangents[0] if len(cotangents) == 1 else cotangents)
        if len(cots) != len(outs):
            raise RuntimeError(f"vjp: expected {len(outs)} cotangent(s) matching the outputs, got {len(cots)}")
        with enable_grad():
            grads = _autograd_grad(outs, leaves, cots, retain_graph=True, create_graph=True, allow_unused=True)
        grads = [g if g is not None else t.detach() * 0.0 for g, t in zip(grads, leaves, strict=True)]
        if not nested:      # inside another transform the graph is kept, as in grad_and_value
            grads = [g.detach() for g in grads]
        it = iter(grads)
        return tuple(_rebuild(p, it) for p in primals)

    detached = _rebuild(value, iter([o.detach() for o in outs]))
    return (detached, vjp_fn, aux) if has_aux else (detached, vjp_fn)


def jvp(func: Callable, primals, tangents, *, has_aux: bool = False):
    """``(func(*primals), J @ tangents)`` (``torch.func.jvp``): the directional derivative,
    computed as the vector-Jacobian product of a vector-Jacobian product.

    >>> out, dout = dg.func.jvp(torch.sin, (x,), (dg.ones_like(x),))     # cos(x)
    """
    from .creation import zeros_like  # noqa: PLC0415  (creation imports func's neighbours)

    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise RuntimeError(f"jvp: expected as many tangents as primals, got {len(tangents)} and {len(primals)}")
    with enable_grad():
        inputs = [t.detach().requires_grad_(True) for t in primals]
        out = func(*inputs)
        value, aux = (out if has_aux else (out, None))
        outs = _tree_leaves(value)
        dummies = [zeros_like(o).requires_grad_(True) for o in outs]
        g = _autograd_grad(outs, inputs, dummies, create_graph=True, allow_unused=True)
        pairs = [(gi, ti) for gi, ti in zip(g, tangents, strict=True) if gi is not None]
        if pairs:
            jv = _autograd_grad([p[0] for p in pairs], dummies, [p[1] for p in pairs], allow_unused=True)
        else:
            jv = [None] * len(dummies)
    jv = [j.detach() if j is not None else zeros_like(o).detach() for j, o in zip(jv, outs, strict=True)]
    primal_out = _rebuild(value, iter([o.detach() for o in outs]))
    tangent_out = _rebuild(value, iter(jv))
    return (primal_out, tangent_out, aux) if has_aux else (primal_out, tangent_out)


def jacfwd(func: Callable, argnums: int = 0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    """``torch.func.jacfwd``: the same Jacobian as :func:`jacrev` (dyngraph computes it in
    reverse mode; the values agree)."""
    if has_aux:
        raise NotImplementedError("jacfwd(has_aux=True) is not supported by dyngraph; return the aux separately")
    return jacrev(func, argnums)
