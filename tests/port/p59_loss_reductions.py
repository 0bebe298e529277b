"""Loss functions with every reduction, `ignore_index`, class weights, label smoothing,
probability targets, and their gradients; NLL on 3-d inputs; losses that are rarely
tried (`PoissonNLLLoss`, `GaussianNLLLoss`, `HuberLoss(delta)`, `SmoothL1Loss(beta)`,
`KLDivLoss(log_target)`, `MultiLabelMarginLoss`, `HingeEmbeddingLoss`, `SoftMarginLoss`)."""

import numpy as np

from tests.port import np_of

RTOL = 1e-10


def run(torch, shared):
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(11)
    out = {}
    logits_np = rng.standard_normal((6, 4))
    tgt = torch.tensor([0, 3, -100, 2, 1, 3])
    w = torch.tensor([1.0, 2.0, 0.5, 1.5], dtype=torch.float64)
    for red in ("mean", "sum", "none"):
        for kw in ({}, {"weight": w}, {"label_smoothing": 0.1}, {"weight": w, "label_smoothing": 0.2}):
            lg = torch.tensor(logits_np, requires_grad=True)
            loss = F.cross_entropy(lg, tgt, reduction=red, **kw)
            loss.sum().backward()
            key = f"ce_{red}_{'_'.join(sorted(kw))}"
            out[key] = [np_of(loss), np_of(lg.grad)]
        lg = torch.tensor(logits_np, requires_grad=True)
        loss = F.nll_loss(F.log_softmax(lg, 1), tgt.clamp(min=0), weight=w, reduction=red, ignore_index=3)
        loss.sum().backward()
        out[f"nll_{red}"] = [np_of(loss), np_of(lg.grad)]
    all_ignored = F.cross_entropy(torch.tensor(logits_np[:2]), torch.tensor([-100, -100]))
    out["ce_all_ignored_nan"] = bool(torch.isnan(all_ignored))
    probs = torch.softmax(torch.tensor(rng.standard_normal((6, 4))), 1)
    lg = torch.tensor(logits_np, requires_grad=True)
    loss = F.cross_entropy(lg, probs, label_smoothing=0.05)
    loss.backward()
    out["ce_probs"] = [loss.item(), np_of(lg.grad)]
    seq = torch.tensor(rng.standard_normal((2, 4, 5)), requires_grad=True)
    seq_t = torch.tensor([[0, 1, 2, 3, -100], [3, 3, -100, 0, 1]])
    loss = nn.CrossEntropyLoss(ignore_index=-100)(seq, seq_t)
    loss.backward()
    out["ce_seq"] = [loss.item(), np_of(seq.grad)]
    x = torch.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    y = torch.tensor(rng.standard_normal((5, 3)))
    for name, fn in [("huber", lambda a, b, r: F.huber_loss(a, b, reduction=r, delta=0.5)),
                     ("smoothl1", lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.3)),
                     ("smoothl1_b0", lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.0)),
                     ("l1", lambda a, b, r: F.l1_loss(a, b, reduction=r)),
                     ("mse", lambda a, b, r: F.mse_loss(a, b, reduction=r)),
                     ("poisson", lambda a, b, r: F.poisson_nll_loss(a, b.abs(), reduction=r)),
                     ("poisson_full", lambda a, b, r: F.poisson_nll_loss(a.exp(), b.abs() * 3, log_input=False,
                                                                         full=True, reduction=r)),
                     ("gauss", lambda a, b, r: F.gaussian_nll_loss(a, b, (a * 0 + 1.5), reduction=r)),
                     ("kl", lambda a, b, r: F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1),
                                                     reduction="batchmean" if r == "mean" else r)),
                     ("kl_logt", lambda a, b, r: F.kl_div(F.log_softmax(a, 1), F.log_softmax(b, 1),
                                                          reduction=r, log_target=True)),
                     ("soft_margin", lambda a, b, r: F.soft_margin_loss(a, b.sign(), reduction=r)),
                     ("hinge", lambda a, b, r: F.hinge_embedding_loss(a, b.sign(), margin=0.7, reduction=r)),
                     ("bce", lambda a, b, r: F.binary_cross_entropy(a.sigmoid(), b.sigmoid(), reduction=r,
                                                                    weight=torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))),
                     ("bcel", lambda a, b, r: F.binary_cross_entropy_with_logits(
                         a, (b > 0).double(), reduction=r, pos_weight=torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)))]:
        for red in ("mean", "sum", "none"):
            x.grad = None
            loss = fn(x, y, red)
            loss.sum().backward()
            out[f"{name}_{red}"] = [np_of(loss), np_of(x.grad)]
    mlm_t = torch.tensor([[2, 0, -1], [1, -1, 0], [0, 1, 2], [-1, 0, 0], [1, 2, -1]])
    x.grad = None
    loss = F.multilabel_margin_loss(x, mlm_t)
    loss.backward()
    out["multilabel_margin"] = [loss.item(), np_of(x.grad)]
    out["module_reprs"] = [repr(nn.CrossEntropyLoss(ignore_index=0)), repr(nn.HuberLoss(delta=2.0)),
                           nn.CrossEntropyLoss().reduction, nn.NLLLoss().ignore_index]
    return out
