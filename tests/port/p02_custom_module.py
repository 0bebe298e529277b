"""A custom nn.Module whose forward mixes cat, view, permute, indexing, where,
relu, softmax and masked_fill; one training step's output, loss and gradients."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional

    class Mixer(nn.Module):
        def __init__(self, d_in, d_hid, n_out):
            super().__init__()
            self.proj = nn.Linear(d_in, d_hid)
            self.gate = nn.Linear(2 * d_hid, d_hid, bias=False)
            self.head = nn.Linear(d_hid, n_out)
            self.register_buffer("scale", torch.tensor(0.5, dtype=torch.float64))

        def forward(self, x, mask):
            b, t, _ = x.shape
            h = F.relu(self.proj(x))                       # (b, t, h)
            pooled = h.mean(dim=1, keepdim=True).expand(-1, t, -1)
            z = torch.cat([h, pooled], dim=-1)             # (b, t, 2h)
            g = torch.sigmoid(self.gate(z))
            h = torch.where(g > 0.5, h * g, h * self.scale)
            scores = h.permute(0, 2, 1).contiguous()       # (b, h, t)
            scores = scores.view(b, -1, t).sum(1)          # (b, t)
            scores = scores.masked_fill(~mask, float("-inf"))
            attn = F.softmax(scores, dim=-1)
            ctx = (attn.unsqueeze(-1) * h).sum(dim=1)      # (b, h)
            first = h[:, 0, :]
            last = h[torch.arange(b), mask.long().sum(1) - 1]
            return self.head(ctx + first - last), attn

    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((4, 5, 6)))
    lengths = np.array([5, 3, 4, 1])
    mask = torch.from_numpy(np.arange(5)[None, :] < lengths[:, None])
    target = torch.tensor([0, 2, 1, 2])
    model = Mixer(6, 8, 3).double()
    shared.model(torch, "mixer", model)
    logits, attn = model(x, mask)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    out = {"logits": np_of(logits), "attn": np_of(attn), "loss": loss.item()}
    out["grads"] = {n: np_of(p.grad) for n, p in model.named_parameters()}
    out["buffers"] = [n for n, _ in model.named_buffers()]
    out["n_params"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return out
