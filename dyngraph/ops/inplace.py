"""``dyngraph.ops.inplace``: the version counters' writer, re-exported.

The in-place machinery (``apply_inplace``: leaf check, version bump, writing into the
tensor's buffer, rebasing a view) and the in-place methods (``add_``, ``x += y``,
``copy_``...) are in :mod:`dyngraph.surface.inplace`; no primitive needs them.  This
module keeps ``bump_version`` importable from here for the optimizers.
"""

from __future__ import annotations

from .._core.graph import bump_version

__all__ = ["bump_version"]
