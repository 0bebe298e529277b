"""Values only through the interpreter: ``concrete(t, why)`` and the guards it becomes."""

import numpy as np

import dyngraph as dg
import dyngraph.nn.functional as F


def _bag_sums(ids, w, offs):
    out = []
    ends = list(offs[1:]) + [len(ids)]
    for s, e in zip(offs, ends, strict=True):
        out.append(w[ids[s:e]].sum(0) if e > s else np.zeros(w.shape[1], w.dtype))
    return np.stack(out)


def test_embedding_bag_replay_follows_new_offsets():
    W = dg.randn(10, 3)
    f = dg.compile(lambda i, o: F.embedding_bag(i, W, o, mode="sum"))
    ids = dg.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    w = W.numpy()
    for offs in ([0, 1, 5], [0, 3, 3], [0, 1, 5]):
        got = f(ids, dg.tensor(offs))
        np.testing.assert_allclose(got.numpy(), _bag_sums(ids.numpy(), w, offs), rtol=1e-6)
    text = f.explain()
    assert "embedding_bag: offsets decide the bag sizes" in text
    assert "[0, 1, 5]" in text and "[0, 3, 3]" in text


def test_one_hot_class_count_is_guarded():
    f = dg.compile(lambda t: F.one_hot(t))
    assert f(dg.tensor([0, 2])).shape == (2, 3)
    assert f(dg.tensor([0, 4])).shape == (2, 5)
    assert f(dg.tensor([1, 2])).shape == (2, 3)


def test_repeat_interleave_counts_are_guarded():
    f = dg.compile(lambda x, r: x.repeat_interleave(r))
    x = dg.tensor([1.0, 2.0, 3.0])
    assert f(x, dg.tensor([1, 2, 0])).tolist() == [1.0, 2.0, 2.0]
    assert f(x, dg.tensor([0, 1, 3])).tolist() == [2.0, 3.0, 3.0, 3.0]


def test_nonzero_size_is_guarded():
    f = dg.compile(lambda x: dg.nonzero(x).sum() + 0)
    assert f(dg.tensor([0.0, 1.0, 2.0])).item() == 3
    assert f(dg.tensor([1.0, 1.0, 0.0])).item() == 1
    assert f(dg.tensor([1.0, 1.0, 1.0])).item() == 3
