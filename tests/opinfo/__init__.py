"""The op test table: one declarative record per op (the idea of PyTorch's OpInfo).

Each family module (``elementwise.py``, ``reduction.py``...) defines ``OPS``, a
list of :class:`OpInfo`.  ``tests/test_ops.py`` turns every record into
parametrised tests: values and result dtypes against PyTorch, gradients
against PyTorch and finite differences (float64), second-order gradients,
forward-mode jvp, and errors.

A record's ``fn(lib, *args, **kwargs)`` is written once against the shared
PyTorch/dyngraph surface and called with ``lib=dg`` or ``lib=torch``; sample
arrays are converted to the library's tensors first.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Sample:
    """Arguments for one call: arrays become tensors; anything else passes as is."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""


@dataclass
class OpInfo:
    name: str
    fn: Callable[..., Any]
    samples: Callable[[np.random.Generator, np.dtype], list]
    grad: bool = True            # differentiable (checked against torch and finite differences)
    gradgrad: bool = True        # second-order gradients checked too
    dtypes: tuple = ("float32", "float64")
    grad_argnums: tuple | None = None  # which array args require grad (default: all float ones)
    rtol: float = 1e-5
    atol: float = 1e-6
    fd_atol: float = 1e-5        # finite-difference tolerance (float64)
    fd: bool = True              # check against finite differences (needs float64 math)
    compare_dtype: bool = True
    skip_torch: bool = False     # no torch counterpart (values checked by `reference`)
    reference: Callable | None = None  # NumPy reference when torch has none
    int_inputs: bool = False     # samples are integer/bool arrays (no grads)
    nondeterministic_grad_at_ties: bool = False


FAMILIES = ("elementwise", "reduction", "shape", "indexing", "linalg", "nn_ops", "conv_ops")


def all_ops() -> list[OpInfo]:
    ops = []
    for fam in FAMILIES:
        try:
            mod = importlib.import_module(f"tests.opinfo.{fam}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tests.opinfo.{fam}":
                continue
            raise
        ops.extend(mod.OPS)
    names = [o.name for o in ops]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate op records: {dup}"
    return ops


def randn(rng, shape, dtype, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def positive(rng, shape, dtype, lo=0.2, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def noncontig(rng, shape, dtype, lo=-2.0, hi=2.0):
    """A transposed (non-contiguous) array with the given final shape."""
    a = rng.uniform(lo, hi, size=tuple(reversed(shape))).astype(dtype).T
    assert not a.flags.c_contiguous or a.ndim < 2
    return a
