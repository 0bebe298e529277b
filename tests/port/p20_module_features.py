"""nn.Module plumbing: ModuleList/ModuleDict/ParameterList, forward and pre-forward
hooks collecting features, named_modules/children, freezing a backbone for fine-tuning,
load_state_dict(strict=False), train/eval flags, repr of standard layers, and a
full backward hook."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
            self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1)})
            self.scales = nn.ParameterList([nn.Parameter(torch.full((4,), 0.5 + i, dtype=torch.float64))
                                            for i in range(3)])
            self.act = nn.ReLU()

        def forward(self, x):
            for block, s in zip(self.blocks, self.scales, strict=True):
                x = self.act(block(x)) * s + x
            return self.heads["cls"](x), self.heads["reg"](x).squeeze(-1)

    model = Net().double()
    shared.model(torch, "net", model)
    out = {"modules": [n for n, _ in model.named_modules()],
           "children": [n for n, _ in model.named_children()],
           "params": [(n, list(p.shape)) for n, p in model.named_parameters()],
           "repr_linear": repr(nn.Linear(4, 3)), "repr_relu": repr(nn.ReLU()),
           "repr_conv": repr(nn.Conv2d(1, 2, 3, stride=2, padding=1)),
           "repr_bn": repr(nn.BatchNorm1d(5)), "repr_drop": repr(nn.Dropout(0.1))}
    feats, pre = {}, []

    def save_output(name):
        def hook(module, inputs, output):
            feats[name] = np_of(output)
        return hook

    handles = [blk.register_forward_hook(save_output(f"block{i}")) for i, blk in enumerate(model.blocks)]
    handles.append(model.heads["cls"].register_forward_pre_hook(lambda m, inp: pre.append(list(inp[0].shape))))
    rng = np.random.default_rng(20)
    x = torch.from_numpy(rng.standard_normal((5, 4)))
    yc = torch.from_numpy(rng.integers(0, 3, 5))
    yr = torch.from_numpy(rng.standard_normal(5))
    logits, reg = model(x)
    for h in handles:
        h.remove()
    model(x)
    out["feats"] = feats
    out["pre"] = pre

    # fine-tune the heads only
    for p in model.blocks.parameters():
        p.requires_grad = False
    trainable = [p for p in model.parameters() if p.requires_grad]
    out["n_trainable"] = sum(p.numel() for p in trainable)
    opt = torch.optim.SGD(trainable, lr=0.1)
    grads_seen = []
    model.heads["reg"].register_full_backward_hook(
        lambda m, gin, gout: grads_seen.append(np_of(gout[0])))
    losses = []
    for _ in range(3):
        logits, reg = model(x)
        loss = nn.functional.cross_entropy(logits, yc) + nn.functional.mse_loss(reg, yr)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["losses"] = losses
    out["grads_seen"] = grads_seen
    out["block_grads_none"] = [p.grad is None for p in model.blocks.parameters()]

    # partial load into a model with an extra layer
    class Bigger(Net):
        def __init__(self):
            super().__init__()
            self.extra = nn.Linear(4, 2)

    big = Bigger().double()
    res = big.load_state_dict(model.state_dict(), strict=False)
    out["missing"] = sorted(res.missing_keys)
    out["unexpected"] = sorted(res.unexpected_keys)
    out["copied"] = np_of(big.heads["cls"].weight)
    model.eval()
    out["training"] = [model.training, model.blocks[0].training]
    model.train()
    out["training_after"] = [m.training for m in model.modules()][:3]
    return out
