"""The interpreter protocol (dyngraph._core.interpreter): hooks, stack, no patching."""

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import autograd
from dyngraph._core.interpreter import Interpreter, interpreting, pop, push, stack
from dyngraph._core.state import STATE, concrete
from dyngraph.autograd import engine
from dyngraph.optim.optimizer import Optimizer
from dyngraph.tensor import Tensor


class Log(Interpreter):
    """Records every hook it sees, then defers to the default (hand below)."""

    observer = True

    def __init__(self):
        self.events = []

    def process(self, prim, args, params):
        self.events.append(("process", prim.name))
        return self.process_below(prim, args, params)

    def on_concrete(self, t, why):
        self.events.append(("concrete", why))
        return super().on_concrete(t, why)

    def on_inplace(self, t, value):
        self.events.append(("inplace",))
        super().on_inplace(t, value)

    def on_set_grad(self, t, value):
        self.events.append(("set_grad", value is None))
        super().on_set_grad(t, value)

    def on_backward(self, run, *args):
        self.events.append(("backward",))
        return super().on_backward(run, *args)

    def on_backward_node(self, node, run):
        self.events.append(("node", node.name()))
        return super().on_backward_node(node, run)

    def on_optimizer_step(self, opt, run):
        self.events.append(("step", type(opt).__name__))
        return super().on_optimizer_step(opt, run)

    def on_node(self, node):
        self.events.append(("custom_node",))
        super().on_node(node)

    def kinds(self):
        return [e[0] for e in self.events]


def test_hooks_reach_the_interpreter_and_results_are_eager():
    p = dg.nn.Parameter(dg.tensor([1.0, 2.0]))
    opt = dg.optim.SGD([p], lr=0.5)
    log = Log()
    with interpreting(log):
        loss = (p * p).sum()
        assert float(loss) == 5.0                     # __float__ -> item -> concrete
        loss.backward()
        opt.step()
        opt.zero_grad()
        p.grad = dg.zeros(2)
        with dg.no_grad():
            p.add_(1.0)
        _ = repr(p)
        _ = p.detach().numpy()
        _ = p.tolist()
    kinds = log.kinds()
    for k in ("process", "concrete", "backward", "step", "set_grad", "inplace"):
        assert k in kinds, k
    whys = [e[1] for e in log.events if e[0] == "concrete"]
    assert {"item", "repr", "numpy", "tolist"} <= set(whys)
    # eager numbers: one SGD step of d(sum p^2)/dp = 2p, then +1
    np.testing.assert_allclose(p.detach().numpy(), [1.0 - 1.0 + 1.0, 2.0 - 2.0 + 1.0])
    assert STATE.interpreter is None


def test_engine_calls_on_backward_node_for_general_path_nodes():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    log = Log()
    with interpreting(log):
        y = x.exp()
        y.grad_fn.special = True          # force the general path
        y.sum().backward()
    assert ("node", "ExpBackward0") in log.events
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]))


def test_custom_function_nodes_reach_on_node():
    class Double(autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = dg.tensor([1.0], requires_grad=True)
    log = Log()
    with interpreting(log):
        Double.apply(x).sum().backward()
    assert ("custom_node",) in log.events
    assert x.grad.tolist() == [2.0]


def test_checkpoint_nested_backward_goes_through_the_hook():
    x = dg.tensor([0.5, 1.5], requires_grad=True)
    log = Log()
    with interpreting(log):
        y = dg.utils.checkpoint.checkpoint(lambda t: t.sin() * t, x, use_reentrant=False)
        y.sum().backward()
    # the outer backward and the checkpoint's recomputation backward both reach the hook
    assert log.kinds().count("backward") == 2
    xv = np.array([0.5, 1.5])
    np.testing.assert_allclose(x.grad.numpy(), np.cos(xv) * xv + np.sin(xv))


def test_stack_push_pop_out_of_order():
    a, b = Log(), Log()
    push(a)
    push(b)
    try:
        assert stack() == [b, a] and b.prev is a
        pop(a)                      # the lower one leaves first: b links past it
        assert stack() == [b] and b.prev is None
    finally:
        pop(b)
    assert STATE.interpreter is None


def test_push_rejects_duck_typed_objects():
    class Duck:
        def process(self, prim, args, params):
            raise AssertionError

    with pytest.raises(TypeError, match="subclass"):
        push(Duck())
    assert STATE.interpreter is None


def test_concrete_eager_returns_the_array():
    t = dg.tensor([3, 1, 2])
    assert concrete(t, "a test") is t._data


def test_capture_patches_nothing():
    """Graph capture works through the hooks: no global is replaced, even mid-trace."""
    seen = {}
    p = dg.nn.Parameter(dg.tensor([1.0, -1.0]))
    opt = dg.optim.SGD([p], lr=0.1)
    originals = (autograd.run_backward, engine.run_backward, Tensor.__dict__["_grad"],
                 Optimizer.__dict__["step"], engine._run_node)

    def step(x):
        seen["inside"] = (autograd.run_backward, engine.run_backward, Tensor.__dict__["_grad"],
                          Optimizer.__dict__["step"], engine._run_node)
        opt.zero_grad()
        loss = ((p * x) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    cstep = dg.compile(step)
    x = dg.tensor([2.0, 3.0])
    ref = dg.nn.Parameter(dg.tensor([1.0, -1.0]))
    ref_opt = dg.optim.SGD([ref], lr=0.1)
    for _ in range(3):
        got = cstep(x)
        ref_opt.zero_grad()
        want = ((ref * x) ** 2).sum()
        want.backward()
        ref_opt.step()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    np.testing.assert_allclose(p.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    assert seen["inside"] == originals
    assert "compiled" in cstep.explain()
