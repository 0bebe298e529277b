"""Sine-wave sequence prediction with two ``LSTMCell`` layers in float64, trained with
``optim.LBFGS`` and a closure, then predicting ``future`` steps past the input, as in the
classic time-sequence example.

    python s10_time_sequence_lbfgs.py --steps 2 --out seq.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--future", type=int, default=10)
    parser.add_argument("--out", default=None)
    opt = parser.parse_args()
    np.random.seed(0)
    torch.manual_seed(0)
    T, L, N = 20, opt.length, 8
    x = np.empty((N, L), "int64")
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype("float64")
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    seq.double()
    rng = np.random.default_rng(2)
    with torch.no_grad():
        for prm in seq.parameters():
            prm.copy_(torch.from_numpy(rng.uniform(-0.25, 0.25, tuple(prm.shape))))
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=8)
    losses, tests = [], []
    for _ in range(opt.steps):
        def closure():
            optimizer.zero_grad()
            loss = criterion(seq(input), target)
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            pred = seq(test_input, future=opt.future)
            tests.append(criterion(pred[:, :-opt.future], test_target).item())
    result = {"losses": losses, "tests": tests, "future": pred[:, -opt.future:].numpy().tolist()}
    if opt.out:
        with open(opt.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
