"""Logistic regression trained by LBFGS with a closure (strong Wolfe line search)
and an L2 penalty."""

import numpy as np

from tests.port import np_of

RTOL = 1e-7


def run(torch, shared):
    nn = torch.nn
    rng = np.random.default_rng(16)
    X = torch.from_numpy(rng.standard_normal((50, 3)))
    y = torch.from_numpy((rng.standard_normal(50) + X.numpy() @ np.array([1.0, -2.0, 0.5]) > 0)
                         .astype(np.float64))
    model = nn.Linear(3, 1).double()
    shared.model(torch, "logreg", model)
    opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=20, line_search_fn="strong_wolfe")
    losses = []

    def closure():
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(X).squeeze(1), y)
        loss = loss + 1e-2 * model.weight.pow(2).sum()
        loss.backward()
        losses.append(loss.item())
        return loss

    for _ in range(2):
        opt.step(closure)
    out = {"lbfgs_losses": losses, "w": np_of(model.weight), "b": np_of(model.bias)}

    return out
