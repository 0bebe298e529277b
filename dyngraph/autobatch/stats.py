"""What ``dg.autobatch(stats=True)`` reports."""

from __future__ import annotations

__all__ = ["AutobatchStats"]


class AutobatchStats:
    """Counters of one ``dg.autobatch`` context.

    Attributes:
        nodes: primitive calls recorded as pending nodes.
        cells: calls of ``dg.autobatch.cell`` functions recorded as one node each.
        groups: primitive calls executed (a batched group counts once, a member run
            one by one counts once per member).
        members: pending nodes executed (the sum of all group sizes).
        evaluations: times the scheduler ran (each forced read, backward or exit).
        gathers: index operations that assembled group inputs (one per source group).
        splits: large group outputs cut into one piece per reading group (gradients the
            size of the piece, not of the group).
        map_rounds: batched evaluations that served blocked ``dg.autobatch.map`` tasks.
        forces: why values were forced (``{"item": 3, "backward": 1, ...}``).
        fallbacks: ``{primitive: {reason: members run one by one}}``.
        per_primitive: ``{primitive: [calls, members, seconds]}`` (``table()`` prints it).
        schedule_s / compute_s: seconds in the scheduler's own bookkeeping (grouping,
            gathering) vs inside the primitives' batched calls.

    >>> with dg.autobatch(stats=True) as ab:
    ...     ...
    >>> print(ab.stats)
    """

    def __init__(self):
        self.nodes = 0
        self.cells = 0
        self.groups = 0
        self.members = 0
        self.evaluations = 0
        self.gathers = 0
        self.splits = 0
        self.map_rounds = 0
        self.forces: dict = {}
        self.fallbacks: dict = {}
        self.per_primitive: dict = {}
        self.schedule_s = 0.0
        self.compute_s = 0.0

    def group(self, prim, size: int, count: int = 1, seconds: float = 0.0) -> None:
        self.groups += count
        self.members += size * count
        e = self.per_primitive.get(prim.name)
        if e is None:
            self.per_primitive[prim.name] = [count, size * count, seconds]
        else:
            e[0] += count
            e[1] += size * count
            e[2] += seconds

    def table(self, top: int = 12) -> str:
        """The primitives (and cells) that took the most time: calls, members, ms."""
        rows = sorted(self.per_primitive.items(), key=lambda kv: -kv[1][2])[:top]
        return "\n".join(f"  {name:28s} {g:6d} calls {m:8d} members {s * 1e3:9.1f} ms"
                         for name, (g, m, s) in rows)

    def fallback(self, prim, reason: str, members: int) -> None:
        d = self.fallbacks.setdefault(prim.name, {})
        d[reason] = d.get(reason, 0) + members

    @property
    def average_group_size(self) -> float:
        return self.members / self.groups if self.groups else 0.0

    def as_dict(self) -> dict:
        return {"nodes": self.nodes, "cells": self.cells, "groups": self.groups, "members": self.members,
                "average_group_size": self.average_group_size, "evaluations": self.evaluations, "gathers": self.gathers, "splits": self.splits, "map_rounds": self.map_rounds,
                "forces": dict(self.forces), "fallbacks": {k: dict(v) for k, v in self.fallbacks.items()},
                "schedule_s": self.schedule_s, "compute_s": self.compute_s}

    def __str__(self) -> str:
        lines = [f"autobatch: {self.nodes} nodes recorded ({self.cells} of them cell calls), {self.members} executed in "
                 f"{self.groups} calls (average group {self.average_group_size:.1f}), "
                 f"{self.evaluations} evaluations ({self.map_rounds} for map), {self.gathers} gathers, {self.splits} splits",
                 f"  time: scheduling {self.schedule_s * 1e3:.1f} ms, compute {self.compute_s * 1e3:.1f} ms"]
        if self.forces:
            lines.append("  forced by: " + ", ".join(f"{k} x{v}" for k, v in sorted(self.forces.items())))
        for name, reasons in sorted(self.fallbacks.items()):
            for reason, n in reasons.items():
                lines.append(f"  fallback {name}: {n} members one by one ({reason})")
        return "\n".join(lines)

    __repr__ = __str__
