"""Metric learning: a shared encoder in a siamese/triplet setup with
TripletMarginLoss, CosineEmbeddingLoss and MarginRankingLoss, hard-negative mining
with cdist + masked_fill + argmin, and a contrastive InfoNCE loss (normalize, matmul
by a temperature, cross_entropy against arange labels)."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(27)
    labels = np.repeat(np.arange(4), 3)
    feats = rng.standard_normal((4, 5))[labels] + 0.3 * rng.standard_normal((12, 5))
    X = torch.from_numpy(feats)
    y = torch.from_numpy(labels)
    enc = nn.Sequential(nn.Linear(5, 8), nn.PReLU(), nn.Linear(8, 4)).double()
    shared.model(torch, "enc", enc)
    opt = torch.optim.Adam(enc.parameters(), lr=5e-3)
    triplet = nn.TripletMarginLoss(margin=0.5, p=2)
    cos_loss = nn.CosineEmbeddingLoss(margin=0.1)
    rank = nn.MarginRankingLoss(margin=0.2)
    out = {"losses": [], "neg_idx": []}
    for _ in range(4):
        z = enc(X)
        with torch.no_grad():
            d = torch.cdist(z, z)
            same = y.unsqueeze(0) == y.unsqueeze(1)
            neg = d.masked_fill(same, float("inf")).argmin(dim=1)
            pos = d.masked_fill(~same | torch.eye(12, dtype=torch.bool), -1.0).argmax(dim=1)
        out["neg_idx"].append(neg.tolist())
        l_trip = triplet(z, z[pos], z[neg])
        pair_t = torch.where(y[::2] == y[1::2], 1, -1)
        l_cos = cos_loss(z[::2], z[1::2], pair_t)
        l_rank = rank((z - z[pos]).norm(dim=1), (z - z[neg]).norm(dim=1), -torch.ones(12, dtype=torch.float64))
        zn = F.normalize(z, dim=1)
        logits = zn @ zn[pos].T / 0.5
        l_nce = F.cross_entropy(logits, torch.arange(12))
        loss = l_trip + l_cos + l_rank + l_nce
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["losses"].append([l_trip.item(), l_cos.item(), l_rank.item(), l_nce.item()])
    out["prelu"] = np_of(enc[1].weight)
    out["z"] = np_of(enc(X))
    return out
