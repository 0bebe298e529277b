"""API gaps the port scripts (tests/port/scripts/s13...) found, each checked against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
@pytest.mark.parametrize("dim, keepdim", [((-2, -1), False), ((0, 2), True), ((1, 0), False)])
def test_matrix_norm_from_singular_values(ord, dim, keepdim):
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    ta, da = torch.tensor(a, requires_grad=True), dyngraph.tensor(a, requires_grad=True)
    t = torch.linalg.matrix_norm(ta, ord=ord, dim=dim, keepdim=keepdim)
    d = dyngraph.linalg.matrix_norm(da, ord=ord, dim=dim, keepdim=keepdim)
    assert tuple(d.shape) == tuple(t.shape)
    np.testing.assert_allclose(d.detach().numpy(), t.detach().numpy(), rtol=1e-10)
    t.sum().backward()
    d.sum().backward()
    np.testing.assert_allclose(da.grad.numpy(), ta.grad.numpy(), rtol=1e-8, atol=1e-10)
    m = a[0]
    assert dyngraph.linalg.norm(dyngraph.tensor(m), ord=ord).item() == pytest.approx(
        torch.linalg.norm(torch.tensor(m), ord=ord).item(), rel=1e-12)


def _spd(rng, n, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("upper, left, unit", [(False, True, False), (True, True, False), (False, False, True),
                                               (True, False, True)])
def test_solve_triangular_and_cholesky_solve_match_torch(upper, left, unit):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3), rng.standard_normal((2, 3, 3))
    res = []
    for lib in (torch, dyngraph):
        A, B = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        X = lib.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
        (X * lib.tensor(b)).sum().backward()
        res.append((X, A.grad, B.grad))
    for d, t in zip(res[1], res[0]):
        np.testing.assert_allclose(d.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)
    res = []
    k = _spd(rng, 3, (2,))
    y = rng.standard_normal((2, 3, 2))
    for lib in (torch, dyngraph):
        K, Y = lib.tensor(k, requires_grad=True), lib.tensor(y, requires_grad=True)
        L = lib.linalg.cholesky(K, upper=upper)
        X = lib.cholesky_solve(Y, L, upper=upper)
        Kinv = lib.cholesky_inverse(L[0], upper=upper)
        (X.sum() + Kinv.sum()).backward()
        res.append((X, Kinv, K.grad, Y.grad))
    for d, t in zip(res[1], res[0]):
        np.testing.assert_allclose(d.detach().numpy(), t.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_ex_variants_rank_and_cond_match_torch():
    rng = np.random.default_rng(2)
    good = _spd(rng, 3)
    batch = np.stack([good, -good, good])
    for lib in (torch, dyngraph):
        L, info = lib.linalg.cholesky_ex(lib.tensor(batch))
        assert info.tolist() == [0, 1, 0] and str(info.dtype).endswith("int32")
        assert lib.allclose(L[0], lib.linalg.cholesky(lib.tensor(good)))
        inv, info = lib.linalg.inv_ex(lib.tensor(np.stack([good, np.zeros((3, 3))])))
        assert info.tolist() == [0, 1]
        with pytest.raises(RuntimeError):
            lib.linalg.cholesky_ex(lib.tensor(-good), check_errors=True)
    low_rank = rng.standard_normal((4, 2)) @ rng.standard_normal((2, 5))
    for m, kw in ((low_rank, {}), (np.eye(3), {"atol": 0.5}), (np.diag([1.0, 1e-3, 1e-9]), {"rtol": 1e-4})):
        assert dyngraph.linalg.matrix_rank(dyngraph.tensor(m), **kw).item() == \
            torch.linalg.matrix_rank(torch.tensor(m), **kw).item()
    assert dyngraph.linalg.matrix_rank(dyngraph.tensor(low_rank)).dtype == dyngraph.int64
    for p in (None, 2, -2, "fro", "nuc", 1, float("inf")):
        np.testing.assert_allclose(dyngraph.linalg.cond(dyngraph.tensor(good), p).item(),
                                   torch.linalg.cond(torch.tensor(good), p).item(), rtol=1e-10)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
                                  "RAdam", "ASGD", "Rprop"])
def test_optimizers_step_zero_dim_parameters_like_torch(name):
    # a scalar nn.Parameter (a temperature, a GP noise level, SAC's log-alpha) next to a vector
    extras = [{}, {"weight_decay": 0.1}, {"maximize": True}]
    if name in ("SGD", "RMSprop"):
        extras.append({"momentum": 0.9})
    for extra in extras:
        try:
            getattr(torch.optim, name)([torch.nn.Parameter(torch.zeros(1))], lr=0.1, **extra)
        except TypeError:      # an option this optimizer does not have (Rprop's weight_decay)
            continue
        res = []
        for lib in (torch, dyngraph):
            p = lib.nn.Parameter(lib.tensor(0.5, dtype=lib.float64))
            q = lib.nn.Parameter(lib.tensor([0.5, -1.0], dtype=lib.float64))
            opt = getattr(lib.optim, name)([p, q], lr=0.1, **extra)
            for _ in range(3):
                opt.zero_grad()
                ((p - 2) ** 2 + (q ** 2).sum() * p).backward()
                opt.step()
            res.append([p.item(), *q.tolist()])
        np.testing.assert_allclose(res[1], res[0], rtol=1e-8, atol=1e-14, err_msg=f"{name} {extra}")


@pytest.mark.parametrize("mode, padding, align", [("bilinear", "zeros", False), ("bilinear", "zeros", True),
                                                  ("bilinear", "border", False), ("nearest", "zeros", False),
                                                  ("nearest", "border", True)])
def test_affine_grid_and_grid_sample_match_torch(mode, padding, align):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 6))
    # random maps: no sampling point falls exactly on a pixel coordinate, where the bilinear
    # gradient has a kink and the last bit of the grid decides the side
    theta = np.eye(2, 3) + 0.3 * rng.standard_normal((2, 2, 3))
    res = []
    for lib in (torch, dyngraph):
        X = lib.tensor(x, requires_grad=True)
        T = lib.tensor(theta, requires_grad=True)
        grid = lib.nn.functional.affine_grid(T, (2, 3, 4, 7), align_corners=align)
        out = lib.nn.functional.grid_sample(X, grid, mode=mode, padding_mode=padding, align_corners=align)
        res.append((grid, out, X, T))
    w = rng.standard_normal((2, 3, 4, 7))
    for lib, (_, out, _, _) in zip((torch, dyngraph), res):
        (out * lib.tensor(w)).sum().backward()
    for d, t in zip(res[1], res[0]):
        np.testing.assert_allclose(d.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res[1][2].grad.numpy(), res[0][2].grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res[1][3].grad.numpy(), res[0][3].grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("reduction, zero_inf, concat", [("mean", False, False), ("sum", False, True),
                                                         ("none", True, False), ("mean", True, True)])
def test_ctc_loss_matches_torch(reduction, zero_inf, concat):
    rng = np.random.default_rng(4)
    T, N, C = 9, 4, 5
    logits = rng.standard_normal((T, N, C))
    targets = np.array([[1, 2, 2, 3], [4, 1, 0, 0], [2, 2, 2, 2], [3, 0, 0, 0]])
    tg_lens = [4, 2, 4, 1]
    in_lens = [9, 7, 5, 3]   # sample 2 (2 2 2 2 needs 7 steps) has no alignment in 5 steps
    res = []
    for lib in (torch, dyngraph):
        X = lib.tensor(logits, requires_grad=True)
        tg = lib.tensor(np.concatenate([t[:n] for t, n in zip(targets, tg_lens)]) if concat else targets)
        loss = lib.nn.CTCLoss(reduction=reduction, zero_infinity=zero_inf)(
            X.log_softmax(2), tg, lib.tensor(in_lens), lib.tensor(tg_lens))
        if zero_inf:
            (loss.sum() if reduction == "none" else loss).backward()
            res.append((loss.detach().numpy(), X.grad.numpy()))
        else:
            res.append((loss.detach().numpy(), None))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-10)
    if zero_inf:
        np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-8, atol=1e-12)
    # all alignments possible: values and gradients through log_softmax
    ok_in = [9, 8, 8, 4]
    res = []
    for lib in (torch, dyngraph):
        X = lib.tensor(logits, requires_grad=True)
        loss = lib.nn.functional.ctc_loss(X.log_softmax(2), lib.tensor(targets), ok_in, tg_lens, reduction=reduction)
        (loss.sum() if reduction == "none" else loss).backward()
        res.append((loss.detach().numpy(), X.grad.numpy()))
    for d, t in zip(res[1], res[0]):
        np.testing.assert_allclose(d, t, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_window_functions_match_torch(name):
    for n in (0, 1, 2, 5, 16):
        for periodic in (True, False):
            t = getattr(torch, name)(n, periodic)
            d = getattr(dyngraph, name)(n, periodic)
            assert str(d.dtype).split(".")[1] == str(t.dtype).split(".")[1]
            np.testing.assert_allclose(d.numpy(), t.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{name}({n}, {periodic})")
    t = getattr(torch, name)(8, dtype=torch.float64)
    d = getattr(dyngraph, name)(8, dtype=dyngraph.float64)
    np.testing.assert_allclose(d.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)


def test_autocast_state_and_custom_fwd_like_torch():
    import warnings

    for lib in (torch, dyngraph):
        assert lib.is_autocast_enabled() is False and lib.is_autocast_enabled("cpu") is False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autocast("cpu"):
                assert lib.is_autocast_enabled("cpu") and not lib.is_autocast_enabled()
                assert lib.get_autocast_dtype("cpu") == lib.bfloat16
                with lib.autocast("cpu", enabled=False):
                    assert not lib.is_autocast_enabled("cpu")
                assert lib.is_autocast_enabled("cpu")
        assert not lib.is_autocast_enabled("cpu") and lib.get_autocast_dtype("cuda") == lib.float16

        class Double(lib.autograd.Function):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu")
            def forward(ctx, x):
                return x * 2

            @staticmethod
            @lib.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g):
                return g * 2

        x = lib.ones(2, requires_grad=True)
        Double.apply(x).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
        with pytest.raises(TypeError, match="device_type"):
            lib.amp.custom_fwd(lambda ctx, x: x)


def test_func_vjp_jvp_jacfwd_match_torch():
    x0 = np.random.default_rng(6).standard_normal(4)
    y0 = np.random.default_rng(7).standard_normal(4)
    res = []
    for lib in (torch, dyngraph):
        def f(x, y, lib=lib):
            return lib.sin(x) * y + x.pow(2).sum()

        x, y = lib.tensor(x0), lib.tensor(y0)
        out, vjp_fn = lib.func.vjp(f, x, y)
        gx, gy = vjp_fn(lib.ones(4, dtype=lib.float64))
        p_out, t_out = lib.func.jvp(f, (x, y), (lib.ones(4, dtype=lib.float64), lib.zeros(4, dtype=lib.float64)))
        jac = lib.func.jacfwd(f)(x, y)
        res.append([out, gx, gy, p_out, t_out, jac])
    for d, t in zip(res[1], res[0]):
        np.testing.assert_allclose(d.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)
