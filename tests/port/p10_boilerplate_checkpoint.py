"""Training-script boilerplate: device selection, seeding, cudnn flags, thread count,
model.apply(init_fn), kaiming init with a generator, named_parameters filters,
optimizer param_groups, checkpoint save/load of model and optimizer state, resume."""

import numpy as np

from tests.port import np_of

RTOL = 1e-9


def run(torch, shared):
    nn = torch.nn
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.set_num_threads(1)
    out = {"device": str(device), "threads": torch.get_num_threads()}

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.constant_(m.bias, 0.1)

    model = nn.Sequential(nn.Linear(5, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 1))
    model = model.to(device).double()
    model.apply(init_weights)
    out["ln_bias"] = np_of(model[1].bias)
    out["zero_bias"] = model[0].bias.abs().sum().item()
    # kaiming with an explicit generator: reproducible within each library
    w1 = nn.init.kaiming_normal_(torch.empty(4, 6), mode="fan_out", nonlinearity="relu",
                                 generator=torch.Generator().manual_seed(3))
    w2 = nn.init.kaiming_normal_(torch.empty(4, 6), mode="fan_out", nonlinearity="relu",
                                 generator=torch.Generator().manual_seed(3))
    out["kaiming_reproducible"] = bool(torch.equal(w1, w2))
    out["kaiming_std_close"] = abs(float(w1.std()) - (2 / 4) ** 0.5) < 0.5
    shared.model(torch, "model", model)

    rng = np.random.default_rng(10)
    X = torch.from_numpy(rng.standard_normal((32, 5))).to(device)
    y = torch.from_numpy(rng.standard_normal((32, 1))).to(device)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if name.endswith(".bias") or "1." in name else decay).append(p)
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-3},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=0.1, momentum=0.9)
    out["groups"] = [len(g["params"]) for g in optimizer.param_groups]

    def train(steps, losses):
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(model(X), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        for g in optimizer.param_groups:
            g["lr"] *= 0.5

    losses = []
    train(3, losses)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3},
               "checkpoint.pt")
    train(3, losses)
    final = [np_of(p) for p in model.parameters()]
    # resume from the checkpoint into fresh objects and redo the last three steps
    ckpt = torch.load("checkpoint.pt")
    model.load_state_dict(ckpt["model"])
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-3},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=0.1, momentum=0.9)
    optimizer.load_state_dict(ckpt["optimizer"])
    resumed = []
    train(3, resumed)
    out["losses"] = losses
    out["resumed_losses"] = resumed
    out["epoch"] = int(ckpt["epoch"])
    out["lr_after"] = optimizer.param_groups[0]["lr"]
    out["resume_matches"] = all(np.allclose(a, np_of(p), rtol=0, atol=0)
                                for a, p in zip(final, model.parameters(), strict=True))
    out["final"] = final
    # save/load of a bare state_dict
    torch.save(model.state_dict(), "weights.pt")
    clone = nn.Sequential(nn.Linear(5, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 1)).double()
    missing = clone.load_state_dict(torch.load("weights.pt"))
    out["missing"] = [list(missing.missing_keys), list(missing.unexpected_keys)]
    with torch.no_grad():
        out["clone_out"] = np_of(clone(X[:4]))
    return out
