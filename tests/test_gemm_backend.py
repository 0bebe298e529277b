"""The optional MKL products (dyngraph/ops/_gemm.py, ``gemm``/``blas_load`` in _kernels.c).

The library tests run where ``pip install mkl`` (``make test`` does it) put ``libmkl_rt`` in
the environment, or ``DYNGRAPH_BLAS`` names a CBLAS library; elsewhere they skip, and the
fallback tests still run.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import dyngraph as dg
from dyngraph.ops import _gemm

K = _gemm._K
LIB = _gemm.find_library() if os.environ.get("DYNGRAPH_BLAS", "").lower() != "numpy" else None
needs_kernels = pytest.mark.skipif(K is None, reason="dyngraph._kernels not built (or pure-Python run)")
needs_lib = pytest.mark.skipif(K is None or LIB is None,
                               reason="no CBLAS library (pip install mkl) in this environment")


@pytest.fixture
def single_thread():
    """Products as in a one-thread run (the only runs that use MKL), restored afterwards."""
    before = _gemm._single_thread
    _gemm.set_single_thread(True)
    yield
    _gemm._single_thread, _gemm._active = before, None


def _loaded():
    assert _gemm.library() is not None, "the library was found but did not open"


# ---------------------------------------------------------------------------
# the kernel's argument handling, without a library
# ---------------------------------------------------------------------------

@needs_kernels
def test_blas_load_bad_path_names_it():
    with pytest.raises((OSError, RuntimeError)) as e:
        K.blas_load("/nonexistent/libnothing.so", 1)
    assert "/nonexistent/libnothing.so" in str(e.value) or "already loaded" in str(e.value)


@needs_kernels
def test_blas_load_library_without_cblas_is_refused():
    libc = ctypes.util.find_library("c")
    if libc is None:
        pytest.skip("no libc to try")
    with pytest.raises((OSError, RuntimeError)) as e:
        K.blas_load(libc, 1)
    assert "cblas_sgemm" in str(e.value) or "already loaded" in str(e.value)


@needs_kernels
def test_gemm_without_library_returns_false_in_a_fresh_process():
    code = ("import numpy as np, dyngraph._kernels as k; a = np.ones((4, 4), np.float32); "
            "o = np.empty((4, 4), np.float32); print(k.gemm(a, a, o))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@needs_kernels
def test_gemm_rejects_malformed_calls():
    a = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError):
        K.gemm(a, a)
    if _gemm.library() is None and LIB is None:
        pytest.skip("shape checks run only with a library loaded")


@needs_kernels
def test_gemm_beta_must_be_zero_or_one():
    a = np.ones((3, 4), np.float32)
    out = np.empty((3, 3), np.float32)
    with pytest.raises(ValueError, match="beta must be 0 or 1"):
        K.gemm(a, a.T, out, 0.5)
    with pytest.raises(TypeError):
        K.gemm(a, a.T, out, "one")


def test_find_library_honours_the_switch(monkeypatch):
    monkeypatch.setenv("DYNGRAPH_BLAS", "numpy")
    assert _gemm.find_library() is None
    monkeypatch.setenv("DYNGRAPH_BLAS", "/opt/some/libmkl_rt.so.2")
    assert _gemm.find_library() == "/opt/some/libmkl_rt.so.2"


def test_env_threads(monkeypatch):
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _gemm._env_threads()
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")   # OpenBLAS's own variable wins
    assert not _gemm._env_threads()


def test_set_num_threads_switches(single_thread):
    dg.set_num_threads(2)
    assert _gemm._single_thread is False
    assert _gemm.library() is None      # more than one thread: NumPy's BLAS
    dg.set_num_threads(1)
    assert _gemm._single_thread is True


def test_matmul2d_falls_back_for_other_dtypes_and_shapes(single_thread):
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    assert np.array_equal(_gemm.matmul2d(a, a.T), a @ a.T)
    v = np.arange(4.0)
    assert np.array_equal(_gemm.matmul2d(np.ones((3, 4)), v), np.ones((3, 4)) @ v)
    with pytest.raises(ValueError):
        _gemm.matmul2d(np.ones((3, 4)), np.ones((5, 6)))


# ---------------------------------------------------------------------------
# with the library
# ---------------------------------------------------------------------------

def _layouts(x):
    """The same matrix as C-order, F-order (a transposed view), a padded row stride, and a
    non-unit column stride (which gemm must refuse: NumPy then computes it)."""
    yield x
    yield np.asfortranarray(x)
    wide = np.zeros((x.shape[0], x.shape[1] + 3), x.dtype)
    wide[:, :x.shape[1]] = x
    yield wide[:, :x.shape[1]]
    twice = np.repeat(x, 2, axis=1)
    yield twice[:, ::2]


@needs_lib
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(3, 50, 60), (20, 128, 501), (7, 1, 9), (5, 33, 1), (1, 40, 40),
                                 (64, 64, 64)])
def test_gemm_equals_numpy_in_every_layout(single_thread, dtype, mkn):
    _loaded()
    m, k, n = mkn
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for A in _layouts(a):
        for B in _layouts(b):
            out = np.empty((m, n), dtype)
            took = K.gemm(A, B, out)
            unit = (A.strides[1] == A.itemsize or A.strides[0] == A.itemsize or 1 in A.shape) and \
                   (B.strides[1] == B.itemsize or B.strides[0] == B.itemsize or 1 in B.shape)
            if unit:
                assert took, (A.strides, B.strides)
                np.testing.assert_allclose(out, want, rtol=tol, atol=tol * k)
            else:
                assert not took
            got = _gemm.matmul2d(A, B)
            assert got.dtype == np.dtype(dtype) and got.shape == (m, n)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k)


@needs_lib
def test_gemm_refuses_what_it_cannot_pass(single_thread):
    _loaded()
    a = np.ones((4, 5), np.float32)
    out = np.empty((4, 4), np.float32)
    assert not K.gemm(a, a.T.astype(np.float64), np.empty((4, 4), np.float64))  # mixed dtypes
    assert not K.gemm(a.astype(np.int32), a.T.astype(np.int32), np.empty((4, 4), np.int32))
    assert not K.gemm(np.ones((4, 0), np.float32), np.ones((0, 4), np.float32), out)  # K == 0
    with pytest.raises(ValueError, match="do not match"):
        K.gemm(a, a, out)
    with pytest.raises(ValueError, match="a must have 2 dimensions, got 1"):
        K.gemm(np.ones(4, np.float32), a, out)
    with pytest.raises(TypeError, match="out must be a writable, C-contiguous"):
        K.gemm(a, a.T, np.empty((4, 4), np.float32).T)   # out not C-contiguous
    ro = np.empty((4, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="out must be"):
        K.gemm(a, a.T, ro)
    with pytest.raises(TypeError, match="a must be an array"):
        K.gemm([[1.0]], a, out)


@needs_lib
def test_gemm_propagates_nan_and_inf(single_thread):
    _loaded()
    a = np.ones((4, 8), np.float32)
    a[1, 2] = np.nan
    a[2, 3] = np.inf
    b = np.ones((8, 16), np.float32)
    out = _gemm.matmul2d(a, b)
    assert np.isnan(out[1]).all() and np.isinf(out[2]).all() and (out[0] == 8).all()


@needs_lib
def test_linear_matmul_and_backward_match_torch(single_thread):
    """The products of linear (forward, both vjps) and matmul through MKL, against PyTorch."""
    _loaded()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 128))
    w = rng.standard_normal((501, 128)) * 0.1
    b = rng.standard_normal(501)
    y = rng.standard_normal((128, 33))
    X, W, B, Y = (dg.tensor(a, requires_grad=True) for a in (x, w, b, y))
    tX, tW, tB, tY = (torch.tensor(a, requires_grad=True) for a in (x, w, b, y))
    out = dg.nn.functional.linear(X, W, B)
    tout = torch.nn.functional.linear(tX, tW, tB)
    z, tz = X @ Y, tX @ tY
    (out.sin().sum() + z.cos().sum()).backward()
    (tout.sin().sum() + tz.cos().sum()).backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(z.detach().numpy(), tz.detach().numpy(), rtol=1e-12, atol=1e-12)
    for a, t in ((X, tX), (W, tW), (B, tB), (Y, tY)):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-11, atol=1e-11)


@needs_lib
def test_float32_linear_layer_matches_torch(single_thread):
    _loaded()
    dg.manual_seed(0)
    lin = dg.nn.Linear(128, 640)
    tlin = torch.nn.Linear(128, 640)
    with torch.no_grad():
        tlin.weight.copy_(torch.from_numpy(lin.weight.detach().numpy()))
        tlin.bias.copy_(torch.from_numpy(lin.bias.detach().numpy()))
    x = np.random.default_rng(1).standard_normal((25, 128)).astype(np.float32)
    X, tX = dg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lin(X).square().mean().backward()
    tlin(tX).square().mean().backward()
    np.testing.assert_allclose(X.grad.numpy(), tX.grad.numpy(), rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), tlin.weight.grad.numpy(), rtol=2e-4, atol=1e-6)


@needs_lib
def test_library_reported_and_gradcheck(single_thread):
    _loaded()
    assert "mkl" in os.path.basename(_gemm.library()).lower() or os.environ.get("DYNGRAPH_BLAS")
    x = dg.randn(5, 7, dtype=dg.float64, requires_grad=True)
    w = dg.randn(6, 7, dtype=dg.float64, requires_grad=True)
    assert dg.autograd.gradcheck(lambda a, b: dg.nn.functional.linear(a, b).tanh(), (x, w))


@needs_lib
def test_matmul_batched_and_convolution_through_mkl_match_torch(single_thread):
    _loaded()
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((6, 20)), rng.standard_normal((4, 20, 7))
    out = np.empty((4, 6, 7))
    np.testing.assert_allclose(_gemm.matmul_batched(a, b, out), np.matmul(a, b), rtol=1e-12)
    x, w = rng.standard_normal((3, 4, 9, 9)), rng.standard_normal((5, 4, 3, 3))
    res = []
    for lib in (dg, torch):
        X, W = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(X, W, padding=1, stride=2)
        (y * y).sum().backward()
        res.append([y.detach().numpy(), X.grad.numpy(), W.grad.numpy()])
    for d, t in zip(*res, strict=True):
        np.testing.assert_allclose(d, t, rtol=1e-11, atol=1e-11)


def test_an_incomplete_mkl_install_is_not_opened(tmp_path):
    """libmkl_rt without libmkl_core / libmkl_sequential beside it would end the process at the
    first product (MKL's fatal error): it is skipped with a warning instead."""
    lone = tmp_path / "libmkl_rt.so.3"
    lone.write_bytes(b"")
    assert _gemm._missing_parts(str(lone)) == ["libmkl_core", "libmkl_sequential"]
    (tmp_path / "libmkl_core.so.3").write_bytes(b"")
    (tmp_path / "libmkl_sequential.so.3").write_bytes(b"")
    assert _gemm._missing_parts(str(lone)) == []
    assert _gemm._missing_parts("/opt/other/libopenblas.so") == []
    if K is None:
        pytest.skip("the library is only opened through dyngraph._kernels")
    code = ("import warnings, dyngraph.ops._gemm as g; g.set_single_thread(True)\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always'); print(g.library(), len(w))")
    env = dict(os.environ, DYNGRAPH_BLAS=str(lone))
    (tmp_path / "libmkl_core.so.3").unlink()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.split() == ["None", "1"]


def test_backends_mkl_reports_the_library(monkeypatch, single_thread):
    monkeypatch.setenv("DYNGRAPH_BLAS", "numpy")
    assert dg.backends.mkl.is_available() is dg.backends.mkl._numpy_has_mkl()
    monkeypatch.delenv("DYNGRAPH_BLAS")
    if LIB is None or K is None:
        pytest.skip("no MKL in this environment")
    assert dg.backends.mkl.is_available()
    assert dg.backends.mkl.library() == _gemm.library() is not None
    dg.set_num_threads(2)
    assert dg.backends.mkl.library() is None       # more than one thread: NumPy's BLAS
    dg.set_num_threads(1)


@needs_lib
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_inside_the_product(single_thread, dtype, monkeypatch):
    """``try_gemm(a, b, bias)`` writes the bias first and lets the library add the product
    (beta = 1): the values of ``a @ b + bias`` (rounding aside), 2-D and 3-D linears take it,
    and a bias it cannot take (another dtype or shape) is refused, not broadcast wrongly."""
    _loaded()
    monkeypatch.setattr(_gemm, "_amd", False)   # every product to the library (see AMD_NT_ROWS)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 96)).astype(dtype)
    w = rng.standard_normal((70, 96)).astype(dtype)
    b = rng.standard_normal(70).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    out = _gemm.try_gemm(a, w.T, b)
    assert out is not None and out.dtype == dtype and out.flags.c_contiguous
    np.testing.assert_allclose(out, a.astype(np.float64) @ w.T.astype(np.float64) + b, **tol)
    assert _gemm.try_gemm(a, w.T, b.astype(np.float16)) is None
    assert _gemm.try_gemm(a, w.T, b[:69]) is None
    assert _gemm.try_gemm(a, w.T, b.reshape(1, 70)) is None
    x3 = rng.standard_normal((4, 10, 96)).astype(dtype)
    for x in (a, x3):
        X, W, B = (dg.tensor(v, requires_grad=True) for v in (x, w, b))
        tX, tW, tB = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
        y, ty = dg.nn.functional.linear(X, W, B), torch.nn.functional.linear(tX, tW, tB)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **tol)
        y.tanh().sum().backward()
        ty.tanh().sum().backward()
        for g, tg in ((X, tX), (W, tW), (B, tB)):
            np.testing.assert_allclose(g.grad.numpy(), tg.grad.numpy(), **tol)


@needs_lib
def test_narrow_products_stay_in_numpy(single_thread):
    """Fewer than MIN_DIM output columns or inner size: NumPy (MKL's generic kernels are slow
    there); from MIN_DIM on, MKL; a narrow linear still gives PyTorch's values."""
    _loaded()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    w = rng.standard_normal((_gemm.MIN_DIM - 1, 512)).astype(np.float32)
    assert _gemm.try_gemm(x, w.T) is None
    w16 = rng.standard_normal((_gemm.MIN_DIM, 512)).astype(np.float32)
    assert _gemm.try_gemm(x, w16.T) is not None
    g = rng.standard_normal((128, _gemm.MIN_DIM - 1)).astype(np.float32)   # inner size 15
    assert _gemm.try_gemm(g, rng.standard_normal((_gemm.MIN_DIM - 1, 512)).astype(np.float32)) is None
    b = rng.standard_normal(_gemm.MIN_DIM - 1).astype(np.float32)
    y = dg.nn.functional.linear(dg.tensor(x), dg.tensor(w), dg.tensor(b)).numpy()
    ty = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b)).numpy()
    np.testing.assert_allclose(y, ty, rtol=1e-5, atol=1e-4)


@needs_lib
def test_amd_policy_keeps_only_skinny_transposed_float32_products(single_thread, monkeypatch):
    """On AMD processors (MKL's generic kernels) only float32 ``x @ W.T`` with fewer than
    AMD_NT_ROWS rows goes to MKL; the others stay in NumPy's OpenBLAS, with the same values."""
    _loaded()
    monkeypatch.setattr(_gemm, "_amd", True)
    rng = np.random.default_rng(9)
    w = rng.standard_normal((300, 64)).astype(np.float32)
    few = rng.standard_normal((_gemm.AMD_NT_ROWS - 1, 64)).astype(np.float32)
    many = rng.standard_normal((_gemm.AMD_NT_ROWS, 64)).astype(np.float32)
    assert _gemm.try_gemm(few, w.T) is not None                      # skinny x @ W.T: MKL
    assert _gemm.try_gemm(many, w.T) is None                         # many rows: NumPy
    assert _gemm.try_gemm(few, w.T.copy()) is None                   # contiguous right operand
    assert _gemm.try_gemm(few.T.copy().T, w.T.copy()) is None        # g.T @ x layout
    assert _gemm.try_gemm(few.astype(np.float64), w.T.astype(np.float64)) is None   # float64
    for x in (few, many):
        b = rng.standard_normal(300).astype(np.float32)
        y = dg.nn.functional.linear(dg.tensor(x), dg.tensor(w), dg.tensor(b)).numpy()
        np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64) + b, rtol=1e-5, atol=1e-4)
    monkeypatch.setattr(_gemm, "_amd", False)
    assert _gemm.try_gemm(many, w.T) is not None and _gemm.try_gemm(few, w.T.copy()) is not None


def test_cpu_vendor_is_read():
    assert _gemm._cpu_is_amd() in (True, False)
