"""The Module system of dg.nn compared with torch.nn: registration, state dicts, hooks,
repr, modes, dtype conversion, containers, and error messages."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.helpers import to_np


def build(nn):
    """The same nested model written against either library."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Linear(4, 4)
            self.bn = nn.BatchNorm1d(4)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x))) + x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(3, 4)
            self.layer1 = nn.Sequential(Block(), Block())
            self.heads = nn.ModuleDict({"cls": nn.Linear(4, 2), "reg": nn.Linear(4, 1, bias=False)})
            self.extra = nn.ModuleList([nn.Dropout(0.1), nn.Tanh(), nn.Tanh(), nn.Tanh()])
            self.scale = nn.Parameter((dg if nn is dg.nn else torch).ones(1))
            self.register_buffer("step", (dg if nn is dg.nn else torch).zeros(1))
            self.register_buffer("tmp", (dg if nn is dg.nn else torch).zeros(2), persistent=False)

        def forward(self, x):
            h = self.layer1(self.embed(x))
            for m in self.extra:
                h = m(h)
            return self.heads["cls"](h) * self.scale + self.heads["reg"](h)

    return Net()


def _port(dm, tm):
    dm.load_state_dict(tm.state_dict())


def test_state_dict_keys_and_parameter_names_match_torch():
    dm, tm = build(dg.nn), build(torch.nn)
    assert list(dm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in dm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in dm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in dm.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in dm.named_children()] == [n for n, _ in tm.named_children()]
    assert "layer1.0.bn.num_batches_tracked" in dm.state_dict()
    assert "tmp" not in dm.state_dict()
    assert [n for n, _ in dm.named_parameters(prefix="m", recurse=False)] == ["m.scale"]


def test_state_dict_values_share_memory_and_are_detached():
    dm = build(dg.nn)
    sd = dm.state_dict()
    w = sd["embed.weight"]
    assert not w.requires_grad and w.grad_fn is None
    w.numpy()[0, 0] = 123.0
    assert dm.embed.weight.detach().numpy()[0, 0] == 123.0
    assert dm.state_dict(keep_vars=True)["embed.weight"] is dm.embed.weight


def test_round_trip_torch_to_dg_and_back_and_same_outputs():
    torch.manual_seed(0)
    dm, tm = build(dg.nn).double(), build(torch.nn).double()
    res = dm.load_state_dict(tm.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    xin = np.random.default_rng(0).normal(size=(5, 3))
    for mode in (True, False):
        dm.train(mode)
        tm.train(mode)
        for m in (dm.extra[0], tm.extra[0]):
            m.p = 0.0
        _close(dm(dg.tensor(xin)), tm(torch.from_numpy(xin)), "forward")
    back = build(torch.nn).double()
    back.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in dm.state_dict().items()})
    for (k, a), (_, b) in zip(back.state_dict().items(), dm.state_dict().items(), strict=True):
        assert np.array_equal(a.numpy(), b.numpy()), k


def _close(a, b, msg, rtol=1e-10):
    np.testing.assert_allclose(to_np(a), to_np(b), rtol=rtol, atol=1e-12, err_msg=msg)


def test_strict_loading_errors():
    lin = dg.nn.Sequential()
    lin.add_module("fc", dg.nn.Linear(4, 4))
    sd = {"fc.weight": np.zeros((3, 4), np.float32), "fc.foo": np.zeros(2)}
    with pytest.raises(RuntimeError) as info:
        lin.load_state_dict(sd)
    msg = str(info.value)
    assert msg.startswith("Error(s) in loading state_dict for Sequential:")
    assert 'Missing key(s) in state_dict: "fc.bias".' in msg
    assert 'Unexpected key(s) in state_dict: "fc.foo".' in msg
    assert ("size mismatch for fc.weight: copying a param with shape [3, 4] from checkpoint, the "
            "shape in current model is [4, 4].") in msg
    res = lin.load_state_dict({"fc.weight": np.ones((4, 4)), "zzz": np.ones(1)}, strict=False)
    assert res.missing_keys == ["fc.bias"] and res.unexpected_keys == ["zzz"]
    assert lin.fc.weight.dtype == dg.float32 and lin.fc.weight.detach().numpy().sum() == 16
    with pytest.raises(RuntimeError, match="size mismatch"):
        lin.load_state_dict({"fc.weight": np.ones((2, 2))}, strict=False)


def test_load_state_dict_old_batchnorm_checkpoint_without_counter():
    bn = dg.nn.BatchNorm1d(3)
    sd = {k: v for k, v in torch.nn.BatchNorm1d(3).state_dict().items()
          if k != "num_batches_tracked"}
    assert bn.load_state_dict(sd).missing_keys == []


def test_registration_rules():
    m = dg.nn.Module()
    m.w = dg.nn.Parameter(dg.ones(2))
    m.sub = dg.nn.Linear(2, 2)
    m.register_buffer("b", dg.zeros(2))
    m.nb = dg.nn.Buffer(dg.ones(1), persistent=False)
    assert set(m._parameters) == {"w"} and set(m._modules) == {"sub"}
    assert set(m._buffers) == {"b", "nb"} and list(m.state_dict()) == ["w", "b", "sub.weight",
                                                                         "sub.bias"]
    with pytest.raises(TypeError, match="cannot assign 'int' as parameter 'w'"):
        m.w = 3
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'sub'"):
        m.sub = 3
    with pytest.raises(KeyError, match="attribute 'w' already exists"):
        m.register_buffer("w", dg.zeros(1))
    with pytest.raises(KeyError, match=r"parameter name can.*t contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="cannot assign 'dyngraph.tensor.Tensor' object to "
                                        "parameter 'q'"):
        m.register_parameter("q", dg.nn.Parameter(dg.ones(1)) * 2)
    m.w = None
    assert m.w is None and [n for n, _ in m.named_parameters()] == ["sub.weight", "sub.bias"]
    del m.sub
    assert not hasattr(m, "sub")
    m.b = dg.ones(2)
    assert "b" in m._buffers
    assert "b" in dir(m) and "nb" in dir(m)

    class Early(dg.nn.Module):
        def __init__(self):
            self.w = dg.nn.Parameter(dg.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        _ = dg.nn.Linear(1, 1).nope


def test_shared_parameters_reported_once():
    a = dg.nn.Linear(2, 2)
    seq = dg.nn.Sequential(a, a)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    assert [n for n, _ in seq.named_modules()] == ["", "0"]
    assert len(seq.state_dict()) == 4


def test_get_submodule_parameter_buffer():
    dm = build(dg.nn)
    assert dm.get_submodule("layer1.1.bn") is dm.layer1[1].bn
    assert dm.get_parameter("heads.cls.bias") is dm.heads["cls"].bias
    assert dm.get_buffer("layer1.0.bn.running_mean") is dm.layer1[0].bn.running_mean
    with pytest.raises(AttributeError, match="Sequential has no attribute `7`"):
        dm.get_submodule("layer1.7")


def test_repr_matches_torch():
    dm, tm = build(dg.nn), build(torch.nn)
    assert repr(dm) == repr(tm)
    pl_d = dg.nn.ParameterList([dg.nn.Parameter(dg.ones(2, 3)), dg.zeros(4)])
    pl_t = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2, 3)), torch.zeros(4)])
    assert repr(pl_d).replace("dyngraph", "torch") == repr(pl_t)
    pd_d = dg.nn.ParameterDict({"a": dg.nn.Parameter(dg.ones(2, 3)), "b": dg.zeros(2)})
    pd_t = torch.nn.ParameterDict({"a": torch.nn.Parameter(torch.ones(2, 3)), "b": torch.zeros(2)})
    assert repr(pd_d).replace("dyngraph", "torch") == repr(pd_t)
    assert repr(dg.nn.Parameter(dg.tensor([1.0, 2.0]))) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0])))
    for name, args in [("Embedding", (10, 3)), ("EmbeddingBag", (10, 3)), ("BatchNorm2d", (3,)),
                       ("LayerNorm", ((2, 3),)), ("GroupNorm", (2, 4)), ("Flatten", ()),
                       ("Unflatten", (1, (2, 2))), ("Bilinear", (2, 3, 4)), ("Identity", ()),
                       ("InstanceNorm1d", (3,)), ("RMSNorm", (3,)), ("PReLU", ()),
                       ("Softmax", (1,)), ("LeakyReLU", (0.2, True)), ("GELU", ("tanh",)),
                       ("Dropout2d", (0.3,)), ("CrossEntropyLoss", ()), ("Hardtanh", ()),
                       ("Softplus", ()), ("Threshold", (0.1, 2.0)), ("Softshrink", ())]:
        assert repr(getattr(dg.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args)), name


def test_train_eval_and_zero_grad():
    dm = build(dg.nn)
    assert dm.training and dm.layer1[0].bn.training
    assert dm.eval() is dm
    assert not any(m.training for m in dm.modules())
    dm.train()
    assert all(m.training for m in dm.modules())
    dm.eval()
    dm(dg.randn(2, 3)).sum().backward()
    assert all(p.grad is not None for p in dm.parameters())
    dm.zero_grad(set_to_none=False)
    assert all(float(abs(p.grad).sum()) == 0 for p in dm.parameters())
    dm.zero_grad()
    assert all(p.grad is None for p in dm.parameters())
    dm.requires_grad_(False)
    assert not any(p.requires_grad for p in dm.parameters())


def test_to_dtype_keeps_integer_buffers_and_parameter_identity():
    dm = build(dg.nn)
    w = dm.embed.weight
    assert dm.to(dg.float64) is dm
    assert dm.embed.weight is w and w.dtype == dg.float64
    assert dm.layer1[0].bn.running_mean.dtype == dg.float64
    assert dm.layer1[0].bn.num_batches_tracked.dtype == dg.int64
    dm.float()
    assert w.dtype == dg.float32
    dm.to("cpu")
    with pytest.raises(TypeError, match="floating point"):
        dm.to(dg.int64)
    dm.half()
    assert w.dtype == dg.float16
    assert dm.cpu() is dm and dm.share_memory() is dm


def test_apply_deepcopy_and_pickle():
    dm = build(dg.nn)
    seen = []
    dm.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Block") == 2
    c = copy.deepcopy(dm)
    assert isinstance(c.embed.weight, dg.nn.Parameter)
    assert c.embed.weight is not dm.embed.weight
    np.testing.assert_array_equal(c.embed.weight.detach().numpy(), dm.embed.weight.detach().numpy())
    c.embed.weight.detach().numpy()[...] = 0
    assert dm.embed.weight.detach().numpy().any()
    lin = pickle.loads(pickle.dumps(dg.nn.Linear(2, 3)))
    assert isinstance(lin.weight, dg.nn.Parameter) and lin.weight.requires_grad


def test_forward_hooks():
    lin = dg.nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    out = lin(dg.ones(3, 2))
    np.testing.assert_allclose(out.detach().numpy(), (lin.bias.detach().numpy() + 1)[None].repeat(3, 0))
    assert calls == [dg.Size([3, 2])]
    h1.remove()
    h2.remove()
    assert lin(dg.zeros(1, 2)).shape == dg.Size([1, 2]) and len(calls) == 1
    kw = []
    lin.register_forward_pre_hook(lambda m, a, k: kw.append(k) or None, with_kwargs=True)
    lin.register_forward_hook(lambda m, a, k, o: kw.append("post"), with_kwargs=True,
                              prepend=True)
    lin(input=dg.ones(1, 2))
    assert kw[0].keys() == {"input"} and kw[1] == "post"


def _bw_record(nn_mod, lib, xin, record):
    def hook(m, gin, gout):
        record.append(("full", [None if g is None else to_np(g).copy() for g in gin],
                       [None if g is None else to_np(g).copy() for g in gout]))

    def pre(m, gout):
        record.append(("pre", [to_np(g).copy() for g in gout]))
        return tuple(g * 2 for g in gout)

    nn_mod.register_full_backward_pre_hook(pre)
    nn_mod.register_full_backward_hook(hook)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("input_grad", [True, False])
def test_full_backward_hooks_match_torch(input_grad):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    dm = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.Linear(4, 2)).double()
    dm.load_state_dict(tm.state_dict())
    xin = np.random.default_rng(0).normal(size=(5, 3))
    recs = {}
    for lib, model in ((torch, tm), (dg, dm)):
        rec = []
        _bw_record(model[1], lib, None, rec)
        _bw_record(model, lib, None, rec)
        xt = (torch.from_numpy(xin.copy()) if lib is torch else dg.tensor(xin.copy()))
        if input_grad:
            xt.requires_grad_(True)
        out = model(xt)
        out.sum().backward()
        recs[lib] = (rec, to_np(model[0].weight.grad).copy(),
                     to_np(xt.grad).copy() if input_grad else None)
    (rt, gwt, gxt), (rd, gwd, gxd) = recs[torch], recs[dg]
    assert [r[0] for r in rd] == [r[0] for r in rt]
    for a, b in zip(rd, rt, strict=True):
        for xa, xb in zip(a[1:], b[1:], strict=True):
            for ga, gb in zip(xa, xb, strict=True):
                assert (ga is None) == (gb is None)
                if ga is not None:
                    np.testing.assert_allclose(ga, gb, rtol=1e-10)
    np.testing.assert_allclose(gwd, gwt, rtol=1e-10)
    if input_grad:
        np.testing.assert_allclose(gxd, gxt, rtol=1e-10)


def test_full_backward_hook_can_replace_grad_input():
    lin = dg.nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda m, gin, gout: (gin[0] * 0 + 7,))
    xin = dg.ones(1, 2, requires_grad=True)
    lin(xin).sum().backward()
    assert xin.grad.numpy().tolist() == [[7.0, 7.0]]


def test_error_inside_forward_names_layer_and_path():
    class Inner(dg.nn.Module):
        def forward(self, x):
            return x @ dg.ones(7, 2)

    model = dg.nn.Sequential()
    model.add_module("block", dg.nn.ModuleDict({"inner": Inner()}))

    class Outer(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = model

        def forward(self, x):
            return self.body.block["inner"](x)

    with pytest.raises(RuntimeError, match=r"^Inner\(\) at 'body.block.inner': matmul"):
        Outer()(dg.ones(2, 3))
    # the same module called directly reports no path
    with pytest.raises(RuntimeError, match=r"^Inner\(\): matmul"):
        Inner()(dg.ones(2, 3))


def test_containers():
    a, b, c = dg.nn.Linear(1, 1), dg.nn.ReLU(), dg.nn.Tanh()
    s = dg.nn.Sequential(a, b)
    s.append(c)
    assert len(s) == 3 and s[-1] is c and list(s) == [a, b, c]
    sl = s[1:]
    assert isinstance(sl, dg.nn.Sequential) and list(sl) == [b, c] and list(sl._modules) == ["1", "2"]
    del s[0]
    assert list(s._modules) == ["0", "1"] and s[0] is b
    s.insert(0, a)
    assert s[0] is a and len(s) == 3
    from collections import OrderedDict
    named = dg.nn.Sequential(OrderedDict([("first", a), ("second", b)]))
    assert named.first is a and [n for n, _ in named.named_children()] == ["first", "second"]
    ml = dg.nn.ModuleList([a, b])
    ml.append(c)
    ml.extend([dg.nn.Identity()])
    assert len(ml) == 4 and ml[2] is c and isinstance(ml[1:3], dg.nn.ModuleList)
    md = dg.nn.ModuleDict({"x": a})
    md["y"] = b
    assert list(md.keys()) == ["x", "y"] and "y" in md and md.pop("x") is a and len(md) == 1
    pl = dg.nn.ParameterList([dg.ones(2)])
    pl.append(dg.zeros(3))
    assert all(isinstance(p, dg.nn.Parameter) for p in pl) and len(pl) == 2
    assert [n for n, _ in dg.nn.Sequential(dg.nn.Module()).named_parameters()] == []
    pd = dg.nn.ParameterDict({"a": dg.ones(1)})
    pd["b"] = dg.nn.Parameter(dg.zeros(2))
    assert list(pd.keys()) == ["a", "b"] and isinstance(pd["a"], dg.nn.Parameter)
    holder = dg.nn.Module()
    holder.pl = pl
    holder.pd = pd
    assert [n for n, _ in holder.named_parameters()] == ["pl.0", "pl.1", "pd.a", "pd.b"]


def test_module_list_repr_compresses_repeats_like_torch():
    d = dg.nn.ModuleList([dg.nn.Linear(2, 2) for _ in range(3)] + [dg.nn.ReLU()])
    t = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] + [torch.nn.ReLU()])
    assert repr(d) == repr(t)


def test_parameter_basics():
    p = dg.nn.Parameter(dg.ones(2))
    assert p.requires_grad and p.is_leaf and isinstance(p, dg.Tensor)
    q = dg.nn.Parameter(dg.ones(2), requires_grad=False)
    assert not q.requires_grad
    y = p * 2
    assert type(y) is dg.Tensor
    base = dg.zeros(3)
    shared = dg.nn.Parameter(base)
    base.numpy()[0] = 5
    assert shared.detach().numpy()[0] == 5


def test_clip_grad_and_vector_utils():
    from dyngraph.nn import utils

    tm = torch.nn.Linear(3, 2).double()
    dm = dg.nn.Linear(3, 2).double()
    dm.load_state_dict(tm.state_dict())
    xin = np.random.default_rng(0).normal(size=(4, 3)) * 10
    for norm_type in (2.0, 1.0, float("inf")):
        tm.zero_grad()
        dm.zero_grad()
        tm(torch.from_numpy(xin)).pow(2).sum().backward()
        (dm(dg.tensor(xin)) ** 2).sum().backward()
        tn = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.5, norm_type)
        dn = utils.clip_grad_norm_(dm.parameters(), 0.5, norm_type)
        assert dn.item() == pytest.approx(tn.item(), rel=1e-10)
        for a, b in zip(dm.parameters(), tm.parameters(), strict=True):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10)
    torch.nn.utils.clip_grad_value_(tm.parameters(), 0.01)
    utils.clip_grad_value_(dm.parameters(), 0.01)
    for a, b in zip(dm.parameters(), tm.parameters(), strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10)
    dm.weight.grad.numpy()[0, 0] = float("nan")
    with pytest.raises(RuntimeError, match="non-finite"):
        utils.clip_grad_norm_(dm.parameters(), 1.0, error_if_nonfinite=True)
    vec = utils.parameters_to_vector(dm.parameters())
    np.testing.assert_allclose(vec.detach().numpy(),
                               torch.nn.utils.parameters_to_vector(tm.parameters()).detach().numpy())
    utils.vector_to_parameters(dg.arange(8, dtype=dg.float64), dm.parameters())
    assert dm.bias.detach().numpy().tolist() == [6.0, 7.0]


def test_load_state_dict_assign_and_extra_state():
    lin = dg.nn.Linear(2, 2)
    new = np.arange(4, dtype=np.float32).reshape(2, 2)
    w = lin.weight
    lin.load_state_dict({"weight": new, "bias": np.zeros(2, np.float32)}, assign=True)
    assert lin.weight.detach().numpy().tolist() == [[0, 1], [2, 3]] and w.requires_grad

    class WithExtra(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.note = "a"

        def get_extra_state(self):
            return {"note": self.note}

        def set_extra_state(self, state):
            self.note = state["note"]

    m = WithExtra()
    sd = m.state_dict()
    assert list(sd) == ["_extra_state"]
    sd["_extra_state"] = {"note": "b"}
    m.load_state_dict(sd)
    assert m.note == "b"


def test_forward_hook_always_call_runs_on_error():
    seen = []

    class Boom(dg.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    b = Boom()
    b.register_forward_hook(lambda m, a, o: seen.append("called"), always_call=True)
    with pytest.raises(ValueError, match=r"^Boom\(\): boom"):
        b(dg.ones(1))
    assert seen == ["called"]


def test_missing_super_init_is_explained():
    class NoInit(dg.nn.Module):
        def __init__(self):
            pass

        def forward(self, x):
            return x

    with pytest.raises(AttributeError, match=r"NoInit is not initialised: call super\(\).__init__"):
        NoInit()(dg.ones(1))
