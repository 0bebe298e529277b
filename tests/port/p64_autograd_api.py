"""Autograd API corners: `backward(gradient=)`, `backward(inputs=)`, gradients
accumulating across calls, `retain_graph`, `retain_grad` on non-leaves, tensor hooks
that rewrite the gradient, `grad(allow_unused=True)`, `grad_outputs`, `materialize_grads`,
double backward through softmax/tanh, `detect_anomaly`-free NaN checks, `is_leaf`/`grad_fn`
visibility, `torch.autograd.backward` with several roots."""

import numpy as np

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-10


def run(torch, shared):
    rng = np.random.default_rng(21)
    out = {}
    x = torch.tensor(rng.standard_normal(3), requires_grad=True)
    w = torch.tensor(rng.standard_normal((3, 3)), requires_grad=True)
    y = w @ x
    y.backward(gradient=torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64), retain_graph=True)
    out["gradient_arg"] = [np_of(x.grad), np_of(w.grad)]
    y.sum().backward(retain_graph=True)
    out["accumulated"] = np_of(x.grad)
    x.grad = None
    y.sum().backward(inputs=[x])
    out["inputs_only"] = [np_of(x.grad), np_of(w.grad)]
    h = torch.tanh(w) @ x
    h.retain_grad()
    mid = h * 2
    mid.retain_grad()
    x.grad = w.grad = None
    (mid ** 2).sum().backward()
    out["retain_grad"] = [np_of(h.grad), np_of(mid.grad), h.is_leaf, mid.grad_fn is not None, x.grad_fn is None]
    seen = []
    a = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    hnd = a.register_hook(lambda g: g * 10)
    b = a * a
    b.register_hook(lambda g: seen.append(np_of(g)))
    b.sum().backward()
    hnd.remove()
    out["hooks"] = [np_of(a.grad), seen]
    a.grad = None
    (a * a).sum().backward()
    out["hook_removed"] = np_of(a.grad)
    u = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    gu, gv = torch.autograd.grad((u * 3).sum(), [u, v], allow_unused=True)
    out["allow_unused"] = [np_of(gu), gv is None]
    gm = torch.autograd.grad((u * 3).sum(), [u, v], allow_unused=True, materialize_grads=True)
    out["materialize"] = [np_of(g) for g in gm]
    go = torch.autograd.grad(u * v, [u], grad_outputs=torch.tensor([1.0, -2.0], dtype=torch.float64))
    out["grad_outputs"] = np_of(go[0])
    out["unused_err"] = err(lambda: torch.autograd.grad((u * 3).sum(), [v]), "used")
    s = torch.tensor(rng.standard_normal(4), requires_grad=True)
    p = torch.softmax(s, 0)
    (g1,) = torch.autograd.grad((p * torch.arange(4.0, dtype=torch.float64)).sum(), s, create_graph=True)
    (g2,) = torch.autograd.grad((g1 ** 2).sum(), s)
    out["double_softmax"] = [np_of(g1), np_of(g2)]
    t = torch.tensor(rng.standard_normal(3), requires_grad=True)
    (d1,) = torch.autograd.grad(torch.tanh(t).sum(), t, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), t, create_graph=True)
    (d3,) = torch.autograd.grad(d2.sum(), t)
    out["triple_tanh"] = [np_of(d1), np_of(d2), np_of(d3)]
    r1 = (u * 2).sum()
    r2 = (u * v).sum()
    torch.autograd.backward([r1, r2])
    out["multi_root"] = [np_of(u.grad), np_of(v.grad)]
    u.grad = v.grad = None
    torch.autograd.backward([u * 1.0, v * 2.0], grad_tensors=[torch.ones(2, dtype=torch.float64),
                                                              torch.full((2,), 0.5, dtype=torch.float64)])
    out["grad_tensors"] = [np_of(u.grad), np_of(v.grad)]
    q = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
    (torch.sqrt(q) * 0).sum().backward()
    out["nan_grad"] = np.isnan(np_of(q.grad)).tolist()
    q.grad = None
    torch.where(q > 0, torch.sqrt(q), torch.zeros_like(q)).sum().backward()
    out["where_nan_trap"] = np.isnan(np_of(q.grad)).tolist()
    c = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    e = c.exp()
    out["grad_fn_names"] = [type(e.grad_fn).__name__ != "", e.grad_fn is not None, c.grad_fn is None,
                            e.requires_grad, e.is_leaf, (e.detach() * 2).requires_grad]
    c.grad = torch.zeros(2, dtype=torch.float64)
    e.sum().backward()
    out["grad_preset"] = np_of(c.grad)
    out["set_grad_wrong_shape"] = err(lambda: setattr(c, "grad", torch.zeros(3, dtype=torch.float64)))
    k = torch.tensor([2.0], dtype=torch.float64, requires_grad=True)
    with torch.autograd.set_detect_anomaly(False):
        (k ** 3).sum().backward(create_graph=True)
    (gk,) = torch.autograd.grad(k.grad.sum(), k)
    out["backward_create_graph"] = [np_of(k.grad.detach()), np_of(gk)]
    return out
