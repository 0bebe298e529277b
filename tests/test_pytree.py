"""``dg.utils._pytree`` against ``torch.utils._pytree``."""

from __future__ import annotations

import collections

import pytest

import dyngraph.utils._pytree as dp

tp = pytest.importorskip("torch.utils._pytree")

Point = collections.namedtuple("Point", "x y")
TREES = [
    [1, None, (2, {"b": 3, "a": 4})],
    {"w": [1, 2], "b": 3},
    (1, [2, 3], {"k": 4}, Point(5, [6])),
    collections.OrderedDict(b=1, a=(2, 3)),
    collections.defaultdict(list, {"x": [1], "y": 2}),
    [],
    7,
]


@pytest.mark.parametrize("tree", TREES)
def test_flatten_unflatten_map_match_torch(tree):
    leaves, spec = dp.tree_flatten(tree)
    t_leaves, t_spec = tp.tree_flatten(tree)
    assert leaves == t_leaves and spec.num_leaves == t_spec.num_leaves
    rebuilt = dp.tree_unflatten([f"v{i}" for i in range(len(leaves))], spec)
    t_rebuilt = tp.tree_unflatten([f"v{i}" for i in range(len(leaves))], t_spec)
    assert rebuilt == t_rebuilt and type(rebuilt) is type(t_rebuilt)
    f = lambda v: None if v is None else v * 2
    assert dp.tree_map(f, tree) == tp.tree_map(f, tree)
    assert dp.tree_map(lambda a, b: (a, b), tree, tree) == tp.tree_map(lambda a, b: (a, b), tree, tree)


def test_errors_and_registration():
    _, spec = dp.tree_flatten([1, 2])
    with pytest.raises(ValueError, match="holds 2 items"):
        dp.tree_unflatten([1], spec)
    with pytest.raises(ValueError, match="different structures"):
        dp.tree_map(lambda a, b: a, [1, 2], [1, (2, 3)])

    class Box:
        def __init__(self, a, b):
            self.a, self.b = a, b

    dp.register_pytree_node(Box, lambda x: ([x.a, x.b], None), lambda ch, ctx: Box(*ch))
    out = dp.tree_map(lambda v: v + 1, [Box(1, (2,))])
    assert out[0].a == 2 and out[0].b == (3,)
    assert dp.tree_leaves({"a": [1, 2]}, is_leaf=lambda n: isinstance(n, list)) == [[1, 2]]
