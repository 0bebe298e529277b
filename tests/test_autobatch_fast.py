"""The cheaper execution paths of ``dg.autobatch`` (issue 12, later passes): the one-call
gather from several source groups (``ops/_batching.gather_p``), the collector list, and
the evaluation order without sorting.  Values and gradients equal eager (float64, 1e-12).
"""

from __future__ import annotations

import numpy as np

import dyngraph as dg
from dyngraph.ops._batching import gather_backward_p, gather_p
from dyngraph.ops.registry import bind

TOL = {"rtol": 1e-12, "atol": 1e-12}


def _gather(x, v, rows, unique):
    return bind(gather_p, (x, v), {"B": 4, "rows": (np.array(rows), None),
                                   "pos": (np.array([0, 2, 3]), slice(1, 2)),
                                   "ns": (3, 0), "uniq": (unique, True)})


def test_gather_values_gradients_and_second_order():
    x = dg.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    v = dg.tensor([0.5, -1.5], requires_grad=True)
    y = _gather(x, v, [2, 2, 0], False)
    want = np.stack([x.detach().numpy()[2], v.detach().numpy(), x.detach().numpy()[2],
                     x.detach().numpy()[0]])
    np.testing.assert_allclose(y.detach().numpy(), want, **TOL)
    gx, gv = dg.autograd.grad((y ** 3).sum(), [x, v], create_graph=True)
    count = np.array([1.0, 0.0, 2.0])[:, None]
    np.testing.assert_allclose(gx.detach().numpy(), 3 * x.detach().numpy() ** 2 * count, **TOL)
    np.testing.assert_allclose(gv.detach().numpy(), 3 * v.detach().numpy() ** 2, **TOL)
    ggx, ggv = dg.autograd.grad(gx.sum() + gv.sum(), [x, v])
    np.testing.assert_allclose(ggx.numpy(), 6 * x.detach().numpy() * count, **TOL)
    np.testing.assert_allclose(ggv.numpy(), 6 * v.detach().numpy(), **TOL)
    assert gather_p.batchable is False and gather_backward_p.batchable is False


def _graph_names(t):
    seen, stack, names = set(), [t.grad_fn], []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen or not hasattr(n, "edges"):
            continue
        seen.add(id(n))
        names.append(n.prim.name)
        stack.extend(e[0] for e in n.edges if e is not None)
    return names


def _two_sources(W, U, xs):
    a = [dg.tanh(x @ W) for x in xs[:6]]          # source group 1 (6 rows)
    b = [dg.sigmoid(x @ U) for x in xs[6:]]       # source group 2 (4 rows)
    lone = dg.exp(xs[0] @ U)                      # a group of one: its own value, no row
    mixed = [a[4], b[0], lone, a[1], b[3], a[4]]  # interleaved, a row taken twice
    return dg.stack([(m @ W).sum() for m in mixed]).sum()


def test_an_input_from_several_groups_is_one_gather_node():
    rng = np.random.default_rng(4)
    W = dg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    U = dg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    xs = [dg.tensor(rng.standard_normal((1, 4))) for _ in range(10)]
    loss_e = _two_sources(W, U, xs)
    ge = dg.autograd.grad(loss_e, [W, U])
    with dg.autobatch(stats=True) as ab:
        loss = _two_sources(W, U, xs)
        loss.item()                               # evaluate: the batched graph exists now
        names = _graph_names(loss)
        gb = dg.autograd.grad(loss, [W, U])
    # the matmul group's input: one gather from the three sources, no cat/reordering
    assert names.count("autobatch_gather") == 1
    assert "cat" not in names
    assert ab.stats.gathers >= 1
    np.testing.assert_allclose(loss.item(), loss_e.item(), **TOL)
    for g1, g2 in zip(gb, ge, strict=True):
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), **TOL)


class _Tree:
    def __init__(self, word=None, kids=()):
        self.word, self.kids = word, kids


def _trees(rng, n):
    def make(depth):
        if depth == 0 or rng.random() < 0.3:
            return _Tree(int(rng.integers(0, 7)))
        return _Tree(kids=(make(depth - 1), make(depth - 1)))
    return [make(int(rng.integers(1, 5))) for _ in range(n)]


def _tree_model(rng):
    E = dg.tensor(rng.standard_normal((7, 4)), requires_grad=True)
    W = dg.tensor(rng.standard_normal((8, 4)) * 0.5, requires_grad=True)
    V = dg.tensor(rng.standard_normal((4, 4)) * 0.5, requires_grad=True)

    def leaf(x, w):                     # a cell whose second input is a shared parameter
        return dg.tanh(x @ w)

    def phrase(a, b):                   # three outputs; the third is never used
        e = dg.cat([a, b], dim=1)
        h = dg.tanh(e @ W)
        return h, dg.sigmoid(h), h * 3.0

    def loss(h):
        return (h @ V).sum()

    return E, W, V, leaf, phrase, loss


def _run(trees, E, P, leaf, phrase, loss, hooked):
    """Summed node losses; ``hooked`` gets the first phrase cell's second output."""
    losses = []

    def node(t):
        if t.word is not None:
            h = leaf(E[t.word:t.word + 1], P)
        else:
            h, g, _unused = phrase(node(t.kids[0]), node(t.kids[1]))
            if not hooked:
                hooked.append(g)        # a cell's output: its hook sees the member's row
            h = h * g
        losses.append(loss(h))
        return h

    for t in trees:
        node(t)
    return dg.stack(losses).sum()


def test_cell_groups_differentiate_like_eager_with_shared_inputs_unused_outputs_hooks():
    rng = np.random.default_rng(5)
    trees = _trees(rng, 12)
    E, W, V, leaf, phrase, loss = _tree_model(rng)
    P = dg.tensor(rng.standard_normal((4, 4)) * 0.5, requires_grad=True)
    params = [E, W, V, P]

    seen_e = []
    hooked_e = []
    total_e = _run(trees, E, P, leaf, phrase, loss, hooked_e)
    hooked_e[0].register_hook(lambda g: seen_e.append(g.numpy().copy()))
    g1 = dg.autograd.grad(total_e, params, retain_graph=True)
    g2 = dg.autograd.grad(total_e, params)

    cells = [dg.autobatch.cell(f) for f in (leaf, phrase, loss)]
    seen_b = []
    hooked_b = []
    with dg.autobatch(stats=True) as ab:
        total_b = _run(trees, E, P, *cells, hooked_b)
        hooked_b[0].register_hook(lambda g: seen_b.append(g.numpy().copy()))
        total_b.backward(retain_graph=True)        # .grad accumulates over two backwards
        total_b.backward()
    assert ab.stats.cells > 0 and not ab.stats.fallbacks
    np.testing.assert_allclose(total_b.item(), total_e.item(), **TOL)
    for p, a, b in zip(params, g1, g2, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), a.numpy() + b.numpy(), **TOL)
    assert len(seen_b) == 2 and len(seen_e) == 2
    for a, b in zip(seen_b, seen_e, strict=True):
        np.testing.assert_allclose(a, b, **TOL)


def test_a_read_with_everything_feeding_it_and_an_inline_cell_forces_only_its_subgraph():
    """``_all_feed``: when every pending node feeds the read, one pass finds them; a cell
    that runs inline (an unhashable argument) and ignores an argument must not count as
    that argument's consumer, or the read would force the ignored value too."""
    from dyngraph.autobatch import is_pending

    def body(a, b, opts):
        return a * opts[0]                  # b is ignored

    f = dg.autobatch.cell(body)
    rng = np.random.default_rng(0)
    c = dg.tensor(rng.normal(size=(3,)))              # per-instance constants: recorded
    w = dg.tensor(rng.normal(size=(3,)), requires_grad=True)
    cv, wv = c.numpy(), w.detach().numpy()
    with dg.autobatch():
        x = dg.tanh(c * w)
        y = dg.sigmoid(c + w)
        assert is_pending(x) and is_pending(y)
        out = f(x, y, [2.0]).sum()                    # a list: unhashable, runs inline
        np.testing.assert_allclose(out.item(), 2 * np.tanh(cv * wv).sum(), **TOL)
        assert is_pending(y)                          # not read, not forced
        total = dg.stack([dg.exp(c * w * float(i)).sum() for i in range(10)]).sum()
        total.backward()                              # everything else pending feeds it
        assert is_pending(y)
        np.testing.assert_allclose(y.sum().item(), (1 / (1 + np.exp(-(cv + wv)))).sum(), **TOL)
    want = sum(np.exp(cv * wv * i).sum() for i in range(10))
    np.testing.assert_allclose(total.item(), want, **TOL)
    np.testing.assert_allclose(w.grad.numpy(), sum(i * cv * np.exp(cv * wv * i) for i in range(10)),
                               **TOL)
