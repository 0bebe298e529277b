"""Op records for linear algebra: matmul family, einsum, tensordot, diagonals and
triangles, and ``dg.linalg`` (norms, inv, det, slogdet, solve, cholesky)."""

from __future__ import annotations

import numpy as np

from tests.opinfo import OpInfo, Sample, noncontig, randn

INF = float("inf")


def _wellcond(rng, shape, dt):
    """Random square matrices far from singular (diagonal boosted)."""
    a = randn(rng, shape, dt, -1.0, 1.0)
    n = shape[-1]
    return (a + 3.0 * np.eye(n, dtype=dt)).astype(dt)


def _pair(sa, sb, nc=False):
    def samples(rng, dt):
        a = noncontig(rng, sa, dt) if nc else randn(rng, sa, dt)
        return [Sample((a, randn(rng, sb, dt)))]
    return samples


def _matmul_samples(rng, dt):
    shapes = [((2, 3), (3, 4), "mm"), ((3,), (3, 2), "vm"), ((2, 3), (3,), "mv"),
              ((3,), (3,), "dot"), ((2, 2, 3), (3, 4), "batch_mat"), ((3,), (2, 3, 4), "v_batch"),
              ((2, 1, 2, 3), (3, 3, 2), "bcast"), ((2, 3, 4), (4,), "batch_v"),
              ((2, 0), (0, 3), "empty_k"), ((0, 3), (3, 2), "empty_n")]
    s = [Sample((randn(rng, a, dt), randn(rng, b, dt)), desc=d) for a, b, d in shapes]
    s.append(Sample((noncontig(rng, (2, 3), dt), noncontig(rng, (3, 4), dt)), desc="noncontig"))
    return s


def _einsum(eq, *shapes):
    def fn(m, *ops):
        return m.einsum(eq, *ops)

    def samples(rng, dt):
        return [Sample(tuple(randn(rng, s, dt) for s in shapes))]
    return fn, samples


EINSUMS = [
    ("mm", "ij,jk->ik", (2, 3), (3, 4)),
    ("implicit", "ij,jk", (2, 3), (3, 4)),
    ("transpose_implicit", "ba", (2, 3)),
    ("trace", "ii", (3, 3)),
    ("diag", "ii->i", (3, 3)),
    ("diag_batched", "bii->bi", (2, 3, 3)),
    ("repeated_3", "iij->ij", (2, 2, 3)),
    ("sum_all", "ij->", (2, 3)),
    ("sum_row", "ij->i", (2, 3)),
    ("dot", "i,i->", (3,), (3,)),
    ("outer", "i,j->ij", (2,), (3,)),
    ("bmm", "bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
    ("ellipsis", "...ij,...jk->...ik", (2, 2, 3), (2, 3, 2)),
    ("ellipsis_bcast", "...ij,...jk", (2, 1, 2, 3), (3, 3, 2)),
    ("ellipsis_mid", "i...j->j...i", (2, 3, 4)),
    ("three", "ij,jk,kl->il", (2, 3), (3, 2), (2, 2)),
    ("summed_out_only", "ij,k->ik", (2, 3), (4,)),
    ("diag_times", "ii,i->i", (3, 3), (3,)),
    ("bilinear", "bn,anm,bm->ba", (2, 3), (2, 3, 4), (2, 4)),
    ("size1_bcast", "ij,ij->ij", (2, 1), (2, 3)),
    ("scalar_operand", ",ij->ji", (), (2, 3)),
    ("all_scalar", ",->", (), ()),
]


def _addmm_samples(rng, dt):
    return [
        Sample((randn(rng, (2, 4), dt), randn(rng, (2, 3), dt), randn(rng, (3, 4), dt))),
        Sample((randn(rng, (4,), dt), randn(rng, (2, 3), dt), randn(rng, (3, 4), dt)),
               {"beta": 0.5, "alpha": 2.0}, desc="bcast_scaled"),
        Sample((randn(rng, (2, 4), dt), randn(rng, (2, 3), dt), randn(rng, (3, 4), dt)),
               {"beta": 0}, desc="beta0"),
    ]


def _tensordot_samples(rng, dt):
    return [
        Sample((randn(rng, (2, 3, 4), dt), randn(rng, (3, 4, 2), dt)), desc="dims2"),
        Sample((randn(rng, (2, 3), dt), randn(rng, (3, 4), dt)), {"dims": 1}, desc="dims1"),
        Sample((randn(rng, (2, 3, 4), dt), randn(rng, (4, 2, 3), dt)),
               {"dims": ([1, 2], [2, 0])}, desc="lists"),
        Sample((randn(rng, (2, 3), dt), randn(rng, (4,), dt)), {"dims": 0}, desc="outer"),
    ]


def _diag_samples(rng, dt):
    return [
        Sample((randn(rng, (3,), dt),), desc="vec"),
        Sample((randn(rng, (3,), dt),), {"diagonal": 1}, desc="vec_off"),
        Sample((randn(rng, (3,), dt),), {"diagonal": -2}, desc="vec_neg_off"),
        Sample((randn(rng, (3, 4), dt),), desc="mat"),
        Sample((randn(rng, (3, 4), dt),), {"diagonal": 2}, desc="mat_off"),
        Sample((noncontig(rng, (4, 3), dt),), {"diagonal": -1}, desc="mat_noncontig"),
    ]


def _diagonal_samples(rng, dt):
    return [
        Sample((randn(rng, (3, 4), dt),)),
        Sample((randn(rng, (3, 4), dt),), {"offset": 1}, desc="off"),
        Sample((randn(rng, (3, 4), dt),), {"offset": -2}, desc="neg_off"),
        Sample((randn(rng, (2, 3, 4), dt),), {"dim1": -1, "dim2": 0}, desc="dims"),
        Sample((randn(rng, (2, 3, 3), dt),), {"offset": 5, "dim1": 1, "dim2": 2}, desc="empty"),
    ]


def _tri_samples(rng, dt):
    return [
        Sample((randn(rng, (3, 4), dt),)),
        Sample((randn(rng, (3, 4), dt),), {"diagonal": 1}, desc="off"),
        Sample((randn(rng, (2, 3, 3), dt),), {"diagonal": -1}, desc="batched"),
        Sample((noncontig(rng, (3, 4), dt),), desc="noncontig"),
    ]


def _square_samples(rng, dt):
    return [
        Sample((_wellcond(rng, (3, 3), dt),)),
        Sample((_wellcond(rng, (2, 2, 2), dt),), desc="batched"),
        Sample((_wellcond(rng, (1, 1), dt),), desc="1x1"),
        Sample((_wellcond(rng, (3, 3), dt).T,), desc="noncontig"),
    ]


def _neg_det_samples(rng, dt):
    a = _wellcond(rng, (3, 3), dt)
    a[0] *= -1  # negative determinant
    return [Sample((a,)), Sample((_wellcond(rng, (2, 3, 3), dt),), desc="batched")]


def _solve_samples(rng, dt):
    return [
        Sample((_wellcond(rng, (3, 3), dt), randn(rng, (3, 2), dt))),
        Sample((_wellcond(rng, (3, 3), dt), randn(rng, (3,), dt)), desc="vector"),
        Sample((_wellcond(rng, (2, 3, 3), dt), randn(rng, (2, 3, 2), dt)), desc="batched"),
        Sample((_wellcond(rng, (2, 3, 3), dt), randn(rng, (3, 2), dt)), desc="bcast_b"),
        Sample((_wellcond(rng, (3, 3), dt), randn(rng, (2, 3, 1), dt)), desc="bcast_a"),
        Sample((_wellcond(rng, (3, 3), dt), randn(rng, (2, 3), dt)), {"left": False}, desc="right"),
    ]


def _chol_fn(upper=False):
    def fn(m, a):
        spd = a @ a.mT + m.eye(a.shape[-1], dtype=a.dtype)
        return m.linalg.cholesky(spd, upper=upper)
    return fn


def _lnorm_samples(rng, dt):
    s = [Sample((randn(rng, (3, 4), dt),), desc="default_flat"),
         Sample((randn(rng, (2, 3, 4), dt),), {"dim": -1}, desc="vec_dim"),
         Sample((randn(rng, (2, 3, 4), dt),), {"dim": (0, 2), "keepdim": True}, desc="mat_dims_keep"),
         Sample((randn(rng, (4,), dt),), {"ord": 3}, desc="vec_ord3")]
    for o in ("fro", 1, -1, INF, -INF):
        s.append(Sample((randn(rng, (3, 4), dt),), {"ord": o}, desc=f"mat_{o}"))
    return s


def _vnorm_samples(rng, dt):
    s = []
    for o in (2, 1, INF, -INF, 0, 3, 0.5):
        s.append(Sample((randn(rng, (3, 4), dt),), {"ord": o}, desc=f"ord{o}"))
    s += [Sample((randn(rng, (2, 3, 4), dt),), {"dim": (0, -1), "keepdim": True}, desc="tuple_keep"),
          Sample((randn(rng, (2, 3), dt),), {"dim": 1, "ord": 1}, desc="dim"),
          Sample((randn(rng, (), dt),), desc="0d"),
          Sample((randn(rng, (0, 2), dt),), {"dim": 0}, desc="empty")]
    return s


def _mnorm_samples(rng, dt):
    s = []
    for o in ("fro", 1, -1, INF, -INF):
        s.append(Sample((randn(rng, (3, 4), dt),), {"ord": o}, desc=f"ord{o}"))
        s.append(Sample((randn(rng, (2, 3, 4), dt),), {"ord": o, "dim": (0, 2), "keepdim": True},
                        desc=f"ord{o}_dims"))
    return s


OPS = [
    OpInfo("matmul", lambda m, x, y: m.matmul(x, y), _matmul_samples),
    OpInfo("matmul_operator", lambda m, x, y: x @ y, lambda rng, dt: _matmul_samples(rng, dt)[:3]),
    OpInfo("matmul_int", lambda m, x, y: x @ y,
           lambda rng, dt: [Sample((rng.integers(-3, 4, (2, 3)).astype(dt),
                                    rng.integers(-3, 4, (3, 2)).astype(dt)))],
           dtypes=("int32", "int64"), grad=False),
    OpInfo("mm", lambda m, x, y: m.mm(x, y), _pair((2, 3), (3, 4), nc=True)),
    OpInfo("bmm", lambda m, x, y: x.bmm(y), _pair((2, 2, 3), (2, 3, 4))),
    OpInfo("mv", lambda m, x, y: m.mv(x, y), _pair((2, 3), (3,))),
    OpInfo("dot", lambda m, x, y: m.dot(x, y), _pair((3,), (3,))),
    OpInfo("vdot", lambda m, x, y: x.vdot(y), _pair((4,), (4,))),
    OpInfo("outer", lambda m, x, y: m.outer(x, y), _pair((3,), (2,))),
    OpInfo("ger", lambda m, x, y: x.ger(y), _pair((2,), (3,))),
    OpInfo("inner", lambda m, x, y: m.inner(x, y),
           lambda rng, dt: [Sample((randn(rng, (3,), dt), randn(rng, (3,), dt)), desc="vec"),
                            Sample((randn(rng, (2, 3), dt), randn(rng, (4, 3), dt)), desc="mat"),
                            Sample((randn(rng, (2, 2, 3), dt), randn(rng, (3,), dt)), desc="batch_vec"),
                            Sample((randn(rng, (), dt), randn(rng, (2, 3), dt)), desc="0d")]),
    OpInfo("addmm", lambda m, i, a, b, **kw: m.addmm(i, a, b, **kw), _addmm_samples),
    OpInfo("addmv", lambda m, i, a, b, **kw: i.addmv(a, b, **kw),
           lambda rng, dt: [Sample((randn(rng, (2,), dt), randn(rng, (2, 3), dt), randn(rng, (3,), dt)),
                                   {"beta": 2.0, "alpha": -1.0})]),
    OpInfo("baddbmm", lambda m, i, a, b, **kw: m.baddbmm(i, a, b, **kw),
           lambda rng, dt: [Sample((randn(rng, (2, 2, 4), dt), randn(rng, (2, 2, 3), dt),
                                    randn(rng, (2, 3, 4), dt)), {"alpha": 0.5})]),
    OpInfo("addbmm", lambda m, i, a, b: m.addbmm(i, a, b),
           lambda rng, dt: [Sample((randn(rng, (2, 4), dt), randn(rng, (3, 2, 3), dt),
                                    randn(rng, (3, 3, 4), dt)))]),
    OpInfo("addr", lambda m, i, a, b: m.addr(i, a, b, beta=0.5),
           lambda rng, dt: [Sample((randn(rng, (2, 3), dt), randn(rng, (2,), dt), randn(rng, (3,), dt)))]),
    OpInfo("tensordot", lambda m, a, b, **kw: m.tensordot(a, b, **kw), _tensordot_samples),
    OpInfo("kron", lambda m, a, b: m.kron(a, b),
           lambda rng, dt: [Sample((randn(rng, (2, 3), dt), randn(rng, (2, 2), dt))),
                            Sample((randn(rng, (2,), dt), randn(rng, (2, 3), dt)), desc="ndim_mismatch")]),
    OpInfo("trace", lambda m, x: m.trace(x),
           lambda rng, dt: [Sample((randn(rng, (3, 3), dt),)), Sample((randn(rng, (2, 4), dt),), desc="rect"),
                            Sample((noncontig(rng, (3, 3), dt),), desc="noncontig")]),
    OpInfo("trace_int", lambda m, x: m.trace(x),
           lambda rng, dt: [Sample((rng.integers(-3, 4, (3, 3)).astype(dt),))],
           dtypes=("int32", "int64"), grad=False),
    OpInfo("diag", lambda m, x, **kw: m.diag(x, **kw), _diag_samples),
    OpInfo("diagflat", lambda m, x, **kw: m.diagflat(x, **kw),
           lambda rng, dt: [Sample((randn(rng, (2, 2), dt),)), Sample((randn(rng, (3,), dt),), {"offset": -1})]),
    OpInfo("diagonal", lambda m, x, **kw: m.diagonal(x, **kw), _diagonal_samples),
    OpInfo("diagonal_method", lambda m, x: x.diagonal(1, 0, 1) * 2.0,
           lambda rng, dt: [Sample((randn(rng, (3, 3), dt),))]),
    OpInfo("diag_embed", lambda m, x, **kw: m.diag_embed(x, **kw),
           lambda rng, dt: [Sample((randn(rng, (2, 3), dt),)),
                            Sample((randn(rng, (2, 3), dt),), {"offset": 1, "dim1": 0, "dim2": 2},
                                   desc="off_dims")]),
    OpInfo("tril", lambda m, x, **kw: m.tril(x, **kw), _tri_samples),
    OpInfo("triu", lambda m, x, **kw: x.triu(**kw), _tri_samples),
    OpInfo("linalg_inv", lambda m, x: m.linalg.inv(x), _square_samples),
    OpInfo("inverse", lambda m, x: x.inverse(), lambda rng, dt: _square_samples(rng, dt)[:1]),
    OpInfo("linalg_det", lambda m, x: m.linalg.det(x), _square_samples),
    OpInfo("det_method", lambda m, x: x.det(), _neg_det_samples),
    OpInfo("linalg_slogdet", lambda m, x: tuple(m.linalg.slogdet(x)), _neg_det_samples),
    OpInfo("logdet", lambda m, x: m.logdet(x @ x.mT),
           lambda rng, dt: _square_samples(rng, dt)[:2]),
    OpInfo("linalg_solve", lambda m, a, b, **kw: m.linalg.solve(a, b, **kw), _solve_samples),
    OpInfo("linalg_cholesky", _chol_fn(), lambda rng, dt: [
        Sample((randn(rng, (3, 3), dt),)), Sample((randn(rng, (2, 2, 2), dt),), desc="batched")]),
    OpInfo("linalg_cholesky_upper", _chol_fn(True), lambda rng, dt: [Sample((randn(rng, (3, 3), dt),))]),
    OpInfo("linalg_qr", lambda m, x: tuple(m.linalg.qr(x)), lambda rng, dt: [
        Sample((randn(rng, (4, 3), dt),), desc="tall"), Sample((randn(rng, (3, 3), dt),), desc="square"),
        Sample((randn(rng, (2, 3, 2), dt),), desc="batched")]),
    # eigenvectors are defined up to sign: compare V * V[0, :] (sign-free) and symmetrise the
    # input so finite differences see the same symmetric matrix eigh reads.
    OpInfo("linalg_eigh", lambda m, x, **kw: (lambda r: (r[0], r[1] * r[1][..., :1, :]))(
        m.linalg.eigh(x + x.mT, **kw)), lambda rng, dt: [
        Sample((randn(rng, (3, 3), dt),)), Sample((randn(rng, (2, 4, 4), dt),), desc="batched"),
        Sample((randn(rng, (3, 3), dt),), {"UPLO": "U"}, desc="upper")], rtol=1e-4, atol=1e-5),
    OpInfo("linalg_eigvalsh", lambda m, x: m.linalg.eigvalsh(x @ x.mT), lambda rng, dt: [
        Sample((randn(rng, (3, 3), dt),))]),
    # singular vectors are defined up to sign: compare U * U[0, :] and Vh * Vh[:, 0]
    OpInfo("linalg_svd", lambda m, x, **kw: (lambda r, k: (r[1], r[0][..., :k] * r[0][..., :1, :k],
                                                           r[2][..., :k, :] * r[2][..., :k, :1]))(
        m.linalg.svd(x, **kw), min(x.shape[-2:])), lambda rng, dt: [
        Sample((randn(rng, (4, 3), dt),), {"full_matrices": False}, desc="tall"),
        Sample((randn(rng, (2, 4), dt),), {"full_matrices": False}, desc="wide"),
        Sample((randn(rng, (3, 3), dt),), desc="square"),
        Sample((randn(rng, (2, 3, 2), dt),), {"full_matrices": True}, desc="batched_full")],
           rtol=1e-4, atol=1e-5),
    OpInfo("linalg_svdvals", lambda m, x: m.linalg.svdvals(x), lambda rng, dt: [
        Sample((randn(rng, (3, 4), dt),))]),
    OpInfo("svd_torch", lambda m, x: (lambda r: (r.S, r.V * r.V[..., :1, :]))(m.svd(x)), lambda rng, dt: [
        Sample((randn(rng, (4, 3), dt),))], rtol=1e-4, atol=1e-5),
    OpInfo("linalg_pinv", lambda m, x: m.linalg.pinv(x), lambda rng, dt: [
        Sample((randn(rng, (4, 3), dt),)), Sample((randn(rng, (2, 2, 3), dt),), desc="batched_wide")],
           rtol=1e-4, atol=1e-5),
    OpInfo("linalg_lstsq", lambda m, a, b: (lambda r: (r.solution, r.rank, r.residuals))(m.linalg.lstsq(a, b)),
           lambda rng, dt: [Sample((randn(rng, (5, 3), dt), randn(rng, (5, 2), dt)), desc="tall"),
                            Sample((randn(rng, (2, 4, 2), dt), randn(rng, (2, 4, 1), dt)), desc="batched"),
                            Sample((randn(rng, (2, 3), dt), randn(rng, (2, 2), dt)), desc="wide_min_norm")],
           rtol=1e-4, atol=1e-5),
    OpInfo("linalg_cross", lambda m, a, b, **kw: m.linalg.cross(a, b, **kw), lambda rng, dt: [
        Sample((randn(rng, (2, 3), dt), randn(rng, (1, 3), dt))),
        Sample((randn(rng, (3, 2), dt), randn(rng, (3, 2), dt)), {"dim": 0}, desc="dim0")]),
    OpInfo("cross", lambda m, a, b: m.cross(a, b, dim=1), lambda rng, dt: [
        Sample((randn(rng, (4, 3), dt), randn(rng, (4, 3), dt)))]),
    OpInfo("pinverse", lambda m, x: m.pinverse(x), lambda rng, dt: [Sample((randn(rng, (3, 2), dt),))],
           rtol=1e-4, atol=1e-5),
    OpInfo("linalg_qr_modes", lambda m, x, mode: tuple(m.linalg.qr(x, mode=mode)), lambda rng, dt: [
        Sample((randn(rng, (2, 4), dt), "reduced"), desc="wide"),
        Sample((randn(rng, (4, 2), dt), "complete"), desc="complete")], grad=False),
    OpInfo("linalg_norm", lambda m, x, **kw: m.linalg.norm(x, **kw), _lnorm_samples),
    OpInfo("linalg_vector_norm", lambda m, x, **kw: m.linalg.vector_norm(x, **kw), _vnorm_samples),
    OpInfo("linalg_matrix_norm", lambda m, x, **kw: m.linalg.matrix_norm(x, **kw), _mnorm_samples),
    OpInfo("linalg_matrix_power", lambda m, x, n: m.linalg.matrix_power(x, n), lambda rng, dt: [
        Sample((randn(rng, (3, 3), dt, -0.8, 0.8), 3), desc="3"),
        Sample((randn(rng, (2, 2, 2), dt, -0.8, 0.8), 6), desc="batched_6"),
        Sample((_wellcond(rng, (3, 3), dt), -2), desc="neg"),
        Sample((randn(rng, (2, 2), dt), 0), desc="zero"),
        Sample((randn(rng, (2, 2), dt), 1), desc="one")]),
    OpInfo("linalg_multi_dot", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]),
           lambda rng, dt: [Sample((randn(rng, (3,), dt), randn(rng, (3, 2), dt), randn(rng, (2, 4), dt)))]),
    OpInfo("linalg_vecdot", lambda m, a, b: m.linalg.vecdot(a, b),
           lambda rng, dt: [Sample((randn(rng, (2, 3), dt), randn(rng, (3,), dt)))]),
    OpInfo("einsum_repeated_operand", lambda m, x: m.einsum("ij,ij->i", x, x),
           lambda rng, dt: [Sample((randn(rng, (2, 3), dt),))]),
    OpInfo("einsum_sublist", lambda m, x, y: m.einsum(x, [0, 1], y, [1, 2], [0, 2]),
           _pair((2, 3), (3, 2))),
    OpInfo("einsum_large_optimized", lambda m, x, y: m.einsum("bij,bjk->bik", x, y),
           _pair((3, 30, 25), (3, 25, 2)), fd=False, rtol=1e-4, atol=1e-5),
    OpInfo("einsum_list_operands", lambda m, x, y: m.einsum("ij,jk->ik", [x, y]),
           _pair((2, 3), (3, 2))),
] + [OpInfo(f"einsum_{name}", *_einsum(eq, *shapes)) for name, eq, *shapes in EINSUMS]
