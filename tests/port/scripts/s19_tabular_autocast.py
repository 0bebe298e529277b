"""A tabular model as Kaggle-style notebooks write it: a ``Dataset`` over a NumPy table with
categorical and continuous columns, ``random_split(..., generator=torch.Generator().manual_seed(42))``,
``nn.Embedding`` per categorical column, ``BatchNorm1d`` + ``Dropout`` MLP, ``BCEWithLogitsLoss(
pos_weight=...)``, training under ``torch.autocast(device_type="cpu", dtype=torch.bfloat16,
enabled=args.amp)`` with ``torch.amp.GradScaler(enabled=False)``, early stopping on the validation
loss with ``copy.deepcopy(model.state_dict())``, ``torch.sigmoid(...) > 0.5`` predictions, and a
``state_dict`` round trip through ``torch.save``/``torch.load(weights_only=True)``.

    python s19_tabular_autocast.py --epochs 4 --split ordered --out tab.json
"""

import argparse
import copy
import json

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, Subset, random_split


class TabularDataset(Dataset):
    def __init__(self, cats, conts, y):
        self.cats = torch.tensor(cats, dtype=torch.long)
        self.conts = torch.tensor(conts, dtype=torch.float32)
        self.y = torch.tensor(y, dtype=torch.float32).unsqueeze(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, idx):
        return self.cats[idx], self.conts[idx], self.y[idx]


class TabularModel(nn.Module):
    def __init__(self, emb_szs, n_cont, out_sz, layers, p=0.0):
        super().__init__()
        self.embeds = nn.ModuleList([nn.Embedding(ni, nf) for ni, nf in emb_szs])
        self.emb_drop = nn.Dropout(p)
        self.bn_cont = nn.BatchNorm1d(n_cont)
        layerlist = []
        n_emb = sum(nf for ni, nf in emb_szs)
        n_in = n_emb + n_cont
        for i in layers:
            layerlist.append(nn.Linear(n_in, i))
            layerlist.append(nn.ReLU(inplace=True))
            layerlist.append(nn.BatchNorm1d(i))
            layerlist.append(nn.Dropout(p))
            n_in = i
        layerlist.append(nn.Linear(layers[-1], out_sz))
        self.layers = nn.Sequential(*layerlist)

    def forward(self, x_cat, x_cont):
        embeddings = []
        for i, e in enumerate(self.embeds):
            embeddings.append(e(x_cat[:, i]))
        x = torch.cat(embeddings, 1)
        x = self.emb_drop(x)
        x_cont = self.bn_cont(x_cont)
        x = torch.cat([x, x_cont], 1)
        return self.layers(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--split", choices=["random", "ordered"], default="random")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    n = 120
    cats = np.stack([rng.integers(0, 5, n), rng.integers(0, 3, n)], 1)
    conts = rng.standard_normal((n, 3)) * [1.0, 10.0, 0.1] + [0.0, 50.0, 1.0]
    y = ((cats[:, 0] >= 2) ^ (conts[:, 0] > 0.3)).astype(np.float64)
    ds = TabularDataset(cats, conts, y)
    if args.split == "random":
        train_ds, val_ds, test_ds = random_split(ds, [0.7, 0.15, 0.15], generator=torch.Generator().manual_seed(42))
    else:
        train_ds, val_ds, test_ds = Subset(ds, range(84)), Subset(ds, range(84, 102)), Subset(ds, range(102, 120))
    sizes = [len(train_ds), len(val_ds), len(test_ds)]
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=False, drop_last=True)
    val_loader = DataLoader(val_ds, batch_size=64)
    test_loader = DataLoader(test_ds, batch_size=64)

    model = TabularModel([(5, 3), (3, 2)], 3, 1, [16, 8]).to(device)
    init = np.random.default_rng(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1 or name.endswith("bias") and "layers" in name and p.numel() != 16 and p.numel() != 8:
                p.copy_(torch.from_numpy(init.normal(0, 0.4, tuple(p.shape)).astype(np.float32)))
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.bias.zero_()
    pos_weight = torch.tensor([(1 - y.mean()) / y.mean()], dtype=torch.float32)
    criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler(enabled=False)
    best_loss, best_state, patience, bad = float("inf"), None, 2, 0
    history = []
    for epoch in range(args.epochs):
        model.train()
        losses = []
        for x_cat, x_cont, target in train_loader:
            x_cat, x_cont, target = x_cat.to(device), x_cont.to(device), target.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=args.amp):
                output = model(x_cat, x_cont)
                loss = criterion(output.float(), target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val_loss = sum(criterion(model(c, x), t).item() * len(t) for c, x, t in val_loader) / len(val_ds)
        history.append({"train": losses, "val": val_loss})
        print(f"Epoch {epoch + 1}: train {np.mean(losses):.4f} val {val_loss:.4f}")
        if val_loss < best_loss:
            best_loss, best_state, bad = val_loss, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= patience:
                print("early stopping")
                break
    torch.save(best_state, "best.pt")
    model.load_state_dict(torch.load("best.pt", weights_only=True))
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for c, x, t in test_loader:
            preds = (torch.sigmoid(model(c, x)) > 0.5).float()
            correct += (preds == t).sum().item()
            total += t.size(0)
    result = {"sizes": sizes, "history": history, "best": best_loss, "test_acc": correct / total,
              "bn_mean": model.bn_cont.running_mean.tolist(), "epochs_run": len(history)}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
