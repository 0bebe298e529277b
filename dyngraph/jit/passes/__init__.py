"""Graph passes, run in order by :func:`optimize`.

* :mod:`.dce` -- dead-code elimination;
* :mod:`.cse` -- common-subexpression elimination;
* :mod:`.constant_folding` -- nodes whose inputs are all constants run once at compile time;
* :mod:`.fusion` -- elementwise ops (and matmul) are emitted as direct NumPy calls that
  write into a dying operand's buffer, so a chain of elementwise ops runs in one buffer;
* :mod:`.buffer_reuse` -- liveness: every buffer is freed or reused (``out=``) after its
  last use.
"""

from __future__ import annotations

from .buffer_reuse import buffer_reuse
from .constant_folding import constant_folding
from .cse import cse
from .dce import dce
from .fusion import fusion

__all__ = ["optimize", "dce", "cse", "constant_folding", "fusion", "buffer_reuse"]


def optimize(graph, *, level: int = 2) -> dict:
    """Run the passes in place; return statistics (nodes removed/merged/folded/fused)."""
    stats = {"nodes_in": len(graph.nodes)}
    if level >= 1:
        stats["cse"] = cse(graph)
        stats["folded"] = constant_folding(graph)
        stats["dce"] = dce(graph)
    if level >= 2:
        stats["fused"] = fusion(graph)
        stats["reused"] = buffer_reuse(graph)
    stats["nodes_out"] = len(graph.nodes)
    return stats
