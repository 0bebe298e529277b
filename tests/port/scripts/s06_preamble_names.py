"""The preamble and small names of everyday scripts: accelerator/device checks, cudnn and
TF32 switches, ``torch.nn.modules.*`` imports, ``DataParallel`` checkpoints with their
``module.`` prefix, ``bfloat16`` casts, ``copy_`` across dtypes in ``load_state_dict``,
``range`` indices, ``size=`` factories, a 0-d tensor as a size, ``Dropout2d`` on 2-D input.

    python s06_preamble_names.py --out names.json
"""

import argparse
import json
import warnings

import numpy as np
import torch
import torch.backends.cudnn
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import Dropout
from torch.nn.modules.loss import _Loss
from torch.nn.modules.utils import _pair, consume_prefix_in_state_dict_if_present
from torch.nn.parallel import DistributedDataParallel  # noqa: F401  (imported, as scripts do)
from torch.utils.data.distributed import DistributedSampler  # noqa: F401


class SmoothedHinge(_Loss):
    def __init__(self, margin=1.0, reduction="mean"):
        super().__init__(reduction=reduction)
        self.margin = margin

    def forward(self, scores, target):
        loss = F.softplus(self.margin - scores.gather(1, target[:, None]) + scores).mean(1)
        return loss.mean() if self.reduction == "mean" else loss.sum()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, _pair(3), padding=_pair(1), bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.drop = Dropout(0.0)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x))).mean((2, 3))
        return self.head(self.drop(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--out", default=None)
    args = p.parse_args()

    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    accel = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    torch.use_deterministic_algorithms(True)
    out = {"device": str(device), "accel": accel, "precision": torch.get_float32_matmul_precision(),
           "tf32": torch.backends.cuda.matmul.allow_tf32, "cuda_version": torch.version.cuda,
           "cudnn_available": torch.backends.cudnn.is_available(), "version_ok": torch.__version__ >= "2.0"}

    rng = np.random.default_rng(args.seed)
    net = Net().to(device)
    with torch.no_grad():
        for prm in net.parameters():
            prm.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, tuple(prm.shape))))
    model = nn.DataParallel(net)
    decay = [p for m in model.modules() if not isinstance(m, _BatchNorm) for p in m.parameters(recurse=False)]
    no_decay = [p for m in model.modules() if isinstance(m, _BatchNorm) for p in m.parameters(recurse=False)]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-3}, {"params": no_decay}], lr=0.1)
    criterion = SmoothedHinge()
    x = torch.from_numpy(rng.standard_normal((6, 2, 5, 5)).astype(np.float32)).to(device)
    y = torch.from_numpy(rng.integers(0, 3, 6)).to(device)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["losses"] = losses

    # a checkpoint of the wrapped model, moved through float64 (integer buffers included)
    state = {k: v.double() for k, v in model.state_dict().items()}
    out["keys"] = list(state)
    consume_prefix_in_state_dict_if_present(state, "module.")
    fresh = Net()
    fresh.load_state_dict(state)
    out["num_batches_tracked"] = [str(fresh.bn.num_batches_tracked.dtype).split(".")[1],
                                  fresh.bn.num_batches_tracked.item()]
    fresh.eval()
    model.eval()
    out["same_eval"] = torch.allclose(fresh(x), model(x))

    t = torch.tensor([1, 4, 2])
    onehot = torch.zeros(3, 5)
    onehot[range(3), t] = 1
    out["onehot"] = onehot.tolist()
    out["sizes"] = [list(torch.empty(size=(2, 3)).shape), list(torch.zeros(size=[4]).shape),
                    list(torch.randint(5, size=(7,)).shape), list(torch.LongTensor(t.max(), 2).shape)]
    out["bf16"] = torch.tensor([1.0 / 3, 1000.7, -2.5e-3]).to(torch.bfloat16).float().tolist()
    out["bf16_promote"] = str((torch.ones(2, dtype=torch.bfloat16) * torch.ones(2, dtype=torch.float16)).dtype).split(".")[1]
    out["long_from_float"] = torch.zeros((), dtype=torch.long).copy_(torch.tensor(3.7)).item()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d2 = nn.Dropout2d(0.5).eval()(torch.ones(2, 3))
    out["dropout2d"] = [d2.tolist(), any("2-D input to dropout2d" in str(w.message) for w in caught)]
    out["predicates"] = [x.is_cuda, x.is_mps, x.is_xpu, x.is_meta, x.is_sparse, x.is_quantized]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
