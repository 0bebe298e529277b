"""The define-by-run autograd engine, compared with PyTorch where it is meaningful."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
import weakref

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import assert_close

RNG = np.random.default_rng(0)


def both(a, requires_grad=True):
    """The same float64 array as a dyngraph and a torch leaf."""
    a = np.asarray(a, dtype=np.float64)
    return (dg.tensor(a.copy(), requires_grad=requires_grad),
            torch.tensor(a.copy(), requires_grad=requires_grad))


@pytest.fixture
def no_gc():
    """Reference counting alone must free graphs: switch the cycle collector off."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# -- graph shapes --------------------------------------------------------------------

def test_diamond_and_shared_subexpressions_match_torch():
    xd, xt = both(RNG.uniform(0.5, 2, (3, 4)))
    wd, wt = both(RNG.uniform(-1, 1, (4, 2)))

    def f(lib, x, w):
        s = x.sin()                     # shared by both branches
        a = s * x
        b = s.exp() @ w
        c = (a @ w) * b                 # diamond: both branches meet here
        return (c + c).sum() + (s * s).mean()

    f(dg, xd, wd).backward()
    f(torch, xt, wt).backward()
    assert_close(xd.grad, xt.grad, 1e-12, 1e-12)
    assert_close(wd.grad, wt.grad, 1e-12, 1e-12)


def test_same_tensor_used_twice_in_one_op():
    xd, xt = both([1.0, -2.0, 3.0])
    (xd * xd).sum().backward()
    (xt * xt).sum().backward()
    assert_close(xd.grad, xt.grad)


def test_long_chain_no_recursion_error():
    x = dg.tensor(1.0, requires_grad=True)
    y = x
    start = time.perf_counter()
    for _ in range(200_000):
        y = y * 1.0
    y.backward()
    elapsed = time.perf_counter() - start
    assert x.grad.item() == 1.0
    # the pure-Python reference (DYNGRAPH_PURE_PYTHON=1) is slower; the bound only catches
    # quadratic behaviour
    from dyngraph.ops import registry

    limit = 30 if registry.bind is not registry._bind_py else 120
    assert elapsed < limit, f"200k-node chain took {elapsed:.1f}s"


def test_long_chain_is_freed_without_recursion(no_gc):
    x = dg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y + 1.0
    ref = weakref.ref(y.grad_fn)
    del y  # a recursive deallocation chain this long would crash; it must not
    assert ref() is None


# -- retain_graph and freed graphs ----------------------------------------------------------

def test_retain_graph_allows_second_backward_and_accumulates():
    xd, xt = both([0.5, 1.5])
    for x in (xd, xt):
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        y.backward()
    assert_close(xd.grad, xt.grad)
    assert_close(xd.grad, 2 * (np.exp([0.5, 1.5]) * (1 + np.array([0.5, 1.5]))))


def test_second_backward_without_retain_graph_names_the_op():
    x = dg.tensor([0.5, 1.5], requires_grad=True)
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"second time.*'exp'.*ExpBackward0.*retain_graph=True"):
        y.backward()


def test_saved_values_are_released_after_backward():
    x = dg.tensor([0.5, 1.5], requires_grad=True)
    y = x.exp()
    node = y.grad_fn
    y.sum().backward()
    assert node.saved_tensors_freed or node.out is None


# -- version counters and in-place -------------------------------------------------------------

def test_inplace_change_of_saved_tensor_raises_naming_op():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    y = h * h            # mul saves h
    h.add_(1.0)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*'mul'.*version 1.*expected version 0"):
        y.sum().backward()


def test_inplace_change_of_saved_output_raises():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()          # exp saves its output
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match=r"inplace operation.*'exp'"):
        y.sum().backward()


def test_inplace_on_unsaved_tensor_is_fine_and_matches_torch():
    xd, xt = both([1.0, 2.0, 3.0])
    for x in (xd, xt):
        h = x + 1      # add saves nothing
        h.mul_(3.0)
        h.sum().backward()
    assert_close(xd.grad, xt.grad)


def test_inplace_on_leaf_requiring_grad_raises():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1.0)
    with dg.no_grad():
        x.add_(1.0)   # allowed, as optimizers do
    assert x.tolist() == [2.0, 3.0]


# -- hooks ---------------------------------------------------------------------------------

def test_tensor_hooks_on_leaf_and_non_leaf_match_torch():
    seen = {dg: [], torch: []}
    xd, xt = both([1.0, 2.0, 3.0])
    for lib, x in ((dg, xd), (torch, xt)):
        h = x * x
        h.register_hook(lambda g, lib=lib: seen[lib].append(g.detach().numpy().copy()) or g * 10)
        x.register_hook(lambda g, lib=lib: g + 1)
        (h * 2).sum().backward()
    assert_close(xd.grad, xt.grad)
    np.testing.assert_allclose(seen[dg][0], seen[torch][0])


def test_hook_removal():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    handle = x.register_hook(lambda g: g * 0)
    handle.remove()
    x.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    y = x * 3
    h2 = y.register_hook(lambda g: g * 100)
    h2.remove()
    x.grad = None
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_retain_grad_matches_torch():
    xd, xt = both([1.0, 2.0])
    res = []
    for x in (xd, xt):
        h = x.exp()
        h.retain_grad()
        (h * h).sum().backward()
        assert h.retains_grad
        res.append(h.grad)
    assert_close(res[0], res[1])


def test_non_leaf_grad_access_warns():
    x = dg.tensor([1.0], requires_grad=True)
    h = x * 2
    h.sum().backward()
    with pytest.warns(UserWarning, match="retain_grad"):
        assert h.grad is None


def test_node_hooks_pre_and_post():
    for lib in (dg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        calls = []
        y.grad_fn.register_prehook(lambda go, c=calls: c.append("pre") or tuple(g * 2 for g in go))
        y.grad_fn.register_hook(lambda gi, go, c=calls: c.append(("post", len(gi), len(go))))
        y.sum().backward()
        assert calls == ["pre", ("post", 1, 1)]
        np.testing.assert_allclose(x.grad.detach().numpy(), 2 * np.exp([1.0, 2.0]))


def test_post_accumulate_grad_hook_sees_accumulated_grad():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0], [6.0, 6.0]]


def test_next_functions_match_torch_structure():
    x = dg.tensor([1.0], requires_grad=True)
    y = x.exp() * 2
    (fn, _), (none, _) = y.grad_fn.next_functions
    assert y.grad_fn.name() == "MulBackward0" and fn.name() == "ExpBackward0"
    assert none is None
    (acc, _), = fn.next_functions
    assert acc.name() == "AccumulateGrad" and acc.variable is x


# -- backward(inputs=) and autograd.grad ---------------------------------------------------------

def test_backward_inputs_restricts_accumulation():
    xd, xt = both([1.0, 2.0])
    yd, yt = both([3.0, 4.0])
    (xd * yd).sum().backward(inputs=[xd])
    (xt * yt).sum().backward(inputs=[xt])
    assert_close(xd.grad, xt.grad)
    assert yd.grad is None and yt.grad is None


def test_backward_inputs_non_leaf_gets_grad_like_torch():
    xd, xt = both([1.0, 2.0])
    res = []
    for x in (xd, xt):
        h = x * 2
        (h * h).sum().backward(inputs=[h, x], retain_graph=True)
        (h * h).sum().backward(inputs=[h])
        res.append((h.grad, x.grad))
    assert_close(res[0][0], res[1][0])
    assert_close(res[0][1], res[1][1])


def test_grad_with_grad_outputs_matches_torch():
    xd, xt = both(RNG.uniform(-1, 1, (2, 3)))
    v = RNG.uniform(-1, 1, (2, 3))
    gd = dg.autograd.grad(xd.tanh() * xd, xd, grad_outputs=dg.tensor(v))
    gt = torch.autograd.grad(xt.tanh() * xt, xt, grad_outputs=torch.tensor(v))
    assert_close(gd[0], gt[0], 1e-12, 1e-12)
    assert xd.grad is None


def test_grad_allow_unused():
    x = dg.tensor([1.0], requires_grad=True)
    z = dg.tensor([2.0], requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        dg.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = dg.autograd.grad(y, [x, z], allow_unused=True)
    assert gx.tolist() == [2.0] and gz is None
    y = (x * 2).sum()
    gx, gz = dg.autograd.grad(y, [x, z], materialize_grads=True)
    assert gz.tolist() == [0.0]


def test_grad_create_graph_second_order_matches_torch():
    xd, xt = both([0.3, -1.2, 2.0])
    res = []
    for lib, x in ((dg, xd), (torch, xt)):
        y = (x.sin() * x ** 3).sum()
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        assert g.requires_grad
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        res.append(gg)
    assert_close(res[0], res[1], 1e-10, 1e-12)


def test_grad_non_scalar_needs_grad_outputs():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"only for scalar outputs.*shape \[2\]"):
        dg.autograd.grad(x * 2, x)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()


def test_grad_of_tensor_not_requiring_grad_errors():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    c = dg.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"inputs\[0\].*does not require grad"):
        dg.autograd.grad((x * c).sum(), c)
    with pytest.raises(RuntimeError, match="does not require grad"):
        (c * 2).sum().backward()


def test_grad_wrt_non_leaf_does_not_consume_its_node():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    (gh,) = dg.autograd.grad((h * 3).sum(), h)
    assert gh.tolist() == [3.0, 3.0]
    (h * 4).sum().backward()   # h's own node must still be intact
    assert x.grad.tolist() == [8.0, 8.0]


def test_grad_accumulates_over_two_backwards():
    xd, xt = both([1.0, 2.0])
    for x in (xd, xt):
        (x * x).sum().backward()
        (x * 3).sum().backward()
    assert_close(xd.grad, xt.grad)


# -- grad modes ----------------------------------------------------------------------------------

def test_grad_mode_context_managers_and_decorators():
    x = dg.tensor([1.0], requires_grad=True)
    with dg.no_grad():
        assert not (x * 2).requires_grad
        with dg.enable_grad():
            assert (x * 2).requires_grad
    with dg.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert dg.is_grad_enabled()
    with dg.inference_mode():
        assert not (x * 2).requires_grad and dg.is_inference_mode_enabled()
    assert not dg.is_inference_mode_enabled()

    @dg.no_grad()
    def f(t):
        return t * 2

    @dg.enable_grad()
    def g(t):
        return t * 2

    @dg.inference_mode()
    def h(t):
        return t * 2

    @dg.set_grad_enabled(False)
    def k(t):
        return t * 2

    assert dg.is_grad_enabled()     # decorating does not switch grad mode off
    assert not f(x).requires_grad and not h(x).requires_grad and not k(x).requires_grad
    with dg.no_grad():
        assert g(x).requires_grad
    dg.set_grad_enabled(False)
    try:
        assert not dg.is_grad_enabled()
    finally:
        dg.set_grad_enabled(True)
    assert dg.is_grad_enabled()


def test_grad_mode_is_thread_local():
    results = {}
    ready = threading.Event()
    done = threading.Event()

    def other():
        ready.wait()
        x = dg.tensor([1.0], requires_grad=True)
        results["other"] = ((x * 2).requires_grad, dg.is_grad_enabled())
        done.set()

    th = threading.Thread(target=other)
    th.start()
    with dg.no_grad():
        ready.set()
        done.wait(10)
        results["main"] = dg.is_grad_enabled()
    th.join()
    assert results["other"] == (True, True)
    assert results["main"] is False


# -- detach / requires_grad / leaves -----------------------------------------------------------------

def test_detach_detach_inplace_requires_grad_is_leaf():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert x.is_leaf and not y.is_leaf
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    d2 = y.detach()
    d2.add_(1.0)                      # shares data and version counter with y
    assert y.tolist() == [3.0, 5.0]
    z = x * 3
    z.detach_()
    assert z.is_leaf and not z.requires_grad
    c = dg.tensor([1.0])
    assert c.requires_grad_() is c and c.requires_grad and c.is_leaf
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point"):
        dg.tensor([1, 2]).requires_grad_()


def test_detached_tensor_modified_in_place_trips_version_check():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.detach().zero_()
    with pytest.raises(RuntimeError, match="inplace"):
        y.sum().backward()


# -- memory -----------------------------------------------------------------------------------------

def test_graph_freed_by_refcount_when_output_deleted(no_gc):
    x = dg.tensor(RNG.uniform(size=(4, 4)), requires_grad=True)
    h = x.exp()
    y = (h * x).sum()
    node_ref, h_ref = weakref.ref(y.grad_fn), weakref.ref(h)
    inner_ref = weakref.ref(h.grad_fn)
    del h
    assert inner_ref() is not None  # h's node is still reachable from y
    del y
    assert node_ref() is None and inner_ref() is None and h_ref() is None


def test_graph_freed_after_backward_and_delete(no_gc):
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = (x.tanh() * x).sum()
    ref = weakref.ref(y.grad_fn)
    y.backward()
    del y
    assert ref() is None


def test_training_loop_memory_is_flat():
    rng = np.random.default_rng(1)
    w = dg.tensor(rng.uniform(-0.1, 0.1, (4, 1)), requires_grad=True)
    xs = dg.tensor(rng.uniform(-1, 1, (8, 4)))
    ys = dg.tensor(rng.uniform(-1, 1, (8, 1)))

    def step():
        loss = ((xs @ w - ys) ** 2).mean()
        loss.backward()
        with dg.no_grad():
            w.sub_(0.01 * w.grad)
        w.grad = None

    for _ in range(200):
        step()
    tracemalloc.start()
    try:
        for _ in range(5000):
            step()
        mid, _ = tracemalloc.get_traced_memory()
        for _ in range(5000):
            step()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - mid < 64 * 1024, f"memory grew by {end - mid} bytes over 5000 steps"
