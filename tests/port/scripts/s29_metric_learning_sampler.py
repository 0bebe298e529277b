"""Metric learning with a custom batch sampler, as retrieval repositories write it: a
``BalancedBatchSampler(torch.utils.data.Sampler)`` yielding index lists (``n_classes`` x
``n_samples``), an embedding net ending in ``F.normalize``, batch-hard triplet mining with
``torch.cdist`` + ``masked_fill`` + ``max``/``min``, ``nn.TripletMarginLoss(margin=0.2)``,
``nn.CosineEmbeddingLoss`` on pairs, ``nn.PairwiseDistance``, ``torch.utils.data.BatchSampler``
over a ``SequentialSampler``, ``StepLR``, and recall@1 from a ``topk`` of the similarity
matrix with the diagonal filled by ``fill_diagonal_(-inf)``.

    python s29_metric_learning_sampler.py --epochs 3 --out metric.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, Sampler, SequentialSampler, TensorDataset


class BalancedBatchSampler(Sampler):
    """Each batch: ``n_classes`` classes x ``n_samples`` examples, drawn with a NumPy generator."""

    def __init__(self, labels, n_classes, n_samples, seed=0):
        self.labels = np.asarray(labels)
        self.labels_set = sorted(set(self.labels.tolist()))
        self.label_to_indices = {lab: np.where(self.labels == lab)[0] for lab in self.labels_set}
        self.n_classes, self.n_samples = n_classes, n_samples
        self.batch_size = n_classes * n_samples
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        count = 0
        while count + self.batch_size <= len(self.labels):
            classes = self.rng.choice(self.labels_set, self.n_classes, replace=False)
            indices = []
            for c in classes:
                indices.extend(self.rng.choice(self.label_to_indices[c], self.n_samples, replace=False).tolist())
            yield indices
            count += self.batch_size

    def __len__(self):
        return len(self.labels) // self.batch_size


class EmbeddingNet(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(6, 16), nn.PReLU(), nn.Linear(16, 16), nn.PReLU(), nn.Linear(16, dim))

    def forward(self, x):
        return F.normalize(self.fc(x), p=2, dim=1)


def batch_hard_triplets(emb, labels):
    dist = torch.cdist(emb, emb)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    hardest_pos = dist.masked_fill(~same, float("-inf")).max(1)[1]
    hardest_neg = dist.masked_fill(same, float("inf")).min(1)[1]
    return emb, emb[hardest_pos], emb[hardest_neg]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((5, 6)) * 2
    labels = rng.integers(0, 5, 80)
    x = (centers[labels] + rng.standard_normal((80, 6))).astype(np.float32)
    ds = TensorDataset(torch.from_numpy(x), torch.from_numpy(labels))
    loader = DataLoader(ds, batch_sampler=BalancedBatchSampler(labels, 3, 4, seed=1))
    model = EmbeddingNet()
    init = np.random.default_rng(2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "fc.1" in name or "fc.3" in name:
                continue     # PReLU slopes keep their 0.25
            p.copy_(torch.from_numpy(init.uniform(-0.4, 0.4, tuple(p.shape)).astype(np.float32)))
    triplet = nn.TripletMarginLoss(margin=0.2, p=2)
    cosine = nn.CosineEmbeddingLoss(margin=0.1)
    pdist = nn.PairwiseDistance(p=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    history = []
    for epoch in range(args.epochs):
        model.train()
        for xb, yb in loader:
            emb = model(xb)
            a, p, n = batch_hard_triplets(emb, yb)
            half = len(yb) // 2
            target = torch.where(yb[:half] == yb[half:2 * half], torch.tensor(1), torch.tensor(-1))
            loss = triplet(a, p, n) + 0.5 * cosine(emb[:half], emb[half:2 * half], target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append([loss.item(), pdist(a, n).mean().item(), len(yb)])
        scheduler.step()
        print(f"epoch {epoch}: loss {history[-1][0]:.4f} lr {scheduler.get_last_lr()[0]:.4f}")
    model.eval()
    embs, labs = [], []
    with torch.no_grad():
        for idx in BatchSampler(SequentialSampler(ds), batch_size=32, drop_last=False):
            xb, yb = ds[idx]
            embs.append(model(xb))
            labs.append(yb)
        emb, lab = torch.cat(embs), torch.cat(labs)
        sim = emb @ emb.T
        sim.fill_diagonal_(float("-inf"))
        nn_idx = sim.topk(1, dim=1).indices.squeeze(1)
        recall = (lab[nn_idx] == lab).float().mean().item()
    result = {"history": history, "recall@1": recall, "n_batches": len(loader), "emb_norms": emb.norm(dim=1)[:4].tolist()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
