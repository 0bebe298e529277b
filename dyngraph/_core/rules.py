"""What every consumer of derivative rules shares: rule inputs, ``fit``, the missing-rule error.

The engine (plain and ``create_graph`` backward), custom ``autograd.Function``
nodes, checkpointing and graph capture's reverse mode (``jit/autodiff.py``)
all call these, so a rule sees the same inputs and its gradient is summed back
the same way everywhere.

* :func:`node_rule_inputs` / :func:`rule_inputs`: a rule gets ``(g, out,
  *inputs, **params)``; ``inputs`` are the saved values (arrays in a plain
  backward, Tensors under ``create_graph``), else :class:`Meta` stand-ins
  (shape and dtype only) where the node recorded them, else ``None``.
* :func:`fit`: a broadcasting primitive's rule returns the gradient for the
  broadcast shape; ``fit`` sums it back to the input's shape and casts it to
  the input's floating dtype (arrays or Tensors).
* :func:`missing_rule`: the one ``NotImplementedError`` for an input whose
  derivative is not defined ("no gradient" is ``None``, never this).
"""

from __future__ import annotations

from ..dtypes import is_floating_point_dtype
from .graph import Meta
from .registry import REGISTRY, missing_rule

__all__ = ["fit", "node_rule_inputs", "rule_inputs", "missing_rule"]


def node_rule_inputs(node, create_graph: bool):
    """The ``inputs`` the rules of a recorded node receive (version checks are the caller's)."""
    saved = node.saved
    if saved is not None:
        return saved if create_graph else node.saved_data
    meta = node.in_meta
    return meta if meta is not None else (None,) * node._ne   # (the edges live in slots)


def rule_inputs(prim, args) -> tuple:
    """The ``inputs`` for the rules of ``prim`` called on ``args`` (arrays or Tensors), as the
    engine would pass them: the values when the primitive saves them, else ``Meta`` for
    primitives that declare ``meta=True``, else ``None``."""
    if prim.save_inputs:
        return tuple(args)
    if prim.meta:
        return tuple(None if a is None or isinstance(a, (int, float, bool)) else
                     Meta(tuple(_data(a).shape), _data(a).dtype) for a in args)
    return (None,) * len(args)


def _data(a):
    d = getattr(a, "_data", None)
    return a if d is None else d


def fit(g, shape, dtype):
    """Sum a broadcast gradient ``g`` back to ``shape`` and cast it to ``dtype`` if floating.

    ``g`` is an array (plain backward: the primitives run their ``impl``) or a
    Tensor (``create_graph`` / capture: the same primitives are recorded).
    """
    shape = tuple(shape)
    if tuple(g.shape) != shape:
        g = REGISTRY["sum_to_shape"](g, shape=shape)
    gd = _data(g).dtype
    if gd != dtype and is_floating_point_dtype(dtype):
        g = REGISTRY["cast"](g, dtype=dtype) if hasattr(g, "_data") else g.astype(dtype)
    return g
