"""Knowledge distillation with mixup, as training-recipe repositories write it: a teacher
CNN trained first, then a student trained on ``nn.KLDivLoss(reduction="batchmean")`` between
``F.log_softmax(student / T)`` and ``F.softmax(teacher / T)`` times ``T * T`` plus the hard
``CrossEntropyLoss(label_smoothing=0.1)``, mixup with ``lam = np.random.beta(alpha, alpha)``
and ``torch.randperm`` (or a NumPy permutation), ``mixup_criterion``, ``CosineAnnealingLR``,
``torch.no_grad()`` teacher forward with ``teacher.eval()``, ``nn.utils.parameters_to_vector``
for a weight-norm check, ``torch.topk`` top-2 accuracy, and ``F.kl_div(log_target=True)``.

    python s28_distill_mixup.py --epochs 2 --perm numpy --out distill.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_net(width):
    return nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 4))


def mixup_data(x, y, alpha, np_rng, perm_mode):
    lam = np_rng.beta(alpha, alpha) if alpha > 0 else 1.0
    batch_size = x.size()[0]
    if perm_mode == "torch":
        index = torch.randperm(batch_size)
    else:
        index = torch.from_numpy(np_rng.permutation(batch_size))
    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / batch_size).item()
                for k in topk]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--T", type=float, default=4.0)
    parser.add_argument("--alpha", type=float, default=0.4)
    parser.add_argument("--kd-weight", type=float, default=0.7)
    parser.add_argument("--perm", choices=["torch", "numpy"], default="torch")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    np_rng = np.random.default_rng(0)
    x = np_rng.standard_normal((48, 1, 8, 8)).astype(np.float32)
    y = (x[:, 0, :4].mean((1, 2)) > 0).astype(np.int64) * 2 + (x[:, 0, :, :4].mean((1, 2)) > 0)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                                         batch_size=12)
    teacher, student = conv_net(8), conv_net(4)
    init = np.random.default_rng(1)
    with torch.no_grad():
        for net in (teacher, student):
            for name, p in net.named_parameters():
                if p.dim() > 1:
                    p.copy_(torch.from_numpy(init.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))
                elif name.endswith("bias"):
                    p.zero_()
    ce = nn.CrossEntropyLoss(label_smoothing=0.1)
    kl = nn.KLDivLoss(reduction="batchmean")
    history = {"teacher": [], "student": [], "acc": []}
    opt_t = torch.optim.SGD(teacher.parameters(), lr=0.05, momentum=0.9)
    for _ in range(args.epochs):
        teacher.train()
        for xb, yb in loader:
            loss = ce(teacher(xb), yb)
            opt_t.zero_grad()
            loss.backward()
            opt_t.step()
            history["teacher"].append(loss.item())
    teacher.eval()
    opt_s = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt_s, T_max=args.epochs * len(loader))
    for _ in range(args.epochs):
        student.train()
        for xb, yb in loader:
            inputs, targets_a, targets_b, lam = mixup_data(xb, yb, args.alpha, np_rng, args.perm)
            with torch.no_grad():
                t_logits = teacher(inputs)
            s_logits = student(inputs)
            soft = kl(F.log_softmax(s_logits / args.T, dim=1), F.softmax(t_logits / args.T, dim=1)) * args.T * args.T
            hard = mixup_criterion(ce, s_logits, targets_a, targets_b, lam)
            loss = args.kd_weight * soft + (1 - args.kd_weight) * hard
            opt_s.zero_grad()
            loss.backward()
            opt_s.step()
            sched.step()
            history["student"].append([loss.item(), soft.item(), hard.item(), float(lam)])
            history["acc"].append(accuracy(s_logits, yb, topk=(1, 2)))
    student.eval()
    with torch.no_grad():
        s_logits, t_logits = student(torch.from_numpy(x)), teacher(torch.from_numpy(x))
        log_target = F.kl_div(F.log_softmax(s_logits, 1), F.log_softmax(t_logits, 1), reduction="batchmean",
                              log_target=True)
        wnorm = nn.utils.parameters_to_vector(student.parameters()).norm()
    result = {**history, "kl_log_target": log_target.item(), "wnorm": wnorm.item(), "lr": sched.get_last_lr()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
