"""Hogwild training with ``torch.multiprocessing``: the model's parameters are moved to
shared memory and several processes update them in place with their own optimizer.
``--mode rounds`` runs the workers one after another (deterministic, each sees the
previous one's updates); ``--mode hogwild`` runs them at once.

    python s05_hogwild.py --num-processes 2 --mode rounds --out hog.json
"""

import argparse
import json

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def make_data(seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    y = (np.sin(X[:, :1]) + X[:, 1:2] * X[:, 2:3]).astype(np.float32)
    return torch.from_numpy(X), torch.from_numpy(y)


def train(rank, args, model, X, y):
    torch.manual_seed(args.seed + rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    shard = slice(rank * 16, rank * 16 + 16)
    for _ in range(args.epochs):
        for start in range(shard.start, shard.stop, 8):
            optimizer.zero_grad()
            loss = F.mse_loss(model(X[start:start + 8]), y[start:start + 8])
            loss.backward()
            optimizer.step()


def main():
    p = argparse.ArgumentParser(description="Hogwild")
    p.add_argument("--num-processes", type=int, default=2)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mode", choices=["rounds", "hogwild"], default="hogwild")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    X, y = make_data(args.seed)
    model = Net()
    rng = np.random.default_rng(args.seed)
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(torch.from_numpy(rng.uniform(-0.4, 0.4, tuple(prm.shape))))
    model.share_memory()  # gradients are allocated lazily and are not shared
    before = F.mse_loss(model(X), y).item()
    ctx = mp.get_context("fork")
    if args.mode == "rounds":
        for rank in range(args.num_processes):
            proc = ctx.Process(target=train, args=(rank, args, model, X, y))
            proc.start()
            proc.join()
    else:
        processes = []
        for rank in range(args.num_processes):
            proc = ctx.Process(target=train, args=(rank, args, model, X, y))
            proc.start()
            processes.append(proc)
        for proc in processes:
            proc.join()
    exitcodes = [0] * args.num_processes if args.mode == "rounds" else [q.exitcode for q in processes]
    after = F.mse_loss(model(X), y).item()
    result = {"shared": model.fc1.weight.is_shared(), "improved": after < before, "exitcodes": exitcodes}
    if args.mode == "rounds":
        result.update(before=before, after=after, weight=model.fc2.weight.detach().numpy().ravel().tolist())
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
