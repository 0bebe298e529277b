"""Whole models under ``dg.autobatch`` equal eager: forward, gradients, training steps.

Binary and child-sum Tree-LSTMs on SST trees, LSTMCell/GRUCell loops over sequences of
different lengths; float64, 1e-10.  Also: a mid-graph read forces only what it needs,
memory stays flat, and errors are raised where the op was written.
"""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import nn
from dyngraph.autobatch import is_pending
from dyngraph.autobatch.interpreter import _PRUNE_MIN, PNode
from dyngraph.nn import functional as F

SST = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared",
                   "data", "sst")
TOL = {"rtol": 1e-10, "atol": 1e-10}


@pytest.fixture(scope="module")
def trees():
    if not os.path.exists(os.path.join(SST, "dev.txt")):
        pytest.skip("SST data not available")
    ts = dg.data.datasets.SST(root=SST, split="dev").trees[:12]
    vocab = {}
    for t in ts:
        for w in t.leaves():
            vocab.setdefault(w, len(vocab))
    return ts, vocab


class BinaryTreeLSTM(nn.Module):
    """The DyNet-benchmark cell: a Linear per gate, cat of the children, loss per node."""

    def __init__(self, V, H):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.Wi, self.Wo, self.Wu = (nn.Linear(H, H) for _ in range(3))
        self.Ui, self.Uo, self.Uu, self.Uf1, self.Uf2 = (nn.Linear(2 * H, H) for _ in range(5))
        self.out = nn.Linear(H, 5)

    def leaf(self, x):
        i, o, u = dg.sigmoid(self.Wi(x)), dg.sigmoid(self.Wo(x)), dg.tanh(self.Wu(x))
        c = i * u
        return o * dg.tanh(c), c

    def phrase(self, h1, c1, h2, c2):
        e = dg.cat([h1, h2], dim=1)
        i, o, u = dg.sigmoid(self.Ui(e)), dg.sigmoid(self.Uo(e)), dg.tanh(self.Uu(e))
        c = i * u + dg.sigmoid(self.Uf1(e)) * c1 + dg.sigmoid(self.Uf2(e)) * c2
        return o * dg.tanh(c), c

    def node_loss(self, h, y):
        return F.cross_entropy(self.out(h), y)

    def node(self, t, vocab, losses):
        if t.word is not None:
            h, c = self.leaf(self.emb(dg.tensor([vocab[t.word]])))
        else:
            h1, c1 = self.node(t.children[0], vocab, losses)
            h2, c2 = self.node(t.children[1], vocab, losses)
            h, c = self.phrase(h1, c1, h2, c2)
        losses.append(self.node_loss(h, dg.tensor([t.label])))
        return h, c

    def loss(self, tree, vocab):
        losses = []
        self.node(tree, vocab, losses)
        return dg.stack(losses).sum()


class ChildSumTreeLSTM(nn.Module):
    """Tai et al.'s child-sum cell (stack + sum over children, a forget gate per child)."""

    def __init__(self, V, X, H):
        super().__init__()
        self.H = H
        self.emb = nn.Embedding(V, X)
        self.W_iou, self.U_iou = nn.Linear(X, 3 * H), nn.Linear(H, 3 * H, bias=False)
        self.W_f, self.U_f = nn.Linear(X, H), nn.Linear(H, H, bias=False)
        self.out = nn.Linear(H, 1)

    def node(self, t, vocab):
        x = self.emb.weight[vocab.get(t.word, 0)] if t.word is not None else self.emb.weight[0] * 0.0
        if t.children:
            hs, cs = zip(*[self.node(c, vocab) for c in t.children], strict=True)
            ch, cc = dg.stack(hs), dg.stack(cs)
        else:
            ch = cc = x.new_zeros(1, self.H)
        i, o, u = dg.chunk(self.W_iou(x) + self.U_iou(ch.sum(0)), 3, dim=-1)
        f = dg.sigmoid(self.W_f(x).unsqueeze(0) + self.U_f(ch))
        c = dg.sigmoid(i) * dg.tanh(u) + (f * cc).sum(0)
        return dg.sigmoid(o) * dg.tanh(c), c

    def loss(self, tree, vocab):
        h, _ = self.node(tree, vocab)
        return (self.out(h).squeeze(-1) - tree.label / 4.0) ** 2


def _grads(model):
    return [p.grad.numpy().copy() for p in model.parameters()]


def _train(model, trees, vocab, batched, steps=1, cells=False):
    opt = dg.optim.Adam(model.parameters(), lr=1e-2)
    if cells:
        model.leaf = dg.autobatch.cell(model.leaf)
        model.phrase = dg.autobatch.cell(model.phrase)
        model.node_loss = dg.autobatch.cell(model.node_loss)
    losses, grads = [], None
    for _ in range(steps):
        ctx = dg.autobatch(stats=True) if batched else None
        if ctx is not None:
            ctx.__enter__()
        try:
            per = [model.loss(t, vocab) for t in trees]
            loss = dg.stack(per).sum()
            opt.zero_grad()
            loss.backward()
            if grads is None:
                grads = _grads(model)
            opt.step()
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        losses.append([float(p) for p in per])
    return np.array(losses), grads, (ctx.stats if ctx is not None else None)


def _pair(make, trees, vocab, **kw):
    dg.manual_seed(0)
    a = make().double()
    dg.manual_seed(0)
    b = make().double()
    return _train(a, trees, vocab, False, **kw), _train(b, trees, vocab, True, **kw)


@pytest.mark.parametrize("cells", [False, True], ids=["ops", "cells"])
def test_binary_tree_lstm_sst_five_steps(trees, cells):
    ts, vocab = trees
    (le, ge, _), (lb, gb, stats) = _pair(lambda: BinaryTreeLSTM(len(vocab), 8), ts, vocab,
                                         steps=5, cells=cells)
    np.testing.assert_allclose(lb, le, **TOL)
    for a, b in zip(gb, ge, strict=True):
        np.testing.assert_allclose(a, b, **TOL)
    assert stats.average_group_size > 5          # it really batched
    assert not stats.fallbacks
    if cells:
        assert stats.cells > 0


def test_child_sum_tree_lstm_sst(trees):
    ts, vocab = trees
    (le, ge, _), (lb, gb, stats) = _pair(lambda: ChildSumTreeLSTM(len(vocab), 6, 8), ts, vocab, steps=2)
    np.testing.assert_allclose(lb, le, **TOL)
    for a, b in zip(gb, ge, strict=True):
        np.testing.assert_allclose(a, b, **TOL)
    assert stats.average_group_size > 3


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_rnn_cells_over_variable_lengths(kind):
    rng = np.random.default_rng(3)
    D, H = 5, 7
    seqs = [dg.tensor(rng.standard_normal((n, 1, D))) for n in (2, 5, 9, 4, 1, 7)]
    y = dg.tensor(rng.integers(0, 3, len(seqs)))

    def build():
        dg.manual_seed(1)
        cell = (nn.LSTMCell if kind == "lstm" else nn.GRUCell)(D, H).double()
        return cell, nn.Linear(H, 3).double()

    def run(batched):
        cell, cls = build()
        params = [*cell.parameters(), *cls.parameters()]
        opt = dg.optim.SGD(params, lr=0.1)
        outs = []
        for _ in range(3):
            with dg.autobatch() if batched else _Null():
                finals = []
                for s in seqs:
                    h = c = s.new_zeros(1, H)
                    for x in s:
                        if kind == "lstm":
                            h, c = cell(x, (h, c))
                        else:
                            h = cell(x, h)
                    finals.append(h[0])
                loss = F.cross_entropy(cls(dg.stack(finals)), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                outs.append(loss.item())
        return outs, [p.detach().numpy().copy() for p in params]

    le, pe = run(False)
    lb, pb = run(True)
    np.testing.assert_allclose(lb, le, **TOL)
    for a, b in zip(pb, pe, strict=True):
        np.testing.assert_allclose(a, b, **TOL)


class _Null:
    """A do-nothing context manager (eager runs of the same loop)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_read_forces_only_its_subgraph():
    W = nn.Parameter(dg.randn(4, 4, dtype=dg.float64))
    xs = [dg.randn(1, 4, dtype=dg.float64) for _ in range(6)]
    with dg.autobatch(stats=True) as ab:
        ys = [dg.tanh(x @ W).sum() for x in xs]
        first = ys[0].item()                  # forces ys[0]'s three nodes only
        assert not is_pending(ys[0])
        assert all(is_pending(y) for y in ys[1:])
        rest = dg.stack(ys[1:]).sum()
        rest.backward()
    assert abs(first - float(dg.tanh(xs[0] @ W).sum())) < 1e-12
    assert ab.stats.evaluations == 2
    # the five remaining members still ran as one group per op
    assert ab.stats.per_primitive["tanh"][:2] == [2, 6]


def test_mid_graph_reads_in_control_flow_equal_eager():
    rng = np.random.default_rng(0)
    W = nn.Parameter(dg.tensor(rng.standard_normal((3, 3))))
    xs = [dg.tensor(rng.standard_normal((1, 3))) for _ in range(5)]

    def member(x):
        h = x
        steps = 0
        while steps < 6:
            h = dg.tanh(h @ W)
            steps += 1
            if h.sum() > 0.5:                 # a data-dependent branch: forces h only
                break
        return h.sum() * steps

    def total():
        W.grad = None
        out = dg.stack([member(x) for x in xs]).sum()
        out.backward()
        return float(out), W.grad.numpy().copy()

    ve, ge = total()
    with dg.autobatch():
        vb, gb = total()
    assert abs(vb - ve) < 1e-12
    np.testing.assert_allclose(gb, ge, **TOL)


def test_memory_stays_flat_over_many_iterations():
    W = nn.Parameter(dg.randn(8, 8, dtype=dg.float64))
    opt = dg.optim.SGD([W], lr=1e-3)
    xs = [dg.randn(1, 8, dtype=dg.float64) for _ in range(4)]

    def live_nodes():
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is PNode)

    def step():
        with dg.autobatch():
            loss = dg.stack([dg.tanh(x @ W).sum() for x in xs]).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return loss

    for _ in range(5):
        step()
    base = live_nodes()
    for _ in range(300):
        step()
    assert live_nodes() <= base
    assert base <= 2


def test_a_finished_graph_is_freed_without_the_cyclic_collector():
    # pending nodes and their outputs form no reference cycles: dropping the result frees
    # the recorded graph by reference counting (gc disabled here, so nothing collects it)
    W = nn.Parameter(dg.randn(8, 8, dtype=dg.float64))
    xs = [dg.randn(1, 8, dtype=dg.float64) for _ in range(4)]
    gc.collect()
    gc.disable()
    try:
        with dg.autobatch():
            ys = [dg.tanh(x @ W) for x in xs]
            node = ys[0].grad_fn
            assert type(node) is PNode
            ref = weakref.ref(node)
            loss = dg.stack([y.sum() for y in ys]).sum()
            del node
            loss.backward()
        del ys, loss
        assert ref() is None
    finally:
        gc.enable()


def test_collector_settings_are_restored_after_the_block():
    before = gc.get_threshold()
    with dg.autobatch():
        assert gc.get_freeze_count() >= 0
        with dg.autobatch():         # nested: only the outermost block changes them
            pass
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    gc.freeze()                      # a program that froze objects itself: left alone
    try:
        n = gc.get_freeze_count()
        with dg.autobatch():
            assert gc.get_threshold() == before
        assert gc.get_freeze_count() == n
    finally:
        gc.unfreeze()


def test_one_context_for_many_steps_stays_flat():
    W = nn.Parameter(dg.randn(8, 8, dtype=dg.float64))
    opt = dg.optim.SGD([W], lr=1e-3)
    xs = [dg.randn(1, 8, dtype=dg.float64) for _ in range(4)]
    sizes = []
    with dg.autobatch() as ab:
        for _ in range(700):      # ~14 nodes a step: finished ones are dropped every ~4096
            loss = dg.stack([dg.tanh(x @ W).sum() for x in xs]).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sizes.append(len(ab.interp.nodes))
    assert max(sizes) <= _PRUNE_MIN + 16          # bounded ...
    assert min(sizes[200:]) <= 1                  # ... and down to the live ``loss`` each time


def test_shape_errors_are_raised_at_the_users_line_with_eagers_message():
    a, b = dg.randn(2, 3), dg.randn(4, 5)
    with pytest.raises(Exception) as eager_err:
        a @ b
    with dg.autobatch():
        x = a * 1.0
        with pytest.raises(type(eager_err.value)) as err:
            x @ b
    assert str(err.value) == str(eager_err.value)


def test_pending_values_survive_an_exception_leaving_the_context():
    x = dg.randn(3, dtype=dg.float64)
    kept = None
    with pytest.raises(ValueError, match="boom"), dg.autobatch():
        kept = dg.exp(x) * 2.0
        raise ValueError("boom")
    assert not is_pending(kept)
    np.testing.assert_allclose(kept.numpy(), np.exp(x.numpy()) * 2.0)


def test_example_recursive_model_under_autobatch_equals_hand_batched():
    from dyngraph.examples import tree_lstm as T

    sents = [T.parse(t) for t in ("(3 (2 (2 a) (3 b)) (4 (3 c) (2 (2 d) (1 e))))", "(1 (0 x) (2 y))",
                                  "(2 z)", "(4 (4 (3 a) (2 x)) (1 e))")]
    vocab = T.build_vocab(sents)
    T.attach_ids(sents, vocab)
    dg.manual_seed(0)
    hand = T.BinaryTreeLSTM(len(vocab), emb=6, hidden=5, dropout=0.0).double()
    rec = T.RecursiveTreeLSTM(len(vocab), emb=6, hidden=5, dropout=0.0).double()
    rec.load_state_dict(hand.state_dict())
    b = T.Batch(sents)
    order = np.argsort(np.concatenate([s.height for s in sents]), kind="stable")
    loss_h = F.cross_entropy(hand(b), b.labels)
    loss_h.backward()
    with dg.autobatch(stats=True) as ab:
        loss_r = F.cross_entropy(rec.forward_trees(sents), T.post_order_labels(sents))
        loss_r.backward()
    assert abs(float(loss_r) - float(loss_h)) < 1e-12
    for (name, p), q in zip(rec.named_parameters(), hand.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), err_msg=name, **TOL)
    assert ab.stats.cells > 0 and not ab.stats.fallbacks
    assert len(order) == sum(len(s) for s in sents)


def test_example_runs_with_autobatch():
    from dyngraph.examples import tree_lstm as T

    if not os.path.exists(os.path.join(SST, "train.txt")):
        pytest.skip("SST data not available")
    res = T.run(SST, epochs=1, batch=10, emb=8, hidden=8, limit_train=30, limit_test=20, quiet=True,
                autobatch=True)
    assert "tree-lstm (autobatch)" in res
    assert np.isfinite(res["tree-lstm (autobatch)"]["losses"][0])


def test_cells_follow_a_dtype_change_of_the_parameters():
    lin = nn.Linear(3, 3)
    f = dg.autobatch.cell(lambda x: dg.tanh(lin(x)))
    with dg.autobatch():
        y32 = f(dg.randn(1, 3) * 1.0)
    lin.double()
    with dg.autobatch():
        y64 = f(dg.randn(1, 3, dtype=dg.float64) * 1.0)
    assert y32.dtype == dg.float32 and y64.dtype == dg.float64
