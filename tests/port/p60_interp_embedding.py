"""`F.interpolate` in every mode (sizes, scale factors, align_corners, 1-d/2-d/3-d),
`F.embedding` with `padding_idx` and `max_norm`, `nn.Embedding.from_pretrained(freeze=...)`,
`F.softmax` over other dims, `F.one_hot` inference, `F.pad` modes."""

import numpy as np

from tests.port import np_of

RTOL = 1e-10


def run(torch, shared):
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(5)
    out = {}
    x1 = rng.standard_normal((2, 3, 5))
    x2 = rng.standard_normal((1, 2, 4, 5))
    x3 = rng.standard_normal((1, 1, 2, 3, 4))
    cases = [
        (x1, {"size": 8, "mode": "nearest"}), (x1, {"scale_factor": 1.5, "mode": "nearest"}),
        (x1, {"size": 9, "mode": "linear", "align_corners": False}),
        (x1, {"size": 9, "mode": "linear", "align_corners": True}),
        (x1, {"size": 3, "mode": "linear"}), (x1, {"size": 7, "mode": "nearest-exact"}),
        (x1, {"size": 2, "mode": "area"}),
        (x2, {"size": (7, 3), "mode": "bilinear", "align_corners": False}),
        (x2, {"scale_factor": 2, "mode": "bilinear", "align_corners": True}),
        (x2, {"scale_factor": (0.5, 2.0), "mode": "nearest"}), (x2, {"size": (3, 2), "mode": "area"}),
        (x2, {"size": (6, 7), "mode": "bicubic", "align_corners": False}),
        (x2, {"size": (6, 7), "mode": "bicubic", "align_corners": True}),
        (x2, {"scale_factor": 1.7, "mode": "bilinear", "recompute_scale_factor": True}),
        (x3, {"size": (3, 4, 6), "mode": "trilinear"}), (x3, {"scale_factor": 2, "mode": "nearest"}),
    ]
    for k, (arr, kw) in enumerate(cases):
        t = torch.tensor(arr, requires_grad=True)
        y = F.interpolate(t, **kw)
        (y * torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape).cos()).sum().backward()
        out[f"interp{k}_{kw['mode']}"] = [np_of(y), np_of(t.grad)]
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    out["upsample"] = [np_of(up(torch.tensor(x2))), repr(up)]
    W = torch.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    idx = torch.tensor([[0, 2, 2], [5, 0, 1]])
    e = F.embedding(idx, W, padding_idx=2)
    (e * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
    out["embedding_padding"] = [np_of(e), np_of(W.grad)]
    Wm = torch.tensor(rng.standard_normal((6, 3)) * 3)
    em = F.embedding(torch.tensor([1, 3, 1]), Wm, max_norm=1.0)
    out["embedding_max_norm"] = [np_of(em), np_of(Wm)]
    pre = torch.tensor(rng.standard_normal((5, 2)))
    frozen = nn.Embedding.from_pretrained(pre)
    thawed = nn.Embedding.from_pretrained(pre, freeze=False, padding_idx=0)
    out["from_pretrained"] = [frozen.weight.requires_grad, thawed.weight.requires_grad, thawed.padding_idx,
                              frozen.num_embeddings, frozen.embedding_dim, np_of(frozen(torch.tensor([4, 0])))]
    thawed(torch.tensor([0, 1, 1, 4])).sum().backward()
    out["from_pretrained_grad"] = np_of(thawed.weight.grad)
    emb = nn.Embedding(4, 3, padding_idx=1)
    out["padding_row_zero"] = np_of(emb.weight[1])
    emb_neg = nn.Embedding(4, 3, padding_idx=-1)
    out["padding_neg"] = [emb_neg.padding_idx, np_of(emb_neg.weight[3])]
    s = torch.tensor(rng.standard_normal((2, 3, 4)))
    out["softmax_dims"] = [np_of(F.softmax(s, dim=0)), np_of(F.softmax(s, dim=-2)), np_of(F.log_softmax(s, 1)),
                           np_of(torch.softmax(s, 2)), np_of(s.softmax(dim=1)), np_of(F.softmin(s, 2)),
                           str(F.softmax(s, dim=1, dtype=torch.float32).dtype).split(".")[-1],
                           np.allclose(np_of(F.softmax(s, dim=1, dtype=torch.float32)), np_of(F.softmax(s, 1)),
                                       rtol=1e-6, atol=0)]
    out["one_hot"] = [np_of(F.one_hot(torch.tensor([3, 0, 1]))), np_of(F.one_hot(torch.tensor([[1], [0]]), 3)),
                      str(F.one_hot(torch.tensor([1])).dtype).split(".")[-1]]
    p = torch.tensor(np.arange(12.0).reshape(1, 1, 3, 4))
    out["pad_modes"] = [np_of(F.pad(p, (1, 2, 2, 1), mode="reflect")), np_of(F.pad(p, (2, 1, 1, 0), mode="replicate")),
                        np_of(F.pad(p, (1, 1, 1, 1), mode="circular")), np_of(F.pad(p, (-1, 1, 0, -1))),
                        np_of(F.pad(p, (1, 1), value=-2.5))]
    return out
