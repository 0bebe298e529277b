"""Named result tuples, like ``torch.return_types`` (``values, indices = x.max(dim=1)``)."""

from __future__ import annotations

from collections import namedtuple

__all__ = ["max", "min", "sort", "topk", "kthvalue", "median", "mode", "aminmax", "var_mean",
           "std_mean", "cummax", "cummin"]


def _vi(name: str):
    cls = namedtuple(name, ["values", "indices"])
    cls.__repr__ = lambda self: (f"dyngraph.return_types.{name}(\nvalues={self.values!r},\n"
                                 f"indices={self.indices!r})")
    return cls


max = _vi("max")
min = _vi("min")
sort = _vi("sort")
topk = _vi("topk")
kthvalue = _vi("kthvalue")
median = _vi("median")
mode = _vi("mode")
cummax = _vi("cummax")
cummin = _vi("cummin")
aminmax = namedtuple("aminmax", ["min", "max"])
var_mean = namedtuple("var_mean", ["var", "mean"])  # PyTorch returns a plain tuple; fields help
std_mean = namedtuple("std_mean", ["std", "mean"])
