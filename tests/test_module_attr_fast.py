"""Reads of registered submodules, parameters and buffers through Module's class-level
readers (``_RegisteredReader``, put on a class by the first ``__getattr__`` hit): every
observable result (values, identities, errors and their messages, precedence of plain and
class attributes, properties, parametrizations) compared with torch 2.13, running the same
program on both libraries."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import dyngraph
from dyngraph.nn.module import _RegisteredReader

torch = pytest.importorskip("torch")

LIBS = [dyngraph, torch]


def _np(t):
    return None if t is None else np.asarray(t.detach().numpy())


def _err(fn):
    """(type name, message) of what ``fn()`` raises, or None."""
    try:
        fn()
    except Exception as exc:
        # (the library's own name in the message: "dyngraph.nn.Module" / "torch.nn.Module")
        return type(exc).__name__, str(exc).replace("dyngraph", "torch")
    return None


def _both(program):
    """Run ``program(lib)`` on both libraries and assert equal results (arrays compared)."""
    out = [program(lib) for lib in LIBS]

    def norm(v):
        if isinstance(v, (dyngraph.Tensor, torch.Tensor)):
            return ("T", _np(v).tolist())
        if isinstance(v, np.ndarray):
            return ("T", v.tolist())
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    assert norm(out[0]) == norm(out[1])
    return out[0]


def _net_cls(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.w = nn.Parameter(lib.ones(2))
            self.register_buffer("buf", lib.zeros(2))
            self.plain = 7

        def forward(self, x):
            return self.fc(x) * self.w + self.buf

    return Net


# module-level classes (pickle finds them by name)
DgNet = _net_cls(dyngraph)
DgNet.__qualname__ = DgNet.__name__ = "DgNet"
TorchNet = _net_cls(torch)
TorchNet.__qualname__ = TorchNet.__name__ = "TorchNet"


def _reader_on(cls, name):
    return isinstance(cls.__dict__.get(name), _RegisteredReader)


def test_reads_identity_and_reader_installed():
    Net = _net_cls(dyngraph)
    m = Net()
    for name, table in (("fc", "_modules"), ("w", "_parameters"), ("buf", "_buffers")):
        assert getattr(m, name) is getattr(m, table)[name]
        assert getattr(m, name) is getattr(m, table)[name]      # second read: the reader
        assert _reader_on(Net, name)
    assert m.plain == 7 and not _reader_on(Net, "plain")
    # a fresh instance: read through the reader from the first access
    m2 = Net()
    assert m2.fc is m2._modules["fc"] and m2.fc is not m.fc


def test_class_level_reads_and_hasattr():
    def prog(lib):
        Net = _net_cls(lib)
        m = Net()
        _ = m.fc, m.w, m.buf
        return [hasattr(Net, "fc"), hasattr(Net, "w"), getattr(Net, "buf", "absent"),
                _err(lambda: Net.w)[0], hasattr(m, "fc"), hasattr(m, "nope"),
                sorted(n for n in dir(m) if n in ("fc", "w", "buf", "plain"))]
    _both(prog)


def test_replace_delete_and_messages():
    def prog(lib):
        nn = lib.nn
        m = _net_cls(lib)()
        out = [m.fc.weight.shape[1]]
        m.fc = nn.Linear(5, 2)
        out.append(m.fc.in_features)
        new = nn.Parameter(lib.full((2,), 3.0))
        m.w = new
        out += [m.w is new, m.w, m._parameters["w"] is new]
        m.buf = lib.full((2,), 2.0)
        out.append(m.buf)
        del m.fc
        out.append(_err(lambda: m.fc))
        out.append(hasattr(m, "fc"))
        del m.w
        out.append(_err(lambda: m.w))
        del m.buf
        out.append(_err(lambda: m.buf))
        # the name is free again: a plain attribute, then a module again
        m.fc = 3
        out += [m.fc, "fc" in m.__dict__]
        m.fc = nn.ReLU()
        out += [type(m.fc).__name__, "fc" in m.__dict__]
        m.fc = None
        out.append(m.fc)
        out.append(_err(lambda: setattr(m, "fc", 3)))
        m.w2 = nn.Parameter(lib.ones(1))
        out.append(_err(lambda: setattr(m, "w2", lib.ones(1)))[0])
        m.w2 = None
        out.append(m.w2)
        return out
    _both(prog)


def test_registration_errors():
    def prog(lib):
        nn = lib.nn
        m = _net_cls(lib)()
        _ = m.fc, m.w, m.buf
        out = [_err(lambda: m.register_buffer("fc", lib.zeros(1))),
               _err(lambda: m.register_parameter("buf", nn.Parameter(lib.zeros(1)))),
               _err(lambda: m.add_module("w", nn.ReLU())),
               _err(lambda: m.register_buffer("plain", lib.zeros(1)))]

        class Early(nn.Module):
            def __init__(self):
                self.fc = nn.Linear(1, 1)

        class EarlyP(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(lib.zeros(1))

        out += [_err(Early), _err(EarlyP)]
        m.register_module("extra", nn.Tanh())
        m.register_parameter("p0", None)
        out += [type(m.extra).__name__, m.p0]
        return out
    _both(prog)


def test_direct_dict_edits_visible():
    def prog(lib):
        nn = lib.nn
        m = _net_cls(lib)()
        _ = m.fc, m.w, m.buf
        out = []
        m._modules["fc"] = nn.Linear(4, 1)
        out.append(m.fc.in_features)
        m._parameters["w"] = nn.Parameter(lib.full((2,), 5.0))
        out.append(m.w)
        m._buffers["buf"] = lib.full((2,), -1.0)
        out.append(m.buf)
        del m._modules["fc"]
        out.append(_err(lambda: m.fc))
        m._parameters.pop("w")
        out.append(_err(lambda: m.w))
        m._buffers.clear()
        out.append(_err(lambda: m.buf))
        m._modules.update(fc=nn.Linear(2, 2))
        out.append(m.fc.out_features)
        # the same name in two dicts: parameters before buffers before modules
        m._buffers["fc"] = lib.ones(1)
        out.append(m.fc)
        m._parameters["fc"] = nn.Parameter(lib.zeros(1))
        out.append(m.fc)
        del m._parameters["fc"]
        del m._buffers["fc"]
        out.append(type(m.fc).__name__)
        # a plain attribute written into __dict__ wins over the registered one
        m.__dict__["fc"] = "plain"
        out.append(m.fc)
        del m.__dict__["fc"]
        out.append(type(m.fc).__name__)
        return out
    _both(prog)


def test_other_instances_of_the_class():
    """A reader put on a class by one instance changes nothing for instances without the name."""
    def prog(lib):
        nn = lib.nn

        class Opt(nn.Module):
            def __init__(self, reg):
                super().__init__()
                if reg == "param":
                    self.bias = nn.Parameter(lib.ones(1))
                elif reg == "plain":
                    self.bias = None
                self.k = 1

        a, b, c = Opt("param"), Opt("plain"), Opt("none")
        out = [a.bias, a.bias, b.bias, "bias" in b.__dict__, _err(lambda: c.bias), hasattr(c, "bias")]
        c.bias = 4
        out.append(c.bias)
        del c.bias
        out.append(_err(lambda: c.bias))
        return out
    _both(prog)


def test_class_attributes_later_in_mro_keep_precedence():
    def prog(lib):
        nn = lib.nn

        class K(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(lib.ones(1))
                self.helper = nn.ReLU()

        class Mixin:
            scale = 1.5

            def helper(self):
                return "method"

        class S(K, Mixin):
            pass

        k = K()
        out = [k.scale, k.scale, type(k.helper).__name__]
        # S's own instances: torch's __getattr__ never runs, the mixin's attributes are found;
        # S cannot register the names (they already exist)
        out.append(_err(S))

        class S2(K, Mixin):
            def __init__(self):
                nn.Module.__init__(self)
                self.other = nn.Tanh()

        s = S2()
        out += [s.scale, s.helper(), type(s.other).__name__]
        # a direct write into _parameters does not beat the class attribute either
        s._parameters["scale"] = nn.Parameter(lib.zeros(1))
        out.append(s.scale)
        return out
    _both(prog)


def test_subclass_property_and_custom_getattr():
    def prog(lib):
        nn = lib.nn
        Net = _net_cls(lib)
        base = Net()
        _ = base.w, base.fc

        class WithProp(Net):
            @property
            def w(self):
                return "prop"

        class WithGetattr(Net):
            def __getattr__(self, name):
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    if name.startswith("missing"):
                        return "fallback:" + name
                    raise

        class Intercepts(Net):
            def __init__(self):
                super().__init__()
                self.ready = True

            def __getattr__(self, name):
                if name == "w" and self.__dict__.get("ready"):
                    return "intercepted"
                return super().__getattr__(name)

        p, g, i = WithProp.__new__(WithProp), WithGetattr(), Intercepts()
        nn.Module.__init__(p)
        out = [p.w, g.fc.in_features, g.missing, g.w, i.w, i.w, i.fc.in_features, i.buf]
        del i._modules["fc"]
        out.append(_err(lambda: i.fc))
        return out
    _both(prog)


def test_containers_indexing():
    def prog(lib):
        nn = lib.nn
        seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
        ml = nn.ModuleList([nn.Tanh(), nn.Linear(1, 1)])
        md = nn.ModuleDict({"a": nn.ReLU(), "b": nn.Linear(2, 2)})
        pl = nn.ParameterList([nn.Parameter(lib.ones(1)), nn.Parameter(lib.zeros(2))])
        pd = nn.ParameterDict({"x": nn.Parameter(lib.ones(3))})
        out = [type(seq[0]).__name__, type(getattr(seq, "1")).__name__, type(ml[1]).__name__,
               type(md.a).__name__, type(md.b).__name__, md.b.in_features, pl[1], pd.x, pd["x"]]
        md.a = nn.Tanh()
        out.append(type(md["a"]).__name__)
        del md["b"]
        out.append(_err(lambda: md.b))
        seq[0] = nn.Linear(2, 5)
        out.append(seq[0].out_features)
        return out
    _both(prog)


def test_state_dict_round_trip_and_optimizer():
    def prog(lib):
        nn = lib.nn
        lib.manual_seed(0)
        m = _net_cls(lib)()
        _ = m.fc, m.w, m.buf
        sd = {k: v.detach().clone() * 0 + i for i, (k, v) in enumerate(m.state_dict().items())}
        m.load_state_dict(sd)
        out = [_np(m.fc.weight), _np(m.w), _np(m.buf)]
        sd2 = {k: v + 10 for k, v in sd.items()}
        m.load_state_dict(sd2, assign=True)
        out += [_np(m.fc.bias), _np(m.w), _np(m.buf), m.fc.bias is m.fc._parameters["bias"]]
        # a replaced parameter: a new optimizer steps the new one
        m.w = nn.Parameter(lib.full((2,), 2.0))
        opt = lib.optim.SGD(m.parameters(), lr=0.5)
        m(lib.ones(1, 3)).sum().backward()
        opt.step()
        out.append(m.w)
        out.append(m.w is m._parameters["w"])
        return out
    _both(prog)


def test_apply_and_dtype_moves():
    def prog(lib):
        m = _net_cls(lib)()
        _ = m.fc, m.w, m.buf
        w = m.w
        m.double()
        out = [m.w is w, str(m.w.dtype).split(".")[-1], str(m.buf.dtype).split(".")[-1],
               m.buf is m._buffers["buf"], str(m.fc.weight.dtype).split(".")[-1]]
        m.float()
        out.append(str(m.buf.dtype).split(".")[-1])
        return out
    _both(prog)


def test_pickle_deepcopy_copy():
    def prog(lib):
        m = (DgNet if lib is dyngraph else TorchNet)()
        _ = m.fc, m.w, m.buf
        out = []
        for clone in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
            out += [type(clone).__name__.replace("Dg", "Torch"), clone.fc is clone._modules["fc"], clone.fc is not m.fc,
                    clone.w, clone.buf, clone.plain, clone.fc.weight is clone._modules["fc"]._parameters["weight"]]
        shallow = copy.copy(m)
        out += [shallow.fc is m.fc, shallow._parameters is m._parameters]
        shallow.w = lib.nn.Parameter(lib.full((2,), 9.0))
        out.append(m.w)        # the dicts are shared: the original sees the new parameter
        return out
    _both(prog)


def test_hooks_still_run():
    def prog(lib):
        m = _net_cls(lib)()
        _ = m.fc
        seen = []
        h = m.fc.register_forward_hook(lambda mod, a, o: seen.append(o.shape[-1]))
        m(lib.ones(1, 3))
        h.remove()
        m(lib.ones(1, 3))
        return seen
    _both(prog)


def test_functional_call_swaps():
    def prog(lib):
        func = lib.func
        m = _net_cls(lib)()
        _ = m.w, m.buf
        seen = []

        class Probe(lib.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                seen.append(self.inner.w)
                seen.append(self.inner.buf)
                return self.inner(x)

        p = Probe(m)
        _ = p.inner
        y = func.functional_call(p, {"inner.w": lib.full((2,), 4.0), "inner.buf": lib.ones(2)},
                                 (lib.ones(1, 3),))
        return [seen, y.shape, m.w, m.buf]
    out = _both(prog)
    assert len(out[0]) == 2


def test_parametrize_serves_parametrized_value():
    def prog(lib):
        nn = lib.nn
        P = lib.nn.utils.parametrize

        class Double(nn.Module):
            def forward(self, x):
                return x * 2

            def right_inverse(self, x):
                return x / 2

        lin = nn.Linear(2, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
        _ = lin.weight, lin.bias                       # readers on Linear before parametrizing
        P.register_parametrization(lin, "weight", Double())
        out = [lin.weight, P.is_parametrized(lin, "weight")]
        with lib.no_grad():
            lin.parametrizations.weight.original.mul_(10)
        out.append(lin.weight)
        lin.weight = lib.tensor([[1.0, 1.0], [1.0, 1.0]])   # through the right inverse: none
        out.append(lin.parametrizations.weight.original)
        P.remove_parametrizations(lin, "weight")
        out += [lin.weight, isinstance(lin.weight, nn.Parameter), type(lin).__name__]
        # another plain Linear is untouched
        other = nn.Linear(2, 2)
        out.append(other.weight is other._parameters["weight"])
        return out
    _both(prog)


def test_weight_norm_and_spectral_norm():
    def prog(lib):
        nn = lib.nn
        lin = nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.arange(6.0).reshape(2, 3) - 2)
        _ = lin.weight
        wn = nn.utils.parametrizations.weight_norm(lin)
        out = [wn.weight, sorted(n for n, _ in wn.named_parameters())]
        lin2 = nn.Linear(3, 2)
        with lib.no_grad():
            lin2.weight.copy_(lib.arange(6.0).reshape(2, 3) - 2)
        old = nn.utils.weight_norm(lin2)
        old(lib.ones(1, 3))
        out += [old.weight, "weight" in old._parameters, "weight_g" in old._parameters]
        return out
    _both(prog)


def test_plain_module_instance_reader_on_module_base():
    """A reader put on Module itself (an nn.Module() with a child) changes no other class."""
    def prog(lib):
        nn = lib.nn
        box = nn.Module()
        box.fc = nn.Linear(1, 1)
        _ = box.fc
        _ = box.fc
        lin = nn.Linear(2, 2)
        return [type(box.fc).__name__, _err(lambda: lin.fc), hasattr(lin, "fc"),
                _err(lambda: nn.ReLU().fc)]
    _both(prog)


def test_subclass_gets_its_own_reader_and_dynamic_classes_are_freed():
    import gc
    import weakref

    Net = _net_cls(dyngraph)
    _ = Net().w

    class Sub(Net):
        pass

    s = Sub()
    # Net's reader put one on Sub (already in Net.__init__'s registration check)
    assert s.w is s._parameters["w"] and _reader_on(Sub, "w")
    assert s.w is s._parameters["w"] and Sub.__dict__["w"].home is Sub
    del s._parameters["w"]
    with pytest.raises(AttributeError, match="'Sub' object has no attribute 'w'"):
        _ = s.w

    # a class made per instance (parametrize makes one per module) is not kept by the readers
    def make():
        cls = type("Tmp", (Net,), {})
        inst = cls()
        assert inst.fc is inst._modules["fc"] and inst.fc is inst._modules["fc"]
        return weakref.ref(cls)

    ref = make()
    gc.collect()
    assert ref() is None
