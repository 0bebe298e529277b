"""An MLP classifier: DataLoader over a TensorDataset, CrossEntropyLoss, Adam with
weight-decay parameter groups, StepLR, clip_grad_norm_, eval accuracy under no_grad."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    from torch.utils.data import DataLoader, TensorDataset  # noqa: F401 (ported as-is below)

    nn = torch.nn
    rng = np.random.default_rng(2)
    n, d, k = 96, 10, 4
    centers = rng.standard_normal((k, d)) * 2
    labels = rng.integers(0, k, n)
    feats = centers[labels] + rng.standard_normal((n, d))
    X = torch.from_numpy(feats)
    Y = torch.from_numpy(labels).long()
    dataset = torch.utils.data.TensorDataset(X, Y)
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=False)

    model = nn.Sequential(
        nn.Linear(d, 32), nn.ReLU(), nn.Dropout(p=0.0),
        nn.Linear(32, 32), nn.Tanh(),
        nn.Linear(32, k),
    ).to(torch.float64)
    shared.model(torch, "mlp", model)
    decay = [p for n_, p in model.named_parameters() if n_.endswith("weight")]
    no_decay = [p for n_, p in model.named_parameters() if not n_.endswith("weight")]
    optimizer = torch.optim.Adam([
        {"params": decay, "weight_decay": 1e-2},
        {"params": no_decay, "weight_decay": 0.0},
    ], lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    criterion = nn.CrossEntropyLoss()
    out = {"losses": [], "lrs": [], "norms": [], "acc": []}
    for _epoch in range(4):
        model.train()
        running = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            running += loss.item() * xb.size(0)
            out["losses"].append(loss.item())
            out["norms"].append(float(norm))
        scheduler.step()
        out["lrs"].append(optimizer.param_groups[0]["lr"])
        model.eval()
        correct = 0
        with torch.no_grad():
            for xb, yb in loader:
                pred = model(xb).argmax(dim=1)
                correct += (pred == yb).sum().item()
        out["acc"].append(correct / len(dataset))
        out.setdefault("epoch_loss", []).append(running / len(loader.dataset))
    out["params"] = [np_of(p) for p in model.parameters()]
    out["last_lr"] = scheduler.get_last_lr()
    return out
