"""Semi-supervised node classification with a two-layer GCN (Kipf & Welling) over a sparse
normalised adjacency: ``torch.sparse_coo_tensor``, ``torch.spmm`` / ``torch.sparse.mm`` /
``adj @ h`` in the layers, Adam with weight decay, masks for train/val/test, early stopping
on the validation loss.

    python s04_gcn_sparse.py --epochs 30 --out gcn.json
"""

import argparse
import json
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True, product="spmm"):
        super().__init__()
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        self.bias = Parameter(torch.FloatTensor(out_features)) if bias else None
        self.product = product
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        if self.product == "spmm":
            output = torch.spmm(adj, support)
        elif self.product == "sparse.mm":
            output = torch.sparse.mm(adj, support)
        else:
            output = adj @ support
        return output + self.bias if self.bias is not None else output

    def __repr__(self):
        return f"{self.__class__.__name__} ({self.weight.shape[0]} -> {self.weight.shape[1]})"


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout, product):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid, product=product)
        self.gc2 = GraphConvolution(nhid, nclass, product=product)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.gc2(x, adj), dim=1)


def make_graph(n_nodes, n_feat, n_class, seed):
    """Communities with dense inner links, a few links between them, noisy features."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_class, n_nodes)
    edges = set()
    for i in range(n_nodes):
        for j in rng.integers(0, n_nodes, 4):
            if i != j and (labels[i] == labels[j] or rng.random() < 0.1):
                edges.add((min(i, j), max(i, j)))
    edges = np.array(sorted(edges))
    feats = rng.standard_normal((n_nodes, n_feat)) * 0.8 + np.eye(n_class)[labels] @ rng.standard_normal((n_class, n_feat))
    return edges, feats.astype(np.float32), labels


def normalized_adjacency(edges, n):
    """D^-1/2 (A + I) D^-1/2 as a sparse COO tensor."""
    both = np.concatenate([edges, edges[:, ::-1], np.stack([np.arange(n)] * 2, 1)])
    index = torch.from_numpy(both.T.copy()).long()
    ones = torch.ones(index.size(1))
    deg = torch.zeros(n).scatter_add_(0, index[0], ones)
    d_inv_sqrt = deg.pow(-0.5)
    values = d_inv_sqrt[index[0]] * d_inv_sqrt[index[1]]
    return torch.sparse_coo_tensor(index, values, (n, n))


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    return preds.eq(labels).double().sum().item() / len(labels)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--no-cuda", action="store_true", default=False)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight_decay", type=float, default=5e-4)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--product", choices=["spmm", "sparse.mm", "matmul"], default="spmm")
    p.add_argument("--layout", choices=["coo", "csr"], default="coo")
    p.add_argument("--patience", type=int, default=5)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    edges, feats, labels_np = make_graph(120, 24, 3, args.seed)
    adj_coo = normalized_adjacency(edges, 120)
    adj = adj_coo.to_sparse_csr() if args.layout == "csr" else adj_coo
    features, labels = torch.from_numpy(feats), torch.LongTensor(labels_np)
    idx_train, idx_val, idx_test = torch.LongTensor(range(30)), torch.LongTensor(range(30, 60)), torch.LongTensor(range(60, 120))

    model = GCN(features.shape[1], args.hidden, int(labels.max()) + 1, args.dropout, args.product)
    rng = np.random.default_rng(args.seed)
    for prm in model.parameters():   # the same start in every framework
        prm.data = torch.from_numpy(rng.uniform(-0.25, 0.25, tuple(prm.shape)).astype(np.float32))
    optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    if args.cuda:
        model.cuda()
        features, adj, labels = features.cuda(), adj.cuda(), labels.cuda()

    history, best, bad = [], float("inf"), 0
    for _ in range(args.epochs):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        model.eval()
        output = model(features, adj)
        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        history.append([loss_train.item(), loss_val.item(), accuracy(output[idx_val], labels[idx_val])])
        if loss_val.item() < best - 1e-4:
            best, bad = loss_val.item(), 0
        else:
            bad += 1
            if bad >= args.patience:
                break
    model.eval()
    output = model(features, adj)
    result = {"history": history, "test_acc": accuracy(output[idx_test], labels[idx_test]),
              "nnz": adj._nnz(), "degree_sum": torch.sparse.sum(adj_coo).item(), "layers": repr(model.gc1)}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
