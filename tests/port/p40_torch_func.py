"""torch.func idioms: per-sample gradients with functional_call + vmap(grad(...),
in_dims=(None, None, 0, 0)) (the PyTorch tutorial recipe) checked against a loop of
ordinary backward passes; a model-agnostic meta-learning (MAML) inner step with
functional_call on adapted parameters and a second-order outer gradient; grad of grad,
grad_and_value with has_aux, jacrev and hessian of small functions."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    from torch.func import functional_call, grad, grad_and_value, hessian, jacrev, vmap  # noqa: F401

    fn = torch.func
    rng = np.random.default_rng(40)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).double()
    shared.model(torch, "m", model)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    x = torch.from_numpy(rng.standard_normal((4, 3)))
    y = torch.from_numpy(rng.integers(0, 2, 4))

    def compute_loss(params, buffers, sample, target):
        logits = fn.functional_call(model, (params, buffers), (sample.unsqueeze(0),))
        return F.cross_entropy(logits, target.unsqueeze(0))

    per_sample = fn.vmap(fn.grad(compute_loss), in_dims=(None, None, 0, 0))(params, buffers, x, y)
    out = {"per_sample": {k: np_of(v) for k, v in per_sample.items()}}
    loop = []
    for i in range(4):
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        loop.append(np_of(model[0].weight.grad))
    out["loop_matches"] = bool(np.allclose(np.stack(loop), out["per_sample"]["0.weight"], rtol=1e-12, atol=1e-14))

    # MAML: one inner SGD step on a support set, loss on a query set, gradient w.r.t. the
    # initial parameters through the inner step (second order)
    meta = {k: v.detach().clone().requires_grad_(True) for k, v in model.named_parameters()}
    xs, ys = x[:2], y[:2]
    xq, yq = x[2:], y[2:]
    inner = F.cross_entropy(fn.functional_call(model, meta, (xs,)), ys)
    g = torch.autograd.grad(inner, list(meta.values()), create_graph=True)
    adapted = {k: v - 0.5 * gi for (k, v), gi in zip(meta.items(), g, strict=True)}
    outer = F.cross_entropy(fn.functional_call(model, adapted, (xq,)), yq)
    outer.backward()
    out["maml_outer"] = outer.item()
    out["maml_grads"] = {k: np_of(v.grad) for k, v in meta.items()}

    def f(v):
        return (v.sin() * v ** 2).sum()

    v = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    out["grad"] = np_of(fn.grad(f)(v))
    out["grad_grad_diag"] = np_of(fn.grad(lambda u: fn.grad(f)(u).sum())(v))
    (gv, (val, aux)) = fn.grad_and_value(lambda u: (f(u), u.mean()), has_aux=True)(v)
    out["grad_and_value"] = [np_of(gv), val.item(), aux.item()]
    out["jacrev"] = np_of(fn.jacrev(lambda u: u.sin() * u.sum())(v))
    out["hessian"] = np_of(fn.hessian(f)(v))
    out["grad_requires_grad"] = fn.grad(f)(v).requires_grad
    return out
