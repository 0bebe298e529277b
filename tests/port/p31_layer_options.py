"""Layer options people switch on: Conv2d(padding_mode="reflect"/"circular", groups,
bias=False), Conv1d(stride, dilation), multi-layer bidirectional LSTM with dropout=0
and proj_size, GRU(batch_first=False), nn.RNN(relu), Embedding(max_norm), losses with
reduction="none"/ignore_index/weight, LayerNorm(elementwise_affine=False),
BatchNorm(affine=False, track_running_stats=False), InstanceNorm2d(affine=True),
MaxPool2d(ceil_mode, return_indices) + MaxUnpool2d, AvgPool2d(count_include_pad=False)."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(31)
    out = {}
    layers = {
        "conv_reflect": nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect", groups=2, bias=False),
        "conv_circular": nn.Conv2d(2, 2, 3, padding=1, padding_mode="circular"),
        "conv1d": nn.Conv1d(2, 3, 3, stride=2, dilation=2, padding=2),
        "lstm": nn.LSTM(3, 5, num_layers=2, bidirectional=True, dropout=0.0, proj_size=2),
        "gru": nn.GRU(3, 4, num_layers=2),
        "rnn": nn.RNN(3, 4, nonlinearity="relu", batch_first=True),
        "emb": nn.Embedding(6, 3, max_norm=1.0),
        "ln": nn.LayerNorm([3, 4], elementwise_affine=False),
        "bn": nn.BatchNorm1d(3, affine=False, track_running_stats=False),
        "inorm": nn.InstanceNorm2d(2, affine=True),
    }
    for name, layer in layers.items():
        shared.model(torch, name, layer.double())
    img = torch.from_numpy(rng.standard_normal((2, 2, 5, 5))).requires_grad_()
    seq = torch.from_numpy(rng.standard_normal((4, 2, 3))).requires_grad_()   # (T, B, F)
    sig = torch.from_numpy(rng.standard_normal((2, 2, 9)))
    results = [layers["conv_reflect"](img), layers["conv_circular"](img), layers["conv1d"](sig)]
    y, (h, c) = layers["lstm"](seq)
    results += [y, h, c]
    y, h = layers["gru"](seq)
    results += [y, h]
    y, h = layers["rnn"](seq.transpose(0, 1))
    results += [y, h]
    idx = torch.tensor([[0, 2, 2], [5, 1, 0]])
    results.append(layers["emb"](idx))
    out["emb_renormed"] = np_of(layers["emb"].weight)          # max_norm renormalises rows in place
    results.append(layers["ln"](torch.from_numpy(rng.standard_normal((2, 3, 4)))))
    results.append(layers["bn"](seq[0].detach().clone().repeat(2, 1)))
    results.append(layers["inorm"](img))
    pooled, indices = F.max_pool2d(img, 2, ceil_mode=True, return_indices=True)
    results.append(pooled)
    out["pool_idx"] = indices.tolist()
    p4, i4 = nn.MaxPool2d(2, return_indices=True)(img[:, :, :4, :4])
    results.append(nn.MaxUnpool2d(2)(p4, i4))
    results.append(nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)(img))
    logits = torch.from_numpy(rng.standard_normal((5, 4)))
    tgt = torch.tensor([0, 3, -100, 1, 3])
    out["ce_none"] = np_of(F.cross_entropy(logits, tgt, reduction="none"))
    out["ce_weight"] = F.cross_entropy(logits, tgt, weight=torch.tensor([1.0, 2.0, 0.5, 1.5], dtype=torch.float64)).item()
    out["nll_sum"] = F.nll_loss(F.log_softmax(logits, 1), tgt.clamp(min=0), reduction="sum").item()
    out["bce_none"] = np_of(F.binary_cross_entropy(torch.sigmoid(logits), (logits > 0).double(), reduction="none"))
    out["l1_sum"] = F.l1_loss(logits, logits.flip(0), reduction="sum").item()
    out["kl"] = F.kl_div(F.log_softmax(logits, 1), F.softmax(logits.flip(1), 1), reduction="batchmean").item()
    total = sum((r.double() ** 2).sum() for r in results)
    total.backward()
    out["outputs"] = [np_of(r) for r in results]
    out["img_grad"] = np_of(img.grad)
    out["seq_grad"] = np_of(seq.grad)
    out["param_grads"] = {n: [np_of(p.grad) for p in layer.parameters() if p.grad is not None]
                          for n, layer in layers.items()}
    return out
