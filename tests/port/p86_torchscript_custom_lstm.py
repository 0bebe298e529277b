# ruff: noqa: UP006, UP035  (TorchScript-era code spells typing.List / Tuple, as these programs do)
"""Custom recurrent cells written for TorchScript, the way people write fast custom
LSTMs (layer-norm LSTM, reversed layer, stacked bidirectional layers): ``jit.ScriptModule``
subclasses with ``@jit.script_method`` forwards, ``jit.annotate(List[Tensor], [])``
output lists, ``torch.jit.Final`` constants, a ``@torch.jit.script`` gate function,
``torch.unbind`` over time, ``reverse`` via ``flip``-free list reversal and
``@torch.jit.ignore`` helpers; trained with Adam, with ``jit.is_scripting()`` checks."""

from typing import List, Tuple

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    jit = torch.jit
    F = torch.nn.functional
    Tensor = torch.Tensor
    D, H = 3, 5
    rng = np.random.default_rng(86)

    @torch.jit.script
    def ln_gates(gates: Tensor, cx: Tensor) -> Tuple[Tensor, Tensor]:
        i, f, g, o = gates.chunk(4, 1)
        cy = torch.sigmoid(f) * cx + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o), cy

    class LayerNormLSTMCell(jit.ScriptModule):
        hidden_size: jit.Final[int]

        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.weight_ih = nn.Parameter(torch.from_numpy(rng.standard_normal((4 * hidden_size, input_size)) * 0.3))
            self.weight_hh = nn.Parameter(torch.from_numpy(rng.standard_normal((4 * hidden_size, hidden_size)) * 0.3))
            self.ln_i = nn.LayerNorm(4 * hidden_size).double()
            self.ln_h = nn.LayerNorm(4 * hidden_size).double()
            self.ln_c = nn.LayerNorm(hidden_size).double()

        @jit.script_method
        def forward(self, x: Tensor, state: Tuple[Tensor, Tensor]) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
            hx, cx = state
            gates = self.ln_i(torch.mm(x, self.weight_ih.t())) + self.ln_h(torch.mm(hx, self.weight_hh.t()))
            o, cy = ln_gates(gates, cx)
            cy = self.ln_c(cy)
            hy = o * torch.tanh(cy)
            return hy, (hy, cy)

    class LSTMLayer(jit.ScriptModule):
        def __init__(self, reverse: bool):
            super().__init__()
            self.cell = LayerNormLSTMCell(D if not reverse else D, H)
            self.reverse = reverse

        @jit.ignore
        def describe(self):
            return "reverse" if self.reverse else "forward"

        @jit.script_method
        def forward(self, x: Tensor, state: Tuple[Tensor, Tensor]) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
            inputs = x.unbind(0)
            if self.reverse:
                inputs = inputs[::-1]
            outputs = jit.annotate(List[Tensor], [])
            for inp in inputs:
                out, state = self.cell(inp, state)
                outputs += [out]
            if self.reverse:
                outputs = outputs[::-1]
            return torch.stack(outputs), state

    class BiLSTM(jit.ScriptModule):
        hidden: jit.Final[int]

        def __init__(self):
            super().__init__()
            self.hidden = H
            self.directions = nn.ModuleList([LSTMLayer(False), LSTMLayer(True)])
            self.head = nn.Linear(2 * H, 1).double()

        @jit.script_method
        def forward(self, x: Tensor) -> Tensor:
            zeros = x.new_zeros(x.size(1), self.hidden)
            outs = jit.annotate(List[Tensor], [])
            for layer in self.directions:
                o, _ = layer(x, (zeros, zeros))
                outs += [o]
            return self.head(torch.cat(outs, -1)).squeeze(-1)        # (T, B)

    model = BiLSTM()
    shared.model(torch, "tslstm", model)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    data = [(torch.from_numpy(rng.standard_normal((t, 2, D))), torch.from_numpy(rng.standard_normal((t, 2))))
            for t in (3, 5, 4)]
    losses = []
    for _step in range(3):
        for x, y in data:
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    x, y = data[1]
    (g,) = torch.autograd.grad(F.mse_loss(model(x), y), model.directions[0].cell.weight_hh, create_graph=True)
    (g2,) = torch.autograd.grad(g.pow(2).sum(), model.directions[1].cell.ln_c.weight)
    return {"losses": losses, "g2": np_of(g2), "scripting": jit.is_scripting(),
            "desc": [layer.describe() for layer in model.directions],
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
