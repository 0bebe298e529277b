"""Primitive operations, grouped by family.  Importing this package registers them all."""

from . import elementwise, inplace, linalg, reduction, shape  # noqa: F401
from .registry import REGISTRY, Primitive, bind, primitive  # noqa: F401
