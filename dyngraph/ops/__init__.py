"""Primitive operations, grouped by family.  Importing this package registers them all
(every family, so a saved graph loads after only ``import dyngraph``) and installs their
Tensor methods."""

from . import structural  # noqa: F401  (first: the structural primitives every family builds on)
from . import elementwise, inplace, linalg, reduction, shape  # noqa: F401
from . import indexing, sorting, nn, conv, pooling, resampling, rnn  # noqa: F401
from .registry import REGISTRY, Primitive, bind, primitive  # noqa: F401
