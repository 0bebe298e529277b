"""Module.__call__'s one-check path (no hooks anywhere) keeps every hook semantics of PyTorch.

Each test runs the same program with ``torch`` and with ``dyngraph`` and compares what the
hooks saw and returned, in order.  The no-hook path is the one a fresh process takes; the
tests register hooks after a model already ran through it, remove them through their
handles, add them by item assignment, copies and pickles, and check that a call takes the
no-hook path again once the last hook is gone.
"""

from __future__ import annotations

import copy
import gc
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn.modules.module as tmm

import dyngraph as dg
import dyngraph.nn.module as dmm

LIBS = [torch, dg]


def _global(lib):
    return tmm if lib is torch else dmm


def _arr(t):
    return None if t is None else np.asarray(t.detach().numpy(), dtype=np.float64)


def _same(a, b):
    """Logs of the two libraries: tensors compared by value, everything else by equality."""
    assert len(a) == len(b), (a, b)
    for x, y in zip(a, b, strict=True):
        if isinstance(x, (tuple, list)):
            assert isinstance(y, (tuple, list)) and len(x) == len(y), (x, y)
            _same(list(x), list(y))
        elif hasattr(x, "detach"):
            np.testing.assert_allclose(_arr(x), _arr(y), rtol=1e-6, atol=1e-7)
        else:
            assert x == y, (a, b)


_BEFORE: set = set()


@pytest.fixture(autouse=True)
def _entries_before():
    # what other tests of the same process left (a module with hooks kept alive elsewhere)
    gc.collect()
    _BEFORE.clear()
    _BEFORE.update(dmm._MAYBE_HOOKED)


def _no_hook_path_is_back():
    """Nothing this test created still asks for the checks (in a fresh process: the registry
    is empty, so Module.__call__ is one truth test and the forward call)."""
    gc.collect()
    return set(dmm._MAYBE_HOOKED) <= _BEFORE


class _Scale:
    """A picklable forward hook (module level) that scales the output."""

    def __init__(self, k):
        self.k = k

    def __call__(self, m, args, out):
        return out * self.k


def _lin(lib, n_in=3, n_out=2):
    lib.manual_seed(0)
    m = lib.nn.Linear(n_in, n_out)
    with lib.no_grad():
        m.weight.copy_(lib.tensor(np.arange(n_in * n_out, dtype=np.float32).reshape(n_out, n_in) / 7))
        m.bias.copy_(lib.tensor(np.arange(n_out, dtype=np.float32) - 0.5))
    return m


def _x(lib, rg=False):
    return lib.tensor([[1.0, -2.0, 0.5]], requires_grad=rg)


def test_fresh_process_state_is_the_no_hook_path():
    # a module created and called here leaves nothing behind that would force the checks
    m = dg.nn.Linear(3, 2)
    m(dg.ones(1, 3))
    del m
    assert _no_hook_path_is_back()


def test_forward_hooks_registered_after_the_model_ran_fire_in_torch_order():
    def run(lib):
        log = []
        m = _lin(lib)
        x = _x(lib)
        log.append(m(x))                      # no hooks: the one-check path
        h1 = m.register_forward_pre_hook(lambda mod, a: log.append(("pre1", a[0])) or (a[0] * 2,))
        h2 = m.register_forward_pre_hook(lambda mod, a: log.append(("pre0", a[0])), prepend=True)
        h3 = m.register_forward_pre_hook(
            lambda mod, a, k: log.append(("prekw", a[0], sorted(k))) or ((a[0] + 1,), k), with_kwargs=True)
        h4 = m.register_forward_hook(lambda mod, a, out: log.append(("fwd", a[0], out)) or out - 1)
        h5 = m.register_forward_hook(lambda mod, a, k, out: log.append(("fwdkw", out, sorted(k))),
                                     with_kwargs=True)
        h6 = m.register_forward_hook(lambda mod, a, out: log.append(("fwd0", out)), prepend=True)
        log.append(m(x))
        # a pre-hook returning a bare tensor: wrapped into a 1-tuple
        h7 = m.register_forward_pre_hook(lambda mod, a: a[0] * 0)
        log.append(m(x))
        for h in (h1, h2, h3, h4, h5, h6, h7):
            h.remove()
        log.append(m(x))
        h1.remove()                           # removing twice is harmless
        log.append(m(x))
        return log

    _same(run(torch), run(dg))
    assert _no_hook_path_is_back()


def test_hook_on_an_inner_module_registered_after_the_outer_ran():
    def run(lib):
        log = []
        outer = lib.nn.Sequential(_lin(lib), lib.nn.Tanh(), _lin(lib, 2, 2))
        x = _x(lib)
        log.append(outer(x))
        h = outer[2].register_forward_hook(lambda mod, a, out: log.append(("inner", a[0], out)) or out * 3)
        log.append(outer(x))
        h.remove()
        log.append(outer(x))
        return log

    _same(run(torch), run(dg))
    assert _no_hook_path_is_back()


def test_hook_handles_as_context_managers():
    def run(lib):
        log = []
        m = _lin(lib)
        with m.register_forward_hook(lambda mod, a, out: out + 10):
            log.append(m(_x(lib)))
        log.append(m(_x(lib)))
        return log

    _same(run(torch), run(dg))
    assert _no_hook_path_is_back()


def test_with_kwargs_pre_hook_must_return_a_pair():
    for lib in LIBS:
        m = _lin(lib)
        h = m.register_forward_pre_hook(lambda mod, a, k: a, with_kwargs=True)
        with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
            m(_x(lib))
        h.remove()
    assert _no_hook_path_is_back()


def test_kwargs_reach_forward_and_the_kwargs_hooks():
    def make(lib):
        class KW(lib.nn.Module):
            def forward(self, x, *, scale=1.0):
                return x * scale

        return KW()

    def run(lib):
        log = []
        m = make(lib)
        x = _x(lib)
        log.append(m(x, scale=2.0))
        h1 = m.register_forward_pre_hook(
            lambda mod, a, k: log.append(("pre", dict(k))) or (a, {"scale": k["scale"] + 1}), with_kwargs=True)
        h2 = m.register_forward_hook(lambda mod, a, k, out: log.append(("post", dict(k), out)), with_kwargs=True)
        log.append(m(x, scale=2.0))
        h1.remove()
        h2.remove()
        log.append(m(x, scale=2.0))
        return log

    _same(run(torch), run(dg))


def _boom(lib, where):
    class Boom(lib.nn.Module):
        def forward(self, x):
            if where == "forward":
                raise ValueError("boom")
            return x + 1

    return Boom()


@pytest.mark.parametrize("where", ["forward", "pre-hook", "forward hook"])
def test_always_call_hooks_run_when_the_call_raises(where):
    def run(lib):
        log = []
        m = _boom(lib, where)
        g = _global(lib)
        hs = [g.register_module_forward_hook(lambda mod, a, out: log.append(("g-always", out)),
                                             always_call=True),
              g.register_module_forward_hook(lambda mod, a, out: log.append(("g-plain", out)))]
        try:
            if where == "pre-hook":
                hs.append(m.register_forward_pre_hook(lambda mod, a: (_ for _ in ()).throw(ValueError("pre"))))
            hs.append(m.register_forward_hook(lambda mod, a, out: log.append(("always", out)), always_call=True))
            hs.append(m.register_forward_hook(lambda mod, a, k, out: log.append(("always-kw", sorted(k), out)),
                                              always_call=True, with_kwargs=True))
            if where == "forward hook":
                hs.append(m.register_forward_hook(lambda mod, a, out: (_ for _ in ()).throw(ValueError("fh"))))
            hs.append(m.register_forward_hook(lambda mod, a, out: log.append(("plain", out))))
            with pytest.raises(ValueError):
                m(_x(lib))
            # an always_call hook that raises itself is reported as a warning, the call's error stays
            hs.append(m.register_forward_hook(lambda mod, a, out: 1 / 0, always_call=True))
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                with pytest.raises(ValueError):
                    m(_x(lib))
            log.append(("warned", len([x for x in w if "always_call=True" in str(x.message)])))
        finally:
            for h in hs:
                h.remove()
        log.append(m(_x(lib)) if where != "forward" else "ok")
        return log

    a, b = run(torch), run(dg)
    _same(a, b)
    assert _no_hook_path_is_back()


def test_global_forward_hooks_run_before_the_modules_own_and_for_every_module():
    def run(lib):
        log = []
        g = _global(lib)
        net = lib.nn.Sequential(_lin(lib), lib.nn.ReLU())
        x = _x(lib)
        log.append(net(x))
        hs = [g.register_module_forward_pre_hook(lambda mod, a: log.append(("gpre", type(mod).__name__))),
              g.register_module_forward_hook(lambda mod, a, out: log.append(("gfwd", type(mod).__name__, out))),
              g.register_module_forward_hook(lambda mod, a, k, out: log.append(("gkw", sorted(k))),
                                             with_kwargs=True),
              net[0].register_forward_pre_hook(lambda mod, a: log.append(("pre", type(mod).__name__))),
              net[0].register_forward_hook(lambda mod, a, out: log.append(("fwd", out)) or out * 2)]
        try:
            log.append(net(x))
        finally:
            for h in hs[:3]:
                h.remove()
        log.append(net(x))
        for h in hs[3:]:
            h.remove()
        log.append(net(x))
        return log

    _same(run(torch), run(dg))
    assert _no_hook_path_is_back()


def test_backward_hooks_module_and_global_with_replacement():
    def run(lib):
        log = []
        g = _global(lib)
        m = _lin(lib)
        x = _x(lib, rg=True)
        m(x).sum().backward()                  # ran once without hooks
        log.append(x.grad)
        x.grad = None
        hs = [g.register_module_full_backward_pre_hook(lambda mod, go: log.append(("gpre", go[0]))),
              g.register_module_full_backward_hook(lambda mod, gi, go: log.append(("gbw", gi[0], go[0]))),
              m.register_full_backward_pre_hook(lambda mod, go: log.append(("pre", go[0])) or (go[0] * 3,)),
              m.register_full_backward_hook(lambda mod, gi, go: log.append(("bw", gi[0], go[0])) or (gi[0] + 1,))]
        try:
            m(x).sum().backward()
            log.append(x.grad)
        finally:
            for h in hs:
                h.remove()
        x.grad = None
        m(x).sum().backward()
        log.append(x.grad)
        return log

    _same(run(torch), run(dg))
    assert _no_hook_path_is_back()


def test_hooks_added_by_item_assignment_or_a_replaced_dict_fire():
    def run(lib, replace):
        log = []
        m = _lin(lib)
        log.append(m(_x(lib)))
        if replace:
            m._forward_hooks = OrderedDict({12345: lambda mod, a, out: log.append("plain dict") or out + 5})
        else:
            m._forward_hooks[12345] = lambda mod, a, out: log.append("item") or out + 5
        log.append(m(_x(lib)))
        del m._forward_hooks[12345]
        log.append(m(_x(lib)))
        return log

    _same(run(torch, False), run(dg, False))
    assert _no_hook_path_is_back()
    _same(run(torch, True), run(dg, True))
    # (a module holding a replaced dict keeps the checks on while it lives: correct, only slower)
    assert _no_hook_path_is_back()


def test_hooks_survive_deepcopy_and_pickle_and_leave_with_their_module():
    for lib in LIBS:
        m = _lin(lib)
        h = m.register_forward_hook(_Scale(10.0))
        ref = m(_x(lib))
        c = copy.deepcopy(m)
        p = pickle.loads(pickle.dumps(m))
        h.remove()
        plain = m(_x(lib))
        np.testing.assert_allclose(_arr(c(_x(lib))), _arr(ref), rtol=1e-6)
        np.testing.assert_allclose(_arr(p(_x(lib))), _arr(ref), rtol=1e-6)
        np.testing.assert_allclose(_arr(plain) * 10, _arr(ref), rtol=1e-6)
        del c, p
    assert _no_hook_path_is_back()


def test_instance_forward_override_and_call_impl():
    for lib in LIBS:
        m = _lin(lib)
        m.forward = lambda x: x * 0 + 7
        assert float(m(_x(lib)).sum()) == 21.0
        assert float(m._call_impl(_x(lib)).sum()) == 21.0


def test_errors_are_annotated_on_the_no_hook_path():
    net = dg.nn.Sequential(dg.nn.Linear(5, 4), dg.nn.Sequential(dg.nn.ReLU(), dg.nn.Linear(3, 3)))
    net[0](dg.ones(1, 5))
    assert _no_hook_path_is_back()
    with pytest.raises(RuntimeError, match=r"^Linear\(in_features=3, out_features=3, bias=True\) at '1.1': "
                                           r"expected input with last dimension 3"):
        net(dg.ones(1, 5))


def test_uninitialised_module_explained_even_after_other_calls():
    class NoInit(dg.nn.Module):
        def __init__(self):
            pass

        def forward(self, x):
            return x

    dg.nn.Linear(2, 2)(dg.ones(1, 2))
    bad = NoInit()
    with pytest.raises(AttributeError, match="NoInit is not initialised"):
        bad(dg.ones(1))
    del bad
    assert _no_hook_path_is_back()


def test_module_rebuilt_by_new_and_dict_assignment_works():
    m = dg.nn.Linear(3, 2)
    r = dg.nn.Linear.__new__(dg.nn.Linear)
    assert id(r) in dmm._MAYBE_HOOKED          # not initialised yet: its call must say so
    r.__dict__ = copy.deepcopy(m.__dict__)
    assert id(r) not in dmm._MAYBE_HOOKED      # a whole module's __dict__: no checks for it
    np.testing.assert_allclose(_arr(r(_x(dg))), _arr(m(_x(dg))))
    del r
    assert _no_hook_path_is_back()


def test_hooks_fire_under_autobatch():
    log = []
    m = _lin(dg)
    h = m.register_forward_hook(lambda mod, a, out: log.append("fwd") or out * 2)
    with dg.autobatch():
        y = m(_x(dg)).sum()
        v = float(y)
    h.remove()
    assert log == ["fwd"]
    assert v == pytest.approx(2 * float(m(_x(dg)).sum()), rel=1e-6)
    assert _no_hook_path_is_back()


def test_overridden_call_impl_is_called_by_call():
    def run(lib):
        log = []

        class Wrapped(lib.nn.Linear):
            def _call_impl(self, *args, **kwargs):
                log.append("call_impl")
                return super()._call_impl(*args, **kwargs) * 2

        class Sub(Wrapped):       # inherits the override
            pass

        for m in (Wrapped(3, 2), Sub(3, 2)):
            with lib.no_grad():
                m.weight.fill_(0.5)
                m.bias.fill_(0.25)
            h = m.register_forward_hook(lambda mod, a, out: log.append("hook") or out + 1)
            log.append(m(_x(lib)))
            h.remove()
            log.append(m(_x(lib)))
        return log

    _same(run(torch), run(dg))
    assert _no_hook_path_is_back()
