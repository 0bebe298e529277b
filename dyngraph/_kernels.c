/*
 * dyngraph._kernels: fused pointwise gate kernels for the recurrent layers (ops/rnn.py).
 *
 * One LSTM / GRU / Elman step is a GEMM (left to NumPy's BLAS) plus ~10-15 elementwise
 * passes (exp, tanh, products) that NumPy runs one at a time over the (batch, 4H) block;
 * each kernel here does one step's pointwise math in a single pass over the rows
 * (lstm_sequence / gru_sequence: a whole layer direction, calling matmul per step; at 1-3
 * rows a step, lstm_sequence and lstm_backward_sequence run the products themselves from
 * W_hh's own layout, see "one-row products" below).  The math
 * is ops/rnn.py's NumPy reference path (same formulas, same order of the products), so the
 * two paths agree to a few ulp; ops/rnn.py uses these kernels when this module imports and
 * DYNGRAPH_PURE_PYTHON is not set.
 *
 * Arrays come through the buffer protocol (no NumPy headers): float32 ('f') or float64
 * ('d'), 2-D.  Inputs may have any strides (transposed GEMM results, column slices, a
 * broadcast gradient); outputs must be writable and C-contiguous.  An output may be the same
 * memory as an input of the same shape (each row is read in full before it is written).
 *
 * Arithmetic is in the arrays' own precision with the NumPy path's order of operations, so
 * the products round exactly as there; only exp and tanh differ.  Those are written out
 * (Cody-Waite reduction + polynomials, branch-free) so that the compiler vectorises the
 * row loops: libm's scalar calls would cost more than NumPy's SIMD passes.  Accuracy
 * (tests/test_rnn_kernels.py measures it): within a few ulp of the correctly rounded value
 * in both precisions.
 *
 * The row math is written once, below "#else", and compiled twice (this file includes
 * itself with KERNEL_T = double, then float).
 */
#ifndef KERNEL_T   /* ---- the module; the per-dtype row loops are further down ---- */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The row loops are compiled twice on x86-64 Linux with GCC (AVX2 and baseline SSE2) and
 * the loader picks one at run time: 8 floats or 4 doubles per vector instead of 4 or 2. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KCLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KCLONES
#endif

/* Work below this many elements keeps the GIL: releasing and re-taking it costs more than
 * the loop, and re-taking it can wait for another thread's switch interval. */
#define GIL_FREE_ELEMENTS 16384

/* ------------------------------------------------------------------------------------ */
/* scalar math (double), written so that loops over it vectorise                         */
/* ------------------------------------------------------------------------------------ */

/* KMATH: always inlined.  Left to itself GCC compiles each of these once, for the baseline
 * target, and the AVX2 clones of the row loops called that scalar copy per element (the
 * float32 sigmoid ran at ~11 ns per element, 3.5x NumPy's four ufunc passes); inlined, the
 * loops vectorise.  The arithmetic is the same IEEE operations in the same order (no FMA:
 * -ffp-contract=off, and the clones target AVX2 without FMA), so the bits do not change. */
#if defined(__GNUC__)
#define KMATH static inline __attribute__((always_inline))
#else
#define KMATH static inline
#endif

KMATH double u2d(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }
KMATH uint64_t d2u(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }

/* exp(x): x = k ln2 + r with |r| <= ln2/2 (ln2 split in two so k*LN2_HI is exact), exp(r)
 * by its Taylor polynomial to degree 13 (truncation < 5e-18 relative), times 2^k built in
 * the exponent bits.  k is read from the low mantissa bits of x*log2(e) + 1.5*2^52 (the
 * add rounds to an integer).  Above 709 the result is inf, below -708 it is 0 (the true
 * values there are inf or below 1e-307 in double, and 0 in float32); NaN stays NaN. */
KMATH double k_exp(double x)
{
    const double shift = 0x1.8p52;
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double xc = x > 709.0 ? 709.0 : x;
    xc = xc < -708.0 ? -708.0 : xc;
    double t = xc * 1.4426950408889634074 + shift;
    double kd = t - shift;
    uint64_t ki = d2u(t);
    double r = (xc - kd * ln2_hi) - kd * ln2_lo;
    double p = 1.0 / 6227020800.0;                    /* 1/13! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    double res = p * u2d((ki + 1023u) << 52);
    res = x > 709.0 ? (double)INFINITY : res;
    return x < -708.0 ? 0.0 : res;
}

/* PyTorch's (and the NumPy path's) logistic: 1 / (1 + exp(-x)). */
KMATH double k_sigmoid(double x) { return 1.0 / (1.0 + k_exp(-x)); }

/* The cell rules' logistic floors its argument at -700 (the NumPy rules do, to keep exp
 * finite); in float32 the floor changes nothing (exp there saturates at -88). */
KMATH double k_logistic(double x) { return k_sigmoid(x < -700.0 ? -700.0 : x); }

/* tanh in double precision: tanh|x| = m / (m + 2) with m = expm1(2|x|); expm1(y) is its
 * Taylor polynomial to degree 18 for y < 1 (truncation < 5e-18 relative, no cancellation
 * near 0) and exp(y) - 1 above (relative error within 1.6x exp's); |x| > 20 gives +-1. */
KMATH double k_tanh_d(double x)
{
    double ax = fabs(x);
    ax = ax > 20.0 ? 20.0 : ax;
    double y = 2.0 * ax;
    double s = 1.0 / 6402373705728000.0;              /* 1/18! */
    s = s * y + 1.0 / 355687428096000.0;
    s = s * y + 1.0 / 20922789888000.0;
    s = s * y + 1.0 / 1307674368000.0;
    s = s * y + 1.0 / 87178291200.0;
    s = s * y + 1.0 / 6227020800.0;
    s = s * y + 1.0 / 479001600.0;
    s = s * y + 1.0 / 39916800.0;
    s = s * y + 1.0 / 3628800.0;
    s = s * y + 1.0 / 362880.0;
    s = s * y + 1.0 / 40320.0;
    s = s * y + 1.0 / 5040.0;
    s = s * y + 1.0 / 720.0;
    s = s * y + 1.0 / 120.0;
    s = s * y + 1.0 / 24.0;
    s = s * y + 1.0 / 6.0;
    s = s * y + 0.5;
    s = s * y + 1.0;
    s = s * y;
    double m = y < 1.0 ? s : k_exp(y) - 1.0;
    return copysign(m / (m + 2.0), x);
}

/* float32 versions, in float arithmetic (8 lanes per AVX2 vector): each step rounds in float32
 * as the NumPy path does.  exp is inf above 88.3 and 0 below -87.3 (2^k must stay a normal
 * float), so a sigmoid below ~5e-39 (a float32 subnormal) is 0.  Polynomials fitted (relative least squares on Chebyshev nodes)
 * to exp on [-ln2/2, ln2/2] (max relative error 1.8e-8 with these float coefficients) and
 * to tanh(x)/x in x^2 on |x| < 1/2 (3.5e-9). */
KMATH float k_expf(float x)
{
    const float shift = 0x1.8p23f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    float xc = x > 88.3f ? 88.3f : x;
    xc = xc < -87.3f ? -87.3f : xc;
    float t = xc * 1.44269504f + shift;
    float kd = t - shift;
    uint32_t ki;
    memcpy(&ki, &t, sizeof ki);
    float r = (xc - kd * ln2_hi) - kd * ln2_lo;
    float p = 0.00138294208f;
    p = p * r + 0.0083747711f;
    p = p * r + 0.0416683592f;
    p = p * r + 0.166664213f;
    p = p * r + 0.499999911f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t sb = (ki + 127u) << 23;
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    float res = p * scale;
    res = x > 88.3f ? (float)INFINITY : res;
    return x < -87.3f ? 0.0f : res;
}

KMATH float k_sigmoidf(float x) { return 1.0f / (1.0f + k_expf(-x)); }

/* tanh|x| = 1 - 2 / (exp(2|x|) + 1) for |x| >= 1/2 (no cancellation there), the fitted odd
 * polynomial below; |x| > 10 gives +-1 (tanh(x) rounds to 1 in float32 above 9.02). */
KMATH float k_tanhf(float x)
{
    float ax = fabsf(x);
    ax = ax > 10.0f ? 10.0f : ax;
    float big = 1.0f - 2.0f / (k_expf(2.0f * ax) + 1.0f);
    float z = ax * ax;
    float q = -0.00660957908f;
    q = q * z + 0.0212722924f;
    q = q * z - 0.0538928881f;
    q = q * z + 0.133328974f;
    q = q * z - 0.333333254f;
    q = q * z + 1.0f;
    return copysignf(ax < 0.5f ? ax * q : big, x);
}

/* ------------------------------------------------------------------------------------ */
/* arrays through the buffer protocol                                                     */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    Py_buffer v;
    int held;            /* v must be released */
    int present;         /* not None */
    char *buf;
    Py_ssize_t s0, s1;   /* byte strides */
} Arr;

typedef struct {
    const char *kern;
    int f32;             /* -1: not known yet */
    Py_ssize_t rows;
} Ctx;

static int is_fmt(const char *fmt, char want)
{
    if (fmt == NULL)
        return want == 'B';
    if (fmt[0] == '@' || fmt[0] == '=')
        fmt++;
#if PY_LITTLE_ENDIAN
    else if (fmt[0] == '<')
        fmt++;
#else
    else if (fmt[0] == '>' || fmt[0] == '!')
        fmt++;
#endif
    return fmt[0] == want && fmt[1] == '\0';
}

/* Get a 2-D float array of shape (ctx->rows, cols) (rows fixed by the first array seen).
 * out: writable and C-contiguous.  optional: None is allowed (present = 0); 2: a 1-D
 * input of cols elements too, the same for every row. */
static int get_arr(Ctx *ctx, const char *name, PyObject *o, int out, int optional,
                   Py_ssize_t cols, Arr *a)
{
    a->held = 0;
    a->present = 0;
    if (o == Py_None && optional)
        return 0;
    if (!PyObject_CheckBuffer(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a float32 or float64 array%s, got %.100s",
                     ctx->kern, name, optional ? " or None" : "", Py_TYPE(o)->tp_name);
        return -1;
    }
    int flags = out ? (PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT)
                    : (PyBUF_STRIDES | PyBUF_FORMAT);
    if (PyObject_GetBuffer(o, &a->v, flags) < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_Format(PyExc_ValueError, "%s: %s must be %s float32 or float64 array (%S)",
                     ctx->kern, name, out ? "a writable, C-contiguous" : "a", value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    a->held = 1;
    int f32;
    if (a->v.itemsize == 4 && is_fmt(a->v.format, 'f'))
        f32 = 1;
    else if (a->v.itemsize == 8 && is_fmt(a->v.format, 'd'))
        f32 = 0;
    else {
        PyErr_Format(PyExc_TypeError, "%s: %s must be float32 or float64, got buffer format '%s'",
                     ctx->kern, name, a->v.format ? a->v.format : "B");
        return -1;
    }
    if (ctx->f32 < 0)
        ctx->f32 = f32;
    else if (ctx->f32 != f32) {
        PyErr_Format(PyExc_TypeError, "%s: %s is %s but the other arrays are %s", ctx->kern, name,
                     f32 ? "float32" : "float64", ctx->f32 ? "float32" : "float64");
        return -1;
    }
    if (a->v.ndim == 1 && optional == 2 && !out && a->v.shape[0] == cols) {
        /* a vector (a bias) stands for every row: row stride 0 */
        a->buf = (char *)a->v.buf;
        a->s0 = 0;
        a->s1 = a->v.strides[0];
        if (((uintptr_t)a->buf) % (uintptr_t)a->v.itemsize || a->s1 % a->v.itemsize) {
            PyErr_Format(PyExc_ValueError, "%s: %s is not aligned to its element size", ctx->kern, name);
            return -1;
        }
        a->present = 1;
        return 0;
    }
    if (a->v.ndim != 2) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be 2-D (rows, %zd), got %d-D", ctx->kern,
                     name, cols, a->v.ndim);
        return -1;
    }
    if (ctx->rows < 0)
        ctx->rows = a->v.shape[0];
    if (a->v.shape[0] != ctx->rows || a->v.shape[1] != cols) {
        PyErr_Format(PyExc_ValueError, "%s: %s must have shape (%zd, %zd), got (%zd, %zd)",
                     ctx->kern, name, ctx->rows, cols, a->v.shape[0], a->v.shape[1]);
        return -1;
    }
    a->buf = (char *)a->v.buf;
    a->s0 = a->v.strides[0];
    a->s1 = a->v.strides[1];
    Py_ssize_t isz = a->v.itemsize;
    if (((uintptr_t)a->buf) % (uintptr_t)isz || a->s0 % isz || a->s1 % isz) {
        PyErr_Format(PyExc_ValueError, "%s: %s is not aligned to its element size", ctx->kern, name);
        return -1;
    }
    a->present = 1;
    return 0;
}

static void release(Arr *arrs, int n)
{
    for (int i = 0; i < n; i++)
        if (arrs[i].held)
            PyBuffer_Release(&arrs[i].v);
}

/* per-call row buffers: n elements of the arrays' type */
static void *scratch(Py_ssize_t n, int f32)
{
    void *p = PyMem_RawMalloc((size_t)(n > 0 ? n : 1) * (f32 ? sizeof(float) : sizeof(double)));
    if (p == NULL)
        PyErr_NoMemory();
    return p;
}

static int check_nargs(const char *kern, Py_ssize_t nargs, Py_ssize_t want, const char *sig)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s(%s) takes %zd arguments, got %zd", kern, sig, want, nargs);
        return -1;
    }
    return 0;
}

/* hidden size from the width of a gate block (k gates) */
static int gate_width(Ctx *ctx, const char *name, PyObject *o, int k, Py_ssize_t *hsz)
{
    Py_buffer v;
    if (!PyObject_CheckBuffer(o) || PyObject_GetBuffer(o, &v, PyBUF_STRIDES) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s must be a 2-D float32 or float64 array, got %.100s",
                     ctx->kern, name, Py_TYPE(o)->tp_name);
        return -1;
    }
    int ok = v.ndim == 2 && v.shape[1] % k == 0;
    Py_ssize_t w = v.ndim == 2 ? v.shape[1] : -1;
    int nd = v.ndim;
    PyBuffer_Release(&v);
    if (!ok) {
        if (nd != 2)
            PyErr_Format(PyExc_ValueError, "%s: %s must be 2-D (rows, %d * hidden), got %d-D",
                         ctx->kern, name, k, nd);
        else
            PyErr_Format(PyExc_ValueError, "%s: %s has %zd columns, not a multiple of %d gates",
                         ctx->kern, name, w, k);
        return -1;
    }
    *hsz = w / k;
    return 0;
}

/* The float32 hidden product W_hh @ h.T arrives transposed: (4H, B) rows, read as a (B, 4H)
 * view whose rows are columns.  block8_add_f writes 8 of its rows plus the matching rows of
 * xw into dst (8 x W, row-major) with AVX2 8x8 register transposes: a scalar element-by-
 * element copy was ~30% of the LSTM step's gate time.  Returns 0 (nothing written) where it
 * does not apply: no AVX2 at run time, or not 8 rows / unit column stride / W % 8. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_BLOCK8 1
static int have_avx2 = -1;   /* set once at import */

__attribute__((target("avx2"))) static void block8_add_avx2(const char *src, Py_ssize_t ld,
                                                           const char *xw, Py_ssize_t xld,
                                                           Py_ssize_t W, float *dst)
{
    for (Py_ssize_t j0 = 0; j0 < W; j0 += 8) {
        __m256 r0 = _mm256_loadu_ps((const float *)(src + (j0 + 0) * ld));
        __m256 r1 = _mm256_loadu_ps((const float *)(src + (j0 + 1) * ld));
        __m256 r2 = _mm256_loadu_ps((const float *)(src + (j0 + 2) * ld));
        __m256 r3 = _mm256_loadu_ps((const float *)(src + (j0 + 3) * ld));
        __m256 r4 = _mm256_loadu_ps((const float *)(src + (j0 + 4) * ld));
        __m256 r5 = _mm256_loadu_ps((const float *)(src + (j0 + 5) * ld));
        __m256 r6 = _mm256_loadu_ps((const float *)(src + (j0 + 6) * ld));
        __m256 r7 = _mm256_loadu_ps((const float *)(src + (j0 + 7) * ld));
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
        __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        __m256 o[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                       _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                       _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                       _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
        for (int k = 0; k < 8; k++) {
            /* dst = hw + xw: the NumPy path's (w @ h.T).T + xw, one rounding */
            __m256 x = _mm256_loadu_ps((const float *)(xw + k * xld) + j0);
            _mm256_storeu_ps(dst + k * W + j0, _mm256_add_ps(o[k], x));
        }
    }
}

/* a: the (B, W) transposed product view; x: xw, rows [xrow, xrow + 8) */
static int block8_add_f(const Arr *a, const Arr *x, Py_ssize_t xrow, Py_ssize_t b0,
                        Py_ssize_t nb, Py_ssize_t W, float *dst)
{
    if (!have_avx2 || nb != 8 || W % 8 || a->s0 != (Py_ssize_t)sizeof(float)
        || x->s1 != (Py_ssize_t)sizeof(float))
        return 0;
    block8_add_avx2(a->buf + b0 * a->s0, a->s1, x->buf + xrow * x->s0, x->s0, W, dst);
    return 1;
}
#endif

/* columns of a are adjacent elements of size sz */
static int unit_cols(const Arr *a, size_t sz) { return a->s1 == (Py_ssize_t)sz; }

/* the bytes of a (rows, cols) array of elements of size sz: [*lo, *hi) */
static void arr_span(const Arr *a, Py_ssize_t rows, Py_ssize_t cols, size_t sz, char **lo, char **hi)
{
    Py_ssize_t r = (rows - 1) * a->s0, c = (cols - 1) * a->s1;
    *lo = a->buf + (r < 0 ? r : 0) + (c < 0 ? c : 0);
    *hi = a->buf + (r > 0 ? r : 0) + (c > 0 ? c : 0) + sz;
}

/* x (rows, xc) and y (rows, yc) may share memory */
static int spans_overlap(const Arr *x, Py_ssize_t xc, const Arr *y, Py_ssize_t yc, Py_ssize_t rows,
                         size_t sz)
{
    char *xl, *xh, *yl, *yh;
    if (rows <= 0 || xc <= 0 || yc <= 0)
        return 0;
    arr_span(x, rows, xc, sz, &xl, &xh);
    arr_span(y, rows, yc, sz, &yl, &yh);
    return xl < yh && yl < xh;
}

#define BEGIN_LOOP(work) PyThreadState *_ts = NULL; if ((work) >= GIL_FREE_ELEMENTS) _ts = PyEval_SaveThread();
#define END_LOOP() if (_ts) PyEval_RestoreThread(_ts);


/* ------------------------------------------------------------------------------------ */
/* the per-dtype row loops: this file again, twice                                        */
/* ------------------------------------------------------------------------------------ */

#define KERNEL_T double
#define KSFX d
#define KEXP k_exp
#define KSIG k_sigmoid
#define KTANH k_tanh_d
#define KLOGI k_logistic
#include "_kernels.c"
#undef KERNEL_T
#undef KSFX
#undef KEXP
#undef KSIG
#undef KTANH
#undef KLOGI

#define KERNEL_T float
#define KSFX f
#define KEXP k_expf
#define KSIG k_sigmoidf
#define KTANH k_tanhf
#define KLOGI k_sigmoidf
#include "_kernels.c"
#undef KERNEL_T

/* ------------------------------------------------------------------------------------ */
/* the Python functions: argument checks, then one call of a row loop                    */
/* ------------------------------------------------------------------------------------ */

typedef void (*RowLoop)(int flag, Py_ssize_t B, Py_ssize_t H, Arr *a, void *buf);

typedef struct {
    const char *name;
    int out;             /* writable, C-contiguous output */
    int optional;        /* None allowed */
    int width;           /* columns, in units of the hidden size */
} ArgSpec;

typedef struct {
    const char *kern, *sig;
    int narr;            /* array arguments (a trailing bool flag comes after them if flag < 0) */
    ArgSpec args[8];
    int shape_arg;       /* the argument whose width fixes the hidden size (and rows) */
    int gates;           /* its width in units of the hidden size */
    int flag;            /* -1: read from the last argument; else this constant */
    int scratch;         /* row buffer, in units of the hidden size */
    RowLoop fd, ff;
} KernSpec;

static PyObject *run_kernel(const KernSpec *ks, PyObject *const *args, Py_ssize_t nargs)
{
    Ctx ctx = {ks->kern, -1, -1};
    Arr a[8];
    Py_ssize_t H;
    memset(a, 0, sizeof a);
    if (check_nargs(ks->kern, nargs, ks->narr + (ks->flag < 0), ks->sig) < 0
        || gate_width(&ctx, ks->args[ks->shape_arg].name, args[ks->shape_arg], ks->gates, &H) < 0)
        return NULL;
    int flag = ks->flag;
    if (flag < 0 && (flag = PyObject_IsTrue(args[ks->narr])) < 0)
        return NULL;
    PyObject *res = NULL;
    void *buf = NULL;
    const ArgSpec *sp = &ks->args[ks->shape_arg];
    if (get_arr(&ctx, sp->name, args[ks->shape_arg], sp->out, 0, sp->width * H,
                &a[ks->shape_arg]) < 0)
        goto done;
    for (int k = 0; k < ks->narr; k++) {
        sp = &ks->args[k];
        if (k != ks->shape_arg
            && get_arr(&ctx, sp->name, args[k], sp->out, sp->optional, sp->width * H, &a[k]) < 0)
            goto done;
    }
    if ((buf = scratch(ks->scratch * H, ctx.f32)) == NULL)
        goto done;
    {
        BEGIN_LOOP(ctx.rows * ks->gates * H)
        (ctx.f32 ? ks->ff : ks->fd)(flag, ctx.rows, H, a, buf);
        END_LOOP()
    }
    res = Py_NewRef(Py_None);
done:
    PyMem_RawFree(buf);
    release(a, ks->narr);
    return res;
}

static const KernSpec K_LSTM_FWD = {
    "lstm_forward", "hw, xw, c_prev, acts, c, h", 6,
    {{"hw", 0, 0, 4}, {"xw", 0, 1, 4}, {"c_prev", 0, 0, 1}, {"acts", 1, 0, 4}, {"c", 1, 0, 1},
     {"h", 1, 0, 1}},
    3, 4, 0, 35, lstm_fwd_d, lstm_fwd_f};
static const KernSpec K_LSTM_BWD = {
    "lstm_backward", "dh, ghs, dc, acts, c, c_prev, dgates, dc_prev", 8,
    {{"dh", 0, 0, 1}, {"ghs", 0, 1, 1}, {"dc", 0, 0, 1}, {"acts", 0, 0, 4}, {"c", 0, 0, 1},
     {"c_prev", 0, 0, 1}, {"dgates", 1, 0, 4}, {"dc_prev", 1, 0, 1}},
    6, 4, 0, 13, lstm_bwd_d, lstm_bwd_f};
static const KernSpec K_GRU_FWD = {
    "gru_forward", "hw, xw, bias, h_prev, acts, hwn, h", 7,
    {{"hw", 0, 0, 3}, {"xw", 0, 0, 3}, {"bias", 0, 2, 3}, {"h_prev", 0, 0, 1}, {"acts", 1, 0, 3},
     {"hwn", 1, 0, 1}, {"h", 1, 0, 1}},
    4, 3, 0, 11, gru_fwd_d, gru_fwd_f};
static const KernSpec K_GRU_BWD = {
    "gru_backward", "dh, ghs, acts, hwn, h_prev, dxw, dhw, dhz", 8,
    {{"dh", 0, 0, 1}, {"ghs", 0, 1, 1}, {"acts", 0, 0, 3}, {"hwn", 0, 0, 1}, {"h_prev", 0, 0, 1},
     {"dxw", 1, 0, 3}, {"dhw", 1, 0, 3}, {"dhz", 1, 0, 1}},
    5, 3, 0, 13, gru_bwd_d, gru_bwd_f};
static const KernSpec K_RNN_FWD = {
    "rnn_forward", "hw, xw, h, relu", 3,
    {{"hw", 0, 0, 1}, {"xw", 0, 1, 1}, {"h", 1, 0, 1}},
    2, 1, -1, 1, rnn_fwd_d, rnn_fwd_f};
static const KernSpec K_RNN_BWD = {
    "rnn_backward", "dh, ghs, h, d, relu", 4,
    {{"dh", 0, 0, 1}, {"ghs", 0, 1, 1}, {"h", 0, 0, 1}, {"d", 1, 0, 1}},
    3, 1, -1, 2, rnn_bwd_d, rnn_bwd_f};
static const KernSpec K_CELL_STATE = {
    "lstm_cell_state", "gates, c, out", 3,
    {{"gates", 0, 0, 4}, {"c", 0, 0, 1}, {"out", 1, 0, 1}},
    0, 4, 0, 6, cell_d, cell_f};
static const KernSpec K_CELL_HIDDEN = {
    "lstm_cell_hidden", "gates, c, out", 3,
    {{"gates", 0, 0, 4}, {"c", 0, 0, 1}, {"out", 1, 0, 1}},
    0, 4, 1, 6, cell_d, cell_f};
static const KernSpec K_CELL_STATE_VJP = {
    "lstm_cell_state_vjp", "gr, gates, c, dgates, dc", 5,
    {{"gr", 0, 0, 1}, {"gates", 0, 0, 4}, {"c", 0, 0, 1}, {"dgates", 1, 1, 4}, {"dc", 1, 1, 1}},
    1, 4, 0, 11, cell_vjp_d, cell_vjp_f};
static const KernSpec K_CELL_HIDDEN_VJP = {
    "lstm_cell_hidden_vjp", "gr, gates, c, dgates, dc", 5,
    {{"gr", 0, 0, 1}, {"gates", 0, 0, 4}, {"c", 0, 0, 1}, {"dgates", 1, 1, 4}, {"dc", 1, 1, 1}},
    1, 4, 1, 11, cell_vjp_d, cell_vjp_f};

#define WRAP(fn, spec) \
    static PyObject *fn(PyObject *self, PyObject *const *args, Py_ssize_t nargs) \
    { return run_kernel(&spec, args, nargs); }
WRAP(py_lstm_forward, K_LSTM_FWD)
WRAP(py_lstm_backward, K_LSTM_BWD)
WRAP(py_gru_forward, K_GRU_FWD)
WRAP(py_gru_backward, K_GRU_BWD)
WRAP(py_rnn_forward, K_RNN_FWD)
WRAP(py_rnn_backward, K_RNN_BWD)
WRAP(py_lstm_cell_state, K_CELL_STATE)
WRAP(py_lstm_cell_hidden, K_CELL_HIDDEN)
WRAP(py_lstm_cell_state_vjp, K_CELL_STATE_VJP)
WRAP(py_lstm_cell_hidden_vjp, K_CELL_HIDDEN_VJP)

/* ==== packed float32 products for the recurrent steps (ops/rnn.py's LSTM layer) ==== */

/* OpenBLAS packs both operands of every product it runs, so a layer's per-step product
 * h @ W^T (B rows against the same W at every step) repacks all of W each step.
 * pack_panels packs W (N x K) once per layer call into N / 16 panels of K x 16 (panel p,
 * row k: W[16 p + j][k], j < 16); gemm_packed then runs C = A @ W^T from the panels with
 * a 4 x 16 AVX2/FMA register tile (1 x 16 for the last M % 4 rows).  Measured in a loop,
 * one thread: M 32, N 1024, K 256 (the forward step of a 256-unit layer) ~190 us, and
 * M 32, N 256, K 1024 (the backward step) ~193 us, against OpenBLAS's 240-300 us for the
 * same products.  Every element is one fused multiply-add chain over k = 0 .. K - 1 in
 * order, whichever tile computes it, so a row's result does not depend on the other
 * rows; it rounds differently from OpenBLAS's sums (both within float32 accumulation
 * error). */
#ifdef HAVE_BLOCK8
#define HAVE_PACKED 1
static int have_fma = -1;   /* set once at import */

__attribute__((target("avx2,fma"))) static void gemm_p16(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                                                        const char *A, Py_ssize_t lda,
                                                        const float *Bp, float *C)
{
    for (Py_ssize_t n0 = 0; n0 < N; n0 += 16) {
        const float *P = Bp + n0 * K;
        Py_ssize_t m0 = 0;
        for (; m0 + 4 <= M; m0 += 4) {
            const float *a0 = (const float *)(A + m0 * lda), *a1 = (const float *)(A + (m0 + 1) * lda);
            const float *a2 = (const float *)(A + (m0 + 2) * lda), *a3 = (const float *)(A + (m0 + 3) * lda);
            __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
            __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
            for (Py_ssize_t k = 0; k < K; k++) {
                __m256 b0 = _mm256_loadu_ps(P + k * 16), b1 = _mm256_loadu_ps(P + k * 16 + 8);
                __m256 x = _mm256_broadcast_ss(a0 + k);
                c00 = _mm256_fmadd_ps(x, b0, c00);
                c01 = _mm256_fmadd_ps(x, b1, c01);
                x = _mm256_broadcast_ss(a1 + k);
                c10 = _mm256_fmadd_ps(x, b0, c10);
                c11 = _mm256_fmadd_ps(x, b1, c11);
                x = _mm256_broadcast_ss(a2 + k);
                c20 = _mm256_fmadd_ps(x, b0, c20);
                c21 = _mm256_fmadd_ps(x, b1, c21);
                x = _mm256_broadcast_ss(a3 + k);
                c30 = _mm256_fmadd_ps(x, b0, c30);
                c31 = _mm256_fmadd_ps(x, b1, c31);
            }
            float *c = C + m0 * N + n0;
            _mm256_storeu_ps(c, c00);
            _mm256_storeu_ps(c + 8, c01);
            _mm256_storeu_ps(c + N, c10);
            _mm256_storeu_ps(c + N + 8, c11);
            _mm256_storeu_ps(c + 2 * N, c20);
            _mm256_storeu_ps(c + 2 * N + 8, c21);
            _mm256_storeu_ps(c + 3 * N, c30);
            _mm256_storeu_ps(c + 3 * N + 8, c31);
        }
        for (; m0 < M; m0++) {
            const float *a0 = (const float *)(A + m0 * lda);
            __m256 c0 = _mm256_setzero_ps(), c1 = c0;
            for (Py_ssize_t k = 0; k < K; k++) {
                __m256 x = _mm256_broadcast_ss(a0 + k);
                c0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(P + k * 16), c0);
                c1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(P + k * 16 + 8), c1);
            }
            _mm256_storeu_ps(C + m0 * N + n0, c0);
            _mm256_storeu_ps(C + m0 * N + n0 + 8, c1);
        }
    }
}

/* ---- one-row products from W's own (N, K) row-major layout (no packing) ----
 * The per-step products of a layer at batch 1-3 are matrix-vector products: OpenBLAS takes
 * ~5-6.5 us for h (1, 128) @ W_hh^T (128, 512) or d (1, 512) @ W_hh (512, 128) plus ~1 us
 * of NumPy's call, and packing W for gemm_p16 (whose 4-row tile such a row would not fill)
 * costs more than a short sentence's steps.  Both products read W in its own layout:
 * dot_rows_f: out[j] = sum_k W[j][k] x[k] (8 rows of W at a time, 8 lanes over k each,
 * one FMA chain per lane in k order, then the lanes summed ((0+1)+(2+3))+((4+5)+(6+7)));
 * axpy_rows_f: out[k] = sum_j d[j] W[j][k] (one FMA chain per column, j in order).  Each
 * element's sum depends on that row and column alone.  K (dot) / K (axpy) a multiple of 8;
 * ~1.5-2.5 us for the 512 x 128 products above. */
__attribute__((target("avx2,fma"), always_inline)) static inline float hsum8(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    __m128 p = _mm_hadd_ps(lo, hi);          /* (0+1, 2+3, 4+5, 6+7) */
    p = _mm_hadd_ps(p, p);                    /* ((0+1)+(2+3), ((4+5)+(6+7)), ...) */
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
}

__attribute__((target("avx2,fma"))) static void dot_rows_f(Py_ssize_t N, Py_ssize_t K,
                                                          const float *W, const float *x,
                                                          float *out)
{
    Py_ssize_t j0 = 0;
    for (; j0 + 8 <= N; j0 += 8) {
        const float *w = W + j0 * K;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        for (Py_ssize_t k = 0; k < K; k += 8) {
            __m256 v = _mm256_loadu_ps(x + k);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), v, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + K + k), v, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 2 * K + k), v, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 3 * K + k), v, a3);
            a4 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 4 * K + k), v, a4);
            a5 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 5 * K + k), v, a5);
            a6 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 6 * K + k), v, a6);
            a7 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 7 * K + k), v, a7);
        }
        /* the 8 lane sums of a0..a7 at once, in hsum8's order for each */
        __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
        __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
        __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
        /* u0: rows 0-3 of lanes 0-3 | rows 0-3 of lanes 4-7; u1 the same for rows 4-7 */
        __m256 s = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                 _mm256_permute2f128_ps(u0, u1, 0x31));
        _mm256_storeu_ps(out + j0, s);
    }
    for (; j0 < N; j0++) {
        const float *w = W + j0 * K;
        __m256 a0 = _mm256_setzero_ps();
        for (Py_ssize_t k = 0; k < K; k += 8)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(x + k), a0);
        out[j0] = hsum8(a0);
    }
}

/* nr (<= 8) vectors of columns [k0, k0 + 8 nr) of out = d @ W */
__attribute__((target("avx2,fma"), always_inline)) static inline void
axpy_chunk(Py_ssize_t N, Py_ssize_t K, const float *W, const float *d, float *out, const int nr)
{
    __m256 acc[8];
    for (int i = 0; i < nr; i++)
        acc[i] = _mm256_setzero_ps();
    for (Py_ssize_t j = 0; j < N; j++) {
        __m256 x = _mm256_broadcast_ss(d + j);
        const float *w = W + j * K;
        for (int i = 0; i < nr; i++)
            acc[i] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w + 8 * i), acc[i]);
    }
    for (int i = 0; i < nr; i++)
        _mm256_storeu_ps(out + 8 * i, acc[i]);
}

__attribute__((target("avx2,fma"))) static void axpy_rows_f(Py_ssize_t N, Py_ssize_t K,
                                                           const float *W, const float *d,
                                                           float *out)
{
    Py_ssize_t k0 = 0;
    for (; k0 + 64 <= K; k0 += 64)
        axpy_chunk(N, K, W + k0, d, out + k0, 8);
    switch ((K - k0) / 8) {
    case 7: axpy_chunk(N, K, W + k0, d, out + k0, 7); break;
    case 6: axpy_chunk(N, K, W + k0, d, out + k0, 6); break;
    case 5: axpy_chunk(N, K, W + k0, d, out + k0, 5); break;
    case 4: axpy_chunk(N, K, W + k0, d, out + k0, 4); break;
    case 3: axpy_chunk(N, K, W + k0, d, out + k0, 3); break;
    case 2: axpy_chunk(N, K, W + k0, d, out + k0, 2); break;
    case 1: axpy_chunk(N, K, W + k0, d, out + k0, 1); break;
    default: break;
    }
}
#endif

/* a float32 2-D buffer (any strides aligned to the element), or -1 with the error set */
static int f32_matrix(const char *kern, const char *name, PyObject *o, Py_buffer *v)
{
    if (!PyObject_CheckBuffer(o) || PyObject_GetBuffer(o, v, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s must be a 2-D float32 array, got %.100s", kern, name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    if (v->ndim != 2 || v->itemsize != 4 || !is_fmt(v->format, 'f') || (uintptr_t)v->buf % 4
        || v->strides[0] % 4 || v->strides[1] % 4) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a 2-D float32 array (got %d-D, format '%s')",
                     kern, name, v->ndim, v->format ? v->format : "B");
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

/* a writable, C-contiguous float32 buffer of n elements */
static int f32_out(const char *kern, const char *name, PyObject *o, Py_ssize_t n, Py_buffer *v)
{
    if (!PyObject_CheckBuffer(o)
        || PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s must be a writable, C-contiguous float32 array",
                     kern, name);
        return -1;
    }
    if (v->itemsize != 4 || !is_fmt(v->format, 'f') || v->len != n * 4 || (uintptr_t)v->buf % 4) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be float32 with %zd elements, got %zd of format '%s'",
                     kern, name, n, v->len / (v->itemsize ? v->itemsize : 1), v->format ? v->format : "B");
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

/* pack_panels(w, out): w (N, K) float32, any strides, N a multiple of 16; out: N * K float32 */
static PyObject *py_pack_panels(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "pack_panels";
    Py_buffer wv, ov;
    if (check_nargs(kern, nargs, 2, "w, out") < 0 || f32_matrix(kern, "w", args[0], &wv) < 0)
        return NULL;
    Py_ssize_t N = wv.shape[0], K = wv.shape[1], s0 = wv.strides[0], s1 = wv.strides[1];
    if (N % 16 || N == 0 || K == 0) {
        PyErr_Format(PyExc_ValueError, "pack_panels: w has shape (%zd, %zd); its rows must be a "
                     "positive multiple of 16 and its columns positive", N, K);
        PyBuffer_Release(&wv);
        return NULL;
    }
    if (f32_out(kern, "out", args[1], N * K, &ov) < 0) {
        PyBuffer_Release(&wv);
        return NULL;
    }
    const char *w = (const char *)wv.buf;
    float *bp = (float *)ov.buf;
    for (Py_ssize_t n0 = 0; n0 < N; n0 += 16) {
        float *P = bp + n0 * K;
        if (s1 == 4)   /* rows of w contiguous along k: read each row once */
            for (Py_ssize_t j = 0; j < 16; j++) {
                const float *src = (const float *)(w + (n0 + j) * s0);
                for (Py_ssize_t k = 0; k < K; k++)
                    P[k * 16 + j] = src[k];
            }
        else
            for (Py_ssize_t k = 0; k < K; k++)
                for (Py_ssize_t j = 0; j < 16; j++)
                    P[k * 16 + j] = *(const float *)(w + (n0 + j) * s0 + k * s1);
    }
    PyBuffer_Release(&ov);
    PyBuffer_Release(&wv);
    Py_RETURN_NONE;
}

/* gemm_packed(a, bp, out) or gemm_packed(a, bp, out=c): c (M, N) = a (M, K) @ W^T, bp the
 * panels of W (N, K) from pack_panels; a float32 with contiguous columns. */
static PyObject *py_gemm_packed(PyObject *self, PyObject *const *args, Py_ssize_t nargsf,
                                PyObject *kwnames)
{
    const char *kern = "gemm_packed";
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw != 3 || nargs < 2
        || (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "out") != 0)) {
        PyErr_SetString(PyExc_TypeError, "gemm_packed(a, bp, out) takes a, bp and out (positional "
                        "or out=)");
        return NULL;
    }
#ifndef HAVE_PACKED
    PyErr_SetString(PyExc_RuntimeError, "gemm_packed: not compiled in (AVX2/FMA on x86-64 GCC only)");
    return NULL;
#else
    if (!have_fma || !have_avx2) {
        PyErr_SetString(PyExc_RuntimeError, "gemm_packed: this CPU has no AVX2/FMA (check packed_gemm)");
        return NULL;
    }
    Py_buffer av, bv, cv;
    if (f32_matrix(kern, "a", args[0], &av) < 0)
        return NULL;
    PyObject *res = NULL;
    int held_b = 0, held_c = 0;
    Py_ssize_t M = av.shape[0], K = av.shape[1];
    if (av.strides[1] != 4 && K > 1) {
        PyErr_Format(PyExc_ValueError, "gemm_packed: a (%zd, %zd) must have contiguous columns", M, K);
        goto done;
    }
    if (!PyObject_CheckBuffer(args[1]) || PyObject_GetBuffer(args[1], &bv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "gemm_packed: bp must be a C-contiguous float32 array (pack_panels)");
        goto done;
    }
    held_b = 1;
    if (bv.itemsize != 4 || !is_fmt(bv.format, 'f') || K == 0 || bv.len % (4 * K)
        || (bv.len / (4 * K)) % 16) {
        PyErr_Format(PyExc_ValueError, "gemm_packed: bp (%zd float32 elements) is not the panels of "
                     "an (N, %zd) matrix with N a multiple of 16", bv.len / 4, K);
        goto done;
    }
    Py_ssize_t N = bv.len / (4 * K);
    PyObject *co = args[2];
    if (f32_out(kern, "out", co, M * N, &cv) < 0)
        goto done;
    held_c = 1;
    if (cv.ndim != 2 || cv.shape[0] != M || cv.shape[1] != N) {
        PyErr_Format(PyExc_ValueError, "gemm_packed: out must have shape (%zd, %zd)", M, N);
        goto done;
    }
    {
        PyThreadState *ts = M * N * K >= (1 << 18) ? PyEval_SaveThread() : NULL;
        gemm_p16(M, N, K, (const char *)av.buf, av.strides[0], (const float *)bv.buf, (float *)cv.buf);
        if (ts)
            PyEval_RestoreThread(ts);
    }
    res = Py_NewRef(co);
done:
    if (held_c)
        PyBuffer_Release(&cv);
    if (held_b)
        PyBuffer_Release(&bv);
    PyBuffer_Release(&av);
    return res;
#endif
}

/* ==== SGD with momentum (optim/sgd.py): one pass instead of NumPy's four ==== */

/* buf = momentum * buf + g; p -= lr * buf, element by element in the arrays' precision with
 * the NumPy path's roundings (buf *= m; buf += g; p -= lr * buf: each product and sum
 * rounded once, no fused multiply-add), so both paths give the same bits; one read of p, g
 * and buf and one write of p and buf instead of four passes and a temporary. */
KCLONES static void sgd_momentum_f(Py_ssize_t n, float *restrict p, const float *restrict g,
                                   float *restrict b, float lr, float m)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        float v = b[i] * m;
        v = v + g[i];
        b[i] = v;
        p[i] = p[i] - lr * v;
    }
}

KCLONES static void sgd_momentum_d(Py_ssize_t n, double *restrict p, const double *restrict g,
                                   double *restrict b, double lr, double m)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = b[i] * m;
        v = v + g[i];
        b[i] = v;
        p[i] = p[i] - lr * v;
    }
}

/* sgd_momentum(p, g, buf, lr, momentum): p and buf in place; p, g, buf C-contiguous arrays of
 * one float dtype and size, three separate memories */
/* The optimizer updates' shared checks: buffers v[0..n) from args[0..n) (p, g, then any
 * state arrays): C-contiguous, one float dtype and size, separate memories; g (index 1) is
 * read, the others are written.  Returns 1 for float32, 0 for float64, -1 with an error set;
 * *held counts the buffers to release either way. */
static int update_buffers(const char *kern, PyObject *const *args, int n, const char *const *names,
                          Py_buffer *v, int *held)
{
    for (*held = 0; *held < n; (*held)++) {
        int k = *held;
        int fl = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (k == 1 ? 0 : PyBUF_WRITABLE);
        if (!PyObject_CheckBuffer(args[k]) || PyObject_GetBuffer(args[k], &v[k], fl) < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: %s must be a%s C-contiguous float32 or float64 array",
                         kern, names[k], k == 1 ? "" : " writable");
            return -1;
        }
    }
    int f32 = v[0].itemsize == 4 && is_fmt(v[0].format, 'f');
    if (!f32 && !(v[0].itemsize == 8 && is_fmt(v[0].format, 'd'))) {
        PyErr_Format(PyExc_TypeError, "%s: p must be float32 or float64, got format '%s'", kern,
                     v[0].format ? v[0].format : "B");
        return -1;
    }
    for (int k = 1; k < n; k++)
        if (v[k].itemsize != v[0].itemsize || !is_fmt(v[k].format, f32 ? 'f' : 'd') || v[k].len != v[0].len) {
            PyErr_Format(PyExc_ValueError, "%s: %s must have p's dtype and size (%zd elements)", kern,
                         names[k], v[0].len / v[0].itemsize);
            return -1;
        }
    for (int k = 0; k < n; k++)
        for (int j = k + 1; j < n; j++) {
            const char *a = (const char *)v[k].buf, *b = (const char *)v[j].buf;
            if (v[0].len && a < b + v[j].len && b < a + v[k].len) {
                PyErr_Format(PyExc_ValueError, "%s: %s and %s share memory", kern, names[k], names[j]);
                return -1;
            }
        }
    return f32;
}

static PyObject *py_sgd_momentum(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "sgd_momentum";
    static const char *const names[] = {"p", "g", "buf"};
    Py_buffer v[3];
    int held = 0;
    PyObject *res = NULL;
    if (check_nargs(kern, nargs, 5, "p, g, buf, lr, momentum") < 0)
        return NULL;
    double lr = PyFloat_AsDouble(args[3]), m = PyFloat_AsDouble(args[4]);
    if (PyErr_Occurred())
        return NULL;
    int f32 = update_buffers(kern, args, 3, names, v, &held);
    if (f32 < 0)
        goto done;
    {
        Py_ssize_t n = v[0].len / v[0].itemsize;
        PyThreadState *ts = n >= GIL_FREE_ELEMENTS ? PyEval_SaveThread() : NULL;
        if (f32)
            sgd_momentum_f(n, (float *)v[0].buf, (const float *)v[1].buf, (float *)v[2].buf,
                           (float)lr, (float)m);
        else
            sgd_momentum_d(n, (double *)v[0].buf, (const double *)v[1].buf, (double *)v[2].buf, lr, m);
        if (ts)
            PyEval_RestoreThread(ts);
    }
    res = Py_NewRef(Py_None);
done:
    while (held > 0)
        PyBuffer_Release(&v[--held]);
    return res;
}

static PyObject *kw_out;   /* ("out",): the keyword of the product call */

/* The sequence kernels' shared parts: mm is (matmul, a, b, out), called once per step as
 * matmul(a, b, out=out) to write the step's hidden product; the rows of the per-step
 * arrays must be whole steps of the batch. */
static int check_mm(const char *kern, PyObject *mm)
{
    if (!PyTuple_Check(mm) || PyTuple_GET_SIZE(mm) != 4 || !PyCallable_Check(PyTuple_GET_ITEM(mm, 0))) {
        PyErr_Format(PyExc_TypeError, "%s: mm must be a tuple (matmul, a, b, out) with a callable matmul",
                     kern);
        return -1;
    }
    return 0;
}

static int step_product(PyObject *mm)
{
    PyObject *call[3] = {PyTuple_GET_ITEM(mm, 1), PyTuple_GET_ITEM(mm, 2), PyTuple_GET_ITEM(mm, 3)};
    PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(mm, 0), call, 2, kw_out);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int whole_steps(const char *kern, Py_ssize_t S, Py_ssize_t B)
{
    if (B <= 0 || S % B) {
        PyErr_Format(PyExc_ValueError, "%s: %zd rows are not whole steps of %zd rows", kern, S, B);
        return -1;
    }
    return 0;
}

/* defined with sgemm_pack below: packed_operand takes buf (sgemm_pack's) as the operand of
 * (m, k) @ (k, n) products, -1 with an exception when it is not; packed_rows writes MKL's
 * product of a (m, k) row-major block by it into out (leading dimension ldo) */
static int packed_operand(const char *kern, PyObject *o, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k,
                          Py_buffer *v);
static void packed_rows(const Py_buffer *v, const float *a, Py_ssize_t lda, float *out, Py_ssize_t ldo);

/* lstm_sequence(mm, hw, xw, c0, acts, hs, cs, hbuf, reverse): a whole LSTM direction of
 * equal steps (S = steps * B rows), without projection.  Each step calls
 * mm[0](mm[1], mm[2], out=mm[3]) -- NumPy's matmul, writing the hidden product that hw
 * (B, 4H) views -- then runs the gates of lstm_forward on rows of xw/acts/hs/cs; this
 * step's h also goes to hbuf (B, H), which the next product reads.  The caller fills
 * hbuf with h0 first.  One call per layer instead of a Python loop (at batch 1 the loop
 * and the per-step argument checks cost as much as the gates).
 * mm may instead be (w,): W_hh itself, float32 (4H, H), C-contiguous, H a multiple of 8;
 * the product of each row of hbuf then runs here (dot_rows_f, from W's own layout, written
 * straight into the step's rows of acts), with no call back into Python; hw is then None.
 * Needs AVX2/FMA (packed_gemm); for small batches (ops/rnn.py: 1-3 rows).
 * mm may also be (pb,): a 1-D uint8 array that sgemm_pack filled with W_hh^T (H, 4H) for
 * products of B rows (MKL loaded); each step MKL writes hbuf @ W_hh^T straight into the step's
 * rows of acts (hbuf C-contiguous, hw None), then the gates run there as with (w,). */
#ifdef HAVE_PACKED
/* a float32 (N, K) C-contiguous weight with K % 8 == 0 for the one-row products, or -1 */
static int row_weight(const char *kern, PyObject *o, Py_ssize_t N, Py_ssize_t K, Py_buffer *v)
{
    if (!have_fma || !have_avx2) {
        PyErr_Format(PyExc_RuntimeError, "%s: this CPU has no AVX2/FMA (check packed_gemm)", kern);
        return -1;
    }
    if (!PyObject_CheckBuffer(o) || PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: w must be a C-contiguous float32 array", kern);
        return -1;
    }
    if (v->ndim != 2 || v->shape[0] != N || v->shape[1] != K || K % 8 || v->itemsize != 4
        || !is_fmt(v->format, 'f') || (uintptr_t)v->buf % 4) {
        PyErr_Format(PyExc_ValueError, "%s: w must be float32 of shape (%zd, %zd), %zd a multiple "
                     "of 8", kern, N, K, K);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}
#endif

static PyObject *py_lstm_sequence(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *names[] = {"hw", "xw", "c0", "acts", "hs", "cs", "hbuf"};
    Ctx ctx = {"lstm_sequence", -1, -1};
    Arr a[7];
    Py_ssize_t H, S = 0, B;
    memset(a, 0, sizeof a);
    if (check_nargs(ctx.kern, nargs, 9, "mm, hw, xw, c0, acts, hs, cs, hbuf, reverse") < 0)
        return NULL;
    PyObject *mm = args[0];
    int native = PyTuple_Check(mm) && PyTuple_GET_SIZE(mm) == 1;
    /* mm = (pb,), pb a 1-D uint8 array from sgemm_pack: W_hh^T packed by MKL; each step's
     * product is written by MKL straight into the step's rows of acts (no product buffer) */
    int blas = 0;
    if (native && PyObject_CheckBuffer(PyTuple_GET_ITEM(mm, 0))) {
        Py_buffer probe;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(mm, 0), &probe, PyBUF_FORMAT | PyBUF_ND) == 0) {
            blas = probe.ndim == 1 && probe.itemsize == 1 && is_fmt(probe.format, 'B');
            PyBuffer_Release(&probe);
        } else
            PyErr_Clear();
        if (blas && args[1] != Py_None) {
            PyErr_SetString(PyExc_ValueError, "lstm_sequence: with mm = (packed W_hh^T,), hw must be None");
            return NULL;
        }
        native = !blas;
    }
    if (native) {
#ifndef HAVE_PACKED
        PyErr_SetString(PyExc_RuntimeError, "lstm_sequence: mm = (w,) is not compiled in (AVX2/FMA "
                        "on x86-64 GCC only)");
        return NULL;
#endif
        if (args[1] != Py_None) {
            PyErr_SetString(PyExc_ValueError, "lstm_sequence: with mm = (w,), hw must be None");
            return NULL;
        }
    } else if (!blas && check_mm(ctx.kern, mm) < 0)
        return NULL;
    int reverse = PyObject_IsTrue(args[8]);
    if (reverse < 0 || gate_width(&ctx, "acts", args[4], 4, &H) < 0)
        return NULL;
    PyObject *res = NULL;
    void *buf = NULL;
    Py_buffer wv, pbv;
    int held_w = 0, held_pb = 0;
    /* rows: acts, xw, hs, cs have S; hw, c0, hbuf have B */
    static const int order[] = {3, 1, 4, 5, 0, 2, 6};
    static const int width[] = {4, 4, 1, 4, 1, 1, 1};
    for (int k = 0; k < 7; k++) {
        int i = order[k];
        if (k == 4) {
            S = ctx.rows;
            ctx.rows = -1;
        }
        if (i == 0 && (native || blas))
            continue;
        if (get_arr(&ctx, names[i], args[1 + i], i >= 3, 0, width[i] * H, &a[i]) < 0)
            goto done;
    }
    B = ctx.rows;
    if (whole_steps(ctx.kern, S, B) < 0)
        goto done;
    if (blas) {
        if (!ctx.f32) {
            PyErr_SetString(PyExc_TypeError, "lstm_sequence: mm = (packed W_hh^T,) needs float32 arrays");
            goto done;
        }
        if (a[6].s1 != (Py_ssize_t)sizeof(float) || a[6].s0 != H * (Py_ssize_t)sizeof(float)) {
            PyErr_SetString(PyExc_ValueError, "lstm_sequence: with a packed W_hh^T, hbuf must be C-contiguous");
            goto done;
        }
        if (packed_operand(ctx.kern, PyTuple_GET_ITEM(mm, 0), B, 4 * H, H, &pbv) < 0)
            goto done;
        held_pb = 1;
    }
#ifdef HAVE_PACKED
    if (native) {
        if (!ctx.f32) {
            PyErr_SetString(PyExc_TypeError, "lstm_sequence: mm = (w,) needs float32 arrays");
            goto done;
        }
        if (row_weight(ctx.kern, PyTuple_GET_ITEM(mm, 0), 4 * H, H, &wv) < 0)
            goto done;
        held_w = 1;
    }
#endif
    if ((buf = scratch(H, ctx.f32)) == NULL)
        goto done;
    {
        Py_ssize_t n = S / B;
        for (Py_ssize_t s = 0; s < n; s++) {
            Py_ssize_t t = reverse ? n - 1 - s : s;
            if (blas)
                packed_rows(&pbv, (const float *)a[6].buf, H, (float *)(a[3].buf + t * B * a[3].s0), 4 * H);
            else
#ifdef HAVE_PACKED
            if (native)
                for (Py_ssize_t b = 0; b < B; b++)
                    dot_rows_f(4 * H, H, (const float *)wv.buf, (const float *)(a[6].buf + b * a[6].s0),
                               (float *)(a[3].buf + (t * B + b) * a[3].s0));
            else
#endif
            if (step_product(mm) < 0)
                goto done;
            Py_ssize_t prev = s == 0 ? -1 : (reverse ? t + 1 : t - 1);
            BEGIN_LOOP(B * 4 * H)
            if (ctx.f32)
                lstm_seq_step_f(t, prev, B, H, a, buf, native || blas);
            else
                lstm_seq_step_d(t, prev, B, H, a, buf, 0);
            END_LOOP()
        }
    }
    res = Py_NewRef(Py_None);
done:
    if (held_w)
        PyBuffer_Release(&wv);
    if (held_pb)
        PyBuffer_Release(&pbv);
    PyMem_RawFree(buf);
    release(a, 7);
    return res;
}

/* lstm_backward_sequence(w, ghs, acts, cs, c0, dgates, dh, dc, reverse): back-propagation
 * through a whole LSTM direction of equal steps (S = steps * B rows), without projection,
 * float32, for small batches: per step (last forward step first) lstm_backward's math on
 * dh + ghs and dc writes the step's rows of dgates (S, 4H) and dc_prev over dc, then
 * dh <- dgates rows @ W (axpy_rows_f, from W_hh's own (4H, H) layout).  dh, dc (B, H): the
 * gradients of h_n and c_n in, of h0 and c0 out.  ghs (S, H) or None; acts, cs: the
 * forward's outputs; w: W_hh, float32, C-contiguous, H a multiple of 8.  Needs AVX2/FMA. */
static PyObject *py_lstm_backward_sequence(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *names[] = {"ghs", "acts", "cs", "c0", "dgates", "dh", "dc"};
    Ctx ctx = {"lstm_backward_sequence", -1, -1};
    if (check_nargs(ctx.kern, nargs, 9, "w, ghs, acts, cs, c0, dgates, dh, dc, reverse") < 0)
        return NULL;
#ifndef HAVE_PACKED
    PyErr_SetString(PyExc_RuntimeError, "lstm_backward_sequence: not compiled in (AVX2/FMA on "
                    "x86-64 GCC only)");
    return NULL;
#else
    Arr a[7];
    Py_ssize_t H, S = 0, B;
    memset(a, 0, sizeof a);
    int reverse = PyObject_IsTrue(args[8]);
    if (reverse < 0 || gate_width(&ctx, "acts", args[2], 4, &H) < 0)
        return NULL;
    PyObject *res = NULL;
    void *buf = NULL;
    Py_buffer wv;
    int held_w = 0;
    /* S rows: acts, ghs, cs, dgates; B rows: c0, dh, dc */
    static const int slot[] = {1, 0, 2, 4, 3, 5, 6};
    static const int width[] = {4, 1, 1, 4, 1, 1, 1};
    static const int outp[] = {0, 0, 0, 1, 0, 1, 1};
    static const int opt[] = {0, 1, 0, 0, 0, 0, 0};
    for (int k = 0; k < 7; k++) {
        if (k == 4) {
            S = ctx.rows;
            ctx.rows = -1;
        }
        if (get_arr(&ctx, names[slot[k]], args[1 + slot[k]], outp[k], opt[k], width[k] * H,
                    &a[slot[k]]) < 0)
            goto done;
    }
    B = ctx.rows;
    if (whole_steps(ctx.kern, S, B) < 0)
        goto done;
    if (!ctx.f32) {
        PyErr_SetString(PyExc_TypeError, "lstm_backward_sequence: needs float32 arrays");
        goto done;
    }
    /* the outputs are written while the inputs are read: no shared memory */
    for (int i = 0; i < 4; i++) {
        static const int in_w[] = {1, 4, 1, 1};
        if (!a[i].present)
            continue;
        Py_ssize_t rows = i == 3 ? B : S;
        for (int o = 4; o < 7; o++) {
            Py_ssize_t orows = o == 4 ? S : B;
            char *xl, *xh, *yl, *yh;
            arr_span(&a[i], rows, in_w[i] * H, sizeof(float), &xl, &xh);
            arr_span(&a[o], orows, (o == 4 ? 4 : 1) * H, sizeof(float), &yl, &yh);
            if (xl < yh && yl < xh) {
                PyErr_Format(PyExc_ValueError, "lstm_backward_sequence: %s and %s share memory",
                             names[i], names[o]);
                goto done;
            }
        }
    }
    if (row_weight(ctx.kern, args[0], 4 * H, H, &wv) < 0)
        goto done;
    held_w = 1;
    if ((buf = scratch(8 * H, 1)) == NULL)
        goto done;
    {
        Py_ssize_t n = S / B;
        BEGIN_LOOP(S * 4 * H)
        for (Py_ssize_t s = 0; s < n; s++) {
            Py_ssize_t t = reverse ? s : n - 1 - s;
            Py_ssize_t prev = t == (reverse ? n - 1 : 0) ? -1 : (reverse ? t + 1 : t - 1);
            lstm_bwd_seq_step_f(t, prev, B, H, a, buf);
            for (Py_ssize_t b = 0; b < B; b++)
                axpy_rows_f(4 * H, H, (const float *)wv.buf,
                            (const float *)(a[4].buf + (t * B + b) * a[4].s0),
                            (float *)(a[5].buf + b * a[5].s0));
        }
        END_LOOP()
    }
    res = Py_NewRef(Py_None);
done:
    if (held_w)
        PyBuffer_Release(&wv);
    PyMem_RawFree(buf);
    release(a, 7);
    return res;
#endif
}

/* gru_sequence(mm, hw, xw, bias, acts, hwn, hs, hbuf, reverse): lstm_sequence for the GRU
 * (gates of gru_forward; bias (3H,) or None is b_hh, added to every row of the product). */
static PyObject *py_gru_sequence(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *names[] = {"hw", "xw", "bias", "hbuf", "acts", "hwn", "hs"};
    Ctx ctx = {"gru_sequence", -1, -1};
    Arr a[7];
    Py_ssize_t H, S = 0, B;
    memset(a, 0, sizeof a);
    if (check_nargs(ctx.kern, nargs, 9, "mm, hw, xw, bias, acts, hwn, hs, hbuf, reverse") < 0)
        return NULL;
    PyObject *mm = args[0];
    if (check_mm(ctx.kern, mm) < 0)
        return NULL;
    int reverse = PyObject_IsTrue(args[8]);
    if (reverse < 0 || gate_width(&ctx, "acts", args[4], 3, &H) < 0)
        return NULL;
    PyObject *res = NULL;
    void *buf = NULL;
    /* Python argument index, Arr slot, width, output, optional; S rows first, then B rows */
    static const int argi[] = {4, 2, 5, 6, 1, 3, 7};
    static const int slot[] = {4, 1, 5, 6, 0, 2, 3};
    static const int width[] = {3, 3, 1, 1, 3, 3, 1};
    static const int outp[] = {1, 0, 1, 1, 0, 0, 1};
    static const int opt[] = {0, 0, 0, 0, 0, 2, 0};
    for (int k = 0; k < 7; k++) {
        if (k == 4) {
            S = ctx.rows;
            ctx.rows = -1;
        }
        if (get_arr(&ctx, names[slot[k]], args[argi[k]], outp[k], opt[k], width[k] * H,
                    &a[slot[k]]) < 0)
            goto done;
    }
    B = ctx.rows;
    if (whole_steps(ctx.kern, S, B) < 0)
        goto done;
    if ((buf = scratch(32 * H, ctx.f32)) == NULL)
        goto done;
    {
        Py_ssize_t n = S / B;
        for (Py_ssize_t s = 0; s < n; s++) {
            Py_ssize_t t = reverse ? n - 1 - s : s;
            if (step_product(mm) < 0)
                goto done;
            BEGIN_LOOP(B * 3 * H)
            if (ctx.f32)
                gru_seq_step_f(t, B, H, a, buf);
            else
                gru_seq_step_d(t, B, H, a, buf);
            END_LOOP()
        }
    }
    res = Py_NewRef(Py_None);
done:
    PyMem_RawFree(buf);
    release(a, 7);
    return res;
}

/* unary(name, x, out): name is 'exp', 'tanh', 'sigmoid' (elementwise) or 'softmax' (of each
   row: the last axis of the 2-D x) */
static PyObject *py_unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("unary", nargs, 3, "name, x, out") < 0)
        return NULL;
    const char *name = PyUnicode_Check(args[0]) ? PyUnicode_AsUTF8(args[0]) : NULL;
    int op = !name ? -1 : !strcmp(name, "exp") ? 0 : !strcmp(name, "tanh") ? 1
             : !strcmp(name, "sigmoid") ? 2 : !strcmp(name, "softmax") ? 3 : -1;
    if (op < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "unary: name must be 'exp', 'tanh', 'sigmoid' or 'softmax'");
        return NULL;
    }
    static const KernSpec spec = {
        "unary", "name, x, out", 2, {{"x", 0, 0, 1}, {"out", 1, 0, 1}}, 1, 1, 0, 1,
        unary_d, unary_f};
    KernSpec ks = spec;
    ks.flag = op;
    return run_kernel(&ks, args + 1, nargs - 1);
}

/* ==== cross_entropy and log_softmax (ops/nn.py; the row loops are ce_rows, log_rows) ==== */

/* cross_entropy(x, target, ignore_index, e, s, picked) -> the number of rows whose target is
   ignore_index.  x (N, C) float32/float64, any strides; target (N,) int64; e (N, C), s and
   picked (N, 1): C-contiguous outputs of x's dtype (see ce_rows).  A target outside [0, C)
   that is not ignore_index raises IndexError before anything is written. */
static PyObject *py_cross_entropy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *sig = "x, target, ignore_index, e, s, picked";
    Ctx ctx = {"cross_entropy", -1, -1};
    Arr a[4];   /* x, e, s, picked */
    Py_buffer tv;
    int have_t = 0;
    Py_ssize_t C;
    PyObject *res = NULL;
    memset(a, 0, sizeof a);
    if (check_nargs("cross_entropy", nargs, 6, sig) < 0
        || gate_width(&ctx, "e", args[3], 1, &C) < 0)
        return NULL;
    long long ign = PyLong_AsLongLong(args[2]);
    if (ign == -1 && PyErr_Occurred())
        return NULL;
    if (get_arr(&ctx, "x", args[0], 0, 0, C, &a[0]) < 0
        || get_arr(&ctx, "e", args[3], 1, 0, C, &a[1]) < 0
        || get_arr(&ctx, "s", args[4], 1, 0, 1, &a[2]) < 0
        || get_arr(&ctx, "picked", args[5], 1, 0, 1, &a[3]) < 0)
        goto done;
    if (!PyObject_CheckBuffer(args[1])
        || PyObject_GetBuffer(args[1], &tv, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "cross_entropy: target must be an int64 array, got %.100s",
                     Py_TYPE(args[1])->tp_name);
        goto done;
    }
    have_t = 1;
    if (tv.itemsize != 8 || !(is_fmt(tv.format, 'q') || is_fmt(tv.format, 'l'))
        || tv.ndim != 1 || tv.shape[0] != ctx.rows
        || ((uintptr_t)tv.buf) % 8 || tv.strides[0] % 8) {
        PyErr_Format(PyExc_ValueError, "cross_entropy: target must be an aligned int64 array of "
                     "shape (%zd,), got format '%s', %d-D", ctx.rows,
                     tv.format ? tv.format : "B", tv.ndim);
        goto done;
    }
    Py_ssize_t N = ctx.rows, ignored = 0;
    const char *tb = (const char *)tv.buf;
    for (Py_ssize_t n = 0; n < N; n++) {
        long long t = *(const long long *)(tb + n * tv.strides[0]);
        if (t == ign)
            ignored++;
        else if (t < 0 || t >= C) {
            PyErr_Format(PyExc_IndexError, "cross_entropy: target %lld of row %zd is out of "
                         "bounds for %zd classes", t, n, C);
            goto done;
        }
    }
    if (N > 0 && C == 0) {
        PyErr_SetString(PyExc_ValueError, "cross_entropy: no classes (C == 0)");
        goto done;
    }
    {
        BEGIN_LOOP(N * C)
        if (ctx.f32)
            ce_rows_f(N, C, &a[0], tb, tv.strides[0], ign, &a[1], &a[2], &a[3]);
        else
            ce_rows_d(N, C, &a[0], tb, tv.strides[0], ign, &a[1], &a[2], &a[3]);
        END_LOOP()
    }
    res = PyLong_FromSsize_t(ignored);
done:
    if (have_t)
        PyBuffer_Release(&tv);
    release(a, 4);
    return res;
}

/* log_softmax(x, out): out (B, C) <- log_softmax of each row of x (any strides), by
   cross_entropy's row operations (log_rows) */
static PyObject *py_log_softmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const KernSpec spec = {
        "log_softmax", "x, out", 2, {{"x", 0, 0, 1}, {"out", 1, 0, 1}}, 1, 1, 0, 1,
        log_rows_d, log_rows_f};
    return run_kernel(&spec, args, nargs);
}

/* ==== end of cross_entropy and log_softmax ==== */

/* ==== plain SGD step (optim/sgd.py, no momentum): p -= lr * g in one pass ==== */

/* p[i] - lr * g[i] with the NumPy line's roundings (`d -= lr * g`: the product rounded, then
 * the difference; no fused multiply-add), so both paths give the same bits; one read of p
 * and g and one write of p instead of a temporary array written and read again. */
KCLONES static void sgd_step_f(Py_ssize_t n, float *restrict p, const float *restrict g, float lr)
{
    for (Py_ssize_t i = 0; i < n; i++)
        p[i] = p[i] - lr * g[i];
}

KCLONES static void sgd_step_d(Py_ssize_t n, double *restrict p, const double *restrict g, double lr)
{
    for (Py_ssize_t i = 0; i < n; i++)
        p[i] = p[i] - lr * g[i];
}

/* sgd_step(p, g, lr): p in place; p (writable) and g C-contiguous arrays of one float dtype
 * and size, separate memories */
static PyObject *py_sgd_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "sgd_step";
    static const char *const names[] = {"p", "g"};
    Py_buffer v[2];
    int held = 0;
    PyObject *res = NULL;
    if (check_nargs(kern, nargs, 3, "p, g, lr") < 0)
        return NULL;
    double lr = PyFloat_AsDouble(args[2]);
    if (lr == -1.0 && PyErr_Occurred())
        return NULL;
    int f32 = update_buffers(kern, args, 2, names, v, &held);
    if (f32 < 0)
        goto done;
    {
        Py_ssize_t n = v[0].len / v[0].itemsize;
        PyThreadState *ts = n >= GIL_FREE_ELEMENTS ? PyEval_SaveThread() : NULL;
        if (f32)
            sgd_step_f(n, (float *)v[0].buf, (const float *)v[1].buf, (float)lr);
        else
            sgd_step_d(n, (double *)v[0].buf, (const double *)v[1].buf, lr);
        if (ts)
            PyEval_RestoreThread(ts);
    }
    res = Py_NewRef(Py_None);
done:
    while (held > 0)
        PyBuffer_Release(&v[--held]);
    return res;
}

/* ==== end of the plain SGD step ==== */

/* ==== sigmoid(x, out): ops/elementwise.py sigmoid_p's forward on a C-contiguous array ==== */

/* sigmoid(x, out) -> bool.  out <- sigmoid of x, elementwise, by unary's 'sigmoid' loop (the
 * same bits: each element's value depends on that element alone), for x and out of one float
 * dtype and size, any number of dimensions, out C-contiguous and writable.  Returns False,
 * writing nothing, where x is not C-contiguous (the caller then takes unary's strided 2-D
 * path).  One buffer request per array and no heap scratch: unary's entry checks (a 2-D
 * shape, two requests for x, a malloc) were ~1.5 us of a 128-element call. */
#define SIG_CHUNK 1024
static PyObject *py_sigmoid(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer vx, vo;
    if (check_nargs("sigmoid", nargs, 2, "x, out") < 0)
        return NULL;
    if (!PyObject_CheckBuffer(args[0]) || PyObject_GetBuffer(args[0], &vx, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "sigmoid: x must be a float32 or float64 array");
        return NULL;
    }
    if (!PyBuffer_IsContiguous(&vx, 'C')) {
        PyBuffer_Release(&vx);
        Py_RETURN_FALSE;
    }
    if (!PyObject_CheckBuffer(args[1])
        || PyObject_GetBuffer(args[1], &vo, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&vx);
        PyErr_SetString(PyExc_TypeError, "sigmoid: out must be a writable, C-contiguous float32 or float64 array");
        return NULL;
    }
    PyObject *res = NULL;
    int f32 = vx.itemsize == 4 && is_fmt(vx.format, 'f');
    if (!f32 && !(vx.itemsize == 8 && is_fmt(vx.format, 'd'))) {
        PyErr_Format(PyExc_TypeError, "sigmoid: x must be float32 or float64, got format '%s'",
                     vx.format ? vx.format : "B");
        goto done;
    }
    if (vo.itemsize != vx.itemsize || !is_fmt(vo.format, f32 ? 'f' : 'd') || vo.len != vx.len) {
        PyErr_Format(PyExc_ValueError, "sigmoid: out must have x's dtype and size (%zd elements)",
                     vx.len / vx.itemsize);
        goto done;
    }
    if (((uintptr_t)vx.buf | (uintptr_t)vo.buf) % (uintptr_t)vx.itemsize) {
        PyErr_SetString(PyExc_ValueError, "sigmoid: x and out must be aligned to their element size");
        goto done;
    }
    {
        /* rows of SIG_CHUNK elements, then the rest as one row, through unary's row loop */
        double scr[SIG_CHUNK];
        Py_ssize_t n = vx.len / vx.itemsize, isz = vx.itemsize;
        Py_ssize_t full = n / SIG_CHUNK, rest = n - full * SIG_CHUNK;
        Arr a[2];
        memset(a, 0, sizeof a);
        RowLoop f = f32 ? unary_f : unary_d;
        BEGIN_LOOP(n)
        for (int k = 0; k < 2; k++) {
            a[k].buf = (char *)(k ? vo.buf : vx.buf);
            a[k].s0 = SIG_CHUNK * isz;
            a[k].s1 = isz;
            a[k].present = 1;
        }
        if (full)
            f(2, full, SIG_CHUNK, a, scr);
        if (rest) {
            a[0].buf += full * SIG_CHUNK * isz;
            a[1].buf += full * SIG_CHUNK * isz;
            f(2, 1, rest, a, scr);
        }
        END_LOOP()
    }
    res = Py_NewRef(Py_True);
done:
    PyBuffer_Release(&vx);
    PyBuffer_Release(&vo);
    return res;
}

/* ==== end of sigmoid ==== */



/* ==== max_pool_tiled / pool_scatter_tiled: 2-d max pooling whose windows tile the input
 *      (ops/pooling.py _max_pool_tiled and _scatter_tiled: stride == kernel, no padding or
 *      dilation, the usual MaxPool2d(2)) ==== */

/* NumPy needs a transposed copy of the input, kh * kw - 1 compare-and-copy passes and a
 * table look-up for the indices: ~8 ms for (64, 32, 28, 28) float32, about as much as the
 * convolution before it.  Here one pass per window, in PyTorch's scan order (row by row, the
 * first maximum wins); a NaN anywhere returns False and the caller takes the NumPy path,
 * which says what PyTorch does with NaN windows. */
#define POOL_LOOP(T)                                                                        \
    for (Py_ssize_t p = 0; p < planes; p++) {                                               \
        const T *xp = (const T *)x + p * H * W;                                             \
        T *vp = (T *)vals + p * ho * wo;                                                    \
        long long *ip = idx + p * ho * wo;                                                  \
        for (Py_ssize_t oh = 0; oh < ho; oh++)                                              \
            for (Py_ssize_t ow = 0; ow < wo; ow++) {                                        \
                Py_ssize_t r0 = oh * kh, c0 = ow * kw;                                      \
                T best = xp[r0 * W + c0];                                                   \
                Py_ssize_t arg = r0 * W + c0;                                               \
                int nan = best != best;                                                     \
                for (Py_ssize_t i = 0; i < kh; i++)                                         \
                    for (Py_ssize_t j = 0; j < kw; j++) {                                   \
                        Py_ssize_t at = (r0 + i) * W + c0 + j;                              \
                        T v = xp[at];                                                       \
                        nan |= v != v;                                                      \
                        if (v > best) {                                                     \
                            best = v;                                                       \
                            arg = at;                                                       \
                        }                                                                   \
                    }                                                                       \
                if (nan)                                                                    \
                    return 0;                                                               \
                vp[oh * wo + ow] = best;                                                    \
                ip[oh * wo + ow] = (long long)arg;                                          \
            }                                                                               \
    }                                                                                       \
    return 1;

/* 2 x 2 windows (MaxPool2d(2)): the four compares written out, branch-free, so that the
 * compiler vectorises along the output row (the general loop above: ~3.7 ns per element) */
#define POOL2_LOOP(T)                                                                       \
    int nan = 0;                                                                            \
    for (Py_ssize_t p = 0; p < planes; p++) {                                               \
        const T *xp = (const T *)x + p * H * W;                                             \
        T *vp = (T *)vals + p * ho * wo;                                                    \
        long long *ip = idx + p * ho * wo;                                                  \
        for (Py_ssize_t oh = 0; oh < ho; oh++) {                                            \
            const T *restrict r0 = xp + 2 * oh * W, *restrict r1 = r0 + W;                  \
            T *restrict vo = vp + oh * wo;                                                  \
            long long *restrict io = ip + oh * wo;                                          \
            long long base = 2 * oh * W;                                                    \
            for (Py_ssize_t ow = 0; ow < wo; ow++) {                                        \
                T v0 = r0[2 * ow], v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1]; \
                T best = v0;                                                                \
                long long arg = 0;                                                          \
                arg = v1 > best ? 1 : arg;                                                  \
                best = v1 > best ? v1 : best;                                               \
                arg = v2 > best ? W : arg;                                                  \
                best = v2 > best ? v2 : best;                                               \
                arg = v3 > best ? W + 1 : arg;                                              \
                best = v3 > best ? v3 : best;                                               \
                nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);                   \
                vo[ow] = best;                                                              \
                io[ow] = base + 2 * ow + arg;                                               \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    return !nan;

KCLONES static int max_pool2_f(Py_ssize_t planes, Py_ssize_t H, Py_ssize_t W, Py_ssize_t ho,
                               Py_ssize_t wo, const void *x, void *vals, long long *idx)
{
    POOL2_LOOP(float)
}

KCLONES static int max_pool2_d(Py_ssize_t planes, Py_ssize_t H, Py_ssize_t W, Py_ssize_t ho,
                               Py_ssize_t wo, const void *x, void *vals, long long *idx)
{
    POOL2_LOOP(double)
}
#undef POOL2_LOOP

static int max_pool_tiled_f(Py_ssize_t planes, Py_ssize_t H, Py_ssize_t W, Py_ssize_t kh,
                            Py_ssize_t kw, Py_ssize_t ho, Py_ssize_t wo, const void *x,
                            void *vals, long long *idx)
{
    if (kh == 2 && kw == 2)
        return max_pool2_f(planes, H, W, ho, wo, x, vals, idx);
    POOL_LOOP(float)
}

static int max_pool_tiled_d(Py_ssize_t planes, Py_ssize_t H, Py_ssize_t W, Py_ssize_t kh,
                            Py_ssize_t kw, Py_ssize_t ho, Py_ssize_t wo, const void *x,
                            void *vals, long long *idx)
{
    if (kh == 2 && kw == 2)
        return max_pool2_d(planes, H, W, ho, wo, x, vals, idx);
    POOL_LOOP(double)
}
#undef POOL_LOOP

/* the buffer of args[k] (flags), its format checked against want ('f'/'d'/'q': float32,
 * float64, int64) and its dimensions against ndim; -1 with an error naming kern and name */
/* The array arguments of the kernels below, taken in one place: BufArg says each argument's
 * name, buffer flags (PyBUF_C_CONTIGUOUS / PyBUF_STRIDES, PyBUF_WRITABLE) and dimensions.
 * take_buffers holds all of them or none: -1 with a TypeError (not an array of that kind) or
 * ValueError (other dimensions) naming the kernel and the argument. */
typedef struct {
    const char *name;
    int flags;
    int ndim;
} BufArg;

static void release_buffers(Py_buffer *v, int n)
{
    while (n > 0)
        PyBuffer_Release(&v[--n]);
}

static int take_buffers(const char *kern, PyObject *const *objs, const BufArg *spec, int n,
                        Py_buffer *v)
{
    for (int k = 0; k < n; k++) {
        if (PyObject_GetBuffer(objs[k], &v[k], spec[k].flags | PyBUF_FORMAT) < 0) {
            PyErr_Clear();   /* NumPy says BufferError, ValueError or TypeError: say what is needed */
            int w = (spec[k].flags & PyBUF_WRITABLE) != 0;
            int c = (spec[k].flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS;
            PyErr_Format(PyExc_TypeError, "%s: %s must be a%s%s%s array", kern, spec[k].name,
                         w ? " writable" : (c ? "" : "n"), w && c ? "," : "", c ? " C-contiguous" : "");
            release_buffers(v, k);
            return -1;
        }
        if (v[k].ndim != spec[k].ndim) {
            PyErr_Format(PyExc_ValueError, "%s: %s must have %d dimensions, got %d", kern,
                         spec[k].name, spec[k].ndim, v[k].ndim);
            release_buffers(v, k + 1);
            return -1;
        }
    }
    return 0;
}

/* 'f' float32, 'd' float64, 'q' int64, 0 anything else */
static char buf_kind(const Py_buffer *v)
{
    if (v->itemsize == 4 && is_fmt(v->format, 'f'))
        return 'f';
    if (v->itemsize == 8 && is_fmt(v->format, 'd'))
        return 'd';
    if (v->itemsize == 8 && (is_fmt(v->format, 'q') || is_fmt(v->format, 'l')))
        return 'q';
    return 0;
}

/* the float kind ('f' / 'd') the n buffers share, or 0 */
static char float_kind(const Py_buffer *v, int n)
{
    char k = buf_kind(&v[0]);
    if (k != 'f' && k != 'd')
        return 0;
    for (int j = 1; j < n; j++)
        if (buf_kind(&v[j]) != k)
            return 0;
    return k;
}

#define C_IN PyBUF_C_CONTIGUOUS
#define C_OUT (PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)

/* run `call` with the GIL released when `work` elements make it worth it */
#define WITHOUT_GIL(work, call)                                                             \
    do {                                                                                    \
        PyThreadState *ts_ = (work) >= GIL_FREE_ELEMENTS ? PyEval_SaveThread() : NULL;      \
        call;                                                                               \
        if (ts_)                                                                            \
            PyEval_RestoreThread(ts_);                                                      \
    } while (0)

/* max_pool_tiled(x, kh, kw, vals, idx) -> bool: x (N, C, H, W) float32/float64, vals (N, C,
 * ho, wo) of x's dtype and idx (N, C, ho, wo) int64, all C-contiguous, ho * kh <= H and
 * wo * kw <= W; vals/idx get each window's maximum and its flat index in the H x W plane.
 * False where x holds a NaN in a window (outputs then partly written) or for other dtypes. */
static PyObject *py_max_pool_tiled(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "max_pool_tiled";
    static const BufArg spec[] = {{"x", C_IN, 4}, {"vals", C_OUT, 4}, {"idx", C_OUT, 4}};
    if (check_nargs(kern, nargs, 5, "x, kh, kw, vals, idx") < 0)
        return NULL;
    Py_ssize_t kh = PyLong_AsSsize_t(args[1]), kw = PyLong_AsSsize_t(args[2]);
    if ((kh == -1 || kw == -1) && PyErr_Occurred())
        return NULL;
    PyObject *objs[] = {args[0], args[3], args[4]};
    Py_buffer v[3];
    if (take_buffers(kern, objs, spec, 3, v) < 0)
        return NULL;
    PyObject *res = NULL;
    char k = float_kind(v, 2);
    Py_ssize_t N = v[0].shape[0], C = v[0].shape[1], H = v[0].shape[2], W = v[0].shape[3];
    Py_ssize_t ho = v[1].shape[2], wo = v[1].shape[3];
    if (!k || buf_kind(&v[2]) != 'q') {
        res = Py_NewRef(Py_False);
        goto done;
    }
    if (kh < 1 || kw < 1 || v[1].shape[0] != N || v[1].shape[1] != C || v[2].shape[0] != N
        || v[2].shape[1] != C || v[2].shape[2] != ho || v[2].shape[3] != wo || ho * kh > H || wo * kw > W) {
        PyErr_Format(PyExc_ValueError, "%s: windows %zd x %zd, input (%zd, %zd, %zd, %zd) and "
                     "outputs (%zd, %zd, %zd, %zd) do not tile", kern, kh, kw, N, C, H, W,
                     v[1].shape[0], v[1].shape[1], ho, wo);
        goto done;
    }
    int ok;
    WITHOUT_GIL(N * C * H * W,
                ok = (k == 'f' ? max_pool_tiled_f : max_pool_tiled_d)(
                    N * C, H, W, kh, kw, ho, wo, v[0].buf, v[1].buf, (long long *)v[2].buf));
    res = Py_NewRef(ok ? Py_True : Py_False);
done:
    release_buffers(v, 3);
    return res;
}

/* pool_scatter_tiled(g, idx, out) -> bool: out (N, C, H, W), zero-filled by the caller, gets
 * out[n, c].flat[idx[n, c, k]] = g[n, c, k] (tiling windows never share a position, so
 * nothing is added); g and out of one float dtype, idx int64, all C-contiguous with g and
 * idx of one shape.  An index outside the plane raises IndexError, writing nothing more. */
static PyObject *py_pool_scatter_tiled(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "pool_scatter_tiled";
    static const BufArg spec[] = {{"out", C_OUT, 4}, {"g", C_IN, 4}, {"idx", C_IN, 4}};
    if (check_nargs(kern, nargs, 3, "g, idx, out") < 0)
        return NULL;
    PyObject *objs[] = {args[2], args[0], args[1]};
    Py_buffer v[3];     /* out, g, idx */
    if (take_buffers(kern, objs, spec, 3, v) < 0)
        return NULL;
    PyObject *res = NULL;
    char k = float_kind(v, 2);
    if (!k || buf_kind(&v[2]) != 'q') {
        res = Py_NewRef(Py_False);
        goto done;
    }
    int same = 1;
    for (int d = 0; d < 4; d++)
        same &= v[1].shape[d] == v[2].shape[d];
    if (!same || v[0].shape[0] != v[1].shape[0] || v[0].shape[1] != v[1].shape[1]) {
        PyErr_Format(PyExc_ValueError, "%s: g, idx and out shapes do not match", kern);
        goto done;
    }
    {
        Py_ssize_t planes = v[1].shape[0] * v[1].shape[1], n = v[1].shape[2] * v[1].shape[3];
        Py_ssize_t m = v[0].shape[2] * v[0].shape[3];
        const long long *ip = (const long long *)v[2].buf;
        for (Py_ssize_t p = 0; p < planes; p++)
            for (Py_ssize_t j = 0; j < n; j++) {
                long long t = ip[p * n + j];
                if (t < 0 || t >= m) {
                    PyErr_Format(PyExc_IndexError, "%s: index %lld outside a plane of %zd", kern, t, m);
                    goto done;
                }
                if (k == 'f')
                    ((float *)v[0].buf)[p * m + t] = ((const float *)v[1].buf)[p * n + j];
                else
                    ((double *)v[0].buf)[p * m + t] = ((const double *)v[1].buf)[p * n + j];
            }
    }
    res = Py_NewRef(Py_True);
done:
    release_buffers(v, 3);
    return res;
}

/* ==== end of the pooling kernels ==== */

/* ==== im2col2d / col2im2d: the column matrices of 2-d convolution (ops/conv.py) ==== */

/* NumPy builds the columns as a copy of a 6-d strided window view of a padded copy of the
 * input (~0.5 ns per element, plus the padding copy), and the transposed convolution adds
 * kh * kw strided blocks into a zero-filled padded buffer, then crops it (~3.7 ms for the
 * (64, 32, 14, 14) 3x3 gradient).  Here both read and write each row once, with the padding
 * as bounds: the values and the order of the additions are NumPy's (offsets in (ki, kj)
 * order into zeros), so the bits are the same. */
typedef struct {
    Py_ssize_t kh, kw, sh, sw, ph, pw, dh, dw;
} Geom2;

/* output columns [*o0, *o1) whose input column o * s - p + k * d lies in [0, n) */
static void valid_range(Py_ssize_t n, Py_ssize_t out, Py_ssize_t s, Py_ssize_t p, Py_ssize_t off,
                        Py_ssize_t *o0, Py_ssize_t *o1)
{
    Py_ssize_t lo = p - off;                     /* need o * s >= lo */
    Py_ssize_t a = lo <= 0 ? 0 : (lo + s - 1) / s;
    Py_ssize_t hi = n - 1 + p - off;             /* need o * s <= hi */
    Py_ssize_t b = hi < 0 ? 0 : hi / s + 1;
    if (b > out)
        b = out;
    if (a > b)
        a = b;
    *o0 = a;
    *o1 = b;
}

#define IM2COL_LOOP(T)                                                                      \
    for (Py_ssize_t q = 0; q < planes; q++) {                                               \
        const T *xq = (const T *)x + q * H * W;                                             \
        T *cq = (T *)cols + q * g->kh * g->kw * OH * OW;                                    \
        for (Py_ssize_t ki = 0; ki < g->kh; ki++)                                           \
            for (Py_ssize_t kj = 0; kj < g->kw; kj++) {                                     \
                Py_ssize_t a, b;                                                            \
                valid_range(W, OW, g->sw, g->pw, kj * g->dw, &a, &b);                       \
                T *cr = cq + (ki * g->kw + kj) * OH * OW;                                   \
                for (Py_ssize_t oh = 0; oh < OH; oh++, cr += OW) {                          \
                    Py_ssize_t ih = oh * g->sh - g->ph + ki * g->dh;                        \
                    if (ih < 0 || ih >= H) {                                                \
                        for (Py_ssize_t ow = 0; ow < OW; ow++)                              \
                            cr[ow] = 0;                                                     \
                        continue;                                                           \
                    }                                                                       \
                    const T *xr = xq + ih * W - g->pw + kj * g->dw;                         \
                    for (Py_ssize_t ow = 0; ow < a; ow++)                                   \
                        cr[ow] = 0;                                                         \
                    if (g->sw == 1)                                                         \
                        for (Py_ssize_t ow = a; ow < b; ow++)                               \
                            cr[ow] = xr[ow];                                                \
                    else                                                                    \
                        for (Py_ssize_t ow = a; ow < b; ow++)                               \
                            cr[ow] = xr[ow * g->sw];                                        \
                    for (Py_ssize_t ow = b; ow < OW; ow++)                                  \
                        cr[ow] = 0;                                                         \
                }                                                                           \
            }                                                                               \
    }

KCLONES static void im2col_f(Py_ssize_t planes, Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH,
                             Py_ssize_t OW, const Geom2 *g, const void *x, void *cols)
{
    IM2COL_LOOP(float)
}

KCLONES static void im2col_d(Py_ssize_t planes, Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH,
                             Py_ssize_t OW, const Geom2 *g, const void *x, void *cols)
{
    IM2COL_LOOP(double)
}
#undef IM2COL_LOOP

/* out (samples, C, H, W) <- zeros + the columns dc (samples, kh * kw, C, OH, OW) added at
 * their input positions, offset by offset in (ki, kj) order */
#define COL2IM_LOOP(T)                                                                      \
    memset(out, 0, (size_t)(samples * C * H * W) * sizeof(T));                              \
    for (Py_ssize_t n = 0; n < samples; n++)                                                \
        for (Py_ssize_t ki = 0; ki < g->kh; ki++)                                           \
            for (Py_ssize_t kj = 0; kj < g->kw; kj++) {                                     \
                Py_ssize_t a, b;                                                            \
                valid_range(W, OW, g->sw, g->pw, kj * g->dw, &a, &b);                       \
                const T *dk = (const T *)dc + ((n * g->kh + ki) * g->kw + kj) * C * OH * OW; \
                for (Py_ssize_t c = 0; c < C; c++) {                                        \
                    T *oc = (T *)out + (n * C + c) * H * W;                                 \
                    const T *dr = dk + c * OH * OW;                                         \
                    for (Py_ssize_t oh = 0; oh < OH; oh++, dr += OW) {                      \
                        Py_ssize_t ih = oh * g->sh - g->ph + ki * g->dh;                    \
                        if (ih < 0 || ih >= H)                                              \
                            continue;                                                       \
                        T *orow = oc + ih * W - g->pw + kj * g->dw;                         \
                        if (g->sw == 1)                                                     \
                            for (Py_ssize_t ow = a; ow < b; ow++)                           \
                                orow[ow] += dr[ow];                                         \
                        else                                                                \
                            for (Py_ssize_t ow = a; ow < b; ow++)                           \
                                orow[ow * g->sw] += dr[ow];                                 \
                    }                                                                       \
                }                                                                           \
            }

KCLONES static void col2im_f(Py_ssize_t samples, Py_ssize_t C, Py_ssize_t H, Py_ssize_t W,
                             Py_ssize_t OH, Py_ssize_t OW, const Geom2 *g, const void *dc, void *out)
{
    COL2IM_LOOP(float)
}

KCLONES static void col2im_d(Py_ssize_t samples, Py_ssize_t C, Py_ssize_t H, Py_ssize_t W,
                             Py_ssize_t OH, Py_ssize_t OW, const Geom2 *g, const void *dc, void *out)
{
    COL2IM_LOOP(double)
}
#undef COL2IM_LOOP

/* geometry from args[first .. first + 7]: kh, kw, sh, sw, ph, pw, dh, dw (kernel, strides and
 * dilations >= 1, paddings >= 0) */
static int geom2(const char *kern, PyObject *const *args, Geom2 *g)
{
    Py_ssize_t v[8];
    for (int k = 0; k < 8; k++) {
        v[k] = PyLong_AsSsize_t(args[k]);
        if (v[k] == -1 && PyErr_Occurred())
            return -1;
    }
    g->kh = v[0]; g->kw = v[1]; g->sh = v[2]; g->sw = v[3];
    g->ph = v[4]; g->pw = v[5]; g->dh = v[6]; g->dw = v[7];
    if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 || g->pw < 0) {
        PyErr_Format(PyExc_ValueError, "%s: kernel, strides and dilations must be >= 1, paddings >= 0", kern);
        return -1;
    }
    return 0;
}

/* the output size of a convolution along one dimension (ops/conv.py _conv_out) */
static Py_ssize_t conv_len(Py_ssize_t n, Py_ssize_t k, Py_ssize_t s, Py_ssize_t p, Py_ssize_t d)
{
    return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* im2col2d(x, cols, kh, kw, sh, sw, ph, pw, dh, dw) -> bool: cols (N, C, kh, kw, OH, OW) <- the
 * windows of x (N, C, H, W) with zero padding ph/pw on both sides, OH/OW the convolution's
 * output sizes; both C-contiguous, one float dtype.  False for other dtypes. */
static PyObject *py_im2col2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "im2col2d";
    static const BufArg spec[] = {{"x", C_IN, 4}, {"cols", C_OUT, 6}};
    Geom2 g;
    Py_buffer v[2];
    if (check_nargs(kern, nargs, 10, "x, cols, kh, kw, sh, sw, ph, pw, dh, dw") < 0
        || geom2(kern, args + 2, &g) < 0 || take_buffers(kern, args, spec, 2, v) < 0)
        return NULL;
    PyObject *res = NULL;
    char k = float_kind(v, 2);
    Py_ssize_t N = v[0].shape[0], C = v[0].shape[1], H = v[0].shape[2], W = v[0].shape[3];
    Py_ssize_t OH = conv_len(H, g.kh, g.sh, g.ph, g.dh), OW = conv_len(W, g.kw, g.sw, g.pw, g.dw);
    const Py_ssize_t *cs = v[1].shape;
    if (!k) {
        res = Py_NewRef(Py_False);
        goto done;
    }
    if (OH < 1 || OW < 1 || cs[0] != N || cs[1] != C || cs[2] != g.kh || cs[3] != g.kw
        || cs[4] != OH || cs[5] != OW) {
        PyErr_Format(PyExc_ValueError, "%s: cols must be (%zd, %zd, %zd, %zd, %zd, %zd)", kern, N, C,
                     g.kh, g.kw, OH, OW);
        goto done;
    }
    WITHOUT_GIL(v[1].len / v[1].itemsize,
                (k == 'f' ? im2col_f : im2col_d)(N * C, H, W, OH, OW, &g, v[0].buf, v[1].buf));
    res = Py_NewRef(Py_True);
done:
    release_buffers(v, 2);
    return res;
}

/* col2im2d(dc, out, kh, kw, sh, sw, ph, pw, dh, dw) -> bool: out (N, C, H, W) <- the sum of the
 * columns dc (N, kh * kw, C, OH, OW) at their input positions (the adjoint of im2col2d, padding
 * dropped), OH/OW the convolution's output sizes for out's H/W; both C-contiguous, one float
 * dtype.  False for other dtypes. */
static PyObject *py_col2im2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "col2im2d";
    static const BufArg spec[] = {{"dc", C_IN, 5}, {"out", C_OUT, 4}};
    Geom2 g;
    Py_buffer v[2];
    if (check_nargs(kern, nargs, 10, "dc, out, kh, kw, sh, sw, ph, pw, dh, dw") < 0
        || geom2(kern, args + 2, &g) < 0 || take_buffers(kern, args, spec, 2, v) < 0)
        return NULL;
    PyObject *res = NULL;
    char k = float_kind(v, 2);
    const Py_ssize_t *ds = v[0].shape;
    Py_ssize_t N = v[1].shape[0], C = v[1].shape[1], H = v[1].shape[2], W = v[1].shape[3];
    Py_ssize_t OH = ds[3], OW = ds[4];
    if (!k) {
        res = Py_NewRef(Py_False);
        goto done;
    }
    if (ds[0] != N || ds[1] != g.kh * g.kw || ds[2] != C
        || (OH - 1) * g.sh + g.dh * (g.kh - 1) + 1 > H + 2 * g.ph + g.sh
        || (OW - 1) * g.sw + g.dw * (g.kw - 1) + 1 > W + 2 * g.pw + g.sw) {
        PyErr_Format(PyExc_ValueError, "%s: dc (%zd, %zd, %zd, %zd, %zd) does not fit out (%zd, %zd, "
                     "%zd, %zd)", kern, ds[0], ds[1], ds[2], OH, OW, N, C, H, W);
        goto done;
    }
    WITHOUT_GIL(v[0].len / v[0].itemsize,
                (k == 'f' ? col2im_f : col2im_d)(N, C, H, W, OH, OW, &g, v[0].buf, v[1].buf));
    res = Py_NewRef(Py_True);
done:
    release_buffers(v, 2);
    return res;
}

/* ==== end of im2col2d / col2im2d ==== */

/* ==== Adam step (optim/adam.py, no AMSGrad): one pass instead of NumPy's twelve ==== */

/* The NumPy lines of Adam._step_group, element by element in the arrays' precision with the
 * same roundings (each operation rounded once, no fused multiply-add, the Python-float
 * hyperparameters cast to the arrays' dtype first as NumPy does with a scalar operand):
 *   m += (g - m) * w1;  v *= b2;  v += (g * g) * c2;
 *   p -= (m / (sqrt(v) / bc2 + eps)) * step
 * with w1 = 1 - beta1, b2 = beta2, c2 = 1 - beta2, bc2 = sqrt(1 - beta2^t), step = lr / (1 -
 * beta1^t).  One read of p, g, m, v and one write of p, m, v. */
#define ADAM_LOOP(T)                                                                        \
    for (Py_ssize_t i = 0; i < n; i++) {                                                    \
        T gi = g[i];                                                                        \
        T mi = m[i] + (gi - m[i]) * w1;                                                     \
        T vi = v[i] * b2;                                                                   \
        vi = vi + (gi * gi) * c2;                                                           \
        m[i] = mi;                                                                          \
        v[i] = vi;                                                                          \
        T den = KSQRT(vi) / bc2 + eps;                                                      \
        p[i] = p[i] - (mi / den) * step;                                                    \
    }

#define KSQRT sqrtf
KCLONES static void adam_step_f(Py_ssize_t n, float *restrict p, const float *restrict g,
                                float *restrict m, float *restrict v, float w1, float b2, float c2,
                                float bc2, float eps, float step)
{
    ADAM_LOOP(float)
}
#undef KSQRT
#define KSQRT sqrt
KCLONES static void adam_step_d(Py_ssize_t n, double *restrict p, const double *restrict g,
                                double *restrict m, double *restrict v, double w1, double b2,
                                double c2, double bc2, double eps, double step)
{
    ADAM_LOOP(double)
}
#undef KSQRT
#undef ADAM_LOOP

/* adam_step(p, g, m, v, w1, b2, c2, bc2, eps, step): p, m and v in place (see above); p, g,
 * m, v C-contiguous arrays of one float dtype and size, four separate memories (ValueError
 * otherwise, before anything is written) */
static PyObject *py_adam_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "adam_step";
    static const char *const names[] = {"p", "g", "m", "v"};
    Py_buffer v[4];
    int held = 0;
    PyObject *res = NULL;
    if (check_nargs(kern, nargs, 10, "p, g, m, v, w1, b2, c2, bc2, eps, step") < 0)
        return NULL;
    double h[6];
    for (int k = 0; k < 6; k++) {
        h[k] = PyFloat_AsDouble(args[4 + k]);
        if (h[k] == -1.0 && PyErr_Occurred())
            return NULL;
    }
    int f32 = update_buffers(kern, args, 4, names, v, &held);
    if (f32 < 0)
        goto done;
    {
        Py_ssize_t n = v[0].len / v[0].itemsize;
        if (f32)
            WITHOUT_GIL(n, adam_step_f(n, (float *)v[0].buf, (const float *)v[1].buf, (float *)v[2].buf,
                                       (float *)v[3].buf, (float)h[0], (float)h[1], (float)h[2],
                                       (float)h[3], (float)h[4], (float)h[5]));
        else
            WITHOUT_GIL(n, adam_step_d(n, (double *)v[0].buf, (const double *)v[1].buf,
                                       (double *)v[2].buf, (double *)v[3].buf, h[0], h[1], h[2], h[3],
                                       h[4], h[5]));
    }
    res = Py_NewRef(Py_None);
done:
    while (held > 0)
        PyBuffer_Release(&v[--held]);
    return res;
}

/* ==== end of the Adam step ==== */

/* ==== outer(a, b, out): the K == 1 product (M, 1) @ (1, N), ops/linalg.py mm_rule ==== */

/* The weight gradient of a one-row `linear` (every per-step cell, every per-node gate) is an
 * outer product g.T @ x.  NumPy's broadcasting multiply (M, 1) * (1, N) runs its inner loop
 * with one operand of stride 0 and does not vectorise it: float32 (512, 1) * (1, 128) takes
 * ~27 us, its GEMM 84 us, PyTorch's mm 6 us.  Here each row is a[i] times the row b, one
 * product per element -- exactly the multiply's values -- in a loop the compiler vectorises. */
KCLONES static void outer_f(Py_ssize_t m, Py_ssize_t n, const char *a, Py_ssize_t sa,
                            const float *restrict b, float *restrict o)
{
    for (Py_ssize_t i = 0; i < m; i++) {
        const float ai = *(const float *)(a + i * sa);
        float *restrict oi = o + i * n;
        for (Py_ssize_t j = 0; j < n; j++)
            oi[j] = ai * b[j];
    }
}

KCLONES static void outer_d(Py_ssize_t m, Py_ssize_t n, const char *a, Py_ssize_t sa,
                            const double *restrict b, double *restrict o)
{
    for (Py_ssize_t i = 0; i < m; i++) {
        const double ai = *(const double *)(a + i * sa);
        double *restrict oi = o + i * n;
        for (Py_ssize_t j = 0; j < n; j++)
            oi[j] = ai * b[j];
    }
}

/* outer(a, b, out) -> bool: out[i, j] = a[i, 0] * b[0, j] for a (M, 1) of any stride, b (1, N)
 * with contiguous elements, out (M, N) C-contiguous and writable, one float dtype.  False,
 * writing nothing, for other dtypes or a strided b (the caller multiplies in NumPy). */
static PyObject *py_outer(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "outer";
    static const BufArg spec[] = {{"a", PyBUF_STRIDES, 2}, {"b", PyBUF_STRIDES, 2}, {"out", C_OUT, 2}};
    Py_buffer v[3];
    if (check_nargs(kern, nargs, 3, "a, b, out") < 0 || take_buffers(kern, args, spec, 3, v) < 0)
        return NULL;
    PyObject *res = NULL;
    Py_ssize_t m = v[0].shape[0], n = v[1].shape[1];
    if (v[0].shape[1] != 1 || v[1].shape[0] != 1 || v[2].shape[0] != m || v[2].shape[1] != n) {
        PyErr_SetString(PyExc_ValueError, "outer: expected a (M, 1), b (1, N) and out (M, N)");
        goto done;
    }
    char k = float_kind(v, 3);
    if (!k || (n > 1 && v[1].strides[1] != v[1].itemsize)
        || ((uintptr_t)v[0].buf | (uintptr_t)v[1].buf | (uintptr_t)v[2].buf) % (uintptr_t)v[0].itemsize) {
        res = Py_NewRef(Py_False);
        goto done;
    }
    if (k == 'f')
        WITHOUT_GIL(m * n, outer_f(m, n, (const char *)v[0].buf, v[0].strides[0],
                                   (const float *)v[1].buf, (float *)v[2].buf));
    else
        WITHOUT_GIL(m * n, outer_d(m, n, (const char *)v[0].buf, v[0].strides[0],
                                   (const double *)v[1].buf, (double *)v[2].buf));
    res = Py_NewRef(Py_True);
done:
    release_buffers(v, 3);
    return res;
}

/* ==== end of outer ==== */

/* ==== gemm(a, b, out): 2-D products through an optional CBLAS library (ops/_gemm.py) ==== */

/* NumPy's bundled OpenBLAS runs skinny float32 products -- a few rows against a transposed
 * weight, x @ W.T, the shape of every batch-of-a-few `linear` -- at half the speed of Intel
 * MKL on AVX-512 machines (ops/_gemm.py has the figures).  When a CBLAS library is named
 * (blas_load: a path to libmkl_rt, found by ops/_gemm.py), gemm() hands it the product,
 * reading each operand in its own layout: a C-contiguous matrix is passed as it is, an
 * F-contiguous one (a transposed view) with the transpose flag, so x @ W.T never copies W.
 * Any other layout returns False and the caller uses NumPy.  The library is opened
 * RTLD_LOCAL: its symbols do not replace those of another BLAS in the process (NumPy's,
 * or the MKL inside PyTorch). */
#include <dlfcn.h>

typedef void (*sgemm_t)(int, int, int, int, int, int, float, const float *, int, const float *,
                        int, float, float *, int);
typedef void (*dgemm_t)(int, int, int, int, int, int, double, const double *, int, const double *,
                        int, double, double *, int);
static void *blas_handle;
static sgemm_t blas_sgemm;
static dgemm_t blas_dgemm;

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

/* blas_load(path, threading_layer): open the CBLAS library at path and take its cblas_sgemm and
 * cblas_dgemm.  threading_layer >= 0 is passed to MKL_Set_Threading_Layer first when the
 * library has it (1: sequential).  Raises OSError naming the path and the loader's message. */
static PyObject *py_blas_load(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("blas_load", nargs, 2, "path, threading_layer") < 0)
        return NULL;
    const char *path = PyUnicode_AsUTF8(args[0]);
    if (path == NULL)
        return NULL;
    long layer = PyLong_AsLong(args[1]);
    if (layer == -1 && PyErr_Occurred())
        return NULL;
    if (blas_handle != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "blas_load: a BLAS library is already loaded");
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *msg = dlerror();
        PyErr_Format(PyExc_OSError, "blas_load: cannot open '%s': %s", path, msg ? msg : "unknown error");
        return NULL;
    }
    sgemm_t s = (sgemm_t)dlsym(h, "cblas_sgemm");
    dgemm_t d = (dgemm_t)dlsym(h, "cblas_dgemm");
    if (s == NULL || d == NULL) {
        dlclose(h);
        PyErr_Format(PyExc_OSError, "blas_load: '%s' has no cblas_sgemm / cblas_dgemm", path);
        return NULL;
    }
    int (*set_layer)(int) = (int (*)(int))dlsym(h, "MKL_Set_Threading_Layer");
    if (set_layer != NULL && layer >= 0)
        set_layer((int)layer);
    blas_handle = h;
    blas_sgemm = s;
    blas_dgemm = d;
    Py_RETURN_NONE;
}

/* How to pass a 2-D operand of r x c elements: 0 not passable, else the CBLAS transpose flag
 * with *ld its leading dimension.  Dimensions of size 1 may carry any stride. */
static int gemm_layout(const Py_buffer *v, Py_ssize_t r, Py_ssize_t c, int *ld)
{
    Py_ssize_t isz = v->itemsize, s0 = v->strides[0], s1 = v->strides[1];
    if (s0 % isz || s1 % isz)
        return 0;
    s0 /= isz;
    s1 /= isz;
    if ((s1 == 1 || c == 1) && (r == 1 || (s0 >= c && s0 > 0)) && s0 <= INT32_MAX) {
        *ld = (int)(r == 1 ? (c > 0 ? c : 1) : s0);
        return CBLAS_NO_TRANS;
    }
    if ((s0 == 1 || r == 1) && (c == 1 || (s1 >= r && s1 > 0)) && s1 <= INT32_MAX) {
        *ld = (int)(c == 1 ? (r > 0 ? r : 1) : s1);
        return CBLAS_TRANS;
    }
    return 0;
}

/* gemm(a, b, out[, beta]) -> bool: out <- a @ b + beta * out for a (M, K), b (K, N), out (M, N)
 * C-contiguous and writable, all float32 or all float64; beta 0 (the default: out's contents
 * are not read) or 1 (out holds a broadcast bias: the linear forward's addmm, which saves the
 * separate bias pass and the library's zeroing of out).  False, writing nothing, when no
 * library is loaded, an operand's layout cannot be passed as it is (see gemm_layout), a size
 * is 0 or does not fit CBLAS's int, or the dtypes are other; TypeError / ValueError for
 * malformed calls. */
static PyObject *py_gemm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *kern = "gemm";
    static const BufArg spec[] = {{"a", PyBUF_STRIDES, 2}, {"b", PyBUF_STRIDES, 2}, {"out", C_OUT, 2}};
    double beta = 0.0;
    if (nargs == 4) {
        beta = PyFloat_AsDouble(args[3]);
        if (beta == -1.0 && PyErr_Occurred())
            return NULL;
        if (beta != 0.0 && beta != 1.0) {
            PyErr_Format(PyExc_ValueError, "gemm: beta must be 0 or 1, got %g", beta);
            return NULL;
        }
        nargs = 3;
    }
    if (check_nargs(kern, nargs, 3, "a, b, out[, beta]") < 0)
        return NULL;
    if (blas_handle == NULL)
        Py_RETURN_FALSE;
    Py_buffer v[3];
    if (take_buffers(kern, args, spec, 3, v) < 0)
        return NULL;
    PyObject *res = NULL;
    char k = float_kind(v, 3);
    Py_ssize_t M = v[0].shape[0], K = v[0].shape[1], N = v[1].shape[1];
    if (!k) {
        res = Py_NewRef(Py_False);
        goto done;
    }
    if (v[1].shape[0] != K || v[2].shape[0] != M || v[2].shape[1] != N) {
        PyErr_Format(PyExc_ValueError, "gemm: shapes (%zd, %zd) @ (%zd, %zd) -> (%zd, %zd) do not match",
                     M, K, v[1].shape[0], N, v[2].shape[0], v[2].shape[1]);
        goto done;
    }
    int lda, ldb;
    int ta = gemm_layout(&v[0], M, K, &lda), tb = gemm_layout(&v[1], K, N, &ldb);
    if (!ta || !tb || M <= 0 || N <= 0 || K <= 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX
        || ((uintptr_t)v[0].buf | (uintptr_t)v[1].buf | (uintptr_t)v[2].buf) % (uintptr_t)v[0].itemsize) {
        res = Py_NewRef(Py_False);
        goto done;
    }
    /* the GIL is released for products worth it (~0.1 us against a ~1 us product) */
    if (k == 'f')
        WITHOUT_GIL((double)M * N * K / 4,
                    blas_sgemm(CBLAS_ROW_MAJOR, ta, tb, (int)M, (int)N, (int)K, 1.0f,
                               (const float *)v[0].buf, lda, (const float *)v[1].buf, ldb, (float)beta,
                               (float *)v[2].buf, (int)N));
    else
        WITHOUT_GIL((double)M * N * K / 4,
                    blas_dgemm(CBLAS_ROW_MAJOR, ta, tb, (int)M, (int)N, (int)K, 1.0,
                               (const double *)v[0].buf, lda, (const double *)v[1].buf, ldb, beta,
                               (double *)v[2].buf, (int)N));
    res = Py_NewRef(Py_True);
done:
    release_buffers(v, 3);
    return res;
}

/* ==== end of gemm ==== */

/* ==== sgemm_pack_size / sgemm_pack / sgemm_packed: MKL's packed-operand products ==== */

/* A recurrent layer multiplies the same W_hh by a new h at every step; plain sgemm repacks
 * all of W_hh into its kernels' layout at every call.  MKL's cblas_sgemm_pack stores the
 * operand once in that layout and cblas_sgemm_compute reads it from there (AVX-512 Xeon, one
 * thread, H 256, batch 32: h @ W_hh^T 140 -> 106 us, d @ W_hh 122 -> 108 us a step).  These
 * are MKL's own symbols: with another CBLAS library (or none) sgemm_pack_size returns 0.
 * The packed buffer starts with a header (shape, magic) that sgemm_packed checks, so a
 * buffer cannot be used with a product of another shape; the packed data starts at the
 * first 64-byte boundary after it. */
typedef size_t (*spack_size_t)(int, int, int, int);
typedef void (*spack_t)(int, int, int, int, int, int, float, const float *, int, float *);
typedef void (*scompute_t)(int, int, int, int, int, int, const float *, int, const float *, int,
                           float, float *, int);
static spack_size_t blas_spack_size;
static spack_t blas_spack;
static scompute_t blas_scompute;
static int blas_pack_tried;

enum { CBLAS_BMATRIX = 162, CBLAS_PACKED = 151 };

typedef struct {
    uint64_t magic;
    int64_t m, n, k, size;
} PackHead;
#define PACK_MAGIC 0x6b636170676e7964ull   /* "dyngpack" */
#define PACK_SLACK ((Py_ssize_t)sizeof(PackHead) + 64)

static int pack_syms(void)
{
    if (blas_handle == NULL)
        return 0;
    if (!blas_pack_tried) {
        blas_pack_tried = 1;   /* blas_handle is set once (blas_load refuses a second library) */
        blas_spack_size = (spack_size_t)dlsym(blas_handle, "cblas_sgemm_pack_get_size");
        blas_spack = (spack_t)dlsym(blas_handle, "cblas_sgemm_pack");
        blas_scompute = (scompute_t)dlsym(blas_handle, "cblas_sgemm_compute");
        if (!blas_spack_size || !blas_spack || !blas_scompute)
            blas_spack_size = NULL, blas_spack = NULL, blas_scompute = NULL;
    }
    return blas_scompute != NULL;
}

static float *pack_data(void *buf)
{
    uintptr_t p = (uintptr_t)buf + sizeof(PackHead);
    return (float *)((p + 63) & ~(uintptr_t)63);
}

static int pack_dims(PyObject *const *args, Py_ssize_t d[3])
{
    for (int i = 0; i < 3; i++) {
        d[i] = PyLong_AsSsize_t(args[i]);
        if (d[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* sgemm_pack_size(m, n, k) -> int: bytes of the buffer sgemm_pack needs for b (k, n) in
 * products with m rows; 0 when the loaded library has no packed products (or none is
 * loaded) or a size is not in 1..INT32_MAX. */
static PyObject *py_sgemm_pack_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t d[3];
    if (check_nargs("sgemm_pack_size", nargs, 3, "m, n, k") < 0 || pack_dims(args, d) < 0)
        return NULL;
    for (int i = 0; i < 3; i++)
        if (d[i] <= 0 || d[i] > INT32_MAX)
            return PyLong_FromLong(0);
    if (!pack_syms())
        return PyLong_FromLong(0);
    size_t sz = blas_spack_size(CBLAS_BMATRIX, (int)d[0], (int)d[1], (int)d[2]);
    return PyLong_FromSize_t(sz ? sz + (size_t)PACK_SLACK : 0);
}

/* sgemm_pack(b, m, buf) -> bool: b (k, n) float32, C-contiguous or a transposed view, packed
 * into buf (a writable C-contiguous buffer of sgemm_pack_size(m, n, k) bytes) for products
 * a @ b with a of m rows.  False, writing nothing, when the library has no packed products
 * or b's layout cannot be passed as it is. */
static PyObject *py_sgemm_pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("sgemm_pack", nargs, 3, "b, m, buf") < 0)
        return NULL;
    Py_ssize_t m = PyLong_AsSsize_t(args[1]);
    if (m == -1 && PyErr_Occurred())
        return NULL;
    if (!pack_syms())
        Py_RETURN_FALSE;
    Py_buffer vb, vo;
    PyObject *res = NULL;
    if (PyObject_GetBuffer(args[0], &vb, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "sgemm_pack: b must be an array");
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &vo, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "sgemm_pack: buf must be a writable, C-contiguous buffer");
        PyBuffer_Release(&vb);
        return NULL;
    }
    if (vb.ndim != 2 || vb.itemsize != 4 || !is_fmt(vb.format, 'f')) {
        PyErr_SetString(PyExc_TypeError, "sgemm_pack: b must be a 2-D float32 array");
        goto done;
    }
    Py_ssize_t K = vb.shape[0], N = vb.shape[1];
    int ldb, tb = gemm_layout(&vb, K, N, &ldb);
    if (!tb || m <= 0 || N <= 0 || K <= 0 || m > INT32_MAX || N > INT32_MAX || K > INT32_MAX
        || (uintptr_t)vb.buf % 4) {
        res = Py_NewRef(Py_False);
        goto done;
    }
    size_t need = blas_spack_size(CBLAS_BMATRIX, (int)m, (int)N, (int)K);
    if (need == 0) {
        res = Py_NewRef(Py_False);
        goto done;
    }
    if (vo.len < (Py_ssize_t)need + PACK_SLACK) {
        PyErr_Format(PyExc_ValueError, "sgemm_pack: buf has %zd bytes, needs %zd (sgemm_pack_size)",
                     vo.len, (Py_ssize_t)need + PACK_SLACK);
        goto done;
    }
    PackHead head = {PACK_MAGIC, m, N, K, (int64_t)need};
    blas_spack(CBLAS_ROW_MAJOR, CBLAS_BMATRIX, tb, (int)m, (int)N, (int)K, 1.0f, (const float *)vb.buf,
               ldb, pack_data(vo.buf));
    memcpy(vo.buf, &head, sizeof head);
    res = Py_NewRef(Py_True);
done:
    PyBuffer_Release(&vo);
    PyBuffer_Release(&vb);
    return res;
}

/* sgemm_packed(a, buf, out, beta) -> out: out <- a @ b + beta * out for b packed in buf by
 * sgemm_pack: a (m, k) float32, C-contiguous or a transposed view, out (m, n) float32,
 * C-contiguous, writable (read too when beta != 0).  ValueError when the shapes are not
 * those buf was packed for or a's layout cannot be passed. */
static PyObject *py_sgemm_packed(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("sgemm_packed", nargs, 4, "a, buf, out, beta") < 0)
        return NULL;
    double beta = PyFloat_AsDouble(args[3]);
    if (beta == -1.0 && PyErr_Occurred())
        return NULL;
    if (!pack_syms()) {
        PyErr_SetString(PyExc_RuntimeError, "sgemm_packed: no library with packed products is loaded");
        return NULL;
    }
    Py_buffer va, vp, vo;
    int held = 0;
    PyObject *res = NULL;
    if (PyObject_GetBuffer(args[0], &va, PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        goto bad;
    held = 1;
    if (PyObject_GetBuffer(args[1], &vp, PyBUF_C_CONTIGUOUS) < 0)
        goto bad;
    held = 2;
    if (PyObject_GetBuffer(args[2], &vo, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        goto bad;
    held = 3;
    PackHead head;
    if (vp.len < PACK_SLACK) {
        PyErr_SetString(PyExc_ValueError, "sgemm_packed: buf is not a packed operand (sgemm_pack)");
        goto done;
    }
    memcpy(&head, vp.buf, sizeof head);
    if (head.magic != PACK_MAGIC || head.size <= 0 || vp.len < head.size + PACK_SLACK) {
        PyErr_SetString(PyExc_ValueError, "sgemm_packed: buf is not a packed operand (sgemm_pack)");
        goto done;
    }
    if (va.ndim != 2 || vo.ndim != 2 || va.itemsize != 4 || vo.itemsize != 4 || !is_fmt(va.format, 'f')
        || !is_fmt(vo.format, 'f')) {
        PyErr_SetString(PyExc_TypeError, "sgemm_packed: a and out must be 2-D float32 arrays");
        goto done;
    }
    if (va.shape[0] != head.m || va.shape[1] != head.k || vo.shape[0] != head.m || vo.shape[1] != head.n) {
        PyErr_Format(PyExc_ValueError, "sgemm_packed: (%zd, %zd) @ packed -> (%zd, %zd), but buf was "
                     "packed for (%lld, %lld) @ (%lld, %lld)", va.shape[0], va.shape[1], vo.shape[0],
                     vo.shape[1], (long long)head.m, (long long)head.k, (long long)head.k,
                     (long long)head.n);
        goto done;
    }
    int lda, ta = gemm_layout(&va, head.m, head.k, &lda);
    if (!ta || ((uintptr_t)va.buf | (uintptr_t)vo.buf) % 4) {
        PyErr_SetString(PyExc_ValueError, "sgemm_packed: a must be C-contiguous or a transposed view");
        goto done;
    }
    {
        PyThreadState *ts = (double)head.m * head.n * head.k >= 65536.0 ? PyEval_SaveThread() : NULL;
        blas_scompute(CBLAS_ROW_MAJOR, ta, CBLAS_PACKED, (int)head.m, (int)head.n, (int)head.k,
                      (const float *)va.buf, lda, pack_data(vp.buf), (int)head.n, (float)beta,
                      (float *)vo.buf, (int)head.n);
        if (ts)
            PyEval_RestoreThread(ts);
    }
    res = Py_NewRef(args[2]);
    goto done;
bad:
    PyErr_Clear();
    PyErr_SetString(PyExc_TypeError, held == 0 ? "sgemm_packed: a must be an array"
                                    : held == 1 ? "sgemm_packed: buf must be a C-contiguous buffer"
                                                : "sgemm_packed: out must be a writable, C-contiguous array");
done:
    if (held >= 3)
        PyBuffer_Release(&vo);
    if (held >= 2)
        PyBuffer_Release(&vp);
    if (held >= 1)
        PyBuffer_Release(&va);
    return res;
}

static int packed_operand(const char *kern, PyObject *o, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k,
                          Py_buffer *v)
{
    if (!pack_syms()) {
        PyErr_Format(PyExc_RuntimeError, "%s: no library with packed products is loaded", kern);
        return -1;
    }
    if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    PackHead head;
    memset(&head, 0, sizeof head);
    if (v->len >= PACK_SLACK)
        memcpy(&head, v->buf, sizeof head);
    if (head.magic != PACK_MAGIC || head.size <= 0 || v->len < head.size + PACK_SLACK || head.m != m
        || head.n != n || head.k != k) {
        PyErr_Format(PyExc_ValueError, "%s: the packed operand is not one of (%zd, %zd) @ (%zd, %zd) "
                     "(sgemm_pack)", kern, m, k, k, n);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

static void packed_rows(const Py_buffer *v, const float *a, Py_ssize_t lda, float *out, Py_ssize_t ldo)
{
    PackHead head;
    memcpy(&head, v->buf, sizeof head);
    blas_scompute(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_PACKED, (int)head.m, (int)head.n, (int)head.k,
                  a, (int)lda, pack_data(v->buf), (int)head.n, 0.0f, out, (int)ldo);
}

/* ==== end of sgemm_pack ==== */

/* ------------------------------------------------------------------------------------ */

static PyMethodDef methods[] = {
    {"sgd_momentum", (PyCFunction)(void (*)(void))py_sgd_momentum, METH_FASTCALL,
     "sgd_momentum(p, g, buf, lr, momentum): buf = momentum * buf + g; p -= lr * buf, in place\n\n"
     "(one pass; the same roundings as the NumPy expressions)."},
    {"pack_panels", (PyCFunction)(void (*)(void))py_pack_panels, METH_FASTCALL,
     "pack_panels(w, out): w (N, K) float32 (N a multiple of 16) into out (N * K float32)\n\n"
     "as N / 16 panels of K x 16 (panel p, row k: w[16 p .. 16 p + 15, k]), for gemm_packed."},
    {"gemm_packed", (PyCFunction)(void (*)(void))py_gemm_packed, METH_FASTCALL | METH_KEYWORDS,
     "gemm_packed(a, bp, out): out (M, N) = a (M, K) @ w.T, bp = pack_panels(w) (float32).\n\n"
     "out may be given as a keyword (the sequence kernels' product call); returns out.\n"
     "Needs AVX2 and FMA (the module's packed_gemm is True)."},
    {"lstm_forward", (PyCFunction)(void (*)(void))py_lstm_forward, METH_FASTCALL,
     "lstm_forward(hw, xw, c_prev, acts, c, h): one LSTM step's pointwise math.\n\n"
     "acts (B, 4H) <- sigmoid/tanh of hw + xw (gate order i, f, g, o; xw may be None);\n"
     "c (B, H) <- f * c_prev + i * g; h (B, H) <- tanh(c) * o."},
    {"lstm_sequence", (PyCFunction)(void (*)(void))py_lstm_sequence, METH_FASTCALL,
     "lstm_sequence(mm, hw, xw, c0, acts, hs, cs, hbuf, reverse): a whole LSTM direction.\n\n"
     "Equal steps of B rows, no projection: per step mm[0](mm[1], mm[2], out=mm[3]) writes\n"
     "the hidden product that hw views, then lstm_forward's gates fill the step's rows of\n"
     "acts, hs, cs and hbuf (the next product's input, holding h0 at the start).\n"
     "mm = (w,) (W_hh, float32 (4H, H), C-contiguous, H % 8 == 0; hw None): the products run\n"
     "in this module from w's own layout (small batches; needs AVX2/FMA).\n"
     "mm = (pb,) (W_hh^T packed by sgemm_pack for B rows; hw None): MKL writes each step's\n"
     "product into the step's rows of acts."},
    {"lstm_backward_sequence", (PyCFunction)(void (*)(void))py_lstm_backward_sequence, METH_FASTCALL,
     "lstm_backward_sequence(w, ghs, acts, cs, c0, dgates, dh, dc, reverse): BPTT through a\n"
     "whole LSTM direction of equal steps, float32, no projection (small batches).\n\n"
     "Per step (last first): lstm_backward's math on dh + ghs and dc writes the step's rows of\n"
     "dgates and dc_prev over dc, then dh <- those rows @ w (w = W_hh (4H, H), C-contiguous,\n"
     "H a multiple of 8).  dh, dc: gradients of h_n, c_n in; of h0, c0 out.  Needs AVX2/FMA."},
    {"gru_sequence", (PyCFunction)(void (*)(void))py_gru_sequence, METH_FASTCALL,
     "gru_sequence(mm, hw, xw, bias, acts, hwn, hs, hbuf, reverse): a whole GRU direction.\n\n"
     "Equal steps of B rows: per step mm[0](mm[1], mm[2], out=mm[3]) writes the hidden\n"
     "product that hw views, then gru_forward's gates (with bias, (3H,) or None) fill the\n"
     "step's rows of acts, hwn and hs; hbuf (B, H) holds h0 at the start and each step's h."},
    {"lstm_backward", (PyCFunction)(void (*)(void))py_lstm_backward, METH_FASTCALL,
     "lstm_backward(dh, ghs, dc, acts, c, c_prev, dgates, dc_prev): one step of BPTT.\n\n"
     "dh + ghs (ghs may be None) is the gradient of h, dc that of c; writes the gradient of\n"
     "the pre-activation gates (B, 4H) and of c_prev (B, H)."},
    {"gru_forward", (PyCFunction)(void (*)(void))py_gru_forward, METH_FASTCALL,
     "gru_forward(hw, xw, bias, h_prev, acts, hwn, h): one GRU step (gate order r, z, n).\n\n"
     "With hw' = hw + bias (b_hh: (3H,) or (B, 3H), or None): acts <- (r, z, n);\n"
     "hwn <- hw'[:, 2H:]; h <- (h_prev - n) * z + n."},
    {"gru_backward", (PyCFunction)(void (*)(void))py_gru_backward, METH_FASTCALL,
     "gru_backward(dh, ghs, acts, hwn, h_prev, dxw, dhw, dhz): one GRU step of BPTT.\n\n"
     "dxw, dhw (B, 3H) <- gradients of xw and hw; dhz (B, H) <- (dh + ghs) * z."},
    {"rnn_forward", (PyCFunction)(void (*)(void))py_rnn_forward, METH_FASTCALL,
     "rnn_forward(hw, xw, h, relu): h <- tanh(hw + xw) (relu: max(hw + xw, 0))."},
    {"rnn_backward", (PyCFunction)(void (*)(void))py_rnn_backward, METH_FASTCALL,
     "rnn_backward(dh, ghs, h, d, relu): d <- (dh + ghs) * (1 - h^2) (relu: * (h > 0))."},
    {"lstm_cell_state", (PyCFunction)(void (*)(void))py_lstm_cell_state, METH_FASTCALL,
     "lstm_cell_state(gates, c, out): out <- sigmoid(f) * c + sigmoid(i) * tanh(g)."},
    {"lstm_cell_hidden", (PyCFunction)(void (*)(void))py_lstm_cell_hidden, METH_FASTCALL,
     "lstm_cell_hidden(gates, c, out): out <- sigmoid(o) * tanh(c)."},
    {"lstm_cell_state_vjp", (PyCFunction)(void (*)(void))py_lstm_cell_state_vjp, METH_FASTCALL,
     "lstm_cell_state_vjp(gr, gates, c, dgates, dc): gradients of lstm_cell_state's inputs."},
    {"lstm_cell_hidden_vjp", (PyCFunction)(void (*)(void))py_lstm_cell_hidden_vjp, METH_FASTCALL,
     "lstm_cell_hidden_vjp(gr, gates, c, dgates, dc): gradients of lstm_cell_hidden's inputs."},
    {"unary", (PyCFunction)(void (*)(void))py_unary, METH_FASTCALL,
     "unary(name, x, out): out <- exp / tanh / sigmoid of x, or softmax of each row of x, with the kernels' own math."},
    {"cross_entropy", (PyCFunction)(void (*)(void))py_cross_entropy, METH_FASTCALL,
     "cross_entropy(x, target, ignore_index, e, s, picked) -> rows ignored.\n\n"
     "Per row of x (N, C): e <- exp(x - max), s (N, 1) <- its sum, picked (N, 1) <-\n"
     "(x[n, t] - max) - log(s) (class 0 where t == ignore_index); target (N,) int64."},
    {"log_softmax", (PyCFunction)(void (*)(void))py_log_softmax, METH_FASTCALL,
     "log_softmax(x, out): out (B, C) <- log_softmax of each row of x, by cross_entropy's\n"
     "row operations (the same bits at a target)."},
    {"sgd_step", (PyCFunction)(void (*)(void))py_sgd_step, METH_FASTCALL,
     "sgd_step(p, g, lr): p -= lr * g in place, in one pass (the NumPy line's roundings)."},
    {"sigmoid", (PyCFunction)(void (*)(void))py_sigmoid, METH_FASTCALL,
     "sigmoid(x, out) -> bool: out <- sigmoid of x by unary's loop, for C-contiguous x of any\n"
     "shape (False, nothing written, where x is not C-contiguous)."},
    {"max_pool_tiled", (PyCFunction)(void (*)(void))py_max_pool_tiled, METH_FASTCALL,
     "max_pool_tiled(x, kh, kw, vals, idx) -> bool: 2-d max pooling of windows that tile x\n"
     "(values and flat plane indices, PyTorch's scan order); False where a window holds NaN."},
    {"pool_scatter_tiled", (PyCFunction)(void (*)(void))py_pool_scatter_tiled, METH_FASTCALL,
     "pool_scatter_tiled(g, idx, out) -> bool: out[n, c].flat[idx[n, c, k]] = g[n, c, k] into a\n"
     "zero-filled out (tiling windows: no position twice)."},
    {"im2col2d", (PyCFunction)(void (*)(void))py_im2col2d, METH_FASTCALL,
     "im2col2d(x, cols, kh, kw, sh, sw, ph, pw, dh, dw) -> bool: the 2-d convolution's columns\n"
     "(N, C, kh, kw, OH, OW) of x (N, C, H, W), zero padding as bounds."},
    {"col2im2d", (PyCFunction)(void (*)(void))py_col2im2d, METH_FASTCALL,
     "col2im2d(dc, out, kh, kw, sh, sw, ph, pw, dh, dw) -> bool: out (N, C, H, W) <- the columns\n"
     "dc (N, kh * kw, C, OH, OW) summed at their input positions (im2col2d's adjoint)."},
    {"adam_step", (PyCFunction)(void (*)(void))py_adam_step, METH_FASTCALL,
     "adam_step(p, g, m, v, w1, b2, c2, bc2, eps, step): one Adam update of p, m, v in place\n"
     "(optim/adam.py's NumPy lines, the same roundings)."},
    {"outer", (PyCFunction)(void (*)(void))py_outer, METH_FASTCALL,
     "outer(a, b, out) -> bool: out <- a * b for a (M, 1), b (1, N) with contiguous elements,\n"
     "out (M, N) C-contiguous, one float dtype (the multiply's values); False otherwise."},
    {"blas_load", (PyCFunction)(void (*)(void))py_blas_load, METH_FASTCALL,
     "blas_load(path, threading_layer): open a CBLAS library (Intel MKL's libmkl_rt) for gemm()\n"
     "(threading_layer >= 0: passed to MKL_Set_Threading_Layer first; 1 is sequential)."},
    {"sgemm_pack_size", (PyCFunction)(void (*)(void))py_sgemm_pack_size, METH_FASTCALL,
     "sgemm_pack_size(m, n, k) -> int: bytes sgemm_pack needs for b (k, n) and products of m rows;\n"
     "0 where the loaded BLAS library (MKL) has no packed products."},
    {"sgemm_pack", (PyCFunction)(void (*)(void))py_sgemm_pack, METH_FASTCALL,
     "sgemm_pack(b, m, buf) -> bool: float32 b (k, n) packed by MKL into buf for a @ b, a of m rows."},
    {"sgemm_packed", (PyCFunction)(void (*)(void))py_sgemm_packed, METH_FASTCALL,
     "sgemm_packed(a, buf, out, beta) -> out: out <- a @ b + beta * out, b packed in buf (sgemm_pack)."},
    {"gemm", (PyCFunction)(void (*)(void))py_gemm, METH_FASTCALL,
     "gemm(a, b, out[, beta]) -> bool: out <- a @ b (+ out when beta is 1) through the library\n"
     "blas_load opened, for 2-D float32/float64 operands in C or F order; False (nothing\n"
     "written) otherwise."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dyngraph._kernels",
    "Fused pointwise gate kernels for dyngraph's recurrent layers (see dyngraph/_kernels.c).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
#ifdef HAVE_BLOCK8
    if (have_avx2 < 0) {
        __builtin_cpu_init();
        have_avx2 = __builtin_cpu_supports("avx2") != 0;
        have_fma = __builtin_cpu_supports("fma") != 0;
    }
#endif
    if (kw_out == NULL && (kw_out = Py_BuildValue("(s)", "out")) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
#ifdef HAVE_PACKED
    int packed = have_avx2 > 0 && have_fma > 0;
#else
    int packed = 0;
#endif
    if (m != NULL && PyModule_AddObjectRef(m, "packed_gemm", packed ? Py_True : Py_False) < 0)
        Py_CLEAR(m);
    return m;
}

#else   /* ---- KERNEL_T defined: the row loops for one dtype (included twice, above) ---- */

#define T KERNEL_T
#define NM3(x, s) x##_##s
#define NM2(x, s) NM3(x, s)
#define NM(x) NM2(x, KSFX)

/* row `row`, columns [col0, col0 + n) of a into dst */
static inline void NM(gather)(const Arr *a, Py_ssize_t row, Py_ssize_t col0, Py_ssize_t n,
                              T *restrict dst)
{
    const char *base = a->buf + row * a->s0 + col0 * a->s1;
    Py_ssize_t s = a->s1;
    if (s == (Py_ssize_t)sizeof(T))
        memcpy(dst, base, (size_t)n * sizeof(T));
    else
        for (Py_ssize_t j = 0; j < n; j++)
            dst[j] = *(const T *)(base + j * s);
}

/* the same, adding into dst (dst + a, as the NumPy path's `+=`) */
static inline void NM(gather_add)(const Arr *a, Py_ssize_t row, Py_ssize_t n, T *restrict dst)
{
    const char *base = a->buf + row * a->s0;
    Py_ssize_t s = a->s1;
    if (s == (Py_ssize_t)sizeof(T)) {
        const T *src = (const T *)base;
        for (Py_ssize_t j = 0; j < n; j++)
            dst[j] += src[j];
    } else
        for (Py_ssize_t j = 0; j < n; j++)
            dst[j] += *(const T *)(base + j * s);
}

/* src into row `row` of the C-contiguous output a, columns [col0, col0 + n) */
static inline void NM(scatter)(const Arr *a, Py_ssize_t row, Py_ssize_t col0, Py_ssize_t n,
                               const T *restrict src)
{
    memcpy((T *)(a->buf + row * a->s0) + col0, src, (size_t)n * sizeof(T));
}

/* A (B, W) input whose rows are strided and columns contiguous -- the transposed float32
 * product W_hh @ h.T -- read row by row touches one cache line per element; copied to a
 * row-major block first, 8 rows (one line of each column) at a time, it is read once
 * (~1/3 of the LSTM step's gate time at batch 32).  *view is the array to read: the copy
 * (returned, to be freed) or, for any other layout or if the copy cannot be allocated, a
 * itself (NULL returned). */
static T *NM(staged)(const Arr *a, Py_ssize_t B, Py_ssize_t W, Arr *view)
{
    *view = *a;
    if (B < 2 || a->s0 != (Py_ssize_t)sizeof(T) || a->s1 == (Py_ssize_t)sizeof(T))
        return NULL;
    T *tmp = (T *)PyMem_RawMalloc((size_t)(B * W) * sizeof(T));
    if (tmp == NULL)
        return NULL;
    for (Py_ssize_t b0 = 0; b0 < B; b0 += 8) {
        Py_ssize_t nb = B - b0 < 8 ? B - b0 : 8;
        for (Py_ssize_t j = 0; j < W; j++) {
            const T *src = (const T *)(a->buf + j * a->s1) + b0;
            for (Py_ssize_t k = 0; k < nb; k++)
                tmp[(b0 + k) * W + j] = src[k];
        }
    }
    view->buf = (char *)tmp;
    view->s0 = W * (Py_ssize_t)sizeof(T);
    view->s1 = sizeof(T);
    return tmp;
}

/* Rows [b0, b0 + nb) (nb <= 8) of a (B, W) input into dst (nb x W, row-major); for a
 * transposed (column-contiguous) input each column's nb values are one cache line, read
 * once for the block instead of once per row, and the block stays in L1. */
static inline void NM(gather_block)(const Arr *a, Py_ssize_t b0, Py_ssize_t nb, Py_ssize_t W,
                                    T *restrict dst)
{
    if (a->s0 == (Py_ssize_t)sizeof(T) && a->s1 != (Py_ssize_t)sizeof(T)) {
        for (Py_ssize_t j = 0; j < W; j++) {
            const T *src = (const T *)(a->buf + j * a->s1) + b0;
            for (Py_ssize_t k = 0; k < nb; k++)
                dst[k * W + j] = src[k];
        }
    } else
        for (Py_ssize_t k = 0; k < nb; k++)
            NM(gather)(a, b0 + k, 0, W, dst + k * W);
}

/* ---- LSTM (gate order i, f, g, o) ---- */

/* one row: p = pre-activations (4H) -> activations in place; c = f * cp + i * g;
 * h = tanh(c) * o.  One short loop per function instead of one loop doing all five: a
 * sigmoid or tanh is a ~80-cycle dependency chain (reduction, polynomial, division), and
 * the five of one column plus tanh(c) (~300 instructions) do not fit the out-of-order
 * window together, so the fused loop ran latency-bound; in short loops consecutive
 * columns overlap (the row, 4H values, stays in L1).  Same operations per element. */
static inline __attribute__((always_inline)) void NM(lstm_fwd_row)(Py_ssize_t H, T *restrict p, const T *restrict cp,
                                    T *restrict c, T *restrict h)
{
    for (Py_ssize_t j = 0; j < 2 * H; j++)
        p[j] = KSIG(p[j]);
    for (Py_ssize_t j = 3 * H; j < 4 * H; j++)
        p[j] = KSIG(p[j]);
    for (Py_ssize_t j = 2 * H; j < 3 * H; j++)
        p[j] = KTANH(p[j]);
    for (Py_ssize_t j = 0; j < H; j++)
        c[j] = p[H + j] * cp[j] + p[j] * p[2 * H + j];
    for (Py_ssize_t j = 0; j < H; j++)
        h[j] = KTANH(c[j]) * p[3 * H + j];
}

/* a: hw, xw (or None), c_prev, acts, c, h */
KCLONES static void NM(lstm_fwd)(int flag, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *blk = (T *)vbuf, *cpb = blk + 32 * H, *cb = cpb + H, *hb = cb + H;
    for (Py_ssize_t b0 = 0; b0 < B; b0 += 8) {
        Py_ssize_t nb = B - b0 < 8 ? B - b0 : 8;
        NM(gather_block)(&a[0], b0, nb, 4 * H, blk);
        for (Py_ssize_t k = 0; k < nb; k++) {
            Py_ssize_t b = b0 + k;
            T *p = blk + k * 4 * H;
            if (a[1].present)
                NM(gather_add)(&a[1], b, 4 * H, p);
            NM(gather)(&a[2], b, 0, H, cpb);
            NM(lstm_fwd_row)(H, p, cpb, cb, hb);
            NM(scatter)(&a[3], b, 0, 4 * H, p);
            NM(scatter)(&a[4], b, 0, H, cb);
            NM(scatter)(&a[5], b, 0, H, hb);
        }
    }
}

/* one row of back-propagation through a step (the NumPy path's factors, per element):
 * dfull = dh (+ ghs); d_o = dfull * (tc * (o (1 - o)));
 * dct = dfull * (o (1 - tc^2)) + dc; d_i = dct * (g (i (1 - i)));
 * d_f = dct * (cp (f (1 - f))); d_g = dct * (i (1 - g^2)); dc_prev = dct * f */
static inline __attribute__((always_inline)) void NM(lstm_bwd_row)(Py_ssize_t H, const T *restrict dh, const T *restrict dc,
                                    const T *restrict a, const T *restrict c,
                                    const T *restrict cp, T *restrict dg, T *restrict dcp)
{
    const T one = 1;
    for (Py_ssize_t j = 0; j < H; j++) {
        T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
        T tc = KTANH(c[j]), d = dh[j];
        dg[3 * H + j] = d * (tc * (o * (one - o)));
        T dct = d * (o * (one - tc * tc)) + dc[j];
        dg[j] = dct * (g * (i * (one - i)));
        dg[H + j] = dct * (cp[j] * (f * (one - f)));
        dg[2 * H + j] = dct * (i * (one - g * g));
        dcp[j] = dct * f;
    }
}

/* a: dh, ghs (or None), dc, acts, c, c_prev, dgates, dc_prev */
KCLONES static void NM(lstm_bwd)(int flag, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *dhb = (T *)vbuf, *dcb = dhb + H, *ab = dcb + H, *cb = ab + 4 * H, *cpb = cb + H;
    T *dgb = cpb + H, *dcpb = dgb + 4 * H;
    /* acts, c and c_prev read in place and dgates written in place (no row copies, ~20% of
     * the step) when their columns are contiguous and dgates shares no memory with an input */
    static const int width[] = {1, 1, 1, 4, 1, 1};
    int direct = unit_cols(&a[3], sizeof(T)) && unit_cols(&a[4], sizeof(T)) && unit_cols(&a[5], sizeof(T));
    for (int k = 0; k < 6 && direct; k++)
        if (a[k].present && spans_overlap(&a[6], 4 * H, &a[k], width[k] * H, B, sizeof(T)))
            direct = 0;
    for (Py_ssize_t b = 0; b < B; b++) {
        NM(gather)(&a[0], b, 0, H, dhb);
        if (a[1].present)
            NM(gather_add)(&a[1], b, H, dhb);
        NM(gather)(&a[2], b, 0, H, dcb);
        const T *ar = ab, *cr = cb, *cpr = cpb;
        T *dgr = dgb;
        if (direct) {
            ar = (const T *)(a[3].buf + b * a[3].s0);
            cr = (const T *)(a[4].buf + b * a[4].s0);
            cpr = (const T *)(a[5].buf + b * a[5].s0);
            dgr = (T *)(a[6].buf + b * a[6].s0);
        } else {
            NM(gather)(&a[3], b, 0, 4 * H, ab);
            NM(gather)(&a[4], b, 0, H, cb);
            NM(gather)(&a[5], b, 0, H, cpb);
        }
        NM(lstm_bwd_row)(H, dhb, dcb, ar, cr, cpr, dgr, dcpb);
        if (!direct)
            NM(scatter)(&a[6], b, 0, 4 * H, dgb);
        NM(scatter)(&a[7], b, 0, H, dcpb);
    }
}

/* One step of lstm_sequence: rows [t B, t B + B) of the layer from the product hw (B, 4H)
 * and the state of step `prev` (-1: c0).  a: hw, xw, c0, acts, hs, cs, hbuf (the next
 * product's input: this step's h again).  Works in the outputs' own rows (acts, hs, cs are
 * C-contiguous and not the memory of hw/xw/c0): hw + xw goes straight into acts, the gates
 * run there in place, c and h are written into cs/hs and the previous c read from cs, with
 * no row copies through a buffer. */
KCLONES static void NM(lstm_seq_step)(Py_ssize_t t, Py_ssize_t prev, Py_ssize_t B, Py_ssize_t H,
                                      Arr *a, void *vbuf, int pre)
{
    T *cpb = (T *)vbuf;
    Py_ssize_t W = 4 * H;
    for (Py_ssize_t b0 = 0; b0 < B; b0 += 8) {
        Py_ssize_t nb = B - b0 < 8 ? B - b0 : 8;
        T *dst = (T *)(a[3].buf + (t * B + b0) * a[3].s0);
        int done = 0;
        if (pre) {   /* the product is already in the step's rows of acts: add xw */
            for (Py_ssize_t k = 0; k < nb; k++)
                NM(gather_add)(&a[1], t * B + b0 + k, W, dst + k * W);
            done = 1;
        }
#ifdef HAVE_BLOCK8
        if (!done && sizeof(T) == sizeof(float))
            done = block8_add_f(&a[0], &a[1], t * B + b0, b0, nb, W, (float *)dst);
#endif
        if (!done) {
            NM(gather_block)(&a[0], b0, nb, W, dst);
            for (Py_ssize_t k = 0; k < nb; k++)
                NM(gather_add)(&a[1], t * B + b0 + k, W, dst + k * W);
        }
        for (Py_ssize_t k = 0; k < nb; k++) {
            Py_ssize_t b = b0 + k, row = t * B + b;
            const T *cp;
            if (prev < 0) {
                NM(gather)(&a[2], b, 0, H, cpb);
                cp = cpb;
            } else
                cp = (const T *)(a[5].buf + (prev * B + b) * a[5].s0);
            T *h = (T *)(a[4].buf + row * a[4].s0);
            NM(lstm_fwd_row)(H, dst + k * W, cp, (T *)(a[5].buf + row * a[5].s0), h);
            NM(scatter)(&a[6], b, 0, H, h);
        }
    }
}

/* One step of lstm_backward_sequence, without the product: rows [t B, t B + B).
 * a: ghs (or None), acts, cs, c0, dgates, dh, dc; `prev` is the forward's previous step
 * (-1: c0).  dh (B, H) holds the gradient reaching this step's h from the later steps;
 * per row lstm_backward's math on dh + ghs and dc writes the step's dgates rows and
 * dc_prev over dc (the caller then writes dgates @ W_hh over dh). */
__attribute__((unused)) KCLONES static void NM(lstm_bwd_seq_step)(Py_ssize_t t, Py_ssize_t prev, Py_ssize_t B, Py_ssize_t H,
                                          Arr *a, void *vbuf)
{
    T *dhb = (T *)vbuf, *dcpb = dhb + H, *cpb = dcpb + H, *ab = cpb + H, *cb = ab + 4 * H;
    int direct = unit_cols(&a[1], sizeof(T)) && unit_cols(&a[2], sizeof(T));
    for (Py_ssize_t b = 0; b < B; b++) {
        Py_ssize_t row = t * B + b;
        NM(gather)(&a[5], b, 0, H, dhb);
        if (a[0].present)
            NM(gather_add)(&a[0], row, H, dhb);
        const T *cp, *ar, *cr;
        if (prev < 0) {
            NM(gather)(&a[3], b, 0, H, cpb);
            cp = cpb;
        } else if (direct)
            cp = (const T *)(a[2].buf + (prev * B + b) * a[2].s0);
        else {
            NM(gather)(&a[2], prev * B + b, 0, H, cpb);
            cp = cpb;
        }
        if (direct) {
            ar = (const T *)(a[1].buf + row * a[1].s0);
            cr = (const T *)(a[2].buf + row * a[2].s0);
        } else {
            NM(gather)(&a[1], row, 0, 4 * H, ab);
            NM(gather)(&a[2], row, 0, H, cb);
            ar = ab;
            cr = cb;
        }
        T *dc = (T *)(a[6].buf + b * a[6].s0);
        NM(lstm_bwd_row)(H, dhb, dc, ar, cr, cp, (T *)(a[4].buf + row * a[4].s0), dcpb);
        memcpy(dc, dcpb, (size_t)H * sizeof(T));
    }
}

/* ---- GRU (gate order r, z, n; hw = h W_hh^T + b_hh, so b_hn sits inside r * (...)) ---- */

/* r, z = sigmoid(x + hw); n = tanh(r * hw_n + x_n); h = (hp - n) * z + n */
static inline __attribute__((always_inline)) void NM(gru_fwd_row)(Py_ssize_t H, const T *restrict x, const T *restrict hw,
                                   const T *restrict hp, T *restrict a, T *restrict h)
{
    for (Py_ssize_t j = 0; j < H; j++) {
        T r = KSIG(x[j] + hw[j]), z = KSIG(x[H + j] + hw[H + j]);
        T n = KTANH(r * hw[2 * H + j] + x[2 * H + j]);
        a[j] = r;
        a[H + j] = z;
        a[2 * H + j] = n;
        h[j] = (hp[j] - n) * z + n;
    }
}

/* a: hw, xw, bias (or None; added to hw, so hw_n includes b_hn), h_prev, acts, hwn, h */
KCLONES static void NM(gru_fwd)(int flag, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *hwb = (T *)vbuf, *xb = hwb + 3 * H, *hpb = xb + 3 * H, *ab = hpb + H, *hb = ab + 3 * H;
    Arr hw;
    T *tmp = NM(staged)(&a[0], B, 3 * H, &hw);
    for (Py_ssize_t b = 0; b < B; b++) {
        NM(gather)(&hw, b, 0, 3 * H, hwb);
        if (a[2].present)
            NM(gather_add)(&a[2], b, 3 * H, hwb);
        NM(gather)(&a[1], b, 0, 3 * H, xb);
        NM(gather)(&a[3], b, 0, H, hpb);
        NM(gru_fwd_row)(H, xb, hwb, hpb, ab, hb);
        NM(scatter)(&a[4], b, 0, 3 * H, ab);
        NM(scatter)(&a[5], b, 0, H, hwb + 2 * H);
        NM(scatter)(&a[6], b, 0, H, hb);
    }
    PyMem_RawFree(tmp);
}

/* One step of gru_sequence: rows [t B, t B + B) from the product hw (B, 3H) and the previous
 * h in hbuf (B, H), which then holds this step's h.  a: hw, xw, bias (or None), hbuf, acts,
 * hwn, hs. */
KCLONES static void NM(gru_seq_step)(Py_ssize_t t, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *blk = (T *)vbuf, *xb = blk + 24 * H, *hpb = xb + 3 * H, *ab = hpb + H, *hb = ab + 3 * H;
    for (Py_ssize_t b0 = 0; b0 < B; b0 += 8) {
        Py_ssize_t nb = B - b0 < 8 ? B - b0 : 8;
        NM(gather_block)(&a[0], b0, nb, 3 * H, blk);
        for (Py_ssize_t k = 0; k < nb; k++) {
            Py_ssize_t b = b0 + k, row = t * B + b;
            T *hwb = blk + k * 3 * H;
            if (a[2].present)
                NM(gather_add)(&a[2], b, 3 * H, hwb);
            NM(gather)(&a[1], row, 0, 3 * H, xb);
            NM(gather)(&a[3], b, 0, H, hpb);
            NM(gru_fwd_row)(H, xb, hwb, hpb, ab, hb);
            NM(scatter)(&a[4], row, 0, 3 * H, ab);
            NM(scatter)(&a[5], row, 0, H, hwb + 2 * H);
            NM(scatter)(&a[6], row, 0, H, hb);
            NM(scatter)(&a[3], b, 0, H, hb);
        }
    }
}

/* dn = (dh (1 - z)) (1 - n^2); dz = ((hp - n) dh) (z (1 - z)); dr = (dn hw_n) (r (1 - r));
 * dxw = (dr, dz, dn), dhw = (dr, dz, dn r), dhz = dh z */
static inline __attribute__((always_inline)) void NM(gru_bwd_row)(Py_ssize_t H, const T *restrict dh, const T *restrict a,
                                   const T *restrict hwn, const T *restrict hp, T *restrict dx,
                                   T *restrict dw, T *restrict dhz)
{
    const T one = 1;
    for (Py_ssize_t j = 0; j < H; j++) {
        T r = a[j], z = a[H + j], n = a[2 * H + j], d = dh[j];
        T dn = (d * (one - z)) * (one - n * n);
        T dz = ((hp[j] - n) * d) * (z * (one - z));
        T dr = (dn * hwn[j]) * (r * (one - r));
        dx[j] = dr;
        dx[H + j] = dz;
        dx[2 * H + j] = dn;
        dw[j] = dr;
        dw[H + j] = dz;
        dw[2 * H + j] = dn * r;
        dhz[j] = d * z;
    }
}

/* a: dh, ghs (or None), acts, hwn, h_prev, dxw, dhw, dhz */
KCLONES static void NM(gru_bwd)(int flag, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *dhb = (T *)vbuf, *ab = dhb + H, *hwnb = ab + 3 * H, *hpb = hwnb + H, *dxb = hpb + H;
    T *dwb = dxb + 3 * H, *dhzb = dwb + 3 * H;
    for (Py_ssize_t b = 0; b < B; b++) {
        NM(gather)(&a[0], b, 0, H, dhb);
        if (a[1].present)
            NM(gather_add)(&a[1], b, H, dhb);
        NM(gather)(&a[2], b, 0, 3 * H, ab);
        NM(gather)(&a[3], b, 0, H, hwnb);
        NM(gather)(&a[4], b, 0, H, hpb);
        NM(gru_bwd_row)(H, dhb, ab, hwnb, hpb, dxb, dwb, dhzb);
        NM(scatter)(&a[5], b, 0, 3 * H, dxb);
        NM(scatter)(&a[6], b, 0, 3 * H, dwb);
        NM(scatter)(&a[7], b, 0, H, dhzb);
    }
}

/* ---- Elman RNN: h = act(hw + xw); backward (dh + ghs) (1 - h^2) or (dh + ghs) (h > 0) ---- */

/* a: hw, xw (or None), h */
KCLONES static void NM(rnn_fwd)(int relu, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *p = (T *)vbuf;
    const T zero = 0;
    Arr hw;
    T *tmp = NM(staged)(&a[0], B, H, &hw);
    for (Py_ssize_t b = 0; b < B; b++) {
        NM(gather)(&hw, b, 0, H, p);
        if (a[1].present)
            NM(gather_add)(&a[1], b, H, p);
        if (relu)
            for (Py_ssize_t j = 0; j < H; j++)
                p[j] = p[j] < zero ? zero : p[j];   /* NaN stays NaN, as in np.maximum */
        else
            for (Py_ssize_t j = 0; j < H; j++)
                p[j] = KTANH(p[j]);
        NM(scatter)(&a[2], b, 0, H, p);
    }
    PyMem_RawFree(tmp);
}

/* a: dh, ghs (or None), h, d */
KCLONES static void NM(rnn_bwd)(int relu, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *dhb = (T *)vbuf, *hb = dhb + H;
    const T one = 1, zero = 0;
    for (Py_ssize_t b = 0; b < B; b++) {
        NM(gather)(&a[0], b, 0, H, dhb);
        if (a[1].present)
            NM(gather_add)(&a[1], b, H, dhb);
        NM(gather)(&a[2], b, 0, H, hb);
        if (relu)
            for (Py_ssize_t j = 0; j < H; j++)
                dhb[j] = dhb[j] * (hb[j] > zero ? one : zero);
        else
            for (Py_ssize_t j = 0; j < H; j++)
                dhb[j] = dhb[j] * (one - hb[j] * hb[j]);
        NM(scatter)(&a[3], b, 0, H, dhb);
    }
}

/* ---- nn.LSTMCell's two nodes (ops/rnn.py lstm_cell_state_p / lstm_cell_hidden_p) ---- */

/* which: 0 = state  c' = sig(f) * c + sig(i) * tanh(g);  1 = hidden  h' = sig(o) * tanh(c).
 * a: gates, c, out */
KCLONES static void NM(cell)(int which, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *gb = (T *)vbuf, *cb = gb + 4 * H, *ob = cb + H;
    for (Py_ssize_t b = 0; b < B; b++) {
        NM(gather)(&a[1], b, 0, H, cb);
        if (which == 0) {
            NM(gather)(&a[0], b, 0, 3 * H, gb);
            for (Py_ssize_t j = 0; j < H; j++)
                ob[j] = KLOGI(gb[H + j]) * cb[j] + KLOGI(gb[j]) * KTANH(gb[2 * H + j]);
        } else {
            NM(gather)(&a[0], b, 3 * H, H, gb);
            for (Py_ssize_t j = 0; j < H; j++)
                ob[j] = KLOGI(gb[j]) * KTANH(cb[j]);
        }
        NM(scatter)(&a[2], b, 0, H, ob);
    }
}

/* Vector-Jacobian products of the two cell nodes for an output gradient gr (B, H); either
 * output may be None.
 * state:  dgates = (((gr t) si)(1 - si), ((gr c) sf)(1 - sf), (gr si)(1 - t^2), 0), dc = gr sf
 * hidden: dgates = (0, 0, 0, ((gr tanh(c)) so)(1 - so)), dc = (gr so)(1 - tanh(c)^2)
 * a: gr, gates, c, dgates, dc */
KCLONES static void NM(cell_vjp)(int which, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *grb = (T *)vbuf, *gb = grb + H, *cb = gb + 4 * H, *dgb = cb + H, *dcb = dgb + 4 * H;
    const T one = 1, zero = 0;
    for (Py_ssize_t b = 0; b < B; b++) {
        NM(gather)(&a[0], b, 0, H, grb);
        NM(gather)(&a[2], b, 0, H, cb);
        if (which == 0) {
            NM(gather)(&a[1], b, 0, 3 * H, gb);
            for (Py_ssize_t j = 0; j < H; j++) {
                T si = KLOGI(gb[j]), sf = KLOGI(gb[H + j]), t = KTANH(gb[2 * H + j]), g = grb[j];
                dgb[j] = ((g * t) * si) * (one - si);
                dgb[H + j] = ((g * cb[j]) * sf) * (one - sf);
                dgb[2 * H + j] = (g * si) * (one - t * t);
                dgb[3 * H + j] = zero;
                dcb[j] = g * sf;
            }
        } else {
            NM(gather)(&a[1], b, 3 * H, H, gb);
            for (Py_ssize_t j = 0; j < H; j++) {
                T so = KLOGI(gb[j]), t = KTANH(cb[j]), g = grb[j];
                dgb[j] = dgb[H + j] = dgb[2 * H + j] = zero;
                dgb[3 * H + j] = ((g * t) * so) * (one - so);
                dcb[j] = (g * so) * (one - t * t);
            }
        }
        if (a[3].present)
            NM(scatter)(&a[3], b, 0, 4 * H, dgb);
        if (a[4].present)
            NM(scatter)(&a[4], b, 0, H, dcb);
    }
}

/* ---- exp / tanh / sigmoid / row softmax of a 2-D array with the kernels' own math (the tests;
   sigmoid_p and softmax_p's forwards in ops/) ---- */

/* a: x, out */
KCLONES static void NM(unary)(int op, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    T *p = (T *)vbuf;
    for (Py_ssize_t b = 0; b < B; b++) {
        NM(gather)(&a[0], b, 0, H, p);
        if (op == 0)
            for (Py_ssize_t j = 0; j < H; j++)
                p[j] = KEXP(p[j]);
        else if (op == 1)
            for (Py_ssize_t j = 0; j < H; j++)
                p[j] = KTANH(p[j]);
        else if (op == 2)
            for (Py_ssize_t j = 0; j < H; j++)
                p[j] = KSIG(p[j]);
        else {
            /* softmax of the row: exp(x - max) / sum, NumPy's reference formula (ops/nn.py).
               The max propagates a NaN (and +inf gives inf - inf = NaN) as np.maximum does;
               the sum is accumulated in double (float32 rows: more accurate than NumPy's
               pairwise float32 sum) */
            T m = p[0];
            for (Py_ssize_t j = 1; j < H; j++)
                m = (p[j] > m || p[j] != p[j]) && m == m ? p[j] : m;
            for (Py_ssize_t j = 0; j < H; j++)   /* apart from the sum: vectorised */
                p[j] = KEXP(p[j] - m);
            double sum = 0.0;
            for (Py_ssize_t j = 0; j < H; j++)
                sum += (double)p[j];
            T st = (T)sum;
            for (Py_ssize_t j = 0; j < H; j++)
                p[j] = p[j] / st;
        }
        NM(scatter)(&a[1], b, 0, H, p);
    }
}

/* ==== cross-entropy rows (ops/nn.py cross_entropy_p and log_softmax_p; py_cross_entropy,
   py_log_softmax) ==== */

/* The helpers are inlined into each target clone of ce_rows / log_rows (left to itself GCC
 * calls one baseline copy from the AVX2 clone, and the float64 loops ran at SSE2 width). */
#ifndef KINLINE
#if defined(__GNUC__)
#define KINLINE static inline __attribute__((always_inline))
#else
#define KINLINE static inline
#endif
#endif

/* The maximum of a row in 8 lanes (element j in lane j % 8, then the lanes in a fixed order):
 * the compiler vectorises it without reassociating, so the result is fixed by the row alone.
 * NaNs are passed over here (they make the sum, so the loss, NaN below); -inf for a row of
 * -inf (then x - m is NaN, as NumPy's -inf - -inf). */
KINLINE T NM(row_max)(const T *xr, Py_ssize_t C)
{
    T mv[8];
    for (int k = 0; k < 8; k++)
        mv[k] = (T)-INFINITY;
    Py_ssize_t j = 0;
    for (; j + 8 <= C; j += 8)
        for (int k = 0; k < 8; k++)
            mv[k] = xr[j + k] > mv[k] ? xr[j + k] : mv[k];
    for (; j < C; j++)
        mv[0] = xr[j] > mv[0] ? xr[j] : mv[0];
    T m = mv[0];
    for (int k = 1; k < 8; k++)
        m = mv[k] > m ? mv[k] : m;
    return m;
}

/* er <- exp(xr - m) (er may be xr); returns their sum, accumulated in double in 8 lanes (as
 * row_max) and rounded to T once.  float32 terms are exact in double; float64 ones are
 * summed with a compensation per lane (Kahan: the terms are >= 0), so a row of thousands of
 * classes stays within ~1 ulp instead of the ~sqrt(C / 8) ulp of plain lane sums. */
KINLINE T NM(row_exp_sum)(const T *xr, T m, T *er, Py_ssize_t C)
{
    Py_ssize_t j;
    for (j = 0; j < C; j++)
        er[j] = KEXP(xr[j] - m);
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, cmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (sizeof(T) == sizeof(float)) {
        for (j = 0; j + 8 <= C; j += 8)
            for (int k = 0; k < 8; k++)
                acc[k] += (double)er[j + k];
    } else {
        for (j = 0; j + 8 <= C; j += 8)
            for (int k = 0; k < 8; k++) {
                double y = (double)er[j + k] - cmp[k], t = acc[k] + y;
                cmp[k] = (t - acc[k]) - y;
                acc[k] = t;
            }
    }
    for (; j < C; j++)
        acc[0] += (double)er[j];
    double a = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    double c = ((cmp[0] + cmp[1]) + (cmp[2] + cmp[3])) + ((cmp[4] + cmp[5]) + (cmp[6] + cmp[7]));
    return (T)(a - c);
}

/* log(s) in T: in double, rounded once (float32: a correctly rounded logf but for rare ties) */
KINLINE T NM(row_log)(T s) { return (T)log((double)s); }

/* Per row n of x (N, C): m = row_max, e[n] <- exp(x[n] - m), s[n] <- row_exp_sum,
 * pk[n] <- (x[n, t] - m) - log(s[n]) with t = target[n] (class 0 for a row whose target is
 * ign: the reference path picks there too).  log_rows gives every class's (x - m) - log(s)
 * by the same operations, so log_softmax picked at t has the same bits (the composition
 * nll_loss(log_softmax(x)) and this fused loss agree exactly).  Each row's results depend on
 * that row alone, so an eager call and the same row inside a batched block (dg.autobatch
 * stacks rows) give the same bits.  A +inf or an all -inf row gives NaN through inf - inf,
 * as in the reference.  Targets were checked by the caller (0 <= t < C or t == ign). */
KCLONES static void NM(ce_rows)(Py_ssize_t N, Py_ssize_t C, const Arr *x, const char *tb,
                                Py_ssize_t ts, long long ign, Arr *e, Arr *s, Arr *pk)
{
    for (Py_ssize_t n = 0; n < N; n++) {
        const char *xrow = x->buf + n * x->s0;
        T *er = (T *)(e->buf + n * e->s0);
        const T *xr;
        if (x->s1 == (Py_ssize_t)sizeof(T))
            xr = (const T *)xrow;
        else {                       /* a strided row: copied into its e row, then done in place */
            NM(gather)(x, n, 0, C, er);
            xr = er;
        }
        T m = NM(row_max)(xr, C);
        long long t = *(const long long *)(tb + n * ts);
        if (t == ign)
            t = 0;
        T xt = *(const T *)(xrow + (Py_ssize_t)t * x->s1);   /* before er (maybe xr) is overwritten */
        T st = NM(row_exp_sum)(xr, m, er, C);
        *(T *)(s->buf + n * s->s0) = st;
        *(T *)(pk->buf + n * pk->s0) = (xt - m) - NM(row_log)(st);
    }
}

/* log_softmax of each row of x (B, H) into out; a: x, out; vbuf: H elements (strided rows) */
KCLONES static void NM(log_rows)(int flag, Py_ssize_t B, Py_ssize_t H, Arr *a, void *vbuf)
{
    (void)flag;
    for (Py_ssize_t b = 0; b < B; b++) {
        T *o = (T *)(a[1].buf + b * a[1].s0);
        const T *xr;
        if (a[0].s1 == (Py_ssize_t)sizeof(T))
            xr = (const T *)(a[0].buf + b * a[0].s0);
        else {
            NM(gather)(&a[0], b, 0, H, (T *)vbuf);
            xr = (const T *)vbuf;
        }
        T m = NM(row_max)(xr, H);
        T ls = NM(row_log)(NM(row_exp_sum)(xr, m, o, H));
        for (Py_ssize_t j = 0; j < H; j++)
            o[j] = (xr[j] - m) - ls;
    }
}

/* ==== end of the cross-entropy rows ==== */

#undef T
#undef NM
#undef NM2
#undef NM3

#endif   /* KERNEL_T */
