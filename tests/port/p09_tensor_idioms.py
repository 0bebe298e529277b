"""Tensor-level idioms people write every day, each checked against PyTorch."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    F = torch.nn.functional
    device = torch.device("cpu")
    rng = np.random.default_rng(7)
    out = {}
    x = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4)
    out["shape"] = [x.shape[0], x.size(1), x.dim(), len(x), x.numel()]
    out["size_eq"] = [x.shape == (2, 3, 4), x.size() == torch.Size([2, 3, 4]), tuple(x.shape)]
    out["iter"] = [row.sum().item() for row in x]
    out["T"] = np_of(x[0].T)
    a = torch.from_numpy(rng.standard_normal((3, 4)))
    b = torch.from_numpy(rng.standard_normal((4, 2)))
    out["matmul"] = np_of(a @ b)
    out["new"] = [np_of(a.new_zeros(2, 3)), np_of(a.new_ones((2,))), np_of(a.new_tensor([1, 2])),
                  np_of(a.new_full((2, 2), 7.0)), list(a.new_empty(3, 1).shape)]
    out["new_dtypes"] = [a.new_zeros(1).dtype == torch.float64, a.new_tensor([1, 2]).dtype == a.dtype,
                         a.new_full((1,), 3).dtype is torch.float64, a.new_tensor([1]).dtype != torch.long]
    i = torch.tensor([1, 2, 3])
    out["type_as"] = i.type_as(a).dtype == torch.float64
    out["to_device"] = np_of(a.to(device))
    out["casts"] = [a.float().dtype == torch.float32, a.long().dtype == torch.int64,
                    i.double().dtype == torch.double, torch.zeros(2, dtype=torch.long).dtype == torch.long,
                    a.is_floating_point(), i.is_floating_point()]
    out["expand"] = np_of(i.unsqueeze(-1).expand(3, 4))
    out["einsum"] = np_of(torch.einsum("ij,jk->ik", a, b))
    out["einsum_batched"] = np_of(torch.einsum("bij,bkj->bik", x, x))
    idx = torch.tensor([[0, 3], [1, 1], [2, 0]])
    out["gather"] = np_of(torch.gather(a, 1, idx))
    s = torch.zeros(3, 4, dtype=torch.float64)
    s.scatter_(1, idx, 1.0)
    out["scatter_"] = np_of(s)
    out["scatter_src"] = np_of(torch.zeros(3, 4).scatter(1, idx, torch.ones(3, 2)))
    vals, inds = torch.topk(a, k=2, dim=1)
    out["topk"] = [np_of(vals), inds.tolist()]
    out["argmax"] = a.argmax(dim=1).tolist()
    out["max_values"] = np_of(a.max(dim=1).values)
    out["max_indices"] = a.max(dim=1)[1].tolist()
    out["stack"] = np_of(torch.stack([a, a * 2], dim=1))
    out["chunk"] = [np_of(c) for c in torch.chunk(a, 2, dim=1)]
    out["split"] = [list(c.shape) for c in a.split(3, dim=1)]
    out["clamp"] = np_of(a.clamp(min=0.0))
    mask = a > 0
    out["masked_fill"] = np_of(a.masked_fill(~mask, float("-inf")).softmax(-1))
    out["one_hot"] = np_of(F.one_hot(torch.tensor([0, 2, 1]), num_classes=4))
    out["pad"] = np_of(F.pad(a, (1, 2), value=-1.0))
    out["pad2d"] = np_of(F.pad(x, (1, 1, 2, 0)))
    out["normalize"] = np_of(F.normalize(a, p=2, dim=1))
    out["cos"] = np_of(F.cosine_similarity(a, a.flip(0), dim=1))
    pts = torch.from_numpy(rng.standard_normal((5, 3)))
    ctr = torch.from_numpy(rng.standard_normal((2, 3)))
    out["cdist"] = np_of(torch.cdist(pts, ctr))
    out["cdist_argmin"] = torch.cdist(pts, ctr).argmin(dim=1).tolist()
    causal = torch.triu(torch.ones(4, 4), diagonal=1).bool()
    out["causal"] = causal.tolist()
    c = a.clone()
    c.add_(1.0)
    c.mul_(2)
    c[c > 2] = 0
    c[:, 0] = torch.tensor([9.0, 8.0, 7.0], dtype=torch.float64)
    out["inplace"] = np_of(c)
    out["item"] = [a.sum().item(), a[0, 0].item(), i.sum().item()]
    out["tolist"] = i.tolist()
    out["allclose"] = [torch.allclose(a, a + 1e-12), torch.allclose(a, a + 1)]
    out["is_tensor"] = [torch.is_tensor(a), torch.is_tensor(np_of(a))]
    out["numpy"] = a.numpy().sum().item()
    out["where"] = np_of(torch.where(a > 0, a, torch.zeros_like(a)))
    out["nonzero"] = torch.nonzero(mask).tolist()
    out["bool_idx"] = np_of(a[mask])
    out["fancy"] = np_of(x[[0, 1], [2, 0]])
    out["ellipsis"] = np_of(x[..., 1:3])
    out["none"] = list(a[None, :, None].shape)
    out["cumsum"] = np_of(a.cumsum(dim=1))
    out["sort"] = a.sort(dim=1, descending=True).indices.tolist()
    out["mean_std"] = [np_of(a.mean(0)), np_of(a.std(0)), np_of(a.var(1, unbiased=False))]
    out["logsumexp"] = np_of(torch.logsumexp(a, dim=1))
    out["repeat"] = np_of(i.repeat(2, 1))
    out["repeat_interleave"] = i.repeat_interleave(2).tolist()
    out["flatten"] = list(torch.flatten(x, start_dim=1).shape)
    out["squeeze"] = list(x[:, :1].squeeze(1).shape)
    out["int_ops"] = [(i // 2).tolist(), (i % 2).tolist(), (i / 2).tolist(), (i * 1.5).tolist()]
    out["dtype_promote"] = [(i + a[0, :3]).dtype == torch.float64, (i * 1.5).dtype == torch.get_default_dtype()]
    out["comparisons"] = [(i > 1).tolist(), (i == 2).any().item(), (i >= 1).all().item()]
    out["arange_float"] = torch.arange(0, 1, 0.25).tolist()
    out["linspace"] = torch.linspace(0, 1, steps=5).tolist()
    out["full"] = np_of(torch.full((2, 2), 3.5))
    out["eye"] = np_of(torch.eye(3, dtype=torch.float64))
    out["unbind"] = [r.tolist() for r in i.unsqueeze(0).unbind(1)]
    out["masked_select"] = torch.masked_select(i, i > 1).tolist()
    out["float_of"] = [float(a[0, 0]), int(i[1]), bool(i[0] == 1)]
    out["index_select"] = np_of(a.index_select(1, torch.tensor([0, 3])))
    out["mT"] = np_of(x.transpose(-2, -1))
    return out
