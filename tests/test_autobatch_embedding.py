"""nn.Embedding's direct lookup (the checks of F.embedding inlined, the primitive handed to
the interpreter or bind) against F.embedding: values, gradients, errors, eager and under
dg.autobatch."""

import numpy as np
import pytest

import dyngraph as dg
import dyngraph.nn as nn
import dyngraph.nn.functional as F


def _pair(pad=None, sgf=False, dtype=dg.float64):
    dg.manual_seed(3)
    e = nn.Embedding(7, 4, padding_idx=pad, scale_grad_by_freq=sgf, dtype=dtype)
    w2 = dg.tensor(e.weight.detach().numpy().copy(), requires_grad=True)
    return e, w2


CASES = [
    ([3], None, False), ([0], 0, False), ([[1, 6], [6, 0]], -1, False), ([2, 2, 5], None, True),
    ([6, 1, 1], 1, True),
]


def test_empty_indices_forward():
    # (backward of an empty lookup fails in embedding_backward_p's reshape, F.embedding too)
    e, w2 = _pair()
    i = dg.tensor(np.zeros(0, np.int64))
    for ctx in (_Null(), dg.autobatch()):
        with ctx:
            y = e(i)
            assert y.shape == (0, 4) and F.embedding(i, w2).shape == (0, 4)
            assert y.detach().numpy().shape == (0, 4)


@pytest.mark.parametrize("idx,pad,sgf", CASES)
@pytest.mark.parametrize("itype", [np.int64, np.int32, np.uint8])
@pytest.mark.parametrize("batched", [False, True])
def test_direct_lookup_equals_functional(idx, pad, sgf, itype, batched):
    e, w2 = _pair(pad, sgf)
    i = dg.tensor(np.array(idx, dtype=itype).reshape(np.shape(idx)))
    g = np.arange(1, 1 + np.array(idx).size * 4, dtype=np.float64).reshape(np.shape(idx) + (4,))
    if batched:
        with dg.autobatch():
            y = e(i)
            y2 = F.embedding(i, w2, e.padding_idx, scale_grad_by_freq=sgf)
            ((y * dg.tensor(g)).sum() + (y2 * dg.tensor(g)).sum()).backward()
    else:
        y = e(i)
        y2 = F.embedding(i, w2, e.padding_idx, scale_grad_by_freq=sgf)
        ((y * dg.tensor(g)).sum() + (y2 * dg.tensor(g)).sum()).backward()
    assert y.shape == y2.shape == tuple(np.shape(idx)) + (4,)
    np.testing.assert_array_equal(y.detach().numpy(), y2.detach().numpy())
    np.testing.assert_array_equal(e.weight.grad.numpy(), w2.grad.numpy())
    if any(r % 7 != (e.padding_idx if pad is not None else -1) for r in np.array(idx).ravel()):
        assert np.abs(e.weight.grad.numpy()).sum() > 0
    if pad is not None:
        assert not e.weight.grad.numpy()[e.padding_idx].any()
    if 6 in np.array(idx).ravel() and pad is None and not sgf:
        rows = np.array(idx).ravel()
        want = sum(g.reshape(-1, 4)[k] for k in range(rows.size) if rows[k] == 6)
        np.testing.assert_array_equal(e.weight.grad.numpy()[6], want)


@pytest.mark.parametrize("batched", [False, True])
def test_direct_lookup_errors_match(batched):
    e, _ = _pair()
    ctx = dg.autobatch() if batched else _Null()
    with ctx:
        with pytest.raises(IndexError, match="index 7 is out of range .* 7 rows"):
            e(dg.tensor([7]))
        with pytest.raises(IndexError, match="index -1 is out of range"):
            e(dg.tensor([[0, -1]]))
        with pytest.raises(RuntimeError, match="expected an integer tensor"):
            e(dg.tensor([1.0]))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_changed_attributes_take_the_functional_path():
    e, w2 = _pair()
    e.max_norm = 0.5
    y = e(dg.tensor([1, 2]))
    assert np.linalg.norm(y.detach().numpy(), axis=1).max() <= 0.5 + 1e-6
    np.testing.assert_array_equal(e.weight.detach().numpy()[3], w2.detach().numpy()[3])
    assert np.linalg.norm(e.weight.detach().numpy()[1]) <= 0.5 + 1e-6   # renormalised in place
    e2, _ = _pair()
    e2.padding_idx = -2     # set after construction: normalised as F.embedding does
    y = e2(dg.tensor([5, 1]))
    y.sum().backward()
    assert not e2.weight.grad.numpy()[5].any() and e2.weight.grad.numpy()[1].all()
    # a list of indices (not a tensor) still works through F.embedding
    np.testing.assert_array_equal(e2([1, 2]).detach().numpy(), e2.weight.detach().numpy()[[1, 2]])


def test_hooks_still_run_on_embedding():
    e, _ = _pair()
    seen = []
    e.register_forward_hook(lambda m, a, out: seen.append(tuple(out.shape)))
    with dg.autobatch():
        e(dg.tensor([1]))
    e(dg.tensor([2, 3]))
    assert seen == [(1, 4), (2, 4)]


def test_one_index_lookups_follow_changed_attributes():
    """The one-index path shares embedding_p's params per (rows, padding_idx,
    scale_grad_by_freq): changing an attribute between calls gives the new params, and a
    one-element index out of range (or negative) raises the lookup's message."""
    e, _ = _pair()
    e(dg.tensor([4])).sum().backward()
    assert e.weight.grad.numpy()[4].all()
    e.zero_grad()
    e.padding_idx = 4
    e(dg.tensor([4])).sum().backward()
    assert not e.weight.grad.numpy()[4].any()
    e.zero_grad()
    e.padding_idx = None
    e.scale_grad_by_freq = True
    e(dg.tensor([[4]])).sum().backward()
    assert e.weight.grad.numpy()[4].all()
    with pytest.raises(IndexError, match="out of range"):
        e(dg.tensor([e.num_embeddings]))
    with pytest.raises(IndexError, match="out of range"):
        e(dg.tensor([-1]))
