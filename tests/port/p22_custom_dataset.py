"""Custom data pipelines: a map-style Dataset subclass returning dicts, an
IterableDataset, DataLoader with batch_size/drop_last, a custom collate_fn padding
variable-length sequences, BatchSampler over a SequentialSampler, Subset and
ConcatDataset; a small model trained over the loader."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    from torch.utils.data import Dataset  # noqa: F401  (the port changes only this import root)

    data = torch.utils.data
    nn = torch.nn
    rng = np.random.default_rng(22)

    class PointsDataset(data.Dataset):
        def __init__(self, n):
            self.x = rng.standard_normal((n, 3))
            self.y = (self.x.sum(1) > 0).astype(np.int64)

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"x": torch.from_numpy(self.x[i]), "y": int(self.y[i]), "id": i}

    class Counter(data.IterableDataset):
        def __iter__(self):
            for i in range(7):
                yield torch.tensor([float(i), float(i * i)], dtype=torch.float64)

    ds = PointsDataset(22)
    loader = data.DataLoader(ds, batch_size=5, shuffle=False, drop_last=True)
    out = {"n_batches": len(loader)}
    first = next(iter(loader))
    out["first_keys"] = sorted(first.keys())
    out["first_types"] = [torch.is_tensor(first["x"]), torch.is_tensor(first["y"]), first["y"].dtype == torch.int64]
    out["first_x"] = np_of(first["x"])
    out["first_ids"] = first["id"].tolist()
    out["iterable"] = [np_of(b) for b in data.DataLoader(Counter(), batch_size=3)]

    def pad_collate(batch):
        seqs, labels = zip(*batch)
        lengths = torch.tensor([len(s) for s in seqs])
        padded = nn.utils.rnn.pad_sequence(list(seqs), batch_first=True)
        return padded, lengths, torch.tensor(labels)

    seqs = [(torch.from_numpy(rng.standard_normal(L)), L % 2) for L in (3, 1, 4, 2, 5, 2)]
    sampler = data.BatchSampler(data.SequentialSampler(seqs), batch_size=4, drop_last=False)
    batches = list(data.DataLoader(seqs, batch_sampler=sampler, collate_fn=pad_collate))
    out["collated"] = [(np_of(p), lens.tolist(), lab.tolist()) for p, lens, lab in batches]
    both = data.ConcatDataset([data.Subset(ds, [0, 2, 4]), data.Subset(ds, list(range(10, 13)))])
    out["concat"] = [both[i]["id"] for i in range(len(both))]

    model = nn.Sequential(nn.Linear(3, 8), nn.Hardtanh(), nn.Linear(8, 2)).double()
    shared.model(torch, "m", model)
    opt = torch.optim.Adamax(model.parameters(), lr=0.05)
    losses = []
    for _epoch in range(2):
        for batch in loader:
            logits = model(batch["x"])
            loss = nn.functional.cross_entropy(logits, batch["y"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    out["losses"] = losses
    return out
