"""Helpers shared by tests: conversion between dyngraph, PyTorch and NumPy."""

from __future__ import annotations

import gc

import numpy as np
import torch

import dyngraph as dg

torch.set_num_threads(1)


def to_lib(lib, a, requires_grad=False):
    """A NumPy array as a tensor of ``lib`` (dg or torch); other values pass through."""
    if not isinstance(a, np.ndarray):
        return a
    if lib is dg:
        t = dg.tensor(a.copy())
    else:
        t = torch.from_numpy(a.copy())
    if requires_grad:
        t.requires_grad_(True)
    return t


def to_np(x):
    if isinstance(x, dg.Tensor):
        return x.detach().numpy()
    if isinstance(x, torch.Tensor):
        return x.detach().numpy(force=True)
    return np.asarray(x)


def flat_outputs(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(flat_outputs(o))
        return res
    if hasattr(out, "values") and hasattr(out, "indices") and not isinstance(out, (dg.Tensor, torch.Tensor)):
        return [out.values, out.indices]
    return [out]


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, msg=""):
    a, e = to_np(actual), to_np(expected)
    assert a.shape == e.shape, f"{msg}: shape {a.shape} != expected {e.shape}"
    np.testing.assert_allclose(a.astype(np.float64) if a.dtype != bool else a,
                               e.astype(np.float64) if e.dtype != bool else e,
                               rtol=rtol, atol=atol, err_msg=msg)


def tracked_per_call(fn, n=200):
    """GC-tracked objects each call of ``fn`` leaves alive (its result kept): the
    count that tests of the graph's bookkeeping hold down (``test_gc_nodes.py``)."""
    fn()             # first call: lazy imports and caches
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        before = len(gc.get_objects())
        keep = [fn() for _ in range(n)]
        after = len(gc.get_objects())
    finally:
        if was:
            gc.enable()
    del keep
    return (after - before - 1) / n   # -1: the list ``keep``
