"""2-D float matrix products through Intel MKL when it is installed, else NumPy.

Why: NumPy's wheels bundle OpenBLAS, which runs the skinny float32 products of dynamic
models at up to half the speed of Intel MKL (the library PyTorch's CPU build uses) on
AVX-512 machines.  Measured on this project's Xeon (Sapphire Rapids class, one thread,
median us; docs/performance.md "Eighth pass" has the command): ``x @ W.T`` for
``x`` (20, 128) and ``W`` (5001, 128) -- a language model's output layer -- OpenBLAS 526,
MKL 299, PyTorch 283; (25, 128) @ (128, 640) 67 / 39 / 36; (128, 784) @ (784, 512) 892 /
719 / 727.  OpenBLAS is slowest when the second operand is a transposed view (the layout
of every ``linear``): up to 1.8x its own time on a contiguous copy.  On AMD processors MKL
takes its generic kernels and OpenBLAS is the faster library for everything but that skinny
float32 ``x @ W.T`` (see ``AMD_NT_ROWS``), so only those products go to MKL there.

How: ``pip install mkl`` (or ``pip install dyngraph[mkl]``) puts ``libmkl_rt.so`` in the
environment's ``lib`` folder; :func:`matmul2d` finds it on its first call, opens it in
the compiled kernels (``dyngraph._kernels.blas_load``, RTLD_LOCAL: NumPy's OpenBLAS and
PyTorch's MKL are untouched) and hands it float32/float64 2-D products, each operand in
its own layout (a transposed view is passed with CBLAS's transpose flag, never copied).

When: only while BLAS runs one thread (``OMP_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``
or ``MKL_NUM_THREADS=1`` in the environment, ``dg.set_num_threads(1)``, or a one-core
machine), because MKL is opened with its sequential threading layer: a threaded MKL next
to NumPy's threaded OpenBLAS competes for the cores (measured: a 0.3 ms product took 8 ms
with two MKL threads on the loaded 2-core machine).  With more threads, NumPy's threaded
BLAS keeps every product.  Products with at most two rows (matrix-vector-like, where
NumPy's call is cheapest), narrow ones (fewer than ``MIN_DIM`` columns or a shorter inner
size) and tiny ones also stay in NumPy.

Switches: ``DYNGRAPH_BLAS=numpy`` never uses MKL; ``DYNGRAPH_BLAS=/path/libmkl_rt.so.2``
names the library (any CBLAS with ``cblas_sgemm``/``cblas_dgemm``).  ``DYNGRAPH_PURE_PYTHON``
turns it off with the other compiled paths.  Results differ from OpenBLAS's in the last
bits (another summation order), as PyTorch's do.

>>> float(matmul2d(np.ones((4, 3), np.float32), np.ones((3, 2), np.float32))[0, 0])
3.0
"""

from __future__ import annotations

import glob
import os
import sys
import sysconfig

import numpy as np

from ._util import compiled_kernels

_K = compiled_kernels("gemm", "blas_load")

# Fewer rows than this: NumPy (OpenBLAS's matrix-vector path; cheaper to call).
MIN_ROWS = 3
# Less work (M * N * K) than this: NumPy (its ~1 us call is as fast as any library's).
MIN_WORK = 8192
# Fewer output columns or a shorter inner size than this: NumPy.  MKL's generic kernels (the
# path it takes on AMD) are slow for narrow products -- a classifier's few outputs and their
# gradients; AMD Zen 4, one thread, us, MKL / NumPy's OpenBLAS: (128, 512) @ (512, 10) with
# its bias 82 / 40, (2000, 128) @ (128, 5) 137 / 100, the input gradient (128, 10) @ (10, 512)
# 23 / 15; at 16 the two are equal ((128, 512) @ (512, 16) 27 / 29).
MIN_DIM = 16

_F32 = np.dtype(np.float32)
_FLOATS = (_F32, np.dtype(np.float64))
_SEQUENTIAL_LAYER = 1    # MKL_Set_Threading_Layer's value for MKL_THREADING_SEQUENTIAL

# On AMD processors MKL runs its generic kernels, and NumPy's OpenBLAS (AVX-512 / AVX2 kernels)
# is as fast or faster for every product except the skinny float32 ``x @ W.T`` (a transposed
# right operand, fewer than AMD_NT_ROWS rows), where OpenBLAS runs at 1.1-1.9x MKL's time.
# AMD Zen 4, one thread, OpenBLAS / MKL time over a grid of M in 16..1024 and K, N in
# 128..1024 (docs/performance.md, Ninth pass): float32 x @ W.T 1.07-1.91 below 256 rows,
# 0.84-1.02 from 256; g @ W and g.T @ x 0.66-1.07; float64 0.62-1.16 (median ~0.9).  The LSTM
# layer's large products: dW_hh 11.9 -> 9.7 ms, x @ W_ih^T 6.7 -> 5.5 ms.  On Intel
# processors MKL was faster for every product measured (the Xeon of the eighth pass).
AMD_NT_ROWS = 256
_amd: bool | None = None         # the CPU is AMD's (decided on the first product)

_library: str | None = None      # the opened library's path
_tried = False                   # the search ran (it runs once, on the first product)
_single_thread: bool | None = None   # None: decided from the environment on first use
_active: bool | None = None      # products take the library now; None: decide on next call


def _env_threads() -> bool:
    """Whether the environment limits BLAS to one thread (or the machine has one core)."""
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        v = os.environ.get(name, "").strip()
        if v:
            return v.split(",")[0].strip() == "1"
    try:
        return len(os.sched_getaffinity(0)) == 1
    except (AttributeError, OSError):
        return os.cpu_count() == 1


def find_library() -> str | None:
    """Path of the CBLAS library :func:`matmul2d` would open, or None.

    ``DYNGRAPH_BLAS`` first (``numpy``/``off``/``0``: none); else ``libmkl_rt.so*`` in the
    environment's ``lib`` folders (where ``pip install mkl`` puts it).

    >>> find_library() is None or find_library().endswith(tuple("0123456789o"))
    True
    """
    choice = os.environ.get("DYNGRAPH_BLAS", "").strip()
    if choice.lower() in ("numpy", "off", "0", "none"):
        return None
    if choice:
        return choice
    roots = []
    for root in (sysconfig.get_paths().get("data"), sys.prefix, sys.base_prefix,
                 sysconfig.get_config_var("userbase")):
        if root and root not in roots:
            roots.append(root)
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, "lib", "libmkl_rt.so*")))
        if hits:
            return hits[-1]
    return None


def _missing_parts(path: str) -> list:
    """The libraries MKL's dispatcher loads on its first call that are not beside ``path``:
    without them MKL prints a fatal error and ends the process, which no caller could catch.
    Only checked for ``libmkl_rt``; another CBLAS named by ``DYNGRAPH_BLAS`` is trusted."""
    if not os.path.basename(path).startswith("libmkl_rt"):
        return []
    here = os.path.dirname(path)
    return [name for name in ("libmkl_core", "libmkl_sequential")
            if not glob.glob(os.path.join(here, name + ".so*"))]


def _open() -> None:
    global _library, _tried
    _tried = True
    if _K is None:
        return
    path = find_library()
    if path is None:
        return
    missing = _missing_parts(path)
    if missing:
        import warnings  # noqa: PLC0415  (only on this rare path)
        warnings.warn(f"dyngraph: {path!r} lacks {', '.join(missing)} beside it; matrix products "
                      "use NumPy's BLAS (reinstall mkl, or set DYNGRAPH_BLAS=numpy to silence "
                      "this)", RuntimeWarning, stacklevel=3)
        return
    try:
        _K.blas_load(path, _SEQUENTIAL_LAYER)
    except (OSError, RuntimeError) as e:
        import warnings  # noqa: PLC0415  (only on this rare path)
        warnings.warn(f"dyngraph: could not open the BLAS library {path!r} ({e}); matrix "
                      "products use NumPy's BLAS (set DYNGRAPH_BLAS=numpy to silence this)",
                      RuntimeWarning, stacklevel=3)
        return
    _library = path


def _cpu_is_amd() -> bool:
    """Whether ``/proc/cpuinfo`` names AMD as the vendor (False where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return "AuthenticAMD" in line
    except OSError:
        pass
    return False


def set_single_thread(single: bool) -> None:
    """Called by ``dg.set_num_threads``: MKL's sequential kernels serve only one-thread runs."""
    global _single_thread, _active
    _single_thread = bool(single)
    _active = None


def _decide() -> bool:
    global _active, _amd
    if _amd is None:
        _amd = _cpu_is_amd()
    if _single_thread is None:
        set_single_thread(_env_threads())
    if _single_thread and not _tried:
        _open()
    _active = bool(_single_thread) and _library is not None
    return _active


def library() -> str | None:
    """Path of the opened MKL library when products use it now, else None.

    >>> library() is None or "mkl" in library() or True
    True
    """
    return _library if (_decide() if _active is None else _active) else None


def try_gemm(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` (``+ bias``) by MKL for 2-D float arrays where it is installed and applies,
    else None (the caller then runs its own NumPy call: ``np.dot`` is the cheapest for
    ``x @ W.T`` on small products, ``@`` for a transposed left operand, where ``np.dot`` is
    ~25% slower).

    ``bias`` (1-D, ``b``'s columns, the same dtype) is written into the output first and the
    product added to it by the library (beta = 1, PyTorch's ``addmm``): one pass over the
    output instead of the library's zeroing plus a separate ``out += bias`` (2-6% of a
    linear forward, one thread: (128, 784) @ (784, 512) 1084 -> 1061 us, (1000, 128) @
    (128, 384) 1027 -> 967 us).  The bias is then added before the products' sum is
    complete, so the last bits may differ from ``a @ b + bias``.

    >>> r = try_gemm(np.ones((4, 3)), np.ones((3, 2)))
    >>> r is None or float(r[0, 0]) == 3.0
    True
    """
    if not (_active if _active is not None else _decide()):
        return None
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 2 or b.ndim != 2:
        return None
    m, k = a.shape
    n = b.shape[1]
    dt = a.dtype
    if m < MIN_ROWS or n < MIN_DIM or k < MIN_DIM or m * n * k < MIN_WORK or dt not in _FLOATS \
            or b.dtype != dt or b.shape[0] != k:
        return None
    if _amd and (dt != _F32 or m >= AMD_NT_ROWS or b.strides[0] != b.itemsize):
        return None     # NumPy's OpenBLAS is as fast or faster on AMD (see AMD_NT_ROWS)
    out = np.empty((m, n), dt)
    if bias is None:
        return out if _K.gemm(a, b, out) else None
    if type(bias) is not np.ndarray or bias.dtype != dt or bias.shape != (n,):
        return None
    out[...] = bias
    return out if _K.gemm(a, b, out, 1.0) else None


def matmul2d(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for 2-D arrays: through MKL where it is installed and applies, else NumPy.

    >>> float(matmul2d(np.eye(3), np.arange(9.0).reshape(3, 3))[2, 1])
    7.0
    """
    out = try_gemm(a, b)
    return a @ b if out is None else out


def active() -> bool:
    """Whether :func:`matmul2d` hands products to MKL now (installed, opened, one thread).

    >>> active() in (True, False)
    True
    """
    return _active if _active is not None else _decide()


def matmul_batched(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` for a stack of products (``a`` (M, K) shared or (B, M, K),
    ``b`` (B, K, N), ``out`` (B, M, N)): one MKL call per product where :func:`active` (NumPy's
    batched matmul runs OpenBLAS's per-product path; the convolutions' column products
    are 1.1-1.5x faster in MKL), else NumPy.

    >>> o = np.empty((2, 3, 4)); _ = matmul_batched(np.ones((3, 5)), np.ones((2, 5, 4)), o)
    >>> float(o[1, 2, 3])
    5.0
    """
    if not active() or b.ndim != 3 or out.ndim != 3 or a.ndim not in (2, 3):
        return np.matmul(a, b, out=out)
    for i in range(b.shape[0]):
        matmul_into(a if a.ndim == 2 else a[i], b[i], out[i])
    return out


def matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` for 2-D float arrays: through MKL where :func:`active` and
    the operands' layouts can be passed as they are (``out`` C-contiguous), else NumPy.  No
    size threshold (the caller decides): the recurrent layers' per-step products call it
    once a step with fixed arrays (``ops/rnn.py``).

    >>> o = np.empty((4, 2)); _ = matmul_into(np.ones((4, 3)), np.ones((3, 2)), out=o)
    >>> float(o[3, 1])
    3.0
    """
    if (active() and type(a) is np.ndarray and type(b) is np.ndarray and type(out) is np.ndarray
            and out.flags.c_contiguous and out.flags.writeable and _K.gemm(a, b, out)):
        return out
    return np.matmul(a, b, out=out)


def pack_operand(b: np.ndarray, m: int) -> np.ndarray | None:
    """``b`` (K, N) float32 stored once in MKL's own packed layout for products ``a @ b`` with
    ``a`` of ``m`` rows (:func:`matmul_packed`), or None where MKL is not :func:`active`, the
    library has no packed products (``cblas_sgemm_pack``) or ``b``'s layout cannot be passed.

    Why: a recurrent layer multiplies the same ``W_hh`` at every step, and a plain product
    repacks all of it each time (H 256, batch 32, one thread: ``h @ W_hh^T`` 140 -> 106 us).

    >>> pb = pack_operand(np.ones((3, 8), np.float32), 4)
    >>> pb is None or float(matmul_packed(np.ones((4, 3), np.float32), pb,
    ...                                   np.empty((4, 8), np.float32))[3, 7]) == 3.0
    True
    """
    if not active() or type(b) is not np.ndarray or b.ndim != 2 or b.dtype != np.float32:
        return None
    size = _K.sgemm_pack_size(m, b.shape[1], b.shape[0]) if hasattr(_K, "sgemm_pack_size") else 0
    if not size:
        return None
    buf = np.empty(size, np.uint8)
    return buf if _K.sgemm_pack(b, m, buf) else None


def matmul_packed(a: np.ndarray, pb: np.ndarray, out: np.ndarray, beta: float = 0.0) -> np.ndarray:
    """``out = a @ b (+ beta * out)`` for ``b`` packed by :func:`pack_operand`; ``a`` (m, K)
    float32, C-contiguous or a transposed view, ``out`` (m, N) C-contiguous float32.

    >>> pb = pack_operand(np.eye(3, 8, dtype=np.float32), 3)
    >>> pb is None or matmul_packed(np.ones((3, 3), np.float32), pb, np.empty((3, 8), np.float32)).shape == (3, 8)
    True
    """
    return _K.sgemm_packed(a, pb, out, beta)
