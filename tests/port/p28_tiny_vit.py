"""A tiny Vision Transformer: Conv2d patch embedding, flatten(2).transpose(1, 2),
a learnable [CLS] token expanded over the batch and concatenated, learned position
embeddings (nn.init.trunc_normal_ replaced by NumPy values), pre-norm blocks written
by hand (qkv Linear, reshape/permute into heads, softmax attention, MLP with GELU),
torch.utils.checkpoint on one block, AdamW with a no-decay group for norms/biases."""

import math

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    from torch.utils.checkpoint import checkpoint  # noqa: F401

    ckpt = torch.utils.checkpoint.checkpoint
    D, H = 12, 3

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            attn = attn.softmax(dim=-1)
            x = (attn @ v).transpose(1, 2).reshape(B, N, C)
            return self.proj(x)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(D, eps=1e-6)
            self.attn = Attention()
            self.norm2 = nn.LayerNorm(D, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(approximate="tanh"), nn.Linear(2 * D, D))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(1, D, kernel_size=4, stride=4)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
            self.pos_embed = nn.Parameter(torch.zeros(1, 5, D))
            self.blocks = nn.ModuleList([Block(), Block()])
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, 3)

        def forward(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2)        # (B, 4, D)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat((cls, x), dim=1) + self.pos_embed
            x = ckpt(self.blocks[0], x, use_reentrant=False)
            x = self.blocks[1](x)
            return self.head(self.norm(x)[:, 0])

    rng = np.random.default_rng(28)
    model = ViT().double()
    with torch.no_grad():
        model.pos_embed.copy_(torch.from_numpy(np.clip(rng.standard_normal((1, 5, D)) * 0.02, -0.04, 0.04)))
        model.cls_token.copy_(torch.from_numpy(rng.standard_normal((1, 1, D)) * 0.02))
    shared.model(torch, "vit", model)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "pos_embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "pos_embed" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3, betas=(0.9, 0.95))
    imgs = torch.from_numpy(rng.standard_normal((4, 1, 8, 8)))
    labels = torch.from_numpy(rng.integers(0, 3, 4))
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(imgs), labels, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "groups": [len(decay), len(no_decay)],
            "cls": np_of(model.cls_token), "head": np_of(model.head.weight),
            "qkv_grad": np_of(model.blocks[0].attn.qkv.weight.grad)}
