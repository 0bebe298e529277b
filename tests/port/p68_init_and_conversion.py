"""Deterministic `nn.init` functions and helpers (`constant_`, `ones_`, `zeros_`, `eye_`,
`dirac_`, `calculate_gain`, fan computation through `kaiming_*`/`xavier_*` bounds checked
by statistics-free properties), module dtype conversions (`double()`, `half()`, `to(dtype)`,
`type()`), buffers following conversions except integer ones, `Parameter` repr/properties,
`torch.nn.Parameter(requires_grad=False)`, `register_parameter` after construction."""

import numpy as np

from tests.port import np_of

RTOL = 1e-12


def dt(t):
    return str(t.dtype).split(".")[-1]


def run(torch, shared):
    nn = torch.nn
    init = nn.init
    out = {}
    w = torch.empty(3, 5)
    out["constant"] = [np_of(init.constant_(w, 0.3)), np_of(init.ones_(torch.empty(2))), np_of(init.zeros_(torch.empty(2, 2)))]
    out["eye"] = [np_of(init.eye_(torch.empty(3, 5))), np_of(init.eye_(torch.empty(4, 2)))]
    out["dirac"] = [np_of(init.dirac_(torch.empty(2, 2, 3))), np_of(init.dirac_(torch.empty(4, 2, 3, 3), groups=2))]
    out["gain"] = [init.calculate_gain("relu"), init.calculate_gain("leaky_relu", 0.2), init.calculate_gain("tanh"),
                   init.calculate_gain("selu"), init.calculate_gain("linear"), init.calculate_gain("conv2d"),
                   init.calculate_gain("sigmoid")]
    torch.manual_seed(0)
    ku = init.kaiming_uniform_(torch.empty(64, 30), a=0.0, nonlinearity="relu")
    xu = init.xavier_uniform_(torch.empty(40, 20, 3), gain=2.0)
    un = init.uniform_(torch.empty(500), -0.25, 0.75)
    tn = init.trunc_normal_(torch.empty(2000), mean=0.0, std=1.0, a=-0.5, b=0.5)
    # bounds that follow from fan_in / fan_out: the largest |value| sits just under the bound
    out["bounds"] = [bool(ku.abs().max() <= np.sqrt(6 / 30)), bool(ku.abs().max() > 0.9 * np.sqrt(6 / 30)),
                     bool(xu.abs().max() <= 2.0 * np.sqrt(6 / (60 + 120))),
                     bool(xu.abs().max() > 0.9 * 2.0 * np.sqrt(6 / (60 + 120))),
                     bool(un.min() >= -0.25), bool(un.max() < 0.75), bool(tn.abs().max() <= 0.5)]
    orth = init.orthogonal_(torch.empty(4, 6), gain=1.5)
    out["orthogonal"] = np.round(np_of(orth @ orth.T), 5)
    sp = init.sparse_(torch.empty(10, 4), sparsity=0.3)
    out["sparse_zeros_per_col"] = [int((sp[:, j] == 0).sum()) for j in range(4)]
    out["init_returns_same"] = [init.normal_(w) is w, init.kaiming_normal_(w, mode="fan_out") is w]
    with torch.no_grad():
        p = nn.Parameter(torch.ones(2))
        init.constant_(p, 2.0)
    out["param_init"] = [np_of(p), p.requires_grad, type(p).__name__]
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    out["default_dtypes"] = [dt(q) for q in m.state_dict().values()]
    m.double()
    out["double"] = [dt(q) for q in m.state_dict().values()]
    m.to(torch.float32)
    out["to_float"] = [dt(q) for q in m.state_dict().values()]
    m.half()
    out["half"] = [dt(q) for q in m.state_dict().values()]
    m.to(dtype=torch.float64)
    out["to_kw"] = [dt(q) for q in m.state_dict().values()]
    m.type(torch.float32)
    out["type"] = [dt(q) for q in m.state_dict().values()]
    out["param_is_param"] = [type(q).__name__ for q in m.parameters()]
    frozen = nn.Parameter(torch.zeros(2), requires_grad=False)
    out["param_props"] = [frozen.requires_grad, frozen.is_leaf, isinstance(frozen, torch.Tensor),
                          repr(nn.Parameter(torch.tensor([1.0, 2.0])))]
    lin = nn.Linear(2, 2)
    lin.register_parameter("scale", nn.Parameter(torch.ones(2)))
    lin.extra = nn.Parameter(torch.zeros(1))
    out["late_params"] = [n for n, _ in lin.named_parameters()]
    out["buffer_assign"] = None
    lin.register_buffer("buf", torch.zeros(2))
    lin.buf = torch.ones(2)
    out["buffer_assign"] = [n for n, _ in lin.named_buffers()] + [float(lin.buf.sum())]
    del lin.extra
    out["after_del"] = [n for n, _ in lin.named_parameters()]
    return out
