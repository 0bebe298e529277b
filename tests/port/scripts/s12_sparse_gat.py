"""A sparse graph attention network: per-edge attention logits from the two endpoint
features, ``exp`` of the LeakyReLU scores as the values of a ``torch.sparse_coo_tensor``,
aggregation and normalisation by sparse products — once through ``torch.sparse.mm``
(autograd through the values) and once through a custom ``autograd.Function`` that
multiplies a sparse matrix by a dense one and returns the gradient of the values, as
sparse GAT implementations do.  Multi-head, ELU, ``log_softmax`` output, Adam.

    python s12_sparse_gat.py --product function --epochs 10 --out gat.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class SparseDenseMatmul(torch.autograd.Function):
    """(sparse indices, values, shape) @ dense, differentiable in the values and the dense side."""

    @staticmethod
    def forward(ctx, indices, values, shape, b):
        assert indices.requires_grad is False
        a = torch.sparse_coo_tensor(indices, values, shape)
        ctx.save_for_backward(indices, b)
        ctx.shape = shape
        ctx.values = values
        return torch.sparse.mm(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        indices, b = ctx.saved_tensors
        grad_values = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_values = (grad_output[indices[0]] * b[indices[1]]).sum(1)
        if ctx.needs_input_grad[3]:
            a_t = torch.sparse_coo_tensor(indices.flip(0), ctx.values, ctx.shape[::-1])
            grad_b = torch.sparse.mm(a_t, grad_output)
        return None, grad_values, None, grad_b


class SpGraphAttentionLayer(nn.Module):
    def __init__(self, in_features, out_features, dropout, alpha, concat=True, product="mm"):
        super().__init__()
        self.W = nn.Parameter(torch.zeros(size=(in_features, out_features)))
        self.a = nn.Parameter(torch.zeros(size=(1, 2 * out_features)))
        self.dropout, self.concat, self.product = dropout, concat, product
        self.leakyrelu = nn.LeakyReLU(alpha)

    def spmm(self, indices, values, shape, b):
        if self.product == "function":
            return SparseDenseMatmul.apply(indices, values, shape, b)
        return torch.sparse.mm(torch.sparse_coo_tensor(indices, values, shape), b)

    def forward(self, input, edge):
        N = input.size(0)
        h = torch.mm(input, self.W)
        edge_h = torch.cat((h[edge[0, :], :], h[edge[1, :], :]), dim=1).t()
        edge_e = torch.exp(-self.leakyrelu(self.a.mm(edge_h).squeeze()))
        e_rowsum = self.spmm(edge, edge_e, (N, N), torch.ones(size=(N, 1), dtype=h.dtype))
        edge_e = F.dropout(edge_e, self.dropout, training=self.training)
        h_prime = self.spmm(edge, edge_e, (N, N), h).div(e_rowsum)
        return F.elu(h_prime) if self.concat else h_prime


class SpGAT(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout, alpha, nheads, product):
        super().__init__()
        self.dropout = dropout
        self.attentions = nn.ModuleList([SpGraphAttentionLayer(nfeat, nhid, dropout, alpha, True, product)
                                         for _ in range(nheads)])
        self.out_att = SpGraphAttentionLayer(nhid * nheads, nclass, dropout, alpha, False, product)

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, training=self.training)
        x = torch.cat([att(x, adj) for att in self.attentions], dim=1)
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(F.elu(self.out_att(x, adj)), dim=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight_decay", type=float, default=5e-4)
    p.add_argument("--hidden", type=int, default=4)
    p.add_argument("--nb_heads", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.6)
    p.add_argument("--alpha", type=float, default=0.2)
    p.add_argument("--product", choices=["mm", "function"], default="mm")
    p.add_argument("--seed", type=int, default=72)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    n, nfeat, nclass = 60, 10, 3
    labels_np = rng.integers(0, nclass, n)
    src = rng.integers(0, n, 240)
    dst = np.where(rng.random(240) < 0.8, [rng.choice(np.flatnonzero(labels_np == labels_np[s])) for s in src],
                   rng.integers(0, n, 240))
    pairs = np.unique(np.concatenate([np.stack([src, dst], 1), np.stack([dst, src], 1),
                                      np.stack([np.arange(n)] * 2, 1)]), axis=0)
    edge = torch.from_numpy(pairs.T.copy()).long()
    features = torch.from_numpy(rng.standard_normal((n, nfeat)) + np.eye(nclass)[labels_np] @ rng.standard_normal((nclass, nfeat)))
    labels = torch.from_numpy(labels_np)
    model = SpGAT(nfeat, args.hidden, nclass, args.dropout, args.alpha, args.nb_heads, args.product).double()
    init = np.random.default_rng(0)
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(torch.from_numpy(init.normal(0, 0.5, tuple(prm.shape))))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    idx_train, idx_val = torch.arange(0, 30), torch.arange(30, 60)
    history = []
    for _ in range(args.epochs):
        model.train()
        optimizer.zero_grad()
        output = model(features, edge)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            output = model(features, edge)
        acc = (output[idx_val].argmax(1) == labels[idx_val]).double().mean().item()
        history.append([loss_train.item(), F.nll_loss(output[idx_val], labels[idx_val]).item(), acc])
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"history": history, "edges": int(edge.size(1))}, f)


if __name__ == "__main__":
    main()
