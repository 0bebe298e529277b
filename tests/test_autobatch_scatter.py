"""The backward of the scheduler's gather from several sources (``ops/_batching.gather_p``):
all sources' gradients computed in one pass (``_gather_backward_all``, its row copies in C:
``dyngraph._autobatch.scatter``) and handed to the engine one input at a time.  The same
values as one ``gather_backward_p`` per source (bit for bit), in float32 and float64, with
repeated rows, members' own values, slices and index arrays; two gather nodes that get
the same gradient array and the same plan each get their own gradients; the C copies
equal the NumPy loop.
"""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.autobatch import interpreter as I
from dyngraph.ops import _batching as Bt
from dyngraph.ops._batching import gather_backward_p, gather_p

native = pytest.mark.skipif(I._NATIVE is None, reason="dyngraph._autobatch not built or DYNGRAPH_PURE_PYTHON")


def _plan(rng, B, W, dtype, repeats, full):
    """A gather of B rows from 3 sources (the third a member's own value)."""
    perm = rng.permutation(B)
    cuts = np.sort(rng.choice(np.arange(1, B), size=2, replace=False))
    srcs, rows, pos, ns, uq = [], [], [], [], []
    for k, p in enumerate(np.split(perm, cuts)):
        p = np.sort(p)
        pos.append(slice(int(p[0]), int(p[0]) + len(p)) if p[-1] - p[0] == len(p) - 1 else p.astype(np.intp))
        if k == 2:
            srcs.append(rng.standard_normal(W).astype(dtype))
            rows.append(None)
            ns.append(0)
            uq.append(True)
            continue
        if repeats:
            n = int(rng.integers(2, 6))
            r = rng.integers(0, n, size=len(p)).astype(np.intp)
        else:
            n = len(p) if full else len(p) + int(rng.integers(1, 4))
            r = rng.permutation(n)[:len(p)].astype(np.intp)
        srcs.append(rng.standard_normal((n, W)).astype(dtype))
        rows.append(r)
        ns.append(n)
        uq.append(len(np.unique(r)) == len(r))
    return srcs, {"B": B, "rows": tuple(rows), "pos": tuple(pos), "ns": tuple(ns), "uniq": tuple(uq)}


def _per_source(g, params):
    return [gather_backward_p(g, B=params["B"], rows=r, pos=p, n=n, unique=u)
            for r, p, n, u in zip(params["rows"], params["pos"], params["ns"], params["uniq"], strict=True)]


@pytest.mark.parametrize("native_on", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("repeats,full", [(False, True), (False, False), (True, False)])
def test_all_at_once_equals_one_per_source(native_on, dtype, repeats, full):
    if native_on and I._NATIVE is None:
        pytest.skip("dyngraph._autobatch not built")
    was = I.use_native(native_on)
    try:
        rng = np.random.default_rng(7)
        for _ in range(15):
            B = int(rng.integers(4, 40))
            srcs, params = _plan(rng, B, 6, dtype, repeats, full)
            g = rng.standard_normal((B, 6)).astype(dtype)
            got = Bt._gather_backward_all(g, params["rows"], params["pos"], params["ns"], params["uniq"])
            want = _per_source(g, params)
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_array_equal(a, b)
    finally:
        I.use_native(was)


@native
def test_c_scatter_equals_numpy_and_declines_what_it_does_not_cover():
    rng = np.random.default_rng(3)
    srcs, params = _plan(rng, 20, 5, np.float64, True, False)
    g = rng.standard_normal((20, 5))
    outs = [np.zeros((n, 5)) if r is not None else None for r, n in zip(params["rows"], params["ns"], strict=True)]
    args = (params["rows"], params["pos"], params["uniq"])
    assert Bt._SCATTER(g, outs, *args) is True
    for z, r, p in zip(outs, params["rows"], params["pos"], strict=True):
        if r is not None:
            want = np.zeros_like(z)
            np.add.at(want, r, g[p])
            np.testing.assert_array_equal(z, want)
    # integer sums, a non-contiguous g, a row out of range: False, nothing written
    gi = rng.integers(0, 9, size=(20, 5))
    zi = [np.zeros((n, 5), gi.dtype) if r is not None else None for r, n in zip(params["rows"], params["ns"], strict=True)]
    assert Bt._SCATTER(gi, zi, *args) is False and not any(z.any() for z in zi if z is not None)
    z2 = [np.zeros((n, 5)) if r is not None else None for r, n in zip(params["rows"], params["ns"], strict=True)]
    assert Bt._SCATTER(np.asfortranarray(g), z2, *args) is False
    bad = list(params["rows"])
    bad[0] = bad[0].copy()
    bad[0][-1] = 99
    assert Bt._SCATTER(g, z2, tuple(bad), params["pos"], params["uniq"]) is False
    assert not any(z.any() for z in z2 if z is not None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_through_the_engine(dtype):
    """Two gather nodes with the same plan (params) read by one ``add``: the engine gives
    both the same gradient array; each source's gradient is the sum of both, as with the
    gather written out by hand."""
    rng = np.random.default_rng(11)
    srcs, params = _plan(rng, 17, 4, dtype, True, False)
    xs = [dg.tensor(s, requires_grad=True) for s in srcs]
    w = dg.tensor(rng.standard_normal((17, 4)).astype(dtype))
    a = gather_p(*xs, **params)
    b = gather_p(*xs, **params)
    ((a + b) * w).sum().backward()
    got = [x.grad.numpy().copy() for x in xs]
    ref = [dg.tensor(s, requires_grad=True) for s in srcs]
    parts = []
    for x, r, p in zip(ref, params["rows"], params["pos"], strict=True):
        v = x if r is None else x[dg.tensor(r)]
        idx = np.arange(17)[p]
        if r is None:
            v = v.reshape(1, -1).expand(len(idx), -1)
        parts.append((v, idx))
    full = dg.zeros(17, 4, dtype=dg.float32 if dtype == np.float32 else dg.float64)
    for v, idx in parts:
        full = full.index_add(0, dg.tensor(idx), v)
    ((full + full) * w).sum().backward()
    for a_, x in zip(got, ref, strict=True):
        np.testing.assert_allclose(a_, x.grad.numpy(), rtol=1e-6 if dtype == np.float32 else 1e-12,
                                   atol=1e-6 if dtype == np.float32 else 1e-12)
    assert Bt._PENDING_GRADS[2] is None          # everything handed out, nothing held
