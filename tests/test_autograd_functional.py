"""``dg.autograd.functional`` against ``torch.autograd.functional`` (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import assert_close, to_np

F = dg.autograd.functional
TF = torch.autograd.functional
RNG = np.random.default_rng(3)


def arr(*shape):
    return RNG.uniform(0.3, 1.5, shape)


def both(*arrays):
    return (tuple(dg.tensor(a.copy()) for a in arrays), tuple(torch.tensor(a.copy()) for a in arrays))


def two_in_two_out(x, y):
    return x.exp().sum(0) * y, x @ y.mT


def scalar_fn(x, y):
    return ((x ** 3).sum(0) * y.sin()).sum() + (x @ y.mT).tanh().sum()


def close_nested(a, b, tol=1e-10):
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            close_nested(u, v, tol)
    else:
        assert_close(a, b, tol, 1e-12)


def test_vjp_matches_torch():
    (xd, yd), (xt, yt) = both(arr(2, 3), arr(4, 3))
    (vd, wd), (vt, wt) = both(arr(4, 3), arr(2, 4))
    od, gd = F.vjp(two_in_two_out, (xd, yd), (vd, wd))
    ot, gt = TF.vjp(two_in_two_out, (xt, yt), (vt, wt))
    close_nested(od, ot)
    close_nested(gd, gt)
    assert not gd[0].requires_grad


def test_jvp_matches_torch():
    (xd, yd), (xt, yt) = both(arr(2, 3), arr(4, 3))
    (vd, wd), (vt, wt) = both(arr(2, 3), arr(4, 3))
    od, jd = F.jvp(two_in_two_out, (xd, yd), (vd, wd))
    ot, jt = TF.jvp(two_in_two_out, (xt, yt), (vt, wt))
    close_nested(od, ot)
    close_nested(jd, jt)


def test_jvp_single_input_default_v_and_independent_output():
    x = dg.tensor(0.7, dtype=dg.float64)
    _, t = F.jvp(lambda a: a.sin() * a, x)
    assert np.isclose(t.item(), np.cos(0.7) * 0.7 + np.sin(0.7))
    _, t = F.jvp(lambda a: dg.ones(2, dtype=dg.float64), x)
    assert t.tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="independent"):
        F.jvp(lambda a: dg.ones(2, dtype=dg.float64), x, strict=True)


def test_jacobian_matches_torch_shapes_and_values():
    (xd, yd), (xt, yt) = both(arr(2, 3), arr(4, 3))
    close_nested(F.jacobian(two_in_two_out, (xd, yd)), TF.jacobian(two_in_two_out, (xt, yt)))
    close_nested(F.jacobian(lambda a: a.exp() * 2, xd), TF.jacobian(lambda a: a.exp() * 2, xt))
    jd = F.jacobian(lambda a: (a.sin(), a.sum()), xd)
    jt = TF.jacobian(lambda a: (a.sin(), a.sum()), xt)
    close_nested(jd, jt)
    assert tuple(jd[0].shape) == (2, 3, 2, 3)


def test_jacobian_create_graph_is_differentiable():
    xd, xt = dg.tensor(arr(3), requires_grad=True), torch.tensor(arr(3))
    xt = torch.tensor(to_np(xd), requires_grad=True)
    jd = F.jacobian(lambda a: a ** 3, xd, create_graph=True)
    jt = TF.jacobian(lambda a: a ** 3, xt, create_graph=True)
    assert jd.requires_grad
    (gd,) = dg.autograd.grad(jd.sum(), xd)
    (gt,) = torch.autograd.grad(jt.sum(), xt)
    assert_close(gd, gt, 1e-12, 1e-12)


def test_jacobian_strict_and_unused_inputs():
    x, y = dg.tensor(arr(2)), dg.tensor(arr(2))
    j = F.jacobian(lambda a, b: a * 2, (x, y))
    assert to_np(j[1]).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(RuntimeError, match="independent of input 1"):
        F.jacobian(lambda a, b: a * 2, (x, y), strict=True)


def test_hessian_matches_torch():
    (xd, yd), (xt, yt) = both(arr(2, 3), arr(4, 3))
    close_nested(F.hessian(scalar_fn, (xd, yd)), TF.hessian(scalar_fn, (xt, yt)), 1e-9)
    f = lambda a: (a.exp() * a.sin()).sum()
    close_nested(F.hessian(f, xd), TF.hessian(f, xt), 1e-9)
    with pytest.raises(RuntimeError, match="single element"):
        F.hessian(lambda a: a * 2, xd)


def test_hvp_and_vhp_match_torch():
    (xd, yd), (xt, yt) = both(arr(2, 3), arr(4, 3))
    (vd, wd), (vt, wt) = both(arr(2, 3), arr(4, 3))
    for fd, ft in ((F.hvp, TF.hvp), (F.vhp, TF.vhp)):
        od, rd = fd(scalar_fn, (xd, yd), (vd, wd))
        ot, rt = ft(scalar_fn, (xt, yt), (vt, wt))
        close_nested(od, ot)
        close_nested(rd, rt, 1e-9)


def test_argument_errors():
    x = dg.tensor(arr(3))
    with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
        F.vjp(lambda a: a, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="v can only be None"):
        F.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        F.vjp(lambda a: a * 2, x, dg.ones(4, dtype=dg.float64))
    with pytest.raises(RuntimeError, match="v can only be None"):
        F.jvp(lambda a: a * 2, x)


def test_create_graph_keeps_link_to_caller_graph():
    x = dg.tensor(arr(3), requires_grad=True)
    xt = torch.tensor(to_np(x), requires_grad=True)
    _, gd = F.vjp(lambda a: (a ** 3).sum(), x * 2, create_graph=True)
    _, gt = TF.vjp(lambda a: (a ** 3).sum(), xt * 2, create_graph=True)
    gd.sum().backward()
    gt.sum().backward()
    assert_close(x.grad, xt.grad, 1e-12, 1e-12)


def test_forward_ad_dual_tensors_match_torch():
    import torch.autograd.forward_ad as tfw

    import dyngraph.autograd.forward_ad as fwd

    a, b = arr(2, 3), arr(3)
    ta, tb = arr(2, 3), arr(3)
    res = []
    for lib, fw in ((dg, fwd), (torch, tfw)):
        with fw.dual_level():
            x = fw.make_dual(lib.tensor(a.copy()), lib.tensor(ta.copy()))
            y = fw.make_dual(lib.tensor(b.copy()), lib.tensor(tb.copy()))
            out = (x.exp() * y).tanh() @ y
            p, t = fw.unpack_dual(out)
            _, t_x = fw.unpack_dual(x * 2)
            res.append((p, t, t_x))
    for u, v in zip(res[0], res[1], strict=True):
        assert_close(u, v, 1e-12, 1e-12)
    with fwd.dual_level():
        assert fwd.unpack_dual(dg.ones(2)).tangent is None
        with pytest.raises(RuntimeError, match="different size"):
            fwd.make_dual(dg.ones(2), dg.ones(3))
    with pytest.raises(RuntimeError, match="no dual level"):
        fwd.make_dual(dg.ones(2), dg.ones(2))
