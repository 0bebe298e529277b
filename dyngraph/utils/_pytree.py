"""``torch.utils._pytree``: flatten nested containers to a list of leaves and rebuild them.

Containers are lists, tuples, named tuples, dicts (insertion order), ``OrderedDict``,
``defaultdict`` and classes added with :func:`register_pytree_node`; everything else
(tensors, numbers, ``None``) is a leaf, as in PyTorch.

>>> leaves, spec = tree_flatten({"w": [1, 2], "b": 3})
>>> leaves
[1, 2, 3]
>>> tree_unflatten([x * 10 for x in leaves], spec)
{'w': [10, 20], 'b': 30}
>>> tree_map(lambda x: x + 1, (1, [2, 3]))
(2, [3, 4])
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any

__all__ = ["TreeSpec", "LeafSpec", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure",
           "tree_map", "tree_map_", "tree_iter", "tree_all", "tree_any", "register_pytree_node"]

_NODES: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable, *,
                         serialized_type_name: str | None = None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None) -> None:
    """Treat ``cls`` as a container: ``flatten_fn(obj) -> (children, context)`` and
    ``unflatten_fn(children, context) -> obj``."""
    if cls in _NODES:
        raise ValueError(f"{cls} is already registered as a pytree node")
    _NODES[cls] = (flatten_fn, unflatten_fn)


def _is_namedtuple(obj) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _node(obj):
    """(type, context, children) for a container, or None for a leaf."""
    t = type(obj)
    if t in _NODES:
        children, context = _NODES[t][0](obj)
        return t, context, list(children)
    if t is list:
        return list, None, list(obj)
    if t is tuple:
        return tuple, None, list(obj)
    if _is_namedtuple(obj):
        return t, t._fields, list(obj)
    if t is defaultdict:
        return defaultdict, (obj.default_factory, list(obj)), list(obj.values())
    if t in (dict, OrderedDict):
        return t, list(obj), list(obj.values())
    return None


def _build(t, context, children):
    if t in _NODES:
        return _NODES[t][1](children, context)
    if t is list:
        return list(children)
    if t is tuple:
        return tuple(children)
    if t is defaultdict:
        factory, keys = context
        return defaultdict(factory, zip(keys, children))
    if t in (dict, OrderedDict):
        return t(zip(context, children))
    return t(*children)   # a named tuple


class TreeSpec:
    """The structure of a flattened tree (``type``, ``context``, ``children_specs``)."""

    def __init__(self, type: type | None, context: Any, children_specs: list[TreeSpec]):
        self.type = type
        self.context = context
        self.children_specs = children_specs
        self.num_leaves = 1 if type is None else sum(c.num_leaves for c in children_specs)
        self.num_children = len(children_specs)

    def is_leaf(self) -> bool:
        return self.type is None

    def __eq__(self, other) -> bool:
        return (isinstance(other, TreeSpec) and self.type is other.type and self.context == other.context
                and self.children_specs == other.children_specs)

    def __hash__(self):
        return id(self)

    def __repr__(self) -> str:
        if self.type is None:
            return "*"
        inner = ", ".join(repr(c) for c in self.children_specs)
        return f"TreeSpec({self.type.__name__}, {self.context!r}, [{inner}])"


class LeafSpec(TreeSpec):
    """The spec of one leaf (shown as ``*``)."""

    def __init__(self):
        super().__init__(None, None, [])


def _flatten(tree, leaves: list, is_leaf) -> TreeSpec:
    node = None if (is_leaf is not None and is_leaf(tree)) else _node(tree)
    if node is None:
        leaves.append(tree)
        return LeafSpec()
    t, context, children = node
    return TreeSpec(t, context, [_flatten(c, leaves, is_leaf) for c in children])


def tree_flatten(tree, is_leaf: Callable | None = None) -> tuple[list, TreeSpec]:
    """The leaves of ``tree`` (depth first) and its :class:`TreeSpec`."""
    leaves: list = []
    spec = _flatten(tree, leaves, is_leaf)
    return leaves, spec


def tree_unflatten(leaves, treespec: TreeSpec):
    """Rebuild the tree described by ``treespec`` from ``leaves``."""
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"tree_unflatten(leaves, treespec): `leaves` has length {len(leaves)} but the spec "
                         f"refers to a pytree that holds {treespec.num_leaves} items ({treespec}).")
    it = iter(leaves)

    def build(spec):
        if spec.type is None:
            return next(it)
        return _build(spec.type, spec.context, [build(c) for c in spec.children_specs])

    return build(treespec)


def tree_leaves(tree, is_leaf: Callable | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf: Callable | None = None):
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree, is_leaf: Callable | None = None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def _zip_leaves(tree, rests, is_leaf):
    leaves, spec = tree_flatten(tree, is_leaf)
    others = []
    for r in rests:
        r_leaves, r_spec = tree_flatten(r, is_leaf)
        if r_spec != spec:
            raise ValueError(f"tree_map: the trees have different structures ({spec} and {r_spec})")
        others.append(r_leaves)
    return leaves, spec, others


def tree_map(func: Callable, tree, *rests, is_leaf: Callable | None = None):
    """A tree of the same structure with ``func`` applied to each leaf (leaves of ``rests`` too)."""
    leaves, spec, others = _zip_leaves(tree, rests, is_leaf)
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_(func: Callable, tree, *rests, is_leaf: Callable | None = None):
    """Call ``func`` on every leaf for its side effects; returns ``tree``."""
    leaves, _, others = _zip_leaves(tree, rests, is_leaf)
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def tree_all(pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return any(map(pred, tree_leaves(tree, is_leaf)))
