"""dg.load on hostile input: header lengths that look like pickle magic, the whole-file checksum,
crafted headers and structures, streams that never end (issue 10, items 2 and 3)."""

from __future__ import annotations

import io
import json
import os
import random
import struct
import sys
import time
import zlib

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

import dyngraph as dg
from dyngraph import serialization
from dyngraph.serialization import CheckpointError

PREFIX = b'{"__metadata__":{"dyngraph_check":"crc32:'


class Named(io.BytesIO):
    """An in-memory file with a name, so the tests can check that errors name the file."""

    def __init__(self, data: bytes, name: str = "mem.safetensors"):
        super().__init__(data)
        self.name = name


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    dg.save(obj, buf)
    return buf.getvalue()


def _header_len(data: bytes) -> int:
    return struct.unpack("<Q", data[:8])[0]


def _with_header_length(target: int) -> tuple[dict, bytes]:
    """A checkpoint whose safetensors header is exactly ``target`` bytes (padding a string)."""
    base = {"model": dg.nn.Linear(3, 4).state_dict(), "epoch": 7}
    k = 0
    for _ in range(3):
        obj = dict(base, pad="x" * k)
        n = _header_len(_saved(obj))
        k += target - n
    for extra in range(-8, 9):     # the 8-byte padding: land exactly on target
        obj = dict(base, pad="x" * max(k + extra, 0))
        data = _saved(obj)
        if _header_len(data) == target:
            return obj, data
    raise AssertionError(f"could not build a header of {target} bytes")


def _recheck(data: bytes) -> bytes:
    """Re-stamp the CRC of a (deliberately edited) dyngraph file: what a crafted file would do."""
    n = _header_len(data)
    assert data[8:8 + len(PREFIX)] == PREFIX
    at = 8 + len(PREFIX)
    zeroed = data[:at] + b"00000000" + data[at + 8:]
    crc = zlib.crc32(zeroed)
    assert n > 0
    return data[:at] + f"{crc:08x}".encode() + data[at + 8:]


def _craft(root, arrays=None, version=2, meta_extra=None) -> bytes:
    """A dyngraph-format file with a *valid* checksum around an arbitrary structure (written here,
    independently of dg.save, from the format description in docs/security.md)."""
    arrays = arrays or {}
    meta = {"dyngraph_check": "crc32:00000000", "format": "pt",
            "dyngraph": root if isinstance(root, str) else json.dumps({"version": version, "root": root})}
    meta.update(meta_extra or {})
    header = {"__metadata__": meta}
    off, blobs = 0, []
    codes = {np.dtype("float32"): "F32", np.dtype("int64"): "I64", np.dtype("uint8"): "U8"}
    for k, a in arrays.items():
        header[k] = {"dtype": codes[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return _recheck(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def _raw_file(header: dict, data: bytes = b"") -> bytes:
    """A plain safetensors file (no dyngraph metadata) with an arbitrary header."""
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def _refused(data: bytes, match: str = "", name: str = "crafted.safetensors"):
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")) as ei:
        dg.load(Named(data, name))
    assert match.lower() in str(ei.value).lower(), str(ei.value)
    return str(ei.value)


# -- item 2: header lengths whose low bytes look like pickle magic --------------------------------
@pytest.mark.parametrize("length", [640, 896, 1152, 1408, 65536 + 640])
def test_header_lengths_that_look_like_pickle_magic(tmp_path, length):
    obj, data = _with_header_length(length)
    assert data[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
    path = tmp_path / "c.safetensors"
    dg.save(obj, path)
    assert _header_len(path.read_bytes()) == length
    back = dg.load(path)
    assert back["epoch"] == 7 and back["pad"] == obj["pad"]
    np.testing.assert_array_equal(back["model"]["weight"].numpy(), obj["model"]["weight"].numpy())


def test_issue_checkpoint_round_trips(tmp_path):
    lin = dg.nn.Linear(3, 4)
    opt = dg.optim.Adam(lin.parameters(), lr=1e-3)
    lin(dg.randn(2, 3)).sum().backward()
    opt.step()
    path = tmp_path / "p.safetensors"
    dg.save({"model": lin.state_dict(), "optimizer": opt.state_dict(), "epoch": 7}, path)
    back = dg.load(path)
    assert back["epoch"] == 7
    assert back["optimizer"]["param_groups"][0]["lr"] == 1e-3
    np.testing.assert_array_equal(back["optimizer"]["state"][0]["exp_avg"].numpy(),
                                  opt.state_dict()["state"][0]["exp_avg"].numpy())


@pytest.mark.parametrize("length", [640, 896, 1152, 1408, 65536 + 640])
def test_foreign_files_with_such_header_lengths(tmp_path, length):
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(4, np.int64)}

    def write(k):
        p = tmp_path / "np.safetensors"
        safetensors.numpy.save_file(arrays, str(p), metadata={"pad": "y" * k})
        return p

    k = 0
    for _ in range(4):
        k += length - _header_len(write(k).read_bytes())
    for extra in range(-8, 9):
        p = write(max(k + extra, 0))
        if _header_len(p.read_bytes()) == length:
            break
    assert _header_len(p.read_bytes()) == length
    back = dg.load(p)
    assert set(back) == {"w", "b"}
    np.testing.assert_array_equal(back["w"].numpy(), arrays["w"])
    pt = tmp_path / "pt.safetensors"
    safetensors.torch.save_file({"w": torch.from_numpy(arrays["w"])}, str(pt), metadata={"pad": "y" * k})
    np.testing.assert_array_equal(dg.load(pt)["w"].numpy(), arrays["w"])


def test_pickle_still_refused_after_the_safetensors_check(tmp_path):
    import pickle

    for proto in (2, 3, 4, 5):
        _refused(pickle.dumps({"w": [1.0] * 100}, protocol=proto), "pickle", name="p.pt")
    p = tmp_path / "t.pt"
    torch.save({"w": torch.ones(3)}, p)
    _refused(p.read_bytes(), "torch.save", name="t.pt")


# -- item 3: the checksum covers the whole file ---------------------------------------------------
def _sample_checkpoint() -> tuple[dict, bytes]:
    lin = dg.nn.Linear(3, 4)
    opt = dg.optim.Adam(lin.parameters(), lr=1e-3)
    lin(dg.randn(2, 3)).sum().backward()
    opt.step()
    obj = {"model": lin.state_dict(), "optimizer": opt.state_dict(), "epoch": 7}
    return obj, _saved(obj)


def test_header_bit_flip_sample_all_refused():
    """A bounded sample of the full sweep in benchmarks/checkpoint_fuzz.py: every single-bit flip
    in the length field and the header must raise CheckpointError naming the file."""
    _, data = _sample_checkpoint()
    n = _header_len(data)
    rng = random.Random(10)
    positions = sorted(rng.sample(range((8 + n) * 8), 400))
    t0 = time.perf_counter()
    for bit in positions:
        bad = bytearray(data)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CheckpointError, match=r"flip\.safetensors") as ei:
            dg.load(Named(bytes(bad), "flip.safetensors"))
        assert "corrupt" in str(ei.value) or "crafted" in str(ei.value) or "not" in str(ei.value)
    assert time.perf_counter() - t0 < 5


def test_data_bit_flips_refused():
    _, data = _sample_checkpoint()
    n = _header_len(data)
    for pos in range(8 + n, len(data), 7):
        bad = bytearray(data)
        bad[pos] ^= 0x10
        _refused(bytes(bad), "checksum mismatch")


def test_metadata_edit_that_keeps_valid_json_is_caught():
    # the issue's example: lr 0.001 -> 1.001 parsed fine and loaded silently before
    _, data = _sample_checkpoint()
    i = data.index(b'0.001')
    bad = data[:i] + b'1.001' + data[i + 5:]
    assert json.loads(bad[8:8 + _header_len(bad)])       # still valid JSON
    _refused(bad, "checksum mismatch")


def test_checksum_field_case_and_position_are_checked():
    _, data = _sample_checkpoint()
    at = 8 + len(PREFIX)
    upper = data[:at] + data[at:at + 8].upper() + data[at + 8:]
    if upper != data:
        _refused(upper, "checksum field")


def test_format_version_1_files_still_load():
    """Files written before the whole-file check (format 1: data-only CRC) load; their data CRC
    is still verified."""
    w = np.arange(6, dtype=np.float32)
    root = {"D": [["w", {"T": "w"}], ["epoch", {"v": 3}]]}
    meta = {"format": "pt", "dyngraph": json.dumps({"version": 1, "root": root}),
            "dyngraph_crc32": str(zlib.crc32(w.tobytes()))}
    buf = safetensors.numpy.save({"w": w}, metadata=meta)
    back = dg.load(Named(buf, "v1.safetensors"))
    assert back["epoch"] == 3 and back["w"].tolist() == w.tolist()
    bad = bytearray(buf)
    bad[-1] ^= 1
    _refused(bytes(bad), "checksum mismatch", name="v1.safetensors")
    meta2 = dict(meta, dyngraph_crc32="123")
    _refused(safetensors.numpy.save({"w": w}, metadata=meta2), "checksum mismatch", name="v1.safetensors")
    del meta2["dyngraph_crc32"]
    _refused(safetensors.numpy.save({"w": w}, metadata=meta2), "dyngraph_crc32", name="v1.safetensors")


def test_versions_and_missing_check():
    _refused(_craft({"v": 1}, version=3), "format version 3")
    _refused(_craft({"v": 1}, version=True), "format version")
    root = json.dumps({"version": 2, "root": {"v": 1}})
    _refused(safetensors.numpy.save({}, metadata={"dyngraph": root}), "must carry", name="nocheck.st")


# -- item 3: the safetensors layout rules ---------------------------------------------------------
F4 = np.arange(4, dtype=np.float32).tobytes()


@pytest.mark.parametrize("header,data,match", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, F4[:12], "overlaps"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}}, F4, "gap"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, F4[:12], "gap"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0.0, 8]}}, F4[:8], "two integers"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 9]}}, F4[:8], "two integers"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, F4[:8], "two integers"),
    ({"a": {"dtype": "F32", "shape": ["2"], "data_offsets": [0, 8]}}, F4[:8], "shape"),
    ({"a": {"dtype": "F32", "shape": "22", "data_offsets": [0, 8]}}, F4[:8], "shape"),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, F4[:8], "non-negative"),
    ({"a": {"dtype": "F32", "shape": [True, 2], "data_offsets": [0, 8]}}, F4[:8], "shape"),
    ({"a": {"dtype": "F32", "shape": [1] * 65 + [2], "data_offsets": [0, 8]}}, F4[:8], "66 dimensions"),
    ({"a": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40], "data_offsets": [0, 2 ** 82]}}, F4[:8], "truncated"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, F4[:8], "need 12"),
    ({"a": {"dtype": "Q99", "shape": [2], "data_offsets": [0, 8]}}, F4[:8], "not a safetensors dtype"),
    ({"a": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [0, 2]}}, F4[:2], "cannot hold"),
    ({"a": {"dtype": "__builtins__", "shape": [2], "data_offsets": [0, 8]}}, F4[:8], "dtype"),
    ({"a": {"dtype": {"x": 1}, "shape": [2], "data_offsets": [0, 8]}}, F4[:8], "not a safetensors dtype"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}}, F4[:8], "exactly the keys"),
    ({"a": [1, 2]}, b"", "exactly the keys"),
    ({"__metadata__": {"k": 1}}, b"", "strings to strings"),
    ({"__metadata__": [], "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, F4[:8], "strings"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, F4[:8], "after the last tensor"),
    ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, F4[:8], "truncated"),
])
def test_crafted_layouts_refused(header, data, match):
    _refused(_raw_file(header, data), match)


def test_crafted_json_refused():
    def raw(text: bytes, data=b""):
        return struct.pack("<Q", len(text)) + text + data
    _refused(raw(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                 b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', F4[:4]), "duplicate key")
    _refused(raw(b'{"a":{"dtype":"F32","shape":[NaN],"data_offsets":[0,4]}}', F4[:4]), "not valid JSON")
    _refused(raw(b"{" + b'"a":' * 0 + b'"x":' + b"[" * 100000 + b"]" * 100000 + b"}"), "")
    _refused(raw(b'{"a":{"dtype":"F32","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,4]}}'), "")
    _refused(raw(b'{"a": "\xff\xfe"}'), "UTF-8")
    _refused(raw(b"[1, 2, 3]"), "not a safetensors file")
    _refused(raw(b"{}") + b"junk", "after the last tensor")
    _refused(b"\x02\x00\x00\x00\x00\x00\x00\x00[]", "not a safetensors file")
    _refused(b"\x01\x00\x00\x00\x00\x00\x00\x00{", "not a safetensors file")
    _refused(b"", "too short")


# -- item 3: the dyngraph structure schema (behind a valid checksum) ------------------------------
def _deep(levels: int):
    node = {"v": 1}
    for _ in range(levels):
        node = {"L": [node]}
    return node


@pytest.mark.parametrize("root,arrays,match", [
    ({"dt": "__builtins__"}, None, "not a dyngraph dtype"),
    ({"dt": "dyngraph.save"}, None, "not a dyngraph dtype"),
    ({"dt": "dyngraph.__builtins__"}, None, "not a dyngraph dtype"),
    ({"dt": ["dyngraph.float32"]}, None, "not a dyngraph dtype"),
    (_deep(150), None, "nested more than"),
    ({"X": 1}, None, "unrecognised"),
    ({"v": {"a": 1}}, None, "plain value"),
    ({"v": 1, "w": 2}, None, "unknown fields"),
    ({"f": "1e5"}, None, "non-finite"),
    ({"f": "__import__('os')"}, None, "non-finite"),
    ({"T": "missing"}, None, "does not contain"),
    ({"T": 3}, None, "names no tensor"),
    ({"T": {"a": 1}}, None, "names no tensor"),
    ({"f": {"a": 1}}, None, "non-finite"),
    ({"T": "w", "rg": "yes"}, {"w": np.ones(2, np.float32)}, "malformed"),
    ({"T": "i", "rg": True}, {"i": np.ones(2, np.int64)}, "requires_grad"),
    ({"P": "i", "rg": True}, {"i": np.ones(2, np.int64)}, "requires_grad"),
    ({"v": 1}, {"w": np.ones(2, np.float32)}, "not in the dyngraph structure"),
    ({"D": [["a", {"v": 1}], ["a", {"v": 2}]]}, None, "appears twice"),
    ({"D": [[{"i": 1}, {"v": 1}], [{"v": True}, {"v": 2}]]}, None, "appears twice"),
    ({"D": [[{"i": True}, {"v": 1}]]}, None, "key"),
    ({"D": [[{"f": "os.system"}, {"v": 1}]]}, None, "key"),
    ({"D": [["a"]]}, None, "pair"),
    ({"D": {"a": 1}}, None, "list of pairs"),
    ({"L": "abc"}, None, "list/tuple"),
    ({"G": "os.system"}, None, "not an allowed global"),
    ({"G": "builtins.eval"}, None, "not an allowed global"),
    ({"R": 0}, None, "points at no module"),
    ("not json", None, "not valid JSON"),
    (json.dumps({"version": 2}), None, "exactly 'version' and 'root'"),
    (json.dumps({"version": 2, "root": 1, "x": 2}), None, "exactly 'version' and 'root'"),
])
def test_crafted_structures_refused(root, arrays, match):
    before = set(sys.modules)
    _refused(_craft(root, arrays), match)
    assert set(sys.modules) <= before


def test_crafted_structure_that_is_valid_loads():
    # the crafting helper is right: the same layout with a valid structure loads
    data = _craft({"D": [["w", {"T": "w", "rg": True}], ["n", {"f": "nan"}], [{"i": 3}, {"dt": "dyngraph.int64"}]]},
                  {"w": np.ones(2, np.float32)})
    back = dg.load(Named(data))
    assert back["w"].requires_grad and np.isnan(back["n"]) and back[3] is dg.int64


def test_shared_tensor_identity_preserved():
    t = dg.ones(3)
    back = dg.load(Named(_saved({"a": t, "b": [t]})))
    assert back["a"] is back["b"][0]


def test_save_refuses_self_containing_structures():
    a: list = []
    a.append(a)
    with pytest.raises(TypeError, match="nested more than"):
        dg.save({"a": a}, io.BytesIO())


# -- item 3: streams, devices and length fields that would read forever ---------------------------
class _Endless(io.RawIOBase):
    """A stream of ``fill`` bytes that never ends and counts what was read from it."""

    def __init__(self, prefix: bytes = b"", fill: bytes = b"\0"):
        self.prefix, self.fill, self.count = prefix, fill, 0

    def readable(self):
        return True

    def readinto(self, b):
        n = len(b)
        chunk = (self.prefix + self.fill * n)[:n]
        self.prefix = self.prefix[n:]
        b[:n] = chunk
        self.count += n
        return n


def test_endless_streams_fail_fast():
    s = _Endless()
    _refused_stream(s, "not a safetensors file")
    assert s.count <= 16
    s = _Endless(struct.pack("<Q", 1 << 40))
    _refused_stream(s, "bound")
    assert s.count <= 16
    # a valid header followed by more bytes than it describes: stop after one extra byte
    head = json.dumps({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}).encode()
    s = _Endless(struct.pack("<Q", len(head)) + head, b"\1")
    _refused_stream(s, "continues past")
    assert s.count <= 8 + len(head) + 4 + 8


def _refused_stream(s, match):
    with pytest.raises(CheckpointError, match=match):
        dg.load(s)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_dev_zero_and_a_symlink_to_it(tmp_path):
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError, match="/dev/zero.*not a safetensors file"):
        dg.load("/dev/zero")
    link = tmp_path / "zero.safetensors"
    link.symlink_to("/dev/zero")
    with pytest.raises(CheckpointError, match="zero.safetensors.*not a safetensors file"):
        dg.load(link)
    assert time.perf_counter() - t0 < 1


def test_header_length_beyond_file_size_or_bound(tmp_path):
    p = tmp_path / "long.safetensors"
    p.write_bytes(struct.pack("<Q", 1000) + b"{" + b" " * 100)
    with pytest.raises(CheckpointError, match="long.safetensors.*only 101 bytes"):
        dg.load(p)
    p.write_bytes(struct.pack("<Q", serialization._st.MAX_HEADER + 8) + b"{" + b" " * 100)
    with pytest.raises(CheckpointError, match="bound"):
        dg.load(p)


def test_fifo_stream_loads(tmp_path):
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = _saved({"w": dg.arange(10, dtype=dg.float32), "epoch": 2})
    t = threading.Thread(target=lambda: fifo.write_bytes(data))
    t.start()
    back = dg.load(fifo)
    t.join(5)
    assert back["epoch"] == 2 and back["w"].tolist() == list(range(10))


@pytest.mark.skipif(not hasattr(dg, "bfloat16"), reason="this dyngraph has no bfloat16 dtype")
def test_bfloat16_round_trip_and_interop(tmp_path):
    t = dg.tensor([[0.5, -1.25], [3.0, 1e-3]]).to(dg.bfloat16)
    p = tmp_path / "bf.safetensors"
    dg.save({"w": t, "dt": dg.bfloat16}, p)
    back = dg.load(p)
    assert back["w"].dtype == dg.bfloat16 and back["dt"] is dg.bfloat16
    assert back["w"].float().tolist() == t.float().tolist()
    tt = safetensors.torch.load_file(str(p))["w"]
    assert tt.dtype == torch.bfloat16 and tt.float().tolist() == t.float().tolist()
    safetensors.torch.save_file({"a": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)}, str(p))
    assert dg.load(p)["a"].float().tolist() == [1.5, -2.0]
