"""The functional and small-layer long tail: `F.layer_norm`/`group_norm`/`instance_norm`
without affine params, `F.batch_norm` in eval with running stats, `F.dropout(training=False)`,
`inplace=True` activations, `F.glu`, `F.threshold`, `F.rrelu(training=False)`,
`Flatten`/`Unflatten`, `PixelShuffle`/`PixelUnshuffle`, `F.linear` without bias,
`F.bilinear`, 1-d pooling with indices, `F.unfold`/`F.fold`, `nn.Softmax2d`,
`nn.CosineSimilarity`, `nn.PairwiseDistance`, `F.normalize(p=1)`, `local_response_norm`."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(17)
    out = {}
    x = torch.tensor(rng.standard_normal((2, 4, 3, 3)), requires_grad=True)
    rm, rv = torch.tensor(rng.standard_normal(4)), torch.tensor(rng.random(4) + 0.5)
    wt, bs = torch.tensor(rng.standard_normal(4)), torch.tensor(rng.standard_normal(4))
    ops = {
        "layer_norm": lambda t: F.layer_norm(t, (3, 3)),
        "layer_norm_w": lambda t: F.layer_norm(t, (3,), weight=torch.ones(3, dtype=torch.float64) * 2, eps=1e-3),
        "group_norm": lambda t: F.group_norm(t, 2),
        "group_norm_w": lambda t: F.group_norm(t, 4, wt, bs),
        "instance_norm": lambda t: F.instance_norm(t),
        "batch_norm_eval": lambda t: F.batch_norm(t, rm, rv, wt, bs, training=False),
        "batch_norm_train_nostats": lambda t: F.batch_norm(t, None, None, training=True),
        "dropout_eval": lambda t: F.dropout(t, 0.5, training=False),
        "dropout2d_eval": lambda t: F.dropout2d(t, 0.3, training=False),
        "glu": lambda t: F.glu(t, dim=1),
        "threshold": lambda t: F.threshold(t, 0.1, -2.0),
        "rrelu_eval": lambda t: F.rrelu(t, training=False),
        "elu": lambda t: F.elu(t * 1, alpha=0.7), "selu": lambda t: F.selu(t),
        "leaky": lambda t: F.leaky_relu(t, 0.2), "hardtanh": lambda t: F.hardtanh(t, -0.5, 0.5),
        "relu6": lambda t: F.relu6(t * 4), "mish": lambda t: F.mish(t), "hardswish": lambda t: F.hardswish(t),
        "softplus_beta": lambda t: F.softplus(t, beta=2.0, threshold=1.0), "tanhshrink": lambda t: F.tanhshrink(t),
        "softshrink": lambda t: F.softshrink(t, 0.3), "hardshrink": lambda t: F.hardshrink(t, 0.3),
        "logsigmoid": lambda t: F.logsigmoid(t), "silu": lambda t: F.silu(t), "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "inplace_relu": lambda t: F.relu(t * 1, inplace=True), "inplace_leaky": lambda t: F.leaky_relu(t * 1, 0.1, inplace=True),
        "inplace_elu": lambda t: F.elu(t * 1, inplace=True), "inplace_hardtanh": lambda t: F.hardtanh(t * 1, inplace=True),
        "pixel_shuffle": lambda t: F.pixel_shuffle(t, 2), "pixel_unshuffle": lambda t: F.pixel_unshuffle(t[:, :, :2, :2], 2),
        "softmax2d": lambda t: nn.Softmax2d()(t), "logsoftmax_mod": lambda t: nn.LogSoftmax(dim=1)(t),
        "normalize_p1": lambda t: F.normalize(t, p=1.0, dim=1), "lrn": lambda t: F.local_response_norm(t, 3),
        "unfold": lambda t: F.unfold(t, 2, padding=1, stride=2), "flatten_mod": lambda t: nn.Flatten()(t),
        "unflatten_mod": lambda t: nn.Unflatten(1, (2, 2))(t), "flatten_0": lambda t: nn.Flatten(0, 1)(t),
        "avgpool1d": lambda t: F.avg_pool1d(t.flatten(2), 3, stride=2, padding=1),
        "maxpool1d": lambda t: F.max_pool1d(t.flatten(2), 2, stride=2),
        "adaptive_max1d": lambda t: F.adaptive_max_pool1d(t.flatten(2), 4),
        "lp_pool1d": lambda t: F.lp_pool1d(t.flatten(2), 2.0, 3),
        "cos_mod": lambda t: nn.CosineSimilarity(dim=1)(t, t.flip(1)),
        "pdist_mod": lambda t: nn.PairwiseDistance(p=1.0)(t.flatten(1), t.flatten(1).flip(0)),
    }
    for name, fn in ops.items():
        x.grad = None
        y = fn(x)
        (y * torch.tensor(np.cos(np.arange(y.numel())).reshape(y.shape))).sum().backward()
        out[name] = [list(y.shape), np_of(y), np_of(x.grad)]
    _, idx = F.max_pool1d(x.detach().flatten(2), 3, stride=2, return_indices=True)
    out["maxpool1d_idx"] = idx.tolist()
    cols = F.unfold(x.detach(), 2)
    out["fold_roundtrip"] = np_of(F.fold(cols, (3, 3), 2))
    lw = torch.tensor(rng.standard_normal((5, 3)))
    out["linear_nobias"] = np_of(F.linear(x.detach()[:, 0], lw.T[:3, :3]))
    bw = torch.tensor(rng.standard_normal((2, 3, 4)))
    out["bilinear"] = np_of(F.bilinear(x.detach()[:, 0, 0], x.detach()[:, :, 0, 0], bw))
    bn = nn.BatchNorm2d(4, momentum=None).double()
    for _ in range(3):
        bn(x.detach())
    out["bn_cumulative"] = [np_of(bn.running_mean), np_of(bn.running_var), bn.num_batches_tracked.item()]
    bn_nt = nn.BatchNorm2d(4, track_running_stats=False).double().eval()
    out["bn_no_track_eval"] = np_of(bn_nt(x.detach()))
    return out
