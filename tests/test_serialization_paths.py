"""dg.save path handling (issue 10, item 6): symlinks, devices, FIFOs, modes, stale temporaries."""

from __future__ import annotations

import fcntl
import io
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import dyngraph as dg
from dyngraph import serialization


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def _temps(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_new_file_honours_umask(tmp_path, umask):
    for mask, mode in ((0o022, 0o644), (0o027, 0o640), (0o002, 0o664), (0o077, 0o600)):
        umask(mask)
        p = tmp_path / f"u{mask:o}.safetensors"
        dg.save({"a": 1}, p)
        assert stat.S_IMODE(os.stat(p).st_mode) == mode, (oct(mask), oct(os.stat(p).st_mode))


def test_existing_file_keeps_its_mode(tmp_path, umask):
    umask(0o077)
    p = tmp_path / "c.safetensors"
    p.write_bytes(b"old")
    for mode in (0o644, 0o640, 0o604):
        os.chmod(p, mode)
        dg.save({"a": mode}, p)
        assert stat.S_IMODE(os.stat(p).st_mode) == mode
        assert dg.load(p) == {"a": mode}


def test_symlink_is_written_through(tmp_path):
    target = tmp_path / "real.safetensors"
    dg.save({"v": 1}, target)
    os.chmod(target, 0o640)
    link = tmp_path / "link.safetensors"
    link.symlink_to(target.name)
    chain = tmp_path / "chain.safetensors"
    chain.symlink_to(link.name)
    dg.save({"v": 2}, link)
    assert link.is_symlink() and dg.load(target) == {"v": 2}
    dg.save({"v": 3}, chain)
    assert chain.is_symlink() and link.is_symlink() and dg.load(target) == {"v": 3}
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    dangling = tmp_path / "dangling.safetensors"
    dangling.symlink_to("created.safetensors")
    dg.save({"v": 4}, dangling)
    assert dangling.is_symlink() and dg.load(tmp_path / "created.safetensors") == {"v": 4}
    assert _temps(tmp_path) == []


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_character_devices_are_written_directly(monkeypatch):
    calls = []
    real = serialization._write_direct
    monkeypatch.setattr(serialization, "_write_direct", lambda *a: (calls.append(a[0]), real(*a)))
    monkeypatch.setattr(serialization, "_write_atomic", lambda *a: pytest.fail("atomic path used"))
    dg.save({"w": dg.ones(1000)}, "/dev/null")
    assert calls == ["/dev/null"] and stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_device_errors_name_the_device():
    with pytest.raises(OSError, match="/dev/full.*No space left") as ei:
        dg.save({"w": dg.ones(1000)}, "/dev/full")
    assert ".tmp" not in str(ei.value)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_fifo_is_written_directly(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault("data", fifo.read_bytes()))
    reader.start()
    dg.save({"w": dg.arange(5), "epoch": 3}, fifo)
    reader.join(5)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    back = dg.load(io.BytesIO(got["data"]))
    assert back["epoch"] == 3 and back["w"].tolist() == [0, 1, 2, 3, 4]
    assert _temps(tmp_path) == []


def test_errors_name_the_target(tmp_path, monkeypatch):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        dg.save({"a": 1}, tmp_path)
    with pytest.raises(FileNotFoundError, match="missing-dir"):
        dg.save({"a": 1}, tmp_path / "missing-dir" / "c.safetensors")
    p = tmp_path / "c.safetensors"

    def failing(fh, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(serialization, "_write_bytes", failing)
    with pytest.raises(OSError, match="c.safetensors.*No space left") as ei:
        dg.save({"a": 1}, p)
    assert ".tmp" not in str(ei.value) and ei.value.errno == 28
    assert _temps(tmp_path) == [] and not p.exists()


def _stale(tmp_path, base, pid=99999999, token="0badc0de"):
    p = tmp_path / f".{base}.{pid}.{token}.tmp"
    p.write_bytes(b"partial checkpoint")
    return p


def test_stale_temporaries_of_killed_saves_are_removed(tmp_path):
    base = "ckpt.safetensors"
    stale = [_stale(tmp_path, base, 1234, "deadbeef"), _stale(tmp_path, base, 5678, "0123abcd")]
    old_style = tmp_path / f".{base}.k3j_9x0a.tmp"        # tempfile.mkstemp name (dyngraph before locking)
    old_style.write_bytes(b"x")
    os.utime(old_style, (time.time() - 3600, time.time() - 3600))
    recent_old_style = tmp_path / f".{base}.zz_9x0aq.tmp"
    recent_old_style.write_bytes(b"x")
    others = [tmp_path / ".other.safetensors.1.deadbeef.tmp", tmp_path / f"{base}.bak",
              tmp_path / f".{base}.1.deadbeef.tmp.keep", tmp_path / f".{base}.12.NOTHEX12.tmp"]
    for o in others:
        o.write_bytes(b"x")
    fifo = tmp_path / f".{base}.77.abcdef01.tmp"           # matches the pattern, but is no file:
    os.mkfifo(fifo)                                         # neither opened for blocking nor removed
    link = tmp_path / f".{base}.78.abcdef02.tmp"
    link.symlink_to(stale[0].name + ".elsewhere")
    others += [fifo, link]
    dg.save({"a": 1}, tmp_path / base)
    left = set(_temps(tmp_path)) | {p.name for p in tmp_path.iterdir()}
    for p in stale + [old_style]:
        assert p.name not in left
    for p in others + [recent_old_style]:
        assert p.name in left
    assert dg.load(tmp_path / base) == {"a": 1}


def test_temporary_being_written_is_left_alone(tmp_path):
    base = "ckpt.safetensors"
    live = _stale(tmp_path, base, os.getpid(), "feedf00d")
    fd = os.open(live, os.O_RDWR)       # a separate open file description: flock conflicts
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        dg.save({"a": 1}, tmp_path / base)
        assert live.exists()
    finally:
        os.close(fd)
    dg.save({"a": 2}, tmp_path / base)
    assert not live.exists()


def test_killed_save_leaves_previous_checkpoint_and_next_save_cleans_up(tmp_path):
    target = tmp_path / "ckpt.safetensors"
    dg.save({"epoch": 1, "w": dg.ones(10)}, target)
    before = target.read_bytes()
    child = textwrap.dedent(f"""
        import sys, time
        import dyngraph as dg
        from dyngraph import serialization
        real = serialization._write_bytes
        def slow(fh, data):
            real(fh, data)
            fh.flush()
            print("mid-write", flush=True)
            time.sleep(60)
        serialization._write_bytes = slow
        dg.save({{"epoch": 2, "w": dg.zeros(100000)}}, {str(target)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "mid-write"
        temps = _temps(tmp_path)
        assert len(temps) == 1 and temps[0].startswith(f".ckpt.safetensors.{proc.pid}.")
        dg.save({"epoch": 1, "w": dg.ones(10)}, tmp_path / "other.safetensors")
        assert _temps(tmp_path) == temps            # a live writer's file is not touched
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert target.read_bytes() == before and _temps(tmp_path) == temps
    dg.save({"epoch": 3}, target)
    assert _temps(tmp_path) == [] and dg.load(target) == {"epoch": 3}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give files away")
def test_existing_owner_kept_when_root(tmp_path):
    p = tmp_path / "owned.safetensors"
    p.write_bytes(b"old")
    os.chown(p, 65534, 65534)
    os.chmod(p, 0o640)
    dg.save({"a": 1}, p)
    st = os.stat(p)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o640)
