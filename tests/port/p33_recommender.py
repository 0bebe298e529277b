"""A recommender: matrix factorisation with user/item Embeddings and biases,
EmbeddingBag(mode="mean") over each user's history given as a flat index tensor with
offsets, nn.Bilinear interaction, BPR loss with F.logsigmoid, SparseAdam-free Adagrad,
and top-k recommendations excluding seen items via scatter_."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    n_users, n_items, d = 6, 10, 4
    rng = np.random.default_rng(33)
    hist_lens = rng.integers(1, 4, n_users)
    history = [rng.choice(n_items, L, replace=False) for L in hist_lens]
    flat = torch.from_numpy(np.concatenate(history))
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(hist_lens)[:-1]]))

    class MF(nn.Module):
        def __init__(self):
            super().__init__()
            self.user = nn.Embedding(n_users, d)
            self.item = nn.Embedding(n_items, d)
            self.user_bias = nn.Embedding(n_users, 1)
            self.item_bias = nn.Embedding(n_items, 1)
            self.hist = nn.EmbeddingBag(n_items, d, mode="mean")
            self.inter = nn.Bilinear(d, d, 1)

        def user_vec(self, users):
            h = self.hist(flat, offsets)[users]
            return self.user(users) + h

        def score(self, users, items):
            u = self.user_vec(users)
            v = self.item(items)
            return ((u * v).sum(-1) + self.user_bias(users).squeeze(-1) + self.item_bias(items).squeeze(-1)
                    + self.inter(u, v).squeeze(-1))

    model = MF().double()
    shared.model(torch, "mf", model)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    users = torch.from_numpy(rng.integers(0, n_users, 24))
    pos = torch.tensor([int(history[u][rng.integers(0, len(history[u]))]) for u in users.tolist()])
    neg = torch.from_numpy(rng.integers(0, n_items, 24))
    losses = []
    for _ in range(5):
        loss = -F.logsigmoid(model.score(users, pos) - model.score(users, neg)).mean()
        loss = loss + 1e-3 * (model.user.weight.norm() ** 2 + model.item.weight.norm() ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        all_u = torch.arange(n_users)
        scores = model.score(all_u.repeat_interleave(n_items), torch.arange(n_items).repeat(n_users)).view(n_users, n_items)
        seen = torch.zeros(n_users, n_items, dtype=torch.bool)
        for u, items in enumerate(history):
            seen[u].scatter_(0, torch.from_numpy(items), True)
        recs = scores.masked_fill(seen, float("-inf")).topk(3, dim=1).indices
    return {"losses": losses, "scores": np_of(scores), "recs": recs.tolist(),
            "bag": np_of(model.hist(flat, offsets))}
