"""A makemore-style family of character models over a list of names: bigram table, MLP
(Bengio et al.), RNN and GRU cells unrolled in Python, a bag-of-words causal model and a
small transformer; ``--type`` picks one.  The data pipeline is a ``Dataset`` subclass and
the popular "infinite" loader ``RandomSampler(replacement=True, num_samples=int(1e10))``.

    python s03_makemore.py --type mlp --max-steps 20 --out mm.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler

NAMES = ("emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily "
         "elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace").split()


class CharDataset(Dataset):
    def __init__(self, words, chars, max_word_length):
        self.words, self.chars, self.max_word_length = words, chars, max_word_length
        self.stoi = {ch: i + 1 for i, ch in enumerate(chars)}

    def __len__(self):
        return len(self.words)

    def get_vocab_size(self):
        return len(self.chars) + 1

    def get_output_length(self):
        return self.max_word_length + 1

    def encode(self, word):
        return torch.tensor([self.stoi[w] for w in word], dtype=torch.long)

    def __getitem__(self, idx):
        ix = self.encode(self.words[idx])
        x = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        y = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        x[1:1 + len(ix)] = ix
        y[:len(ix)] = ix
        y[len(ix) + 1:] = -1  # mask the loss at the inactive locations
        return x, y


class Bigram(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros((vocab_size, vocab_size)))

    def forward(self, idx, targets=None):
        logits = self.logits[idx]
        return logits, _loss(logits, targets)


class MLP(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd):
        super().__init__()
        self.block_size, self.vocab_size = block_size, vocab_size
        self.wte = nn.Embedding(vocab_size + 1, n_embd)  # +1 for a special <BLANK> token
        self.mlp = nn.Sequential(nn.Linear(block_size * n_embd, 4 * n_embd), nn.Tanh(),
                                 nn.Linear(4 * n_embd, vocab_size))

    def forward(self, idx, targets=None):
        embs = []
        for _ in range(self.block_size):
            embs.append(self.wte(idx))
            idx = torch.roll(idx, 1, 1)
            idx[:, 0] = self.vocab_size  # special <BLANK> token
        logits = self.mlp(torch.cat(embs, -1))
        return logits, _loss(logits, targets)


class RNNCell(nn.Module):
    def __init__(self, n_embd, n_hidden):
        super().__init__()
        self.xh_to_h = nn.Linear(n_embd + n_hidden, n_hidden)

    def forward(self, xt, hprev):
        return F.tanh(self.xh_to_h(torch.cat([xt, hprev], dim=1)))


class GRUCell(nn.Module):
    def __init__(self, n_embd, n_hidden):
        super().__init__()
        self.xh_to_z = nn.Linear(n_embd + n_hidden, n_hidden)
        self.xh_to_r = nn.Linear(n_embd + n_hidden, n_hidden)
        self.xh_to_hbar = nn.Linear(n_embd + n_hidden, n_hidden)

    def forward(self, xt, hprev):
        xh = torch.cat([xt, hprev], dim=1)
        r = F.sigmoid(self.xh_to_r(xh))
        hbar = F.tanh(self.xh_to_hbar(torch.cat([xt, r * hprev], dim=1)))
        z = F.sigmoid(self.xh_to_z(xh))
        return (1 - z) * hprev + z * hbar


class RNN(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd, cell_type):
        super().__init__()
        self.start = nn.Parameter(torch.zeros(1, n_embd))
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.cell = RNNCell(n_embd, n_embd) if cell_type == "rnn" else GRUCell(n_embd, n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        emb = self.wte(idx)
        hprev = self.start.expand((b, -1))
        hiddens = []
        for i in range(t):
            hprev = self.cell(emb[:, i, :], hprev)
            hiddens.append(hprev)
        logits = self.lm_head(torch.stack(hiddens, 1))
        return logits, _loss(logits, targets)


class CausalBoW(nn.Module):
    def __init__(self, block_size):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        att = torch.zeros((B, T, T), device=x.device)
        att = att.masked_fill(self.bias[:, :T, :T] == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ x


class BoW(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.cbow = CausalBoW(block_size)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(n_embd, 4 * n_embd), c_proj=nn.Linear(4 * n_embd, n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.cbow(x)
        x = x + self.mlp.c_proj(F.tanh(self.mlp.c_fc(x)))
        logits = self.lm_head(x)
        return logits, _loss(logits, targets)


class Transformer(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        layer = nn.TransformerEncoderLayer(n_embd, 2, 4 * n_embd, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.lm_head = nn.Linear(n_embd, vocab_size)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(block_size))

    def forward(self, idx, targets=None):
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        logits = self.lm_head(self.blocks(x, mask=self.mask[:t, :t], is_causal=True))
        return logits, _loss(logits, targets)


def _loss(logits, targets):
    if targets is None:
        return None
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


class InfiniteDataLoader:
    """Batches forever, as makemore's loop draws them."""

    def __init__(self, dataset, **kwargs):
        sampler = RandomSampler(dataset, replacement=True, num_samples=int(1e10))
        self.train_loader = DataLoader(dataset, sampler=sampler, **kwargs)
        self.data_iter = iter(self.train_loader)

    def next(self):
        try:
            return next(self.data_iter)
        except StopIteration:
            self.data_iter = iter(self.train_loader)
            return next(self.data_iter)


@torch.inference_mode()
def evaluate(model, dataset, batch_size=8):
    model.eval()
    loader = DataLoader(dataset, shuffle=False, batch_size=batch_size, num_workers=0)
    losses = [model(X, Y)[1].item() for X, Y in loader]
    model.train()
    return float(np.mean(losses))


def main():
    p = argparse.ArgumentParser(description="makemore-style")
    p.add_argument("--type", type=str, default="transformer",
                   choices=["bigram", "mlp", "rnn", "gru", "bow", "transformer"])
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--n-embd", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=5e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--sampler", choices=["random", "ordered"], default="random")
    p.add_argument("--seed", type=int, default=3407)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)

    chars = sorted(set("".join(NAMES)))
    max_len = max(len(w) for w in NAMES)
    train_ds = CharDataset(NAMES[:20], chars, max_len)
    test_ds = CharDataset(NAMES[20:], chars, max_len)
    vocab, block = train_ds.get_vocab_size(), train_ds.get_output_length()
    makers = {"bigram": lambda: Bigram(vocab, block, args.n_embd), "mlp": lambda: MLP(vocab, block, args.n_embd),
              "rnn": lambda: RNN(vocab, block, args.n_embd, "rnn"), "gru": lambda: RNN(vocab, block, args.n_embd, "gru"),
              "bow": lambda: BoW(vocab, block, args.n_embd), "transformer": lambda: Transformer(vocab, block, args.n_embd)}
    model = makers[args.type]()
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for name, prm in model.named_parameters():
            fill = rng.normal(0.0, 0.3, size=tuple(prm.shape))
            if "norm" in name:
                fill = 1.0 + 0.0 * fill if name.endswith("weight") else 0.0 * fill
            prm.copy_(torch.from_numpy(fill))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay,
                                  betas=(0.9, 0.99), eps=1e-8)
    if args.sampler == "random":
        loader = InfiniteDataLoader(train_ds, batch_size=args.batch_size, pin_memory=True, num_workers=0)
        next_batch = loader.next
    else:
        order = iter(BatchSampler(SequentialSampler(range(len(train_ds) * args.max_steps)), args.batch_size, False))

        def next_batch():
            xs, ys = zip(*(train_ds[i % len(train_ds)] for i in next(order)))
            return torch.stack(xs), torch.stack(ys)

    losses = []
    for _ in range(args.max_steps):
        X, Y = next_batch()
        _, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    result = {"type": args.type, "finite": bool(np.isfinite(losses).all()), "test_loss": evaluate(model, test_ds),
              "nparams": sum(p.numel() for p in model.parameters())}
    if args.sampler == "ordered":
        result["losses"] = losses
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
