"""The default float32 world: data as float32 via torch.tensor(..., dtype=torch.float32)
and .float(), BatchNorm1d, CrossEntropyLoss with class weights and label smoothing,
Adam(amsgrad=True), ExponentialLR, accuracy and a confusion matrix with bincount-free
indexing."""

import numpy as np

from tests.port import np_of

RTOL = 2e-5
ATOL = 2e-6


def run(torch, shared):
    nn = torch.nn
    rng = np.random.default_rng(21)
    n, d, k = 64, 8, 3
    labels = rng.integers(0, k, n)
    feats = rng.standard_normal((n, d)) + labels[:, None] * 0.8
    X = torch.tensor(feats, dtype=torch.float32)
    y = torch.tensor(labels)
    assert X.dtype == torch.float32 and y.dtype == torch.int64
    # no bias before BatchNorm: its gradient is rounding noise, which Adam would amplify
    model = nn.Sequential(nn.Linear(d, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, k))
    shared.model(torch, "clf", model)
    weight = torch.tensor([1.0, 2.0, 0.5])
    crit = nn.CrossEntropyLoss(weight=weight, label_smoothing=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    out = {"losses": [], "lrs": []}
    for _epoch in range(3):
        model.train()
        for i in range(0, n, 16):
            opt.zero_grad()
            loss = crit(model(X[i:i + 16]), y[i:i + 16])
            loss.backward()
            opt.step()
            out["losses"].append(loss.item())
        sched.step()
        out["lrs"].append(sched.get_last_lr()[0])
    model.eval()
    with torch.no_grad():
        logits = model(X)
        pred = logits.argmax(1)
    conf = torch.zeros(k, k, dtype=torch.long)
    for t_, p_ in zip(y.tolist(), pred.tolist(), strict=True):
        conf[t_, p_] += 1
    out["conf"] = conf.tolist()
    out["acc"] = (pred == y).float().mean().item()
    out["logits"] = np_of(logits)
    out["dtype_ok"] = logits.dtype == torch.float32
    out["params"] = [np_of(p) for p in model.parameters()]
    out["rm"] = np_of(model[1].running_mean)
    out["rv"] = np_of(model[1].running_var)
    return out
