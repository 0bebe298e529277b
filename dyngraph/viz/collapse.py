"""Find repeated structure in a large graph so it can be drawn as one box per repetition run.

Two detectors, both linear in the graph's size and iterative (no recursion):

1. **Module calls** (when the graph was built inside :func:`dyngraph.viz.record`):
   nodes created inside repeated calls of one module (``cell`` called 500
   times, or ``layers.0`` ... ``layers.11``) form one block per call; runs of
   consecutive, structurally equal blocks collapse to ``"LSTMCell ×500"``.
2. **Periodic critical path** (any graph): the longest path through the graph
   of an unrolled loop passes through every iteration, so its sequence of op
   names is periodic.  The period splits the path into blocks; every other node
   joins the block all of its consumers belong to.  Runs of equal blocks
   collapse to ``"matmul→add→tanh ×25 000"``.  Repeated on what is left until
   nothing more collapses.
3. **Parallel copies** (when a lot is still left): nodes with the same op,
   the same parameters and equivalent consumers (1000 independent branches
   stacked into one tensor) collapse to ``"exp ×1 000"``.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["Group", "find_groups", "fmt_count"]


def fmt_count(n: int) -> str:
    """``25000 -> "25 000"`` (thin grouping, as in the labels)."""
    return f"{n:,}".replace(",", " ")


class Group:
    """A run of structurally equal blocks drawn as one box.

    Attributes:
        blocks: node positions per repetition.
        label: text for the box (``"LSTMCell ×500"``).
        detail: second line (ops per repetition, module path).
        members: set of all node positions in the group.
    """

    __slots__ = ("blocks", "label", "detail", "members", "kind", "head")

    def __init__(self, blocks, label, detail, kind, head):
        self.blocks = blocks
        self.label = label
        self.detail = detail
        self.kind = kind
        self.head = head  # a node (root-side) whose output stands for the group's output
        self.members = {k for b in blocks for k in b}

    @property
    def count(self) -> int:
        return len(self.blocks)

    def __repr__(self) -> str:
        return f"Group({self.label!r}, {len(self.members)} nodes)"


def _ops(n: int) -> str:
    return "1 op" if n == 1 else f"{n} ops"


def _signatures(view):
    codes = {}
    sig = np.empty(len(view), dtype=np.int64)
    for k, node in enumerate(view.nodes):
        key = (view.op_name(k), len(node.edges))
        sig[k] = codes.setdefault(key, len(codes))
    return sig


def _block_key(view, block, block_of, b):
    """A structural fingerprint of one block (op names and what each input comes from)."""
    items = []
    for k in block:
        ins = []
        for src in view.inputs[k]:
            if src is None:
                ins.append("-")
            elif src[0] == "l":
                ins.append("p:" + (view.leaf_name(src[1]) or "leaf"))
            else:
                ins.append("in" if block_of.get(src[1]) == b else "x:" + view.op_name(src[1]))
        items.append((view.op_name(k), tuple(ins)))
    items.sort()
    return hash(tuple(items))


def _runs(keys, min_repeat):
    """(start, end) of maximal runs of equal consecutive keys with length >= min_repeat."""
    out = []
    i = 0
    while i < len(keys):
        j = i + 1
        while j < len(keys) and keys[j] == keys[i]:
            j += 1
        if j - i >= min_repeat:
            out.append((i, j))
        i = j
    return out


_NUM = re.compile(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.|$)")


def _module_groups(view, min_repeat, taken):
    """Blocks from repeated module calls (needs ``record()`` annotations)."""
    per_family: dict = {}  # (depth, family, type) -> set of call numbers
    chains = {}
    for k in range(len(view)):
        calls = view.info(k).get("calls")
        if not calls:
            continue
        chains[k] = calls
        for d, (path, call_no, typ) in enumerate(calls):
            fam = (d, _NUM.sub("#", path), typ)
            per_family.setdefault(fam, set()).add(call_no)
    repeated = {f for f, calls in per_family.items() if len(calls) >= min_repeat}
    if not repeated:
        return []
    blocks: dict = {}  # (family, call_no) -> [node positions]
    for k, calls in chains.items():
        for d, (path, call_no, typ) in enumerate(calls):
            fam = (d, _NUM.sub("#", path), typ)
            if fam in repeated:
                blocks.setdefault((fam, call_no), []).append(k)
                break
    by_family: dict = {}
    for (fam, call_no), members in blocks.items():
        by_family.setdefault(fam, []).append((call_no, members))
    groups = []
    for fam, items in by_family.items():
        items.sort()
        block_of = {}
        for b, (_, members) in enumerate(items):
            for k in members:
                block_of[k] = b
        keys = [_block_key(view, m, block_of, b) for b, (_, m) in enumerate(items)]
        for s, e in _runs(keys, min_repeat):
            run = [m for _, m in items[s:e]]
            typ = fam[2]
            path = fam[1] or typ
            head = min(run[-1])  # root-side node of the last call
            groups.append(Group(run, f"{typ} ×{fmt_count(e - s)}",
                                f"{path}: {_ops(len(run[0]))} per call", "module", head))
            for m in run:
                taken.update(m)
    return groups


def _longest_path(view, alive):
    n = len(view)
    dist = np.zeros(n, dtype=np.int64)
    inputs = view.inputs
    for k in range(n - 1, -1, -1):
        if not alive[k]:
            continue
        best = 0
        for src in inputs[k]:
            if src is not None and src[0] == "n" and alive[src[1]]:
                d = dist[src[1]]
                if d > best:
                    best = d
        dist[k] = best + 1
    masked = np.where(alive, dist, -1)
    k = int(np.argmax(masked))
    if masked[k] <= 0:
        return []
    path = [k]
    while True:
        want = dist[k] - 1
        if want <= 0:
            break
        for src in inputs[k]:
            if src is not None and src[0] == "n" and alive[src[1]] and dist[src[1]] == want:
                k = src[1]
                break
        path.append(k)
    return path


def _best_period(codes, min_repeat, max_period):
    """(period, start, repeats) of the longest periodic stretch of ``codes``, or None."""
    best = None
    L = len(codes)
    for p in range(1, min(max_period, L // min_repeat) + 1):
        eq = codes[:-p] == codes[p:]
        if not eq.any():
            continue
        padded = np.concatenate(([0], eq.view(np.int8), [0]))
        d = np.diff(padded)
        starts = np.flatnonzero(d == 1)
        ends = np.flatnonzero(d == -1)
        lengths = ends - starts
        i = int(np.argmax(lengths))
        reps = (int(lengths[i]) + p) // p
        if reps < min_repeat:
            continue
        covered = reps * p
        if best is None or covered > best[0]:
            best = (covered, p, int(starts[i]), reps)
    return None if best is None else best[1:]


def _path_groups(view, sig, min_repeat, max_period, taken, max_rounds=8):
    n = len(view)
    alive = np.ones(n, dtype=bool)
    for k in taken:
        alive[k] = False
    groups = []
    for _ in range(max_rounds):
        path = _longest_path(view, alive)
        if len(path) < 2 * min_repeat:
            break
        found = _best_period(sig[np.asarray(path)], min_repeat, max_period)
        if found is None:
            break
        p, start, reps = found
        block_of = {}
        for b in range(reps):
            for k in path[start + b * p: start + (b + 1) * p]:
                block_of[k] = b
        # every other live node joins the block that all of its consumers are in
        consumers = view.consumers
        lo = min(block_of)
        for k in range(lo, n):
            if not alive[k] or k in block_of:
                continue
            cs = consumers[k]
            if not cs:
                continue
            b = block_of.get(cs[0])
            if b is None:
                continue
            for c in cs:
                if block_of.get(c) != b:
                    b = None
                    break
            if b is not None:
                block_of[k] = b
        blocks = [[] for _ in range(reps)]
        for k, b in block_of.items():
            blocks[b].append(k)
        keys = [_block_key(view, blk, block_of, b) for b, blk in enumerate(blocks)]
        made = False
        for s, e in _runs(keys, min_repeat):
            run = blocks[s:e]
            # the path ops of one block, in data-flow order (producer first)
            first = start + s * p
            ops = [view.op_name(k) for k in reversed(path[first:first + p])]
            if len(ops) > 5:
                ops = ops[:2] + ["…"] + ops[-2:]
            label = "→".join(ops) + f" ×{fmt_count(e - s)}"
            mods = {view.info(k).get("module") for k in run[0]}
            where = f"{mods.pop()}: " if len(mods) == 1 and None not in mods else ""
            detail = f"{where}{_ops(len(run[0]))} per repeat"
            if len(run[0]) > p:  # ops hanging off the path: name them (producers first)
                names = list(dict.fromkeys(view.op_name(k) for k in sorted(run[0], reverse=True)))
                detail += ": " + ", ".join(names[:6]) + (", …" if len(names) > 6 else "")
            groups.append(Group(run, label, detail, "structure", min(run[0])))
            for blk in run:
                for k in blk:
                    alive[k] = False
            made = True
        if not made:
            break
    return groups


def _sibling_groups(view, min_repeat, taken):
    """Parallel repetition: nodes doing the same thing for the same consumers.

    Root-first, a node's class is its op, its parameter inputs and the classes
    of its consumers; a class with ``min_repeat`` or more members (1000
    independent branches stacked into one tensor) becomes one group.
    """
    n = len(view)
    cls = [None] * n
    codes: dict = {}
    members: dict = {}
    for k in range(n):
        if k in taken:
            continue
        cons = tuple(sorted({cls[c] if cls[c] is not None else -2 - c for c in view.consumers[k]}))
        leaves = tuple(("p:" + (view.leaf_name(src[1]) or "leaf")) if src is not None and src[0] == "l"
                       else ("n" if src is not None else "-") for src in view.inputs[k])
        key = (view.op_name(k), leaves, cons)
        c = codes.get(key)
        if c is None:
            c = codes[key] = len(codes)
        cls[k] = c
        members.setdefault(c, []).append(k)
    groups = []
    for ks in members.values():
        if len(ks) >= min_repeat:
            op = view.op_name(ks[0])
            groups.append(Group([[k] for k in ks], f"{op} ×{fmt_count(len(ks))}",
                                "in parallel", "parallel", ks[0]))
            taken.update(ks)
    return groups


def find_groups(view, min_repeat: int = 3, max_period: int = 64) -> list[Group]:
    """Groups of repeated structure in ``view`` (a :class:`~dyngraph.viz.extract.GraphView`)."""
    if len(view) == 0:
        return []
    taken: set = set()
    groups = _module_groups(view, min_repeat, taken)
    groups += _path_groups(view, _signatures(view), min_repeat, max_period, taken)
    if len(view) - len(taken) > 60:  # still large: fold parallel copies too
        groups += _sibling_groups(view, min_repeat, taken)
    return groups
