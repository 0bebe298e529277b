"""The dynamic-model examples, end to end on small budgets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.examples import adaptive_computation, anomaly_demo, dynamic_depth, tree_lstm, varlen_rnn

HAVE_DOT = shutil.which("dot") is not None


def test_dynamic_depth_loss_falls_and_depth_varies():
    res = dynamic_depth.train(steps=200, quiet=True)
    assert res["last"] < 0.3 * res["first"]
    assert len(set(res["depths"])) == 5  # every depth 0..4 was used
    assert all(np.isfinite(v) for v in res["per_depth"].values())


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz `dot` not installed")
def test_dynamic_depth_draws_graph_and_diff(tmp_path):
    pytest.importorskip("graphviz")
    res = dynamic_depth.train(steps=5, quiet=True)
    paths = dynamic_depth.draw(res["model"], str(tmp_path))
    assert [os.path.basename(p) for p in paths] == ["dynamic_depth_graph.png", "dynamic_depth_diff.png"]
    assert all(open(p, "rb").read(4) == b"\x89PNG" for p in paths)


def test_varlen_dynamic_equals_padded_masked():
    """Running each sequence for its own length computes what padding+masking computes."""
    dg.manual_seed(0)
    model = varlen_rnn.SeqClassifier()
    seqs, _ = varlen_rnn.make_data(12, seed=3)
    a = model.forward_dynamic(seqs)
    b = model.forward_padded(*varlen_rnn.pad(seqs))
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    a.sum().backward()
    g_dyn = model.cell.weight_hh.grad.numpy().copy()
    model.zero_grad()
    b.sum().backward()
    np.testing.assert_allclose(g_dyn, model.cell.weight_hh.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_varlen_compare_small_budget():
    out = varlen_rnn.compare(epochs=1, n_train=160, n_test=80, quiet=True)
    for mode in ("dynamic", "padded"):
        assert 0.0 <= out[mode]["accuracy"] <= 1.0 and out[mode]["seconds_per_epoch"] > 0
    assert out["dynamic"]["losses"][0] == pytest.approx(out["padded"]["losses"][0], rel=1e-3)


def test_tree_parser_handles_unary_and_nbsp():
    s = tree_lstm.parse("(3 (2 (2 8\xa01\\/2)) (4 (3 good) (2 .)))")
    assert s.word == ["8\xa01\\/2", "good", ".", None, None]
    assert list(s.label) == [2, 3, 2, 4, 3] and s.root_label == 3
    assert list(s.height) == [0, 0, 0, 1, 2]
    assert [tuple(x) for x in s.span] == [(0, 1), (1, 2), (2, 3), (1, 3), (0, 3)]


def _reference_tree_lstm(model, sent):
    """Node-by-node post-order evaluation of one tree (what the level batching must equal)."""
    H = model.hidden
    hs, cs = [], []
    for k in range(len(sent)):
        if sent.word[k] is not None:
            g = model.leaf(model.embed(dg.tensor([int(sent.ids[k])])))
            i, o, u = g[:, :H], g[:, H:2 * H], g[:, 2 * H:]
            c = dg.sigmoid(i) * dg.tanh(u)
        else:
            lft, rgt = int(sent.left[k]), int(sent.right[k])
            g = model.compose(dg.cat([hs[lft], hs[rgt]], dim=1))
            i, fl, fr, o, u = (g[:, j * H:(j + 1) * H] for j in range(5))
            c = dg.sigmoid(i) * dg.tanh(u) + dg.sigmoid(fl) * cs[lft] + dg.sigmoid(fr) * cs[rgt]
        hs.append(dg.sigmoid(o) * dg.tanh(c))
        cs.append(c)
    return model.out(dg.cat(hs, dim=0))


def test_tree_lstm_level_batching_matches_post_order():
    sents = [tree_lstm.parse(t) for t in (
        "(3 (2 (2 a) (3 b)) (4 (3 c) (2 (2 d) (1 e))))", "(1 (0 x) (2 y))", "(2 z)")]
    vocab = tree_lstm.build_vocab(sents)
    tree_lstm.attach_ids(sents, vocab)
    dg.manual_seed(0)
    model = tree_lstm.BinaryTreeLSTM(len(vocab), emb=6, hidden=5).eval()
    batch = tree_lstm.Batch(sents)
    got = model(batch).detach().numpy()
    offsets = np.cumsum([0] + [len(s) for s in sents])
    order = np.argsort(np.concatenate([s.height for s in sents]), kind="stable")
    for s, off in zip(sents, offsets[:-1], strict=True):
        ref = _reference_tree_lstm(model, s).detach().numpy()
        for k in range(len(s)):
            row = int(np.flatnonzero(order == off + k)[0])
            np.testing.assert_allclose(got[row], ref[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(batch.root_labels, [3, 1, 2])


def test_tree_lstm_runs_on_sst_subset():
    root = tree_lstm.default_root()
    if not os.path.exists(os.path.join(root, "train.txt")):
        pytest.skip(f"SST not found at {root}")
    res = tree_lstm.run(epochs=1, emb=16, hidden=16, limit_train=60, limit_test=40, quiet=True)
    for name in ("tree-lstm", "bag-of-words"):
        r = res[name]
        assert 0 <= r["fine"] <= 1 and 0 <= r["binary"] <= 1 and np.isfinite(r["losses"][0])


def test_adaptive_computation_exits_early():
    res = adaptive_computation.train(epochs=2, hidden=32, limit_test=60, thresholds=(0.5, 0.999), quiet=True)
    assert res["full_accuracy"] > 0.7
    early, late = res["exits"][0.5], res["exits"][0.999]
    assert 1 <= early["mean_blocks"] < late["mean_blocks"] <= res["blocks"]
    assert early["accuracy"] > 0.6


def test_anomaly_demo_points_at_the_user_line():
    with np.errstate(all="ignore"):
        res = anomaly_demo.demo(verbose=False)
    assert res["nan_grads"] == ["weight", "bias"]
    msg = res["message"]
    assert "PowBackward0" in msg and "nan" in msg
    assert "anomaly_demo.py" in msg and "pair_distance" in msg and "dg.sqrt(((a - b) ** 2)" in msg
    assert res["fixed"]


def test_examples_accept_budget_flags():
    r = subprocess.run([sys.executable, "-m", "dyngraph.examples.dynamic_depth", "--steps", "3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "test loss per depth" in r.stdout
