"""The "learning PyTorch with examples" progression: fit a cubic to sin(x) with raw
tensors and a hand-written backward, then autograd, then nn.Sequential + optim."""

import math

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    out = {}
    dtype = torch.float64
    device = torch.device("cpu")
    x = torch.linspace(-math.pi, math.pi, 200, device=device, dtype=dtype)
    y = torch.sin(x)
    # 1) tensors and a manual backward pass
    a, b, c, d = (torch.tensor(v, device=device, dtype=dtype) for v in (0.1, -0.2, 0.3, 0.05))
    lr = 1e-6
    losses = []
    for _t in range(50):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum().item()
        losses.append(loss)
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()
        a -= lr * grad_a
        b -= lr * grad_b
        c -= lr * grad_c
        d -= lr * grad_d
    out["manual_losses"] = losses
    out["manual_coeffs"] = [a.item(), b.item(), c.item(), d.item()]

    # 2) autograd
    a, b, c, d = (torch.tensor(v, dtype=dtype, requires_grad=True) for v in (0.1, -0.2, 0.3, 0.05))
    losses = []
    for _t in range(50):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= lr * p.grad
                p.grad = None
    out["autograd_losses"] = losses
    out["autograd_coeffs"] = [p.item() for p in (a, b, c, d)]

    # 3) nn.Sequential, a Flatten, MSELoss(reduction="sum") and an optimizer
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    assert xx.shape == (200, 3)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1)).double()
    shared.model(torch, "poly", model)
    loss_fn = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    losses = []
    for _t in range(40):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    out["nn_losses"] = losses
    linear_layer = model[0]
    out["nn_weight"] = np_of(linear_layer.weight)
    out["nn_bias"] = linear_layer.bias.item()

    # 4) a custom Module with dynamic control flow (loop count from NumPy)
    class DynamicNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.tensor(0.1, dtype=dtype))
            self.b = torch.nn.Parameter(torch.tensor(-0.1, dtype=dtype))
            self.c = torch.nn.Parameter(torch.tensor(0.05, dtype=dtype))
            self.e = torch.nn.Parameter(torch.tensor(0.01, dtype=dtype))

        def forward(self, x, n_extra):
            y = self.a + self.b * x + self.c * x ** 2
            for exp in range(3, 3 + n_extra):
                y = y + self.e * x ** exp
            return y

    net = DynamicNet()
    opt = torch.optim.SGD(net.parameters(), lr=1e-8, momentum=0.9)
    rng = np.random.default_rng(0)
    losses = []
    for _t in range(20):
        y_pred = net(x, int(rng.integers(0, 3)))
        loss = torch.nn.functional.mse_loss(y_pred, y, reduction="sum")
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    out["dyn_losses"] = losses
    out["dyn_params"] = {n: p.item() for n, p in net.named_parameters()}
    return out
