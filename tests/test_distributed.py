"""Distributed tests: each launches `mpiexec -n 2` on a script in tests/distributed/."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("mpi4py")

HERE = os.path.dirname(os.path.abspath(__file__))
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install mpich)")


def _run(script: str, n: int = 2, timeout: float = 120):
    """mpiexec -n n python tests/distributed/<script>; a job still running after ``timeout`` seconds
    is killed with all its ranks (its own session) and fails the test: a hang never hangs the suite."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), OMP_NUM_THREADS="1")
    p = subprocess.Popen([MPIEXEC, "-n", str(n), sys.executable, os.path.join(HERE, "distributed", script)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"{script} hung for more than {timeout} s\n{out}\n{err}")
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _assert_ok(res, marker):
    assert res.returncode == 0, res.stdout + res.stderr
    for r in range(2):
        assert f"{marker} OK rank {r}" in res.stdout, res.stdout + res.stderr


def test_collectives_values():
    _assert_ok(_run("collectives_check.py"), "collectives")


def test_ddp_matches_single_process_with_double_batch():
    _assert_ok(_run("ddp_check.py"), "ddp")


def test_ddp_ranks_taking_different_branches_do_not_hang():
    _assert_ok(_run("ddp_branches_check.py"), "branches")


def test_rank_failure_aborts_job_quickly():
    t0 = time.time()
    res = _run("failure_check.py", timeout=60)
    assert res.returncode != 0
    assert time.time() - t0 < 30, "a failing rank must stop the job within 30 s"
    assert "planted failure on rank 1" in res.stderr


def test_mismatched_models_and_collectives_raise_on_every_rank():
    res = _run("mismatch_check.py", timeout=90)
    _assert_ok(res, "mismatch")
    for r in range(2):   # every check raised on both ranks: nobody waits for a peer that gave up
        assert res.stdout.count(f"rank {r} raised:") == 9, res.stdout


def test_rank_calling_sys_exit_fails_the_job():
    t0 = time.time()
    res = _run("exit_check.py", timeout=90)
    elapsed = time.time() - t0
    assert res.returncode != 0, res.stdout + res.stderr
    assert "rank 1 calls sys.exit(3)" in res.stdout and "without rank 1" not in res.stdout
    assert "rank 1 has left the job" in res.stderr and "DistributedDataParallel gradient all_reduce" in res.stderr
    assert elapsed < 45, elapsed             # startup (~10 s here) + a 2 s grace


def test_ranks_finishing_at_different_times_exit_normally():
    res = _run("exit_ok_check.py", timeout=90)
    _assert_ok(res, "exit_ok")
    assert "rank 0 saw rank 1's exit notice while still working" in res.stdout


def test_stalled_rank_times_out_naming_collective_rank_and_timeout():
    t0 = time.time()
    res = _run("stall_check.py", timeout=90)
    elapsed = time.time() - t0
    assert res.returncode != 0, res.stdout + res.stderr   # the job ends although rank 1 sleeps 120 s
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("rank 0 raised after")]
    assert line, res.stdout + res.stderr
    waited = float(line[0].split("after ")[1].split(" s")[0])
    assert 0.9 < waited < 3.0, line[0]
    assert "all_reduce of shape [5] float32" in line[0], line[0]
    assert "on rank 0 did not complete within the process group timeout of 1 s" in line[0], line[0]
    assert "process group is unusable" in res.stdout
    assert elapsed < 60, elapsed


def test_sampler_shares_cover_dataset_once():
    from dyngraph.distributed import DistributedSampler

    data = list(range(10))
    shares = [list(DistributedSampler(data, num_replicas=3, rank=r, shuffle=True, seed=1)) for r in range(3)]
    assert all(len(s) == 4 for s in shares)
    assert set(sum(shares, [])) == set(data)  # padded by repetition, covers everything
    dropped = [list(DistributedSampler(data, num_replicas=3, rank=r, shuffle=False, drop_last=True)) for r in range(3)]
    assert sorted(sum(dropped, [])) == list(range(9))
    s = DistributedSampler(data, num_replicas=2, rank=0, seed=3)
    e0 = list(s)
    s.set_epoch(1)
    assert list(s) != e0
    s.set_epoch(0)
    assert list(s) == e0


def test_ddp_digits_example_reaches_single_process_accuracy():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), OMP_NUM_THREADS="1")
    res = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "dyngraph.examples.ddp_digits"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    line = [ln for ln in res.stdout.splitlines() if "test accuracy" in ln][-1]
    acc = float(line.split("test accuracy")[1].split("%")[0])
    assert acc >= 96.5, line  # the single-process demo reaches ~97-98%
    assert "identical predictions: True" in line
