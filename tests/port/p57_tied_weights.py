"""Parameter sharing: a decoder tied to the embedding, one Linear used twice, the
gradient accumulating from both uses, `named_parameters()`/`parameters()` dedup (and
`remove_duplicate=False`), `state_dict` keeping both keys, loading it back, optimizer
stepping a shared parameter once."""

import numpy as np

from tests.port import np_of

RTOL = 1e-10


def run(torch, shared):
    nn = torch.nn

    class TiedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(7, 4)
            self.proj = nn.Linear(4, 4)
            self.out = nn.Linear(4, 7, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, idx):
            h = torch.tanh(self.proj(self.emb(idx)))
            h = torch.tanh(self.proj(h))  # the same layer twice
            return self.out(h)

    model = TiedLM().double()
    shared.model(torch, "tied", model)
    out = {"tied": model.out.weight is model.emb.weight,
           "names": [n for n, _ in model.named_parameters()],
           "names_dups": [n for n, _ in model.named_parameters(remove_duplicate=False)],
           "n_params": len(list(model.parameters())), "numel": sum(p.numel() for p in model.parameters()),
           "state_keys": list(model.state_dict().keys()),
           "modules": [type(m).__name__ for m in model.modules()]}
    sd = model.state_dict()
    out["state_same_data"] = sd["out.weight"].data_ptr() == sd["emb.weight"].data_ptr()
    idx = torch.tensor([[1, 2, 3], [4, 5, 6]])
    tgt = torch.tensor([[2, 3, 4], [5, 6, 0]])
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    out["opt_params"] = len(opt.param_groups[0]["params"])
    out["loss"] = []
    for _ in range(3):
        logits = model(idx)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 7), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        out["loss"].append(loss.item())
        opt.step()
    out["grad_emb"] = np_of(model.emb.weight.grad)
    out["still_tied"] = model.out.weight is model.emb.weight
    out["weights"] = np_of(model.out.weight)
    clone = TiedLM().double()
    res = clone.load_state_dict(model.state_dict())
    out["load_result"] = [list(res.missing_keys), list(res.unexpected_keys)]
    out["clone_tied"] = clone.out.weight is clone.emb.weight
    out["clone_same"] = np_of(clone(idx))
    lin = nn.Linear(3, 3).double()
    shared.model(torch, "lin", lin)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    out["seq_names"] = [n for n, _ in seq.named_parameters()]
    out["seq_modules"] = [n for n, _ in seq.named_modules()]
    out["seq_children"] = len(list(seq.children()))
    out["seq_state"] = list(seq.state_dict().keys())
    x = torch.from_numpy(np.linspace(-1, 1, 6).reshape(2, 3))
    seq(x).pow(2).sum().backward()
    out["seq_grad"] = [np_of(lin.weight.grad), np_of(lin.bias.grad)]
    p = nn.Parameter(torch.ones(2, dtype=torch.float64))
    opt2 = torch.optim.SGD([p], lr=0.1)
    (p * 3).sum().backward()
    opt2.step()
    out["single_step"] = np_of(p)
    return out
