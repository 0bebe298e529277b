"""``dg.autobatch.map``: reads block only their instance; one evaluation serves them all."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import nn

TOL = {"rtol": 1e-10, "atol": 1e-10}


def test_early_exit_loops_batch_across_instances():
    rng = np.random.default_rng(0)
    W = nn.Parameter(dg.tensor(rng.standard_normal((4, 4)) * 0.8))
    xs = [dg.tensor(rng.standard_normal((1, 4))) for _ in range(8)]

    def member(x):
        h, steps = x, 0
        while steps < 10:
            h = dg.tanh(h @ W)
            steps += 1
            if h.sum().item() > 0.5:       # a read: only this instance waits
                break
        return h.sum() * steps

    eager = [member(x) for x in xs]
    dg.stack(eager).sum().backward()
    ge, W.grad = W.grad.numpy().copy(), None
    reads = 0
    with dg.autobatch(stats=True) as ab:
        outs = dg.autobatch.map(member, xs)
        dg.stack(outs).sum().backward()
        reads = ab.stats.forces["item"]
    np.testing.assert_allclose([float(o) for o in outs], [float(e) for e in eager], **TOL)
    np.testing.assert_allclose(W.grad.numpy(), ge, **TOL)
    # every read was served by one of a few shared evaluations, not one each
    assert ab.stats.map_rounds < reads / 2
    assert ab.stats.average_group_size > 2


class SPINN(nn.Module):
    """A shift-reduce encoder: a tracker picks SHIFT or REDUCE from the stack top."""

    def __init__(self, V, H):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.reduce = nn.Linear(2 * H, H)
        self.track = nn.Linear(2 * H, 2)
        self.out = nn.Linear(H, 1)

    def forward(self, words):
        buf = [self.emb(dg.tensor([w])) for w in words]
        stack = []
        while buf or len(stack) > 1:
            if len(stack) < 2:
                action = 0
            elif not buf:
                action = 1
            else:
                logits = self.track(dg.cat([stack[-1], buf[0]], dim=1))
                action = int(logits.argmax())          # a data-dependent decision
            if action == 0:
                stack.append(buf.pop(0))
            else:
                r, left = stack.pop(), stack.pop()
                stack.append(dg.tanh(self.reduce(dg.cat([left, r], dim=1))))
        return self.out(stack[0]).sum()


def test_shift_reduce_parser_through_map_equals_eager():
    rng = np.random.default_rng(1)
    sents = [list(rng.integers(0, 20, n)) for n in (3, 7, 5, 9, 4, 6)]
    dg.manual_seed(0)
    model = SPINN(20, 6).double()
    eager = [model(s) for s in sents]
    dg.stack(eager).sum().backward()
    ge = [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    with dg.autobatch(stats=True) as ab:
        outs = dg.autobatch.map(model, sents)
        dg.stack(outs).sum().backward()
    np.testing.assert_allclose([float(o) for o in outs], [float(e) for e in eager], **TOL)
    for p, b in zip(model.parameters(), ge, strict=True):
        if b is None:           # the tracker only decides (argmax): no gradient, as in eager
            assert p.grad is None
        else:
            np.testing.assert_allclose(p.grad.numpy(), b, **TOL)
    assert ab.stats.map_rounds < ab.stats.forces.get("item", 0)


def test_greedy_decoding_until_eos():
    rng = np.random.default_rng(2)
    V, H, EOS = 7, 5, 0
    dg.manual_seed(3)
    cell, emb, out = nn.GRUCell(H, H).double(), nn.Embedding(V, H).double(), nn.Linear(H, V).double()
    srcs = [dg.tensor(rng.standard_normal((1, H))) for _ in range(5)]

    def decode(h):
        tok, toks = 1, []
        while len(toks) < 8:
            h = cell(emb(dg.tensor([tok])), h)
            tok = int(out(h).argmax())
            if tok == EOS:
                break
            toks.append(tok)
        return toks

    eager = [decode(h) for h in srcs]
    assert dg.autobatch.map(decode, srcs) == eager


def test_an_error_in_one_instance_propagates():
    def member(i):
        if i == 2:
            raise KeyError("instance 2")
        return dg.tensor([float(i)]) * 2.0

    with pytest.raises(KeyError, match="instance 2"):
        dg.autobatch.map(member, range(4))
