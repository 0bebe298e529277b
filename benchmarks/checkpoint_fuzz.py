"""Adversarial sweep of ``dg.load``: corrupted and crafted checkpoints (issue 10, items 2 and 3).

    python benchmarks/checkpoint_fuzz.py            # full sweep (a few minutes on one core)
    python benchmarks/checkpoint_fuzz.py --quick    # every 16th bit, fewer crafted cases

Cases, on three checkpoints (the issue's Linear + Adam + epoch dict; a whole user module with
Sequential/LSTM/BatchNorm, allow-listed; a whole-module file without the allow-list):

* every single-bit flip of the length field and the header, and a flip in every data byte
  (no checksum repair: this is corruption);
* every truncation length;
* crafted files: random edits of the header JSON and of the dyngraph structure (wrong types,
  negative / huge / float numbers, ``"22"`` shapes, deep nesting, unknown dtype and class names,
  ``os.system``, overlapping and gapped offsets, dropped and duplicated entries), each re-stamped
  with a valid CRC so that validation, not the checksum, has to catch it.

Outcomes: ``refused`` (CheckpointError naming the file: correct), ``crash`` (any other
exception), ``silent`` (loaded, but the content differs from what was saved: only possible for
corruption, a crafted file is allowed to load different content), ``unsafe`` (a crafted file
loaded an object of a type outside the documented set, or imported a module), ``unclear``
(CheckpointError that does not name the file), ``slow`` (a case over 1 s).
"""

from __future__ import annotations

import argparse
import collections
import copy
import io
import json
import math
import random
import re
import struct
import sys
import time
import zlib

import numpy as np

import dyngraph as dg
from dyngraph import serialization
from dyngraph.serialization import CheckpointError

PREFIX = b'{"__metadata__":{"dyngraph_check":"crc32:'
NAME = "fuzz-case.safetensors"


class Named(io.BytesIO):
    def __init__(self, data):
        super().__init__(data)
        self.name = NAME


class FuzzNet(dg.nn.Module):
    def __init__(self):
        super().__init__()
        self.width = 4
        self.tags = ("a", [1, 2.5, None], {"k": True})
        self.body = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.BatchNorm1d(4))
        self.rnn = dg.nn.LSTM(4, 3)
        self.register_buffer("count", dg.zeros((), dtype=dg.int64))

    def forward(self, x):
        return self.rnn(self.body(x).unsqueeze(0))[0]


def samples():
    dg.manual_seed(0)
    lin = dg.nn.Linear(3, 4)
    opt = dg.optim.Adam(lin.parameters(), lr=1e-3)
    lin(dg.randn(2, 3)).sum().backward()
    opt.step()
    net = FuzzNet()
    net(dg.randn(5, 3))
    net.eval()
    return {"state-dict": {"model": lin.state_dict(), "optimizer": opt.state_dict(), "epoch": 7},
            "module": net}


def to_bytes(obj) -> bytes:
    buf = io.BytesIO()
    dg.save(obj, buf)
    return buf.getvalue()


# -- deep comparison of loaded content ---------------------------------------------------------
def same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dg.Tensor):
        x, y = a.detach().numpy(), b.detach().numpy()
        return (a.requires_grad == b.requires_grad and x.dtype == y.dtype and x.shape == y.shape
                and x.tobytes() == y.tobytes())
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dg.nn.Module):
        da = {k: v for k, v in vars(a).items() if not k.startswith("_")}
        db = {k: v for k, v in vars(b).items() if not k.startswith("_")}
        return (list(da) == list(db) and all(same(da[k], db[k]) for k in da if not isinstance(da[k], dg.nn.Module))
                and same(dict(a.named_parameters()), dict(b.named_parameters()))
                and same(dict(a.named_buffers()), dict(b.named_buffers()))
                and [type(m) for m in a.modules()] == [type(m) for m in b.modules()]
                and [m.training for m in a.modules()] == [m.training for m in b.modules()])
    return a == b


ALLOWED_LEAVES = (int, float, bool, str, type(None), dg.Tensor, np.ndarray, dg.dtype)


def safe_types(obj, seen=None) -> bool:
    seen = seen if seen is not None else set()
    if id(obj) in seen:
        return True
    seen.add(id(obj))
    if isinstance(obj, dict):
        return all(safe_types(k, seen) and safe_types(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return all(safe_types(v, seen) for v in obj)
    if isinstance(obj, dg.nn.Module):
        return type(obj) in (FuzzNet,) or type(obj).__module__.startswith("dyngraph.nn")
    if callable(obj) and getattr(obj, "__module__", "").startswith("dyngraph.nn"):
        return True
    return isinstance(obj, ALLOWED_LEAVES)


# -- one case ------------------------------------------------------------------------------------
def run_case(data: bytes, original, tally, kind: str, crafted: bool, examples):
    mods = len(sys.modules)
    t0 = time.perf_counter()
    try:
        got = dg.load(Named(data))
    except CheckpointError as e:
        outcome = "refused" if NAME in str(e) else "unclear"
        msg = str(e)
    except Exception as e:
        outcome, msg = "crash", f"{type(e).__name__}: {e}"
    else:
        msg = ""
        if len(sys.modules) != mods or not safe_types(got):
            outcome = "unsafe"
        elif same(got, original):
            outcome = "loaded-identical"
        else:
            outcome = "accepted-crafted" if crafted else "silent"
    dt = time.perf_counter() - t0
    if dt > 1.0:
        tally[kind]["slow"] += 1
    tally[kind][outcome] += 1
    tally[kind]["cases"] += 1
    if outcome in ("crash", "silent", "unsafe", "unclear") and len(examples[outcome]) < 5:
        examples[outcome].append(f"{kind}: {msg[:200]}")


def restamp(data: bytes) -> bytes:
    """Give an edited dyngraph file a valid CRC (as a crafted file would)."""
    if data[8:8 + len(PREFIX)] != PREFIX:
        return data
    at = 8 + len(PREFIX)
    crc = zlib.crc32(data[:at] + b"00000000" + data[at + 8:])
    return data[:at] + f"{crc:08x}".encode() + data[at + 8:]


def deepen(text: str) -> str:
    def nest(m):
        k = int(m.group(1))
        return "".join(rng_nest[i % 2] for i in range(k)) + "1" + "".join(rng_close[i % 2] for i in range(k))[::-1]
    return re.sub(r'"__DEEP(\d+)__"', nest, text)


rng_nest, rng_close = ('[', '{"L":['), (']', ']}')


def rebuild(header: dict, data_section: bytes) -> bytes:
    raw = deepen(json.dumps(header, separators=(",", ":"))).encode()
    raw += b" " * (-len(raw) % 8)
    return restamp(struct.pack("<Q", len(raw)) + raw + data_section)


NASTY = [-1, 0, 1, 2 ** 70, 1.5, -0.0, "22", "", "__builtins__", "os.system", "builtins.eval",
         "dyngraph.save", None, True, False, [], {}, [1, 2, 3], {"a": 1}, [[[[[[[[1]]]]]]]],
         {"T": "x"}, {"G": "os.system"}, {"dt": "__builtins__"}, "x" * 1000, [1] * 70, 2 ** 82,
         [2 ** 40, 2 ** 40], -(2 ** 63), 1e308, {"M": "os.system"}, {"R": 0}, {"f": "nan"}]


def nodes(obj, path=()):
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from nodes(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from nodes(v, path + (i,))


def set_at(obj, path, value):
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def mutate(tree, rng):
    tree = copy.deepcopy(tree)
    spots = [p for p, _ in nodes(tree) if p]
    path = rng.choice(spots)
    parent = tree
    for p in path[:-1]:
        parent = parent[p]
    r = rng.random()
    if r < 0.6:
        set_at(tree, path, copy.deepcopy(rng.choice(NASTY)))
    elif r < 0.7:   # deep nesting, spliced in as text after json.dumps (which would refuse it)
        set_at(tree, path, f"__DEEP{rng.choice([50, 120, 400, 5000, 100000])}__")
    elif r < 0.85 and isinstance(parent, dict):
        del parent[path[-1]]
    elif isinstance(parent, list):
        parent.append(copy.deepcopy(parent[path[-1]]))
    elif isinstance(parent, dict):
        parent[str(path[-1]) + "_"] = copy.deepcopy(parent[path[-1]])
    return tree


def crafted_cases(data: bytes, rng, count: int):
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    doc = json.loads(header["__metadata__"]["dyngraph"])
    for i in range(count):
        h = copy.deepcopy(header)
        if i % 3 == 0:   # the layout (offsets, shapes, dtypes, names)
            tensors = {k: v for k, v in h.items() if k != "__metadata__"}
            h2 = mutate(tensors, rng)
            h = {"__metadata__": h["__metadata__"], **h2}
        else:            # the dyngraph structure, behind a valid CRC
            h["__metadata__"]["dyngraph"] = deepen(json.dumps(mutate(doc, rng)))
        yield rebuild(h, body)
    for _ in range(count // 4):   # byte-level edits of the header text, CRC repaired
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(8 + len(PREFIX) + 9, 8 + n)
            b[pos] = rng.choice(b'{}[]",:0123456789-.eE ntfa\\\x00\xff')
        yield restamp(bytes(b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=10)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    stride = 16 if args.quick else 1
    serialization.add_safe_globals([FuzzNet])
    tally = collections.defaultdict(collections.Counter)
    examples = collections.defaultdict(list)
    t0 = time.perf_counter()
    for label, obj in samples().items():
        data = to_bytes(obj)
        original = dg.load(Named(data))
        n = struct.unpack("<Q", data[:8])[0]
        print(f"{label}: {len(data)} bytes, header {n} bytes", flush=True)
        for bit in range(0, (8 + n) * 8, stride):
            bad = bytearray(data)
            bad[bit // 8] ^= 1 << (bit % 8)
            run_case(bytes(bad), original, tally, "header bit flip", False, examples)
        for pos in range(8 + n, len(data), max(1, stride // 4)):
            bad = bytearray(data)
            bad[pos] ^= 1 << rng.randrange(8)
            run_case(bytes(bad), original, tally, "data bit flip", False, examples)
        for cut in range(0, len(data), stride):
            run_case(data[:cut], original, tally, "truncation", False, examples)
        for case in crafted_cases(data, rng, 300 if args.quick else 3000):
            run_case(case, original, tally, "crafted (valid CRC)", True, examples)
    # whole-module file without the allow-list: always refused, naming the class
    serialization.clear_safe_globals()
    data = to_bytes(samples()["module"])
    for _ in range(10):
        run_case(data, None, tally, "module not allow-listed", True, examples)
    elapsed = time.perf_counter() - t0

    keys = ["cases", "refused", "crash", "silent", "unsafe", "unclear", "slow", "accepted-crafted",
            "loaded-identical"]
    print(f"\n{'kind':<26}" + "".join(f"{k:>17}" for k in keys))
    total = collections.Counter()
    for kind, c in tally.items():
        total.update(c)
        print(f"{kind:<26}" + "".join(f"{c[k]:>17}" for k in keys))
    print(f"{'total':<26}" + "".join(f"{total[k]:>17}" for k in keys))
    print(f"\n{total['cases']} cases in {elapsed:.1f} s: {total['crash']} crashes, {total['silent']} silent "
          f"wrong results, {total['unsafe']} unsafe loads, {total['unclear']} unclear errors, "
          f"{total['slow']} cases over 1 s")
    for k, v in examples.items():
        print(f"\nexamples of {k}:")
        for line in v:
            print("  " + line)
    return 1 if total["crash"] or total["silent"] or total["unsafe"] or total["unclear"] else 0


if __name__ == "__main__":
    sys.exit(main())
