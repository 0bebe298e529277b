"""Debugging a NaN gradient with anomaly mode and the recorded graph.

    python -m dyngraph.examples.anomaly_demo

A tiny embedding model is trained to pull pairs of points together with a
Euclidean distance loss.  One pair is already identical, so the distance is
``sqrt(0)``: the forward value is a harmless 0, but the backward pass computes
``d sqrt(s)/ds = 1 / (2 sqrt(s)) = inf`` and then ``inf * 0 = nan``.  Every
parameter gradient silently becomes NaN and training dies a few steps later.

The script shows the three steps of finding it:

1. ``loss.backward()`` runs without complaint; the gradients are NaN.
2. Under ``dg.autograd.detect_anomaly()`` the same backward raises an error
   that names the op whose backward produced the NaN and shows the line of
   *this file* that created it.
3. ``dg.viz.record()`` + ``dg.autograd.graph.walk(loss)`` list every node with
   the source line that created it; ``print(t.grad_fn)`` and printing tensors
   work at any breakpoint.

The fix (``sqrt(s + eps)``) is applied at the end and the gradients are finite.
"""

from __future__ import annotations

import argparse

import dyngraph as dg
from dyngraph import nn


def pair_distance(a, b, eps: float = 0.0):
    return dg.sqrt(((a - b) ** 2).sum(dim=1) + eps)  # NaN gradient when a row of a equals b


def make_problem(seed: int = 0):
    dg.manual_seed(seed)
    model = nn.Linear(3, 2)
    x1 = dg.randn(4, 3)
    x2 = dg.randn(4, 3)
    x2[1] = x1[1]  # a pair that is already identical: distance exactly 0
    return model, x1, x2


def loss_fn(model, x1, x2, eps: float = 0.0):
    return pair_distance(model(x1), model(x2), eps).mean()


def demo(verbose: bool = True) -> dict:
    say = print if verbose else (lambda *a, **k: None)
    model, x1, x2 = make_problem()

    # 1. the silent failure
    loss = loss_fn(model, x1, x2)
    loss.backward()
    nan_grads = [name for name, p in model.named_parameters() if bool(dg.isnan(p.grad).any())]
    say(f"1. loss = {loss.item():.4f}; parameters with NaN gradients: {nan_grads}")

    # 2. anomaly mode names the op and the line
    model.zero_grad()
    message = ""
    with dg.autograd.detect_anomaly():
        loss = loss_fn(model, x1, x2)
        try:
            loss.backward()
        except RuntimeError as err:
            message = str(err)
    say("2. with dg.autograd.detect_anomaly():\n" + message)

    # 3. the recorded graph, node by node, with the line that created each node
    with dg.viz.record():
        loss = loss_fn(model, x1, x2)
    say("3. print(loss.grad_fn) ->", loss.grad_fn, "created at", loss.grad_fn.metadata.get("source"))
    say("   dg.autograd.graph.walk(loss):")
    for depth, node in dg.autograd.graph.walk(loss):
        src = node.metadata.get("source", "") if isinstance(node, dg.autograd.graph.Node) else ""
        where = src.split(": ", 1)[0].rsplit("/", 1)[-1] if src else ""
        say(f"   {'  ' * depth}{node.name():<18s} {where}")

    # the fix
    model.zero_grad()
    loss = loss_fn(model, x1, x2, eps=1e-12)
    loss.backward()
    finite = all(bool(dg.isfinite(p.grad).all()) for p in model.parameters())
    say(f"4. with sqrt(s + 1e-12): loss = {loss.item():.4f}, all gradients finite: {finite}")
    return {"nan_grads": nan_grads, "message": message, "fixed": finite}


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    demo()


if __name__ == "__main__":
    main()
