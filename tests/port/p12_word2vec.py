"""Skip-gram word2vec with negative sampling: two Embedding tables, bmm scores,
F.logsigmoid losses, SparseAdam-free plain SGD, and nearest neighbours by cosine
similarity (F.normalize + mm + topk)."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    corpus = ("the cat sat on the mat the dog sat on the log the cat saw the dog "
              "a cat and a dog are friends").split()
    vocab = sorted(set(corpus))
    w2i = {w: i for i, w in enumerate(vocab)}
    ids = [w2i[w] for w in corpus]
    pairs = [(ids[i], ids[j]) for i in range(len(ids)) for j in range(max(0, i - 2), min(len(ids), i + 3)) if i != j]
    rng = np.random.default_rng(12)
    pairs = np.array(pairs)[rng.permutation(len(pairs))]
    negatives = rng.integers(0, len(vocab), (len(pairs), 4))

    class SkipGram(nn.Module):
        def __init__(self, n, d):
            super().__init__()
            self.in_embed = nn.Embedding(n, d)
            self.out_embed = nn.Embedding(n, d)

        def forward(self, center, context, neg):
            v = self.in_embed(center)                          # (B, d)
            u = self.out_embed(context)                        # (B, d)
            un = self.out_embed(neg)                           # (B, K, d)
            pos = F.logsigmoid((v * u).sum(-1))
            negs = F.logsigmoid(-torch.bmm(un, v.unsqueeze(2)).squeeze(2)).sum(1)
            return -(pos + negs).mean()

    model = SkipGram(len(vocab), 6).double()
    shared.model(torch, "sg", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for start in range(0, len(pairs), 16):
        c = torch.from_numpy(pairs[start:start + 16, 0])
        o = torch.from_numpy(pairs[start:start + 16, 1])
        n = torch.from_numpy(negatives[start:start + 16])
        loss = model(c, o, n)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    emb = F.normalize(model.in_embed.weight.detach(), dim=1)
    sims = emb @ emb.t()
    sims.fill_diagonal_(-2.0)
    q = w2i["cat"]
    sims_q = sims[q]
    top = torch.topk(sims_q, 3)
    return {"losses": losses, "emb": np_of(emb), "nearest": [vocab[i] for i in top.indices.tolist()],
            "top_vals": np_of(top.values),
            "tri": [np_of(sims[:3, :3].clone().triu_(1)), np_of(sims[:3, :3].clone().tril_())]}
