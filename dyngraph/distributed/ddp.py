"""``DistributedDataParallel``: average gradients across ranks during ``backward()``.

How it works (the design of PyTorch DDP, on MPI):

* At construction, rank 0's parameters and buffers are broadcast to all ranks,
  and the parameters are packed, in reverse registration order (roughly the
  order backward produces their gradients), into size-bounded *buckets*.
* Each parameter gets a post-accumulate-grad hook.  When every gradient of a
  bucket has arrived, the bucket's flat buffer starts a non-blocking MPI
  all-reduce (``Iallreduce``) while backward goes on computing the rest:
  communication overlaps computation.  Buckets are always launched in index
  order, because MPI matches collectives by the order they are started.
* When the backward pass finishes (an engine callback), any bucket not yet
  launched -- parameters that got no gradient in this step, e.g. because this
  rank took a different branch of a dynamic graph -- is launched with zeros
  for the missing gradients, all requests are waited for, and the averaged
  gradients are written back into ``.grad``.  No rank ever waits for a
  collective another rank does not start, so different branches never hang.
* ``no_sync()`` skips communication; gradients accumulate locally and the next
  synchronised backward averages the accumulated sum.
* Construction first all-gathers a description of the model (parameter and
  buffer names, shapes, dtypes, ``requires_grad``, and the bucket layout) and
  raises the same ``RuntimeError`` on every rank if any rank differs -- as
  PyTorch does -- before anything of a mismatched size is communicated.  The
  buckets never change afterwards, so the per-step all-reduces need no further
  checks; their waits are bounded by the process group's timeout.
"""

from __future__ import annotations

import contextlib
import json
import time

import numpy as np

from .._core.graph import bump_version
from ..autograd.engine import queue_callback
from ..autograd.grad_mode import STATE, no_grad
from ..autograd.graph import Node
from ..nn.module import Module
from ..tensor import Tensor
from . import collectives as C

__all__ = ["DistributedDataParallel"]


class _Bucket:
    __slots__ = ("params", "offsets", "buffer", "pending", "ready", "request", "arrived")

    def __init__(self, params, dtype):
        self.params = params
        self.offsets = []
        n = 0
        for p in params:
            self.offsets.append((n, n + p._data.size))
            n += p._data.size
        self.buffer = np.zeros(n, dtype)
        self.pending = len(params)
        self.ready = False
        self.request = None
        self.arrived = [False] * len(params)


class DistributedDataParallel(Module):
    """Wrap ``module`` so that every rank trains the same replica on its own data.

    >>> dist.init_process_group()
    >>> model = dist.DistributedDataParallel(Net())
    >>> loss = loss_fn(model(x), y); loss.backward()   # grads averaged over ranks
    >>> opt.step()

    Args:
        module: the model to replicate.
        bucket_cap_mb: upper bound of one communication bucket (MiB).
        broadcast_buffers: re-broadcast rank 0's buffers (e.g. BatchNorm running
            statistics) at every forward in training mode.
        find_unused_parameters: after each forward, walk the graph to find
            parameters the output does not depend on and communicate their
            buckets right away.  Not needed for correctness (unused parameters
            are handled when backward ends) except when *no* parameter of a
            rank receives a gradient in a step.
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, bucket_cap_mb: float = 25.0,
                 find_unused_parameters: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False):
        super().__init__()
        if not C.is_initialized():
            raise RuntimeError(
                "DistributedDataParallel: call dyngraph.distributed.init_process_group() first "
                "(and launch the script with mpiexec -n N)")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self._world = C.get_world_size()
        params = [p for p in module.parameters() if p.requires_grad]
        buckets = self._make_buckets(params, bucket_cap_mb)
        _verify_same_model(module, buckets)
        with no_grad():
            for name, p in module.named_parameters():
                C._broadcast(p, 0, False, check=False, what=f"DistributedDataParallel: broadcast of parameter {name!r}")
            for name, b in module.named_buffers():
                C._broadcast(b, 0, False, check=False, what=f"DistributedDataParallel: broadcast of buffer {name!r}")
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_where", {})
        for bi, bucket in enumerate(self._buckets):
            for pi, p in enumerate(bucket.params):
                self._where[id(p)] = (bi, pi)
        object.__setattr__(self, "_hooks_handles",
                           [p.register_post_accumulate_grad_hook(self._grad_ready) for p in params])
        object.__setattr__(self, "_active", False)
        object.__setattr__(self, "_next_launch", 0)
        object.__setattr__(self, "_callback_queued", False)
        object.__setattr__(self, "last_wait_s", 0.0)

    @staticmethod
    def _make_buckets(params, cap_mb):
        cap = int(cap_mb * 1024 * 1024)
        buckets, current, size, dtype = [], [], 0, None
        for p in reversed(params):
            nbytes = p._data.nbytes
            if current and (p._data.dtype != dtype or size + nbytes > cap):
                buckets.append(_Bucket(current, dtype))
                current, size = [], 0
            dtype = p._data.dtype
            current.append(p)
            size += nbytes
        if current:
            buckets.append(_Bucket(current, dtype))
        return buckets

    # -- forward -------------------------------------------------------------
    def forward(self, *args, **kwargs):
        if self.broadcast_buffers and self.training and self._world > 1:
            with no_grad():
                for b in self.module.buffers():
                    C._broadcast(b, 0, False, check=False, what="DistributedDataParallel: buffer broadcast")
        out = self.module(*args, **kwargs)
        if STATE.grad_enabled and self.require_backward_grad_sync:
            self._prepare_for_backward(out)
        else:
            object.__setattr__(self, "_active", False)
        return out

    def _prepare_for_backward(self, out) -> None:
        for b in self._buckets:
            b.pending = len(b.params)
            b.ready = False
            b.request = None
            b.arrived = [False] * len(b.params)
            b.buffer[...] = 0
        object.__setattr__(self, "_active", True)
        object.__setattr__(self, "_next_launch", 0)
        object.__setattr__(self, "_callback_queued", False)
        if self.find_unused_parameters:
            used = _reachable_leaves(out)
            for p in (p for b in self._buckets for p in b.params):
                if id(p) not in used:
                    self._mark(p, None)

    @contextlib.contextmanager
    def no_sync(self):
        """Accumulate gradients locally (no communication) inside this block."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -- gradient readiness ------------------------------------------------------
    def _grad_ready(self, p: Tensor) -> None:
        if not self._active:
            return
        if not self._callback_queued and STATE.backward_depth > 0:
            object.__setattr__(self, "_callback_queued", True)
            queue_callback(self._finish)
        self._mark(p, p._grad)
        self._progress()

    def _progress(self) -> None:
        # MPI libraries usually advance non-blocking collectives only inside MPI
        # calls: test the launched requests so communication proceeds during backward.
        launched = [b.request for b in self._buckets[:self._next_launch] if b.request is not None]
        if launched:
            C._mpi().Request.Testall(launched)    # completed requests become REQUEST_NULL: harmless

    def _mark(self, p, grad) -> None:
        bi, pi = self._where[id(p)]
        bucket = self._buckets[bi]
        if bucket.arrived[pi]:
            return
        bucket.arrived[pi] = True
        lo, hi = bucket.offsets[pi]
        if grad is not None:
            bucket.buffer[lo:hi] = grad._data.reshape(-1)
        bucket.pending -= 1
        if bucket.pending == 0:
            bucket.ready = True
            self._launch_ready()

    def _launch_ready(self) -> None:
        mpi = C._mpi()
        comm = C._comm()
        while self._next_launch < len(self._buckets) and self._buckets[self._next_launch].ready:
            b = self._buckets[self._next_launch]
            b.request = comm.Iallreduce(mpi.IN_PLACE, b.buffer, op=mpi.SUM)
            object.__setattr__(self, "_next_launch", self._next_launch + 1)

    def _finish(self) -> None:
        """End of backward: launch what is left (zeros for missing grads), wait, write back."""
        if not self._active:
            return
        for b in self._buckets:
            if not b.ready:
                b.pending = 0
                b.ready = True
                b.arrived = [True] * len(b.params)
        self._launch_ready()
        t0 = time.perf_counter()
        n = sum(b.buffer.size for b in self._buckets)
        C._wait([b.request for b in self._buckets],
                f"DistributedDataParallel gradient all_reduce ({len(self._buckets)} buckets, {n} elements)")
        # time spent waiting for communication after backward (benchmarks/distributed.py)
        object.__setattr__(self, "last_wait_s", time.perf_counter() - t0)
        for b in self._buckets:
            b.buffer /= self._world
            for p, (lo, hi) in zip(b.params, b.offsets):
                avg = b.buffer[lo:hi].reshape(p._data.shape)
                if p._grad is None:
                    p._grad = Tensor._make(avg.copy(), False, None, 0)
                else:
                    p._grad._data[...] = avg
                    bump_version(p._grad)
        object.__setattr__(self, "_active", False)


def _model_description(module: Module, buckets) -> dict:
    return {
        "parameters": [[n, list(p.shape), str(p._data.dtype), bool(p.requires_grad)]
                       for n, p in module.named_parameters()],
        "buffers": [[n, list(b.shape), str(b._data.dtype)] for n, b in module.named_buffers()],
        "buckets": [[int(b.buffer.size), str(b.buffer.dtype)] for b in buckets],
    }


def _verify_same_model(module: Module, buckets) -> None:
    """One all-gather of the model description; every rank raises the same error on a mismatch."""
    mine = json.dumps(_model_description(module, buckets)).encode()
    docs = [json.loads(d) for d in C._allgather_bytes(mine, "DistributedDataParallel model check")]
    ref = docs[0]
    problems = []
    for r, doc in enumerate(docs[1:], start=1):
        for kind in ("parameters", "buffers"):
            a, b = ref[kind], doc[kind]
            if len(a) != len(b):
                problems.append(f"rank 0 has {len(a)} {kind}, while rank {r} has {len(b)}")
                continue
            for x, y in zip(a, b):
                if x[1:] != y[1:]:
                    what = "shape {} {}".format(*x[1:3]) + ("" if kind == "buffers" else
                                                               f", requires_grad={x[3]}")
                    other = "shape {} {}".format(*y[1:3]) + ("" if kind == "buffers" else
                                                                f", requires_grad={y[3]}")
                    problems.append(f"{kind[:-1]} {x[0]!r}: rank 0 has {what}, rank {r} has {other}")
                    break
        if not problems and ref["buckets"] != doc["buckets"]:
            problems.append(f"gradient buckets differ (bucket_cap_mb differs?): rank 0 has "
                            f"{ref['buckets']}, rank {r} has {doc['buckets']}")
        if len(problems) >= 4:
            break
    if problems:
        raise RuntimeError("DistributedDataParallel: DDP expects the same model on every rank, but "
                           + "; ".join(problems[:4]))


def _reachable_leaves(out) -> set:
    """ids of the leaf tensors the graph behind ``out`` reaches (iteratively)."""
    roots = []
    stack = [out]
    while stack:
        o = stack.pop()
        if isinstance(o, Tensor):
            roots.append(o)
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
    leaves, seen = set(), set()
    nodes = []
    for t in roots:
        if t._fn is None:
            leaves.add(id(t))
        else:
            nodes.append(t._fn)
    while nodes:
        n = nodes.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for e in n.edges:
            if e is None:
                continue
            if isinstance(e[0], Node):
                nodes.append(e[0])
            else:
                leaves.add(id(e[0]))
    return leaves
