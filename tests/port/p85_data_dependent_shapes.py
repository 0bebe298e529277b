"""Shapes that depend on the data: images of different sizes sent one at a time through a
CNN with ``F.pad`` by computed amounts (to a multiple of 4), ``F.interpolate`` to a
size computed from the input, ``adaptive_avg_pool2d`` / ``adaptive_max_pool2d``;
sentences of different lengths through ``Conv1d`` with a max-over-time
``F.max_pool1d(x, x.size(2))`` whose kernel is the length; a DeepSets encoder over
sets of different sizes; and capsule dynamic routing (3 iterations of a softmax
over ``einsum`` agreements, ``squash``)."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(85)
    images = [torch.from_numpy(rng.standard_normal((1, 2, h, w))) for h, w in ((5, 7), (8, 6), (6, 9))]
    sents = [torch.from_numpy(rng.standard_normal((1, 3, n))) for n in (4, 7, 5)]
    sets = [torch.from_numpy(rng.standard_normal((n, 2))) for n in (2, 6, 3)]
    y = torch.from_numpy(rng.integers(0, 3, 3))

    def squash(s, dim=-1):
        n2 = (s * s).sum(dim, keepdim=True)
        return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-9)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.conv1d = nn.Conv1d(3, 5, 2)
            self.phi = nn.Sequential(nn.Linear(2, 6), nn.ReLU(), nn.Linear(6, 6))
            self.rho = nn.Linear(6, 4)
            self.W = nn.Parameter(torch.from_numpy(rng.standard_normal((5, 3, 4, 4)) * 0.3))  # in caps, out caps
            self.cls = nn.Linear(3 * 4, 3)

        def image(self, x):
            H, W = x.shape[-2:]
            x = F.pad(x, (0, (-W) % 4, 0, (-H) % 4), mode="replicate")
            x = F.relu(self.conv(x))
            x = F.interpolate(x, size=(x.size(2) // 2, x.size(3) // 2), mode="bilinear", align_corners=False)
            return torch.cat([F.adaptive_avg_pool2d(x, (1, 1)).flatten(), F.adaptive_max_pool2d(x, 1).flatten()])

        def sentence(self, s):
            h = torch.tanh(self.conv1d(s))
            return F.max_pool1d(h, h.size(2)).squeeze(-1).squeeze(0)          # (5,)

        def deepset(self, xs):
            return self.rho(self.phi(xs).sum(0) / xs.size(0))

        def routing(self, u):                                # u (5 in caps, 4 dims)
            u_hat = torch.einsum("ijkl,il->ijk", self.W, u)    # (5, 3, 4)
            b = u.new_zeros(5, 3)
            for it in range(3):
                c = F.softmax(b, dim=1)
                v = squash((c.unsqueeze(-1) * u_hat).sum(0))   # (3, 4)
                if it < 2:
                    b = b + torch.einsum("ijk,jk->ij", u_hat, v)
            return v

        def forward(self, img, sent, st):
            feats = torch.cat([self.image(img)[:4], self.deepset(st)])        # 4 + 4 -> 8
            caps_in = torch.stack([feats[:4], feats[4:], self.sentence(sent)[:4], self.image(img)[4:],
                                   self.deepset(st) * 0.5])
            return self.cls(self.routing(caps_in).flatten())

    model = Net().double()
    shared.model(torch, "shapes", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _step in range(4):
        logits = torch.stack([model(i, s, st) for i, s, st in zip(images, sents, sets)])
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = model(images[1], sents[1], sets[1])
    (g,) = torch.autograd.grad(out.sum(), model.W, create_graph=True)
    (g2,) = torch.autograd.grad(g.pow(2).sum(), model.conv.weight)
    return {"losses": losses, "logits": np_of(logits), "g2": np_of(g2),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
