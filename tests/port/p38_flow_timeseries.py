"""Two more everyday models.  A RealNVP-style normalizing flow: affine coupling layers
with masks registered as buffers, log|det J| from the scales, a learned invertible
linear layer whose log-determinant comes from torch.linalg.slogdet, negative
log-likelihood under a standard Normal.  A time-series forecaster: sliding windows with
Tensor.unfold, a causal Conv1d (F.pad on the left), an LSTM over the windows, MSE on
the next value, inverse standardisation of the forecasts."""

import math

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(38)
    out = {}

    class Coupling(nn.Module):
        def __init__(self, d, mask):
            super().__init__()
            self.register_buffer("mask", mask)
            self.net = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, 2 * d))

        def forward(self, x):
            s, t = self.net(x * self.mask).chunk(2, dim=-1)
            s = torch.tanh(s) * (1 - self.mask)
            t = t * (1 - self.mask)
            return x * torch.exp(s) + t, s.sum(-1)

    class Flow(nn.Module):
        def __init__(self, d=2):
            super().__init__()
            m = torch.tensor([1.0, 0.0], dtype=torch.float64)
            self.layers = nn.ModuleList([Coupling(d, m), Coupling(d, 1 - m)])
            self.W = nn.Parameter(torch.eye(d, dtype=torch.float64) + 0.1 * torch.ones(d, d, dtype=torch.float64))

        def forward(self, x):
            logdet = torch.zeros(x.size(0), dtype=x.dtype)
            for layer in self.layers:
                x, ld = layer(x)
                logdet = logdet + ld
            x = x @ self.W.T
            sign, lad = torch.linalg.slogdet(self.W)
            return x, logdet + lad

    data = torch.from_numpy(np.stack([rng.standard_normal(64), rng.standard_normal(64) * 0.5 + 1], 1))
    flow = Flow().double()
    shared.model(torch, "flow", flow)
    opt = torch.optim.Adam(flow.parameters(), lr=1e-2)
    nll = []
    for _ in range(4):
        z, logdet = flow(data)
        log_pz = -0.5 * (z ** 2).sum(-1) - z.size(1) * 0.5 * math.log(2 * math.pi)
        loss = -(log_pz + logdet).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        nll.append(loss.item())
    out["flow_nll"] = nll
    out["W"] = np_of(flow.W)

    series = np.sin(np.linspace(0, 12, 80)) + 0.1 * rng.standard_normal(80)
    mu, sd = series.mean(), series.std()
    s = torch.from_numpy((series - mu) / sd)
    windows = s.unfold(0, 9, 1)                     # (72, 9): 8 inputs + 1 target
    X, Y = windows[:, :-1].unsqueeze(-1), windows[:, -1]

    class Forecaster(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(1, 4, kernel_size=3)
            self.lstm = nn.LSTM(4, 8, batch_first=True)
            self.head = nn.Linear(8, 1)

        def forward(self, x):                       # (B, T, 1)
            h = self.conv(F.pad(x.transpose(1, 2), (2, 0)))   # causal: pad the past only
            h, _ = self.lstm(F.relu(h).transpose(1, 2))
            return self.head(h[:, -1]).squeeze(-1)

    model = Forecaster().double()
    shared.model(torch, "fc", model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        for i in range(0, len(X), 24):
            loss = F.mse_loss(model(X[i:i + 24]), Y[i:i + 24])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    with torch.no_grad():
        forecast = model(X[-5:]) * sd + mu
    out["ts_losses"] = losses
    out["forecast"] = np_of(forecast)
    return out
