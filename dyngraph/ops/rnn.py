"""Fused recurrent-layer primitives: one node runs a whole LSTM / GRU / Elman layer.

A recurrent layer over T steps written with elementwise primitives records
~12 nodes per step and sums ``T`` weight gradients one by one.  Here one
primitive runs the time loop in NumPy (per step: one GEMM ``h @ W_hh^T`` and
the fused gate math), and its backward runs back-propagation through time in
one pass: per step one GEMM for ``dh``; the weight gradient is a single GEMM
over all steps at the end.  The input projection ``x @ W_ih^T + b`` is *not*
inside the primitive: callers compute it for all steps at once with
``linear`` (one large GEMM), and its gradients come from ``linear``'s rules.

Layout: the sequence is *packed* -- rows of all time steps stacked, step ``t``
holding ``batch_sizes[t]`` rows (non-increasing), exactly
:class:`~dyngraph.nn.utils.rnn.PackedSequence`'s ``data``.  A padded batch is
the special case ``batch_sizes = (B,) * T``.  ``reverse=True`` runs the steps
from last to first (the backward direction of a bidirectional layer); a
sequence then starts from its initial state at its own last step.

Derivatives: ``backward_node`` computes all input gradients in one pass.
Under ``create_graph=True`` (higher-order gradients) it instead re-runs the
layer as a composition of differentiable primitives and differentiates that,
so gradients of gradients are exact too.

Hidden extra outputs (gate activations, cell states) are what the backward
pass reads; the public wrappers return only the PyTorch-visible outputs.

Gate kernels: when the optional C extension ``dyngraph._kernels`` is built and
``DYNGRAPH_PURE_PYTHON`` is not set, each step's pointwise math (and that of the
``nn.LSTMCell`` nodes and their rules) is one compiled pass instead of ~10-15 NumPy calls.
The GEMMs stay NumPy's, except the per-step products of float32 LSTM/GRU layers of >= 8
steps and >= 4 rows, which run from weights packed once per call (``_K.gemm_packed``, see
:func:`_packed_steps`; OpenBLAS would repack all of ``W_hh`` at every step), and those of
equal-step float32 LSTM layers of 1-3 rows, which run inside the sequence kernels from
``W_hh`` itself, the backward's time loop included (:func:`_row_products`).  Where
``ops/_gemm`` hands products to Intel MKL (installed, one thread), float32 LSTM/GRU layers of
>= 16 rows a step (8 in the backward) take MKL's instead (:func:`_mkl_steps`): the forward's
from ``W_hh^T`` packed once in MKL's own layout (an equal-step LSTM's written by MKL straight
into the step's rows of ``acts`` inside ``lstm_sequence``), and the weight gradients.  The NumPy
functions (``_lstm_forward`` ...) are the reference path: same formulas, same order of the
products, and the same saved outputs, so either path's backward accepts either forward's
outputs.
"""

from __future__ import annotations

import numpy as np

from .._core.grad_mode import enable_grad
from ..tensor import Tensor
from . import _gemm
from . import elementwise as E
from ._util import compiled_kernels
from .elementwise import tanh_p
from .registry import REGISTRY as R
from .registry import Primitive, bind, primitive
from .shape import cat, cat_p

__all__ = ["lstm_layer", "gru_layer", "rnn_layer"]

# The compiled gate kernels (dyngraph/_kernels.c), or None: the NumPy path.
_K = compiled_kernels()
_KDT = (np.dtype(np.float32), np.dtype(np.float64))


def _kernel_ok(*xs) -> bool:
    """The compiled kernels apply: 2-D float32/float64 ndarrays, all of one dtype."""
    if _K is None:
        return False
    d = xs[0].dtype
    return d in _KDT and all(type(x) is np.ndarray and x.ndim == 2 and x.dtype == d for x in xs)


def _packed_steps(w, n_steps, rows, n_cols) -> bool:
    """The per-step products of a layer run through ``_K.gemm_packed`` (weights packed once per
    call): float32 weights, AVX2/FMA at run time, output columns a multiple of 16, >= 4 rows a
    step (the kernel's 4-row tile) and >= 8 steps (packing the weights costs about as much as
    four steps gain: 256 units, ~0.16 ms against ~40 us a step)."""
    return (w.dtype == np.float32 and getattr(_K, "packed_gemm", False) and n_cols % 16 == 0
            and rows >= 4 and n_steps >= 8)


# the one-row products of dyngraph/_kernels.c (lstm_sequence with mm = (W_hh,),
# lstm_backward_sequence): built with them, AVX2/FMA at run time
_ROWS = _K is not None and getattr(_K, "packed_gemm", False) and hasattr(_K, "lstm_backward_sequence")


# MKL's sgemm (ops/_gemm.py, where active) against the packed kernel for the per-step products
# (AVX-512 Xeon, one thread, us a step): H 256, batch 32: h @ W_hh^T 128 / 172, d @ W_hh
# 111 / 176; H 128, batch 16: 21 / 23, 14 / 23; at 4 rows the packed kernel is faster
# (H 256: forward 23 / 30, backward 23 / 18; H 512, 8 rows: forward 260 / 449).  From these
# rows up the products run in MKL:
_MKL_FWD_ROWS = 16
_MKL_BWD_ROWS = 8


def _mkl_steps(w, rows, fwd) -> bool:
    """The per-step products of a float32 layer of ``rows`` rows a step run through
    :func:`ops._gemm.matmul_into` (MKL; nothing to pack).  Not on AMD processors, where MKL
    takes its generic kernels and the packed AVX2 kernel is faster (Zen 4, H 256, batch 32,
    one thread: d @ W_hh 171 against 208 us a step; the ``nn.LSTM`` step, alternated in one
    process, 57.4 -> 55.7 and 60.4 -> 58.0 ms with the backward's products moved, 60.5 ->
    59.4 and 57.8 -> 57.1 with the forward's)."""
    return w.dtype == np.float32 and rows >= (_MKL_FWD_ROWS if fwd else _MKL_BWD_ROWS) \
        and _gemm.active() and not _gemm._amd


def _row_products(w, rows) -> bool:
    """A uniform float32 LSTM layer of 1-3 rows a step runs its per-step products inside the
    sequence kernels, from ``W_hh``'s own layout (no packing, no call back into NumPy): at
    batch 1 ``h @ W_hh^T`` and ``d @ W_hh`` are matrix-vector products, ~5-6.5 us each in
    OpenBLAS plus NumPy's call, ~1.5-2.5 us there (H 128).  The hidden size must be a
    multiple of 8 (the kernels' vector width); 4 rows and more keep :func:`_packed_steps`'s
    tile (or NumPy's product)."""
    return _ROWS and w.dtype == np.float32 and 0 < rows < 4 and w.shape[1] % 8 == 0


def _packed(w):
    """``w`` (N, K) packed for ``_K.gemm_packed`` (products ``a @ w.T``)."""
    bp = np.empty(w.shape[0] * w.shape[1], np.float32)
    _K.pack_panels(w, bp)
    return bp


def _offsets(batch_sizes):
    offs = [0]
    for b in batch_sizes:
        offs.append(offs[-1] + b)
    return offs


def _sigmoid_(a):
    """In-place logistic function (1 / (1 + exp(-a)), as PyTorch computes it)."""
    with np.errstate(over="ignore"):
        _sigmoid_in_loop(a)


def _sigmoid_in_loop(a):
    """:func:`_sigmoid_` for time loops that run under ``np.errstate(over="ignore")`` once
    (entering it costs ~1 us, as much as a gate's arithmetic at batch 1); ``exp(-a)``
    overflows to inf below -88 (float32), giving exactly 0, as in PyTorch."""
    np.negative(a, out=a)
    np.exp(a, out=a)
    a += 1.0
    np.reciprocal(a, out=a)


# gate blocks of at most this many elements per step take one sigmoid pass over all four
# gates (tanh(g) saved before, written back after: 6 NumPy calls instead of 9); larger ones
# two passes over i, f and o (less arithmetic)
_ONE_PASS_GATES = 8192


def _hidden_matmul(h, w, add, out):
    """``out = h @ w.T + add`` for one step.

    OpenBLAS's single-precision GEMM is ~1.5x faster for these skinny products
    (batch rows x hidden) computed as ``(w @ h.T).T`` than as ``h @ w.T``;
    double precision is the other way round (measured, benchmarks/layers.py).
    """
    if h.dtype == np.float32:
        np.add((w @ h.T).T, add, out=out)
    else:
        np.matmul(h, w.T, out=out)
        out += add
    return out


def _prev_rows(states, init, offs, batch_sizes, t, reverse):
    """State each row of step ``t`` starts from (rows of the previous step, or ``init``)."""
    r = batch_sizes[t]
    last = len(batch_sizes) - 1
    if (t == 0 and not reverse) or (t == last and reverse):
        return init[:r]
    p = t + 1 if reverse else t - 1
    rp = min(batch_sizes[p], r)
    prev = states[offs[p]:offs[p] + rp]
    if rp == r:
        return prev
    return np.concatenate([prev, init[rp:r]], axis=0)


class _FusedRecurrent(Primitive):
    """A primitive whose node computes all input gradients in one backward pass."""

    def __init__(self, name, impl, backward, reference, n_visible):
        super().__init__(name, impl, save_inputs=True, save_output=True, n_outputs=-1)
        self.fused_backward = backward
        self.reference = reference
        self.n_visible = n_visible
        self.defvjp_argnum(self._vjp_one)

    def _vjp_one(self, argnum, g, out, *inputs, **params):
        """Registry-style rule (used by graph capture, which replays it on arrays).

        Eager ``backward()`` never calls it: ``backward_node`` computes all
        gradients in one pass.  On Tensors it declines, so capture records the
        rule as one opaque node that runs it on arrays.
        """
        if any(isinstance(a, Tensor) for a in (*g, *inputs)) or isinstance(out[0], Tensor):
            raise NotImplementedError(
                f"the derivative of '{self.name}' is computed by a fused backward pass; "
                "it is replayed on arrays, not traced")
        return self.fused_backward(list(g)[:self.n_visible], out, *inputs, **params)[argnum]

    def backward_node(self, node, grads, create_graph):
        saved = node.saved
        versions = node.saved_versions or ()
        for i, (a, v) in enumerate(zip(saved, versions, strict=False)):
            vc = getattr(a, "_vc", None)
            if v is not None and vc is not None and vc[0] != v:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: input {i} of '{self.name}' (shape {list(a.shape)}) is at "
                    f"version {vc[0]}; expected version {v}. Clone it before modifying it in place.")
        grads = list(grads)[:self.n_visible]
        if create_graph:
            return self._higher_order(node, grads)
        inputs = [a._data if isinstance(a, Tensor) else a for a in saved]
        gs = [g._data if isinstance(g, Tensor) else g for g in grads]
        result = self.fused_backward(gs, node.out, *inputs, **node.params)
        return [r if e is not None else None for r, e in zip(result, node.edges, strict=True)]

    def _higher_order(self, node, grads):
        from ..autograd import grad as _grad  # noqa: PLC0415  (autograd sits above ops: the rule calls the engine)

        idx = [i for i, e in enumerate(node.edges) if e is not None]
        with enable_grad():
            # Differentiate w.r.t. fresh aliases, not the saved tensors themselves: a saved
            # input with history (h0 = the previous cell's output) leads back to the same
            # weights, and ``grad`` w.r.t. the weights would then also collect the upstream
            # path, which the engine propagates through this node's h0 edge again.
            saved = [a.view(a.shape) if i in idx else a for i, a in enumerate(node.saved)]
            outs = self.reference(*saved, **node.params)
            pairs = [(o, g) for o, g in zip(outs, grads, strict=True) if g is not None]
            got = _grad([o for o, _ in pairs], [saved[i] for i in idx],
                        [g if isinstance(g, Tensor) else Tensor._make(g, False, None, 0)
                         for _, g in pairs],
                        create_graph=True, allow_unused=True)
        result = [None] * len(saved)
        for i, gi in zip(idx, got, strict=True):
            result[i] = gi
        return result


# ---------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------

def _lstm_forward(xw, h0, c0, w_hh, w_hr=None, batch_sizes=(), reverse=False):
    hsz = c0.shape[1]
    offs = _offsets(batch_sizes)
    n = len(batch_sizes)
    dtype = np.result_type(xw.dtype, w_hh.dtype)
    acts = np.empty(xw.shape, dtype)
    hs = np.empty((xw.shape[0], h0.shape[1]), dtype)
    cs = np.empty((xw.shape[0], hsz), dtype)
    # every step the same rows (a padded batch, one sequence): a step starts from the rows the
    # previous one wrote into hs/cs, no state copies; packed batches keep running h and c
    uniform = n > 0 and batch_sizes.count(batch_sizes[0]) == n and h0.shape[0] == batch_sizes[0]
    if uniform:
        h = h0 if h0.dtype == dtype else h0.astype(dtype)   # read, never written
        c = c0 if c0.dtype == dtype else c0.astype(dtype)
    else:
        h = np.array(h0, dtype=dtype)
        c = np.array(c0, dtype=dtype)
    full = None if w_hr is None else np.empty((c0.shape[0], hsz), dtype)
    one_pass = n > 0 and batch_sizes[0] * 4 * hsz <= _ONE_PASS_GATES
    gt = np.empty((batch_sizes[0], hsz), dtype) if one_pass else None
    steps = range(n - 1, -1, -1) if reverse else range(n)
    with np.errstate(over="ignore"):
        for t in steps:
            r = batch_sizes[t]
            sl = slice(offs[t], offs[t] + r)
            hp, cp = (h, c) if uniform else (h[:r], c[:r])
            a = _hidden_matmul(hp, w_hh, xw[sl], acts[sl])
            g = a[:, 2 * hsz:3 * hsz]
            if one_pass:
                gr = gt[:r]
                np.tanh(g, out=gr)
                _sigmoid_in_loop(a)
                g[...] = gr
            else:
                _sigmoid_in_loop(a[:, :2 * hsz])
                np.tanh(g, out=g)
                _sigmoid_in_loop(a[:, 3 * hsz:])
            cn = cs[sl]
            np.multiply(a[:, hsz:2 * hsz], cp, out=cn)
            cn += a[:, :hsz] * g
            hn = hs[sl] if w_hr is None else full[:r]
            np.tanh(cn, out=hn)
            hn *= a[:, 3 * hsz:]
            if w_hr is not None:   # LSTM with projections: h = (o * tanh(c)) @ W_hr^T
                hn = np.matmul(hn, w_hr.T, out=hs[sl])
            if uniform:
                h, c = hn, cn
            else:
                h[:r] = hn
                c[:r] = cn
    if uniform:   # h_n, c_n are their own arrays, not views of the outputs
        h = h.copy()
        c = c.copy()
    return hs, h, c, acts, cs


def _prev_all(states, init, batch_sizes, reverse):
    """For every packed row, the state it started its step from (S, H)."""
    n = len(batch_sizes)
    if n and all(b == batch_sizes[0] for b in batch_sizes):   # padded batch: one shifted copy
        b = batch_sizes[0]
        prev = np.empty_like(states)
        if reverse:
            prev[:-b] = states[b:]
            prev[-b:] = init[:b]
        else:
            prev[b:] = states[:-b]
            prev[:b] = init[:b]
        return prev
    offs = _offsets(batch_sizes)
    prev = np.empty_like(states)
    for t in range(n):
        prev[offs[t]:offs[t + 1]] = _prev_rows(states, init, offs, batch_sizes, t, reverse)
    return prev


def _lstm_backward(grads, out, xw, h0, c0, w_hh, w_hr=None, batch_sizes=(), reverse=False):
    ghs, ghn, gcn = grads
    hs, _, _, acts, cs = out
    hsz = c0.shape[1]
    offs = _offsets(batch_sizes)
    dtype = acts.dtype
    hprev = _prev_all(hs, h0, batch_sizes, reverse)
    cprev = _prev_all(cs, c0, batch_sizes, reverse)
    # Everything that does not depend on the incoming gradient is computed for all
    # steps at once (large vectorised passes); the time loop keeps ~6 small ops + 1 GEMM.
    i, f, g, o = acts[:, :hsz], acts[:, hsz:2 * hsz], acts[:, 2 * hsz:3 * hsz], acts[:, 3 * hsz:]
    tc = np.tanh(cs)
    fac = np.empty((acts.shape[0], 3, hsz), dtype)          # d(i, f, g pre-activations)/dc
    np.multiply(g, i * (1.0 - i), out=fac[:, 0])
    np.multiply(cprev, f * (1.0 - f), out=fac[:, 1])
    np.multiply(i, 1.0 - g * g, out=fac[:, 2])
    fo = tc * (o * (1.0 - o))                                # d(o pre-activation)/dh
    oc = o * (1.0 - tc * tc)                                 # dc/dh through h = o * tanh(c)
    hfull = None if w_hr is None else o * tc             # unprojected outputs, for dW_hr
    dhs = None if w_hr is None else np.empty(hs.shape, dtype)
    del tc
    dh = np.zeros(h0.shape, dtype) if ghn is None else np.array(ghn, dtype=dtype)
    dc = np.zeros(c0.shape, dtype) if gcn is None else np.array(gcn, dtype=dtype)
    dgates = np.empty(acts.shape, dtype)
    steps = range(len(batch_sizes)) if reverse else range(len(batch_sizes) - 1, -1, -1)
    for t in steps:
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        dht = dh[:r]
        if ghs is not None:
            dht += ghs[sl]
        d = dgates[sl]
        dfull = dht
        if w_hr is not None:
            dhs[sl] = dht
            dfull = dht @ w_hr
        np.multiply(dfull, fo[sl], out=d[:, 3 * hsz:])
        dct = dfull * oc[sl]
        dct += dc[:r]
        np.multiply(dct[:, None, :], fac[sl], out=d[:, :3 * hsz].reshape(r, 3, hsz))
        np.multiply(dct, f[sl], out=dc[:r])
        np.matmul(d, w_hh, out=dht)
    dw = dgates.T @ hprev
    dwr = None if w_hr is None else dhs.T @ hfull
    return [dgates, dh, dc, dw, dwr]


def _lstm_forward_k(xw, h0, c0, w_hh, w_hr=None, batch_sizes=(), reverse=False):
    """:func:`_lstm_forward` with each step's gate math in one compiled pass (``_K``).

    Per step: the hidden product into a preallocated buffer (float32: ``W @ h.T``, see
    :func:`_hidden_matmul`), then ``lstm_forward`` adds ``xw``, applies the gates and writes
    the step's rows of ``acts``, ``cs`` and ``hs`` in place.
    """
    hsz = c0.shape[1]
    n = len(batch_sizes)
    dtype = np.result_type(xw.dtype, w_hh.dtype)
    xw = xw.astype(dtype, copy=False)
    acts = np.empty(xw.shape, dtype)
    hs = np.empty((xw.shape[0], h0.shape[1]), dtype)
    cs = np.empty((xw.shape[0], hsz), dtype)
    uniform = batch_sizes.count(batch_sizes[0]) == n and h0.shape[0] == batch_sizes[0]
    if uniform:
        h = h0 if h0.dtype == dtype else h0.astype(dtype)   # read, never written
        c = c0 if c0.dtype == dtype else c0.astype(dtype)
    else:
        h = np.array(h0, dtype=dtype)
        c = np.array(c0, dtype=dtype)
    full = None if w_hr is None else np.empty((c0.shape[0], hsz), dtype)
    f32 = dtype == np.float32
    prod = np.empty(4 * hsz * batch_sizes[0], dtype) if f32 else None   # (4H, r) products
    wt = w_hh.T
    step = _K.lstm_forward
    if uniform and w_hr is None and batch_sizes[0] > 0:
        # Equal steps (a padded batch, one sequence): the whole loop in one call, which per
        # step calls matmul on fixed arrays (the product reads ``hbuf``, the step's h) and
        # runs the gates; ~3 us less per step at batch 1 (a step costs ~11 us there) than
        # the loop below with its per-step views and argument checks.
        b0 = batch_sizes[0]
        hbuf = np.array(h, dtype=dtype)   # h_n at the end: an array of its own
        if f32 and _row_products(w_hh, b0):   # the products inside the kernel
            mm, hw = (np.ascontiguousarray(w_hh),), None
        elif f32 and _mkl_steps(w_hh, b0, True):
            # W_hh^T stored once in MKL's packed layout (H 256, batch 32: 99 against 136 us a
            # step, packing ~80 us), each step's product written by MKL into the step's rows
            # of acts inside the kernel; a plain MKL product where the library cannot pack
            pb = _gemm.pack_operand(wt, b0) if n >= 4 else None
            if pb is None:
                p2 = np.empty((b0, 4 * hsz), dtype)
                mm, hw = (_gemm.matmul_into, hbuf, wt, p2), p2
            else:
                mm, hw = (pb,), None
        elif f32 and _packed_steps(w_hh, n, b0, 4 * hsz):
            # W_hh packed once, then h @ W_hh^T per step in our own kernel: OpenBLAS repacks
            # all of W_hh at every step (~20% of the step's product at batch 32, H 256)
            p2 = np.empty((b0, 4 * hsz), dtype)
            mm, hw = (_K.gemm_packed, hbuf, _packed(w_hh), p2), p2
        elif f32:
            p2 = prod.reshape(4 * hsz, b0)
            mm, hw = (np.matmul, w_hh, hbuf.T, p2), p2.T
        else:
            p2 = np.empty((b0, 4 * hsz), dtype)
            mm, hw = (np.matmul, hbuf, wt, p2), p2
        _K.lstm_sequence(mm, hw, xw, c, acts, hs, cs, hbuf, reverse)
        last = slice(0, b0) if reverse else slice((n - 1) * b0, n * b0)
        return hs, hbuf, cs[last].copy(), acts, cs
    offs = _offsets(batch_sizes)
    mk = f32 and _mkl_steps(w_hh, _MKL_FWD_ROWS, True)
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        hp, cp = (h, c) if uniform else (h[:r], c[:r])
        a = acts[sl]
        if mk and r >= _MKL_FWD_ROWS:
            hw = _gemm.matmul_into(hp, wt, out=prod[:4 * hsz * r].reshape(r, 4 * hsz))
        elif f32:
            hw = np.matmul(w_hh, hp.T, out=prod[:4 * hsz * r].reshape(4 * hsz, r)).T
        else:
            hw = np.matmul(hp, wt, out=a)   # the kernel reads each row before writing it
        cn = cs[sl]
        hn = hs[sl] if w_hr is None else full[:r]
        step(hw, xw[sl], cp, a, cn, hn)
        if w_hr is not None:   # LSTM with projections: h = (o * tanh(c)) @ W_hr^T
            hn = np.matmul(hn, w_hr.T, out=hs[sl])
        if uniform:
            h, c = hn, cn
        else:
            h[:r] = hn
            c[:r] = cn
    if uniform:   # h_n, c_n are their own arrays, not views of the outputs
        h = h.copy()
        c = c.copy()
    return hs, h, c, acts, cs


def _lstm_backward_k(grads, out, xw, h0, c0, w_hh, w_hr=None, batch_sizes=(), reverse=False):
    """:func:`_lstm_backward` with each step's pointwise back-propagation in one compiled
    pass (``lstm_backward``: it recomputes ``tanh(c)`` instead of reading precomputed
    factors), then the step's GEMM ``dgates @ W_hh``."""
    ghs, ghn, gcn = grads
    hs, _, _, acts, cs = out
    hsz = c0.shape[1]
    n = len(batch_sizes)
    dtype = acts.dtype
    # equal steps: a step's previous states are rows of hs/cs (or h0/c0), read in place
    # instead of shifted copies of both (2 x 1.6 MB at batch 32, H 256, 50 steps)
    b0 = batch_sizes[0]
    uniform = batch_sizes.count(b0) == n and h0.shape[0] == b0 and n > 1
    if uniform:
        hprev = None
        c0r = c0[:b0] if c0.dtype == dtype else c0[:b0].astype(dtype)
        if w_hr is None and dtype == np.float32 and _row_products(w_hh, b0):
            # the whole time loop, products included, in one call (see _row_products)
            if ghs is not None and ghs.dtype != dtype:
                ghs = ghs.astype(dtype)
            dh = np.zeros(h0.shape, dtype) if ghn is None else np.array(ghn, dtype=dtype)
            dc = np.zeros(c0.shape, dtype) if gcn is None else np.array(gcn, dtype=dtype)
            dgates = np.empty(acts.shape, dtype)
            _K.lstm_backward_sequence(np.ascontiguousarray(w_hh), ghs, acts, cs, c0r, dgates, dh, dc,
                                      reverse)
            return [dgates, dh, dc, _uniform_dw(dgates, hs, h0, b0, dtype, reverse), None]
    else:
        hprev = _prev_all(hs, h0, batch_sizes, reverse)
        cprev = _prev_all(cs, c0, batch_sizes, reverse)
    if ghs is not None and ghs.dtype != dtype:
        ghs = ghs.astype(dtype)
    hfull = None if w_hr is None else acts[:, 3 * hsz:] * np.tanh(cs)   # for dW_hr
    dhs = None if w_hr is None else np.empty(hs.shape, dtype)
    dh = np.zeros(h0.shape, dtype) if ghn is None else np.array(ghn, dtype=dtype)
    dc = np.zeros(c0.shape, dtype) if gcn is None else np.array(gcn, dtype=dtype)
    dgates = np.empty(acts.shape, dtype)
    offs = _offsets(batch_sizes)
    step = _K.lstm_backward
    # dh = dgates @ W_hh per step from W_hh^T packed once (see _lstm_forward_k); its width is
    # W_hh's columns: H, or the projection size
    mk = _mkl_steps(w_hh, b0, False) if dtype == np.float32 else False
    wp = _packed(w_hh.T) if not mk and dtype == np.float32 and _packed_steps(w_hh, n, b0, w_hh.shape[1]) \
        else None
    for t in (range(len(batch_sizes)) if reverse else range(len(batch_sizes) - 1, -1, -1)):
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        dht = dh[:r]
        g = None if ghs is None else ghs[sl]
        dfull = dht
        if w_hr is not None:
            if g is not None:
                dht += g
                g = None
            dhs[sl] = dht
            dfull = dht @ w_hr
        d = dgates[sl]
        dct = dc[:r]
        if uniform:
            first = t == (n - 1 if reverse else 0)
            p = offs[t] + (b0 if reverse else -b0)
            cp = c0r if first else cs[p:p + b0]
        else:
            cp = cprev[sl]
        step(dfull, g, dct, acts[sl], cs[sl], cp, d, dct)   # dc_prev over dc, in place
        if mk:
            _gemm.matmul_into(d, w_hh, out=dht)
        elif wp is None:
            np.matmul(d, w_hh, out=dht)
        else:
            _K.gemm_packed(d, wp, dht)
    # the weight gradients: MKL where active (matmul2d), else the same NumPy products
    dw = _uniform_dw(dgates, hs, h0, b0, dtype, reverse) if uniform else _gemm.matmul2d(dgates.T, hprev)
    dwr = None if w_hr is None else _gemm.matmul2d(dhs.T, hfull)
    return [dgates, dh, dc, dw, dwr]


def _uniform_dw(dgates, hs, h0, b0, dtype, reverse):
    """dW_hh = dgates^T @ (previous h of every row) for equal steps of ``b0`` rows: the
    shifted rows of ``hs``, then ``h0``.

    Below 8 rows a step, one GEMM over a copy of the previous states (small): the product
    of the first step's rows alone would be a (4H, b0) @ (b0, H) GEMM with an inner size of
    1-7, which NumPy runs outside BLAS at b0 = 1 (a (4H, 1) transposed view is not
    BLAS-able: ~175-200 us for 512 x 128 against ~40 us for the whole GEMM)."""
    h0r = h0[:b0] if h0.dtype == dtype else h0[:b0].astype(dtype)
    if b0 < 8:
        hprev = np.empty(hs.shape, dtype)
        if reverse:
            hprev[:-b0] = hs[b0:]
            hprev[-b0:] = h0r
        else:
            hprev[b0:] = hs[:-b0]
            hprev[:b0] = h0r
        return _gemm.matmul2d(dgates.T, hprev)
    mm = _gemm.matmul2d   # MKL where active, else NumPy's @
    if reverse:
        dw = mm(dgates[:-b0].T, hs[b0:])
        dw += mm(dgates[-b0:].T, h0r)
    else:
        dw = mm(dgates[b0:].T, hs[:-b0])
        dw += mm(dgates[:b0].T, h0r)
    return dw


def _lstm_forward_any(xw, h0, c0, w_hh, w_hr=None, batch_sizes=(), reverse=False):
    """The layer's implementation: the kernel path when it applies, else the NumPy one."""
    if _K is not None and batch_sizes and np.result_type(xw.dtype, w_hh.dtype) in _KDT:
        return _lstm_forward_k(xw, h0, c0, w_hh, w_hr, batch_sizes, reverse)
    return _lstm_forward(xw, h0, c0, w_hh, w_hr, batch_sizes, reverse)


def _lstm_backward_any(grads, out, xw, h0, c0, w_hh, w_hr=None, batch_sizes=(), reverse=False):
    if _K is not None and batch_sizes and out[3].dtype in _KDT:
        return _lstm_backward_k(grads, out, xw, h0, c0, w_hh, w_hr, batch_sizes, reverse)
    return _lstm_backward(grads, out, xw, h0, c0, w_hh, w_hr, batch_sizes, reverse)


def _lstm_reference(xw, h0, c0, w_hh, w_hr=None, batch_sizes=(), reverse=False):
    """The same layer as differentiable primitives (used for higher-order gradients)."""
    hsz = c0.shape[1]

    def cell(x, hw, h, c):
        gates = x + hw
        i = E.sigmoid(gates[:, :hsz])
        f = E.sigmoid(gates[:, hsz:2 * hsz])
        g = E.tanh(gates[:, 2 * hsz:3 * hsz])
        o = E.sigmoid(gates[:, 3 * hsz:])
        c2 = f * c + i * g
        h2 = o * E.tanh(c2)
        return (h2 if w_hr is None else h2 @ w_hr.mT), c2

    with enable_grad():
        hs, h, c = _scan(cell, xw, [h0, c0], w_hh, batch_sizes, reverse)
    return hs, h[0], h[1]


def _scan(cell, xw, init, w_hh, batch_sizes, reverse, extra=None):
    """Unrolled loop over packed steps with differentiable ops (reference path)."""
    offs = _offsets(batch_sizes)
    wt = w_hh.mT
    state = list(init)
    outs = [None] * len(batch_sizes)
    steps = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    for t in steps:
        r = batch_sizes[t]
        cur = [s[:r] for s in state]
        hw = cur[0] @ wt
        if extra is not None:
            hw = hw + extra
        new = cell(xw[offs[t]:offs[t] + r], hw, *cur)
        new = list(new) if isinstance(new, tuple) else [new]
        outs[t] = new[0]
        state = [n if n.shape[0] == s.shape[0] else cat([n, s[r:]], 0) for n, s in zip(new, state, strict=True)]
    return cat(outs, 0), state, None


lstm_layer_p = _FusedRecurrent("lstm_layer", _lstm_forward_any, _lstm_backward_any, _lstm_reference, 3)


def lstm_layer(xw, h0, c0, w_hh, batch_sizes, reverse=False, w_hr=None):
    """Run one LSTM direction over packed pre-activations ``xw = x @ W_ih^T + b`` (S, 4H).

    Gate order is PyTorch's (i, f, g, o).  With ``w_hr`` (P, H) the hidden state is
    projected (``proj_size``).  Returns ``(outputs (S, H or P), h_n, c_n)``.
    """
    return lstm_layer_sizes(xw, h0, c0, w_hh, tuple(int(b) for b in batch_sizes), bool(reverse), w_hr)


def lstm_layer_sizes(xw, h0, c0, w_hh, batch_sizes, reverse, w_hr=None):
    """:func:`lstm_layer` with ``batch_sizes`` already a tuple of Python ints and ``reverse``
    a bool (nn.LSTM's call: no conversion per call)."""
    hs, hn, cn, _, _ = bind(lstm_layer_p, (xw, h0, c0, w_hh, w_hr),
                            {"batch_sizes": batch_sizes, "reverse": reverse})
    return hs, hn, cn


# ---------------------------------------------------------------------------
# GRU:  r, z = sigmoid(xw + hw);  n = tanh(xw_n + r * hw_n);  h' = (1 - z) * n + z * h
# (hw = h @ W_hh^T + b_hh, so b_hn sits inside r * (...), as in PyTorch)
# ---------------------------------------------------------------------------

def _gru_forward(xw, h0, w_hh, b_hh, batch_sizes=(), reverse=False):
    hsz = h0.shape[1]
    offs = _offsets(batch_sizes)
    dtype = np.result_type(xw.dtype, w_hh.dtype)
    acts = np.empty(xw.shape, dtype)
    hwn = np.empty((xw.shape[0], hsz), dtype)
    hs = np.empty((xw.shape[0], hsz), dtype)
    h = np.array(h0, dtype=dtype)
    wt = w_hh.T
    steps = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    with np.errstate(over="ignore"):   # once per layer, not per step (_sigmoid_in_loop)
        for t in steps:
            r = batch_sizes[t]
            sl = slice(offs[t], offs[t] + r)
            hw = h[:r] @ wt if b_hh is None else _hidden_matmul(h[:r], w_hh, b_hh, np.empty((r, wt.shape[1]), dtype))
            a = acts[sl]
            x = xw[sl]
            np.add(x[:, :2 * hsz], hw[:, :2 * hsz], out=a[:, :2 * hsz])
            _sigmoid_in_loop(a[:, :2 * hsz])
            hwn[sl] = hw[:, 2 * hsz:]
            n = a[:, 2 * hsz:]
            np.multiply(a[:, :hsz], hw[:, 2 * hsz:], out=n)
            n += x[:, 2 * hsz:]
            np.tanh(n, out=n)
            z = a[:, hsz:2 * hsz]
            hn = hs[sl]
            np.subtract(h[:r], n, out=hn)
            hn *= z
            hn += n
            h[:r] = hn
    return hs, h, acts, hwn


def _gru_backward(grads, out, xw, h0, w_hh, b_hh, batch_sizes=(), reverse=False):
    ghs, ghn = grads
    hs, _, acts, hwn = out
    hsz = h0.shape[1]
    offs = _offsets(batch_sizes)
    dtype = acts.dtype
    dh = np.zeros(h0.shape, dtype) if ghn is None else np.array(ghn, dtype=dtype)
    dxw = np.empty(acts.shape, dtype)
    dhw = np.empty(acts.shape, dtype)
    hprev = np.empty(hs.shape, dtype)
    steps = range(len(batch_sizes)) if reverse else range(len(batch_sizes) - 1, -1, -1)
    for t in steps:
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        if ghs is not None:
            dh[:r] += ghs[sl]
        a = acts[sl]
        rg, z, n = a[:, :hsz], a[:, hsz:2 * hsz], a[:, 2 * hsz:]
        hp = _prev_rows(hs, h0, offs, batch_sizes, t, reverse)
        hprev[sl] = hp
        dht = dh[:r]
        dx = dxw[sl]
        dw = dhw[sl]
        # n: dn_pre = dh * (1 - z) * (1 - n^2)
        dnp = dx[:, 2 * hsz:]
        np.multiply(dht, 1.0 - z, out=dnp)
        dnp *= 1.0 - n * n
        # z: dz_pre = dh * (h_prev - n) * z * (1 - z)
        np.subtract(hp, n, out=dx[:, hsz:2 * hsz])
        dx[:, hsz:2 * hsz] *= dht
        dx[:, hsz:2 * hsz] *= z * (1.0 - z)
        # r: dr_pre = dn_pre * hw_n * r * (1 - r)
        np.multiply(dnp, hwn[sl], out=dx[:, :hsz])
        dx[:, :hsz] *= rg * (1.0 - rg)
        dw[:, :2 * hsz] = dx[:, :2 * hsz]
        np.multiply(dnp, rg, out=dw[:, 2 * hsz:])
        dhp = dht * z
        dhp += dw @ w_hh
        dh[:r] = dhp
    dwh = dhw.T @ hprev
    dbh = dhw.sum(0) if b_hh is not None else None
    return [dxw, dh, dwh, dbh]


def _gru_forward_k(xw, h0, w_hh, b_hh, batch_sizes=(), reverse=False):
    """:func:`_gru_forward` with each step's gate math in one compiled pass (``gru_forward``,
    which also adds the (3H,) ``b_hh`` to each row of the product)."""
    hsz = h0.shape[1]
    offs = _offsets(batch_sizes)
    n = len(batch_sizes)
    dtype = np.result_type(xw.dtype, w_hh.dtype)
    xw = xw.astype(dtype, copy=False)
    acts = np.empty(xw.shape, dtype)
    hwn = np.empty((xw.shape[0], hsz), dtype)
    hs = np.empty((xw.shape[0], hsz), dtype)
    uniform = batch_sizes.count(batch_sizes[0]) == n and h0.shape[0] == batch_sizes[0]
    if uniform:
        h = h0 if h0.dtype == dtype else h0.astype(dtype)   # read, never written
    else:
        h = np.array(h0, dtype=dtype)
    wt = w_hh.T
    b0 = batch_sizes[0]
    # the NumPy path's products: h @ W^T without a bias; with one, float32 as W @ h.T
    transposed = b_hh is not None and dtype == np.float32
    prod = np.empty(3 * hsz * b0, dtype)
    bias = None if b_hh is None else b_hh.astype(dtype, copy=False)   # (3H,): every row
    if uniform and b0 > 0:
        # equal steps: the whole loop in one call (see _lstm_forward_k); hbuf is the step's h
        hbuf = np.array(h, dtype=dtype)   # h_n at the end: an array of its own
        pb = _gemm.pack_operand(wt, b0) if dtype == np.float32 and n >= 4 and _mkl_steps(w_hh, b0, True) \
            else None
        if pb is not None:   # MKL, from W_hh^T packed once (see _lstm_forward_k)
            p2 = prod.reshape(b0, 3 * hsz)
            mm, hw = (_gemm.matmul_packed, hbuf, pb, p2), p2
        elif dtype == np.float32 and _packed_steps(w_hh, n, b0, 3 * hsz):   # see _lstm_forward_k
            p2 = prod.reshape(b0, 3 * hsz)
            mm, hw = (_K.gemm_packed, hbuf, _packed(w_hh), p2), p2
        elif transposed:
            p2 = prod.reshape(3 * hsz, b0)
            mm, hw = (np.matmul, w_hh, hbuf.T, p2), p2.T
        else:
            p2 = prod.reshape(b0, 3 * hsz)
            mm, hw = (np.matmul, hbuf, wt, p2), p2
        _K.gru_sequence(mm, hw, xw, bias, acts, hwn, hs, hbuf, reverse)
        return hs, hbuf, acts, hwn
    step = _K.gru_forward
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        hp = h if uniform else h[:r]
        if transposed:
            hw = np.matmul(w_hh, hp.T, out=prod[:3 * hsz * r].reshape(3 * hsz, r)).T
        else:
            hw = np.matmul(hp, wt, out=prod[:3 * hsz * r].reshape(r, 3 * hsz))
        hn = hs[sl]
        step(hw, xw[sl], bias, hp, acts[sl], hwn[sl], hn)
        if uniform:
            h = hn
        else:
            h[:r] = hn
    if uniform:
        h = h.copy()
    return hs, h, acts, hwn


def _gru_backward_k(grads, out, xw, h0, w_hh, b_hh, batch_sizes=(), reverse=False):
    """:func:`_gru_backward` with each step's pointwise math in one compiled pass
    (``gru_backward`` writes ``dh * z`` over ``dh``; the step then adds ``dhw @ W_hh``)."""
    ghs, ghn = grads
    hs, _, acts, hwn = out
    offs = _offsets(batch_sizes)
    dtype = acts.dtype
    if ghs is not None and ghs.dtype != dtype:
        ghs = ghs.astype(dtype)
    dh = np.zeros(h0.shape, dtype) if ghn is None else np.array(ghn, dtype=dtype)
    dxw = np.empty(acts.shape, dtype)
    dhw = np.empty(acts.shape, dtype)
    hprev = _prev_all(hs, h0, batch_sizes, reverse)
    step = _K.gru_backward
    n = len(batch_sizes)
    # dhw @ W_hh per step from W_hh^T packed once (see _lstm_forward_k), into prod, then added
    # MKL where active (see _lstm_backward_k): dht += dhw rows @ W_hh in one product with
    # beta = 1, from W_hh packed once (steps of b0 rows), else through prod
    b0 = batch_sizes[0]
    mk = dtype == np.float32 and _mkl_steps(w_hh, b0, False)
    pb = _gemm.pack_operand(w_hh, b0) if mk and n >= 8 else None
    packed = not mk and dtype == np.float32 and _packed_steps(w_hh, n, b0, w_hh.shape[1])
    wp = _packed(w_hh.T) if packed else None
    prod = np.empty(h0.shape, dtype) if packed or mk else None
    for t in (range(n) if reverse else range(n - 1, -1, -1)):
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        dht = dh[:r]
        dw = dhw[sl]
        step(dht, None if ghs is None else ghs[sl], acts[sl], hwn[sl], hprev[sl], dxw[sl], dw, dht)
        if pb is not None and r == b0:
            _gemm.matmul_packed(dw, pb, dht, 1.0)
        elif mk:
            dht += _gemm.matmul_into(dw, w_hh, out=prod[:r])
        elif wp is None:
            dht += dw @ w_hh
        else:
            dht += _K.gemm_packed(dw, wp, prod[:r])
    dwh = _gemm.matmul2d(dhw.T, hprev)   # MKL where active, else NumPy's @
    dbh = dhw.sum(0) if b_hh is not None else None
    return [dxw, dh, dwh, dbh]


def _gru_forward_any(xw, h0, w_hh, b_hh, batch_sizes=(), reverse=False):
    """The layer's implementation: the kernel path when it applies, else the NumPy one."""
    if _K is not None and batch_sizes and np.result_type(xw.dtype, w_hh.dtype) in _KDT:
        return _gru_forward_k(xw, h0, w_hh, b_hh, batch_sizes, reverse)
    return _gru_forward(xw, h0, w_hh, b_hh, batch_sizes, reverse)


def _gru_backward_any(grads, out, xw, h0, w_hh, b_hh, batch_sizes=(), reverse=False):
    if _K is not None and batch_sizes and out[2].dtype in _KDT:
        return _gru_backward_k(grads, out, xw, h0, w_hh, b_hh, batch_sizes, reverse)
    return _gru_backward(grads, out, xw, h0, w_hh, b_hh, batch_sizes, reverse)


def _gru_reference(xw, h0, w_hh, b_hh, batch_sizes=(), reverse=False):
    hsz = h0.shape[1]

    def cell(x, hw, h):
        r = E.sigmoid(x[:, :hsz] + hw[:, :hsz])
        z = E.sigmoid(x[:, hsz:2 * hsz] + hw[:, hsz:2 * hsz])
        n = E.tanh(x[:, 2 * hsz:] + r * hw[:, 2 * hsz:])
        return (1 - z) * n + z * h

    with enable_grad():
        hs, state, _ = _scan(cell, xw, [h0], w_hh, batch_sizes, reverse, extra=b_hh)
    return hs, state[0]


gru_layer_p = _FusedRecurrent("gru_layer", _gru_forward_any, _gru_backward_any, _gru_reference, 2)


def gru_layer(xw, h0, w_hh, b_hh, batch_sizes, reverse=False):
    """Run one GRU direction over packed ``xw = x @ W_ih^T + b_ih`` (S, 3H), gate order r, z, n.

    Returns ``(outputs (S, H), h_n)``.
    """
    hs, hn, _, _ = bind(gru_layer_p, (xw, h0, w_hh, b_hh),
                        {"batch_sizes": tuple(int(b) for b in batch_sizes), "reverse": bool(reverse)})
    return hs, hn


# ---------------------------------------------------------------------------
# Elman RNN:  h' = act(xw + h @ W_hh^T)
# ---------------------------------------------------------------------------

def _rnn_forward(xw, h0, w_hh, batch_sizes=(), reverse=False, nonlinearity="tanh"):
    offs = _offsets(batch_sizes)
    dtype = np.result_type(xw.dtype, w_hh.dtype)
    hs = np.empty((xw.shape[0], h0.shape[1]), dtype)
    h = np.array(h0, dtype=dtype)
    steps = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    for t in steps:
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        hn = _hidden_matmul(h[:r], w_hh, xw[sl], hs[sl])
        if nonlinearity == "tanh":
            np.tanh(hn, out=hn)
        else:
            np.maximum(hn, 0, out=hn)
        h[:r] = hn
    return hs, h


def _rnn_backward(grads, out, xw, h0, w_hh, batch_sizes=(), reverse=False, nonlinearity="tanh"):
    ghs, ghn = grads
    hs, _ = out
    offs = _offsets(batch_sizes)
    dtype = hs.dtype
    dh = np.zeros(h0.shape, dtype) if ghn is None else np.array(ghn, dtype=dtype)
    dpre = np.empty(hs.shape, dtype)
    hprev = np.empty(hs.shape, dtype)
    steps = range(len(batch_sizes)) if reverse else range(len(batch_sizes) - 1, -1, -1)
    for t in steps:
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        if ghs is not None:
            dh[:r] += ghs[sl]
        hprev[sl] = _prev_rows(hs, h0, offs, batch_sizes, t, reverse)
        d = dpre[sl]
        h = hs[sl]
        if nonlinearity == "tanh":
            np.multiply(dh[:r], 1.0 - h * h, out=d)
        else:
            np.multiply(dh[:r], h > 0, out=d)
        np.matmul(d, w_hh, out=dh[:r])
    return [dpre, dh, dpre.T @ hprev]


def _rnn_forward_k(xw, h0, w_hh, batch_sizes=(), reverse=False, nonlinearity="tanh"):
    """:func:`_rnn_forward` with the step's ``act(hw + xw)`` in one compiled pass."""
    offs = _offsets(batch_sizes)
    n = len(batch_sizes)
    dtype = np.result_type(xw.dtype, w_hh.dtype)
    xw = xw.astype(dtype, copy=False)
    hsz = h0.shape[1]
    hs = np.empty((xw.shape[0], hsz), dtype)
    uniform = batch_sizes.count(batch_sizes[0]) == n and h0.shape[0] == batch_sizes[0]
    if uniform:
        h = h0 if h0.dtype == dtype else h0.astype(dtype)   # read, never written
    else:
        h = np.array(h0, dtype=dtype)
    f32 = dtype == np.float32
    prod = np.empty(hsz * batch_sizes[0], dtype) if f32 else None
    wt = w_hh.T
    relu = nonlinearity != "tanh"
    step = _K.rnn_forward
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        hp = h if uniform else h[:r]
        hn = hs[sl]
        if f32:
            hw = np.matmul(w_hh, hp.T, out=prod[:hsz * r].reshape(hsz, r)).T
        else:
            hw = np.matmul(hp, wt, out=hn)
        step(hw, xw[sl], hn, relu)
        if uniform:
            h = hn
        else:
            h[:r] = hn
    if uniform:
        h = h.copy()
    return hs, h


def _rnn_backward_k(grads, out, xw, h0, w_hh, batch_sizes=(), reverse=False, nonlinearity="tanh"):
    """:func:`_rnn_backward` with the step's ``(dh + g) * act'`` in one compiled pass."""
    ghs, ghn = grads
    hs, _ = out
    offs = _offsets(batch_sizes)
    dtype = hs.dtype
    if ghs is not None and ghs.dtype != dtype:
        ghs = ghs.astype(dtype)
    dh = np.zeros(h0.shape, dtype) if ghn is None else np.array(ghn, dtype=dtype)
    dpre = np.empty(hs.shape, dtype)
    hprev = _prev_all(hs, h0, batch_sizes, reverse)
    relu = nonlinearity != "tanh"
    step = _K.rnn_backward
    for t in (range(len(batch_sizes)) if reverse else range(len(batch_sizes) - 1, -1, -1)):
        r = batch_sizes[t]
        sl = slice(offs[t], offs[t] + r)
        d = dpre[sl]
        step(dh[:r], None if ghs is None else ghs[sl], hs[sl], d, relu)
        np.matmul(d, w_hh, out=dh[:r])
    return [dpre, dh, dpre.T @ hprev]


def _rnn_forward_any(xw, h0, w_hh, batch_sizes=(), reverse=False, nonlinearity="tanh"):
    """The layer's implementation: the kernel path when it applies, else the NumPy one."""
    if _K is not None and batch_sizes and np.result_type(xw.dtype, w_hh.dtype) in _KDT:
        return _rnn_forward_k(xw, h0, w_hh, batch_sizes, reverse, nonlinearity)
    return _rnn_forward(xw, h0, w_hh, batch_sizes, reverse, nonlinearity)


def _rnn_backward_any(grads, out, xw, h0, w_hh, batch_sizes=(), reverse=False, nonlinearity="tanh"):
    if _K is not None and batch_sizes and out[0].dtype in _KDT:
        return _rnn_backward_k(grads, out, xw, h0, w_hh, batch_sizes, reverse, nonlinearity)
    return _rnn_backward(grads, out, xw, h0, w_hh, batch_sizes, reverse, nonlinearity)


def _rnn_reference(xw, h0, w_hh, batch_sizes=(), reverse=False, nonlinearity="tanh"):
    act = E.tanh if nonlinearity == "tanh" else E.relu

    def cell(x, hw, h):
        return act(x + hw)

    with enable_grad():
        hs, state, _ = _scan(cell, xw, [h0], w_hh, batch_sizes, reverse)
    return hs, state[0]


rnn_layer_p = _FusedRecurrent("rnn_layer", _rnn_forward_any, _rnn_backward_any, _rnn_reference, 2)


def rnn_layer(xw, h0, w_hh, batch_sizes, reverse=False, nonlinearity="tanh"):
    """Run one Elman-RNN direction over packed ``xw = x @ W_ih^T + b_ih + b_hh``.

    Returns ``(outputs (S, H), h_n)``.
    """
    return bind(rnn_layer_p, (xw, h0, w_hh),
                {"batch_sizes": tuple(int(b) for b in batch_sizes), "reverse": bool(reverse),
                 "nonlinearity": nonlinearity})


# ---------------------------------------------------------------------------
# One LSTM cell step (nn.LSTMCell), as two nodes with PyTorch's graph structure
# ---------------------------------------------------------------------------
# c' = sigmoid(f) * c + sigmoid(i) * tanh(g) and h' = sigmoid(o) * tanh(c') as two small
# primitives instead of ~10 elementwise nodes: h' is computed *from* c' (so gradients
# w.r.t. a cell state include the path through h', as in PyTorch), at the cost of two
# nodes.  Rules recompute the gate activations (cheap) instead of saving them.

def _logistic(x):
    """``1 / (1 + exp(-x))`` on an array, PyTorch's formula.

    ``x`` is floored at -700 so ``exp`` cannot overflow (the result there is < 1e-304
    either way); cheaper than an ``np.errstate`` block on these small arrays.
    """
    return 1.0 / (1.0 + np.exp(-np.maximum(x, -700.0)))


@primitive("lstm_gate_sigmoid", promote="float", save_output=True)
def _gate_sigmoid_p(x):
    """The logistic function for the cell rules (lighter than ``sigmoid``'s stable form)."""
    return _logistic(x)


_gate_sigmoid_p.defvjp(lambda g, out, x: g * out * (1.0 - out))


@primitive("lstm_cell_state", promote="same", save_inputs=True)
def lstm_cell_state_p(gates, c):
    """``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)`` from pre-activation ``gates`` (i, f, g, o)."""
    h = c.shape[-1]
    if _cell_kernel_ok(gates, c):
        out = np.empty(c.shape, c.dtype)
        _K.lstm_cell_state(gates, c, out)
        return out
    return _logistic(gates[:, h:2 * h]) * c + _logistic(gates[:, :h]) * np.tanh(gates[:, 2 * h:3 * h])


def _cell_kernel_ok(gates, c, gr=None):
    """The cell kernels apply: (B, 4H) gates, (B, H) state (and gradient), one float dtype."""
    xs = (gates, c) if gr is None else (gates, c, gr)
    return (_kernel_ok(*xs) and gates.shape[1] == 4 * c.shape[1]
            and all(x.shape == c.shape for x in xs[1:]) and gates.shape[0] == c.shape[0])


def _plain(*xs) -> bool:
    """All rule inputs are arrays (a plain ``backward()``, not ``create_graph``)."""
    return all(type(x) is np.ndarray for x in xs)


# The cell rules are written with primitives so that they also record under create_graph; on
# arrays (every plain backward()) they run straight NumPy instead, writing the (B, 4H) gates
# gradient into one array (no primitive dispatch per product, no cat of four quarters): the
# same products in the same order, and exact zeros for the quarter a rule does not reach.

def _state_vjp_gates(gr, out, gates, c):
    h = c.shape[-1]
    if _plain(gr, gates, c):
        g4 = np.empty(gates.shape, np.result_type(gr.dtype, gates.dtype))
        if _cell_kernel_ok(gates, c, gr):
            _K.lstm_cell_state_vjp(gr, gates, c, g4, None)
            return g4
        si, sf = _logistic(gates[:, :h]), _logistic(gates[:, h:2 * h])
        t = np.tanh(gates[:, 2 * h:3 * h])
        np.multiply(gr * t * si, 1.0 - si, out=g4[:, :h])
        np.multiply(gr * c * sf, 1.0 - sf, out=g4[:, h:2 * h])
        np.multiply(gr * si, 1.0 - t * t, out=g4[:, 2 * h:3 * h])
        g4[:, 3 * h:] = 0.0
        return g4
    si, sf = _gate_sigmoid_p(gates[:, :h]), _gate_sigmoid_p(gates[:, h:2 * h])
    t = tanh_p(gates[:, 2 * h:3 * h])
    return cat_p(gr * t * si * (1.0 - si), gr * c * sf * (1.0 - sf), gr * si * (1.0 - t * t),
                 gr * 0.0, dim=1)


def _state_vjp_c(gr, out, gates, c):
    h = c.shape[-1]
    if _plain(gr, gates):
        if _cell_kernel_ok(gates, c, gr):
            dc = np.empty(c.shape, c.dtype)
            _K.lstm_cell_state_vjp(gr, gates, c, None, dc)
            return dc
        return gr * _logistic(gates[:, h:2 * h])
    return gr * _gate_sigmoid_p(gates[:, h:2 * h])


lstm_cell_state_p.defvjp(_state_vjp_gates, _state_vjp_c)


@primitive("lstm_cell_hidden", promote="same", save_inputs=True)
def lstm_cell_hidden_p(gates, c):
    """``h' = sigmoid(o) * tanh(c')``, ``o`` the last quarter of ``gates``."""
    if _cell_kernel_ok(gates, c):
        out = np.empty(c.shape, c.dtype)
        _K.lstm_cell_hidden(gates, c, out)
        return out
    return _logistic(gates[:, 3 * c.shape[-1]:]) * np.tanh(c)


def _hidden_vjp_gates(gr, out, gates, c):
    h = c.shape[-1]
    if _plain(gr, gates, c):
        g4 = np.empty(gates.shape, np.result_type(gr.dtype, gates.dtype))
        if _cell_kernel_ok(gates, c, gr):
            _K.lstm_cell_hidden_vjp(gr, gates, c, g4, None)
            return g4
        so = _logistic(gates[:, 3 * h:])
        g4[:, :3 * h] = 0.0
        np.multiply(gr * np.tanh(c) * so, 1.0 - so, out=g4[:, 3 * h:])
        return g4
    so, t = _gate_sigmoid_p(gates[:, 3 * h:]), tanh_p(c)
    return cat_p(gates[:, :3 * h] * 0.0, gr * t * so * (1.0 - so), dim=1)


def _hidden_vjp_c(gr, out, gates, c):
    if _plain(gr, gates, c):
        if _cell_kernel_ok(gates, c, gr):
            dc = np.empty(c.shape, c.dtype)
            _K.lstm_cell_hidden_vjp(gr, gates, c, None, dc)
            return dc
        t = np.tanh(c)
        return gr * _logistic(gates[:, 3 * c.shape[-1]:]) * (1.0 - t * t)
    t = tanh_p(c)
    return gr * _gate_sigmoid_p(gates[:, 3 * c.shape[-1]:]) * (1.0 - t * t)


lstm_cell_hidden_p.defvjp(_hidden_vjp_gates, _hidden_vjp_c)


def lstm_cell(gates, c):
    """One LSTM step from 2-D pre-activation ``gates`` (B, 4H) in PyTorch's order (i, f, g, o)
    and the previous cell state ``c`` (B, H); returns ``(h', c')``.

    >>> h, c = lstm_cell(dg.randn(2, 12), dg.zeros(2, 3))
    """
    cn = bind(lstm_cell_state_p, (gates, c), {})
    return bind(lstm_cell_hidden_p, (gates, cn), {}), cn


# -- batching rules (dg.autobatch; the generic rules are in ops/_batching.py) --------------
def _defbatch_rnn():
    from . import _batching as b  # noqa: PLC0415  (keeps this block self-contained)

    for name in ("lstm_layer", "gru_layer", "rnn_layer"):
        R[name].defbatch(b.rnn_step_rule)
    R["lstm_gate_sigmoid"].defbatch(b.elementwise)
    cell = b.merge_leading(lambda prim, params, args: 0)
    R["lstm_cell_state"].defbatch(cell)
    R["lstm_cell_hidden"].defbatch(cell)


_defbatch_rnn()
