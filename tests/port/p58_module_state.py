"""Module state edge cases: buffers with `persistent=False`, `register_buffer(name, None)`,
`load_state_dict(strict=False)` return value and strict errors, `state_dict` prefixes
and ordering, `modules()`/`named_modules()` order, `apply(init)` with deterministic
`nn.init.*_` functions, `parameters_to_vector`/`vector_to_parameters`, `zero_grad`
set_to_none, `train()`/`eval()` propagation, `get_submodule`/`get_parameter`."""

import numpy as np

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-12


def run(torch, shared):
    nn = torch.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.register_buffer("running", torch.zeros(3))
            self.register_buffer("scratch", torch.ones(3), persistent=False)
            self.register_buffer("maybe", None)
            self.register_parameter("extra", None)

        def forward(self, x):
            return self.fc(x) * self.scratch + self.running

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Block()
            self.seq = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Sequential(nn.Linear(4, 2), nn.Identity()))
            self.head = nn.ModuleDict({"z": nn.Linear(2, 1), "b": nn.Linear(2, 1)})

        def forward(self, x):
            h = self.seq(self.a(x))
            return self.head["z"](h) + self.head["b"](h)

    net = Net()
    out = {"state_keys": list(net.state_dict().keys()),
           "buffers": [n for n, _ in net.named_buffers()],
           "modules": [n for n, _ in net.named_modules()],
           "module_types": [type(m).__name__ for m in net.modules()],
           "children": [n for n, _ in net.named_children()],
           "params": [n for n, _ in net.named_parameters()],
           "maybe_none": [net.a.maybe is None, net.a.extra is None],
           "prefix": list(net.seq.state_dict(prefix="enc.").keys())[:2],
           "moduledict_order": list(net.head.keys()),
           "get": [type(net.get_submodule("seq.2.0")).__name__, list(net.get_parameter("seq.0.weight").shape)]}

    def init(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.bias, 0.1)
            nn.init.eye_(m.weight) if m.weight.shape[0] == m.weight.shape[1] else nn.init.ones_(m.weight)
            with torch.no_grad():
                m.weight.mul_(0.5)

    net.apply(init)
    net.double()
    out["buffer_dtypes"] = [net.a.running.dtype == torch.float64, net.a.scratch.dtype == torch.float64]
    x = torch.from_numpy(np.linspace(-1, 1, 6).reshape(2, 3))
    out["forward"] = np_of(net(x))
    vec = nn.utils.parameters_to_vector(net.parameters())
    out["vec"] = [list(vec.shape), np_of(vec)]
    nn.utils.vector_to_parameters(vec * 2, net.parameters())
    out["vec_back"] = np_of(net.seq[0].weight)
    sd = net.state_dict()
    sd.pop("head.b.bias")
    sd["bogus.weight"] = torch.zeros(1)
    fresh = Net().double()
    res = fresh.load_state_dict(sd, strict=False)
    out["strict_false"] = [sorted(res.missing_keys), sorted(res.unexpected_keys),
                           isinstance(res, tuple), len(res)]
    out["loaded"] = np_of(fresh.seq[0].weight)
    out["strict_err"] = err(lambda: Net().double().load_state_dict(sd), "missing", "unexpected")
    bad = net.state_dict()
    bad["seq.0.weight"] = torch.zeros(5, 5, dtype=torch.float64)
    out["shape_err"] = err(lambda: Net().double().load_state_dict(bad), "size mismatch")
    net.eval()
    out["eval"] = [m.training for m in net.modules()]
    net.seq.train()
    out["partial_train"] = [m.training for m in net.modules()]
    net(x).sum().backward()
    net.zero_grad()
    out["zero_grad_none"] = [p.grad is None for p in net.parameters()]
    net(x).sum().backward()
    net.zero_grad(set_to_none=False)
    out["zero_grad_zeros"] = [float(p.grad.abs().sum()) for p in net.parameters()][:3]
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2), nn.Sigmoid())
    out["seq_ops"] = [len(seq), type(seq[-1]).__name__, len(seq[1:3]), type(seq[1:3]).__name__,
                      [type(m).__name__ for m in seq[::2]], list(seq[:2].state_dict().keys())]
    seq.append(nn.Identity())
    del seq[0]
    out["seq_mutate"] = [len(seq), list(seq.state_dict().keys()), [n for n, _ in seq.named_children()]]
    md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Tanh()})
    md["c"] = nn.Identity()
    md.update({"d": nn.ReLU()})
    out["moduledict"] = [list(md.keys()), [type(v).__name__ for v in md.values()], "a" in md, len(md),
                         [k for k, _ in md.items()], type(md.pop("b")).__name__, list(md)]
    ml = nn.ModuleList([nn.ReLU()])
    ml.extend([nn.Tanh(), nn.Identity()])
    ml.insert(1, nn.Sigmoid())
    out["modulelist"] = [[type(m).__name__ for m in ml], len(ml), type(ml[-1]).__name__]
    ident = nn.Identity(54, unused="x")
    out["identity"] = np_of(ident(x))
    pd = nn.ParameterDict({"w": nn.Parameter(torch.ones(2))})
    out["paramdict"] = [list(pd.keys()), list(dict(pd.named_parameters()).keys())]
    out["F_identity"] = np_of(F.linear(x, torch.eye(3, dtype=torch.float64)))
    return out
