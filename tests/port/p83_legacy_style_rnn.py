"""Dynamic-model research code in the pre-0.4 style that is still all over GitHub: a
character-level GRU language model written with ``Variable``, ``torch.LongTensor``,
``.data``, ``repackage_hidden`` through ``Variable(h.data)``, ``x.type(torch.DoubleTensor)``,
a manual SGD update with ``p.data.add_(p.grad.data, alpha=-lr)`` and
``p.grad.data.zero_()``, gradient clipping with ``clip_grad_norm_``, and sampling by
``max(1)[1]`` with ``.data[0]``."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    Variable = torch.autograd.Variable   # "from torch.autograd import Variable"
    V, E, H, SEQ = 12, 6, 8, 5
    rng = np.random.default_rng(83)
    corpus = torch.LongTensor(rng.integers(0, V, 31).tolist())

    class CharRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(V, E)
            self.rnn = nn.GRU(E, H, 1)
            self.decoder = nn.Linear(H, V)

        def forward(self, inp, hidden):
            emb = self.encoder(inp.view(-1, 1))          # (T, 1, E)
            out, hidden = self.rnn(emb, hidden)
            return self.decoder(out.view(out.size(0), -1)), hidden

        def init_hidden(self):
            return Variable(torch.zeros(1, 1, H).type(torch.DoubleTensor))

    def repackage_hidden(h):
        return Variable(h.data)

    model = CharRNN().double()
    shared.model(torch, "charrnn", model)
    criterion = nn.CrossEntropyLoss()
    lr, losses, norms = 0.5, [], []
    hidden = model.init_hidden()
    for i in range(0, corpus.size(0) - 1, SEQ):
        seq_len = min(SEQ, corpus.size(0) - 1 - i)
        inp = Variable(corpus[i:i + seq_len])
        target = Variable(corpus[i + 1:i + 1 + seq_len])
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(inp, hidden)
        loss = criterion(output, target)
        loss.backward()
        norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), 0.25)))
        for p in model.parameters():
            p.data.add_(p.grad.data, alpha=-lr)
        losses.append(loss.data.item())
    for p in model.parameters():
        p.grad.data.zero_()
    # greedy sampling the old way
    hidden = model.init_hidden()
    inp = Variable(torch.LongTensor([int(corpus[0])]))
    sampled = []
    for _ in range(8):
        output, hidden = model(inp, hidden)
        top_i = output.data.max(1)[1]
        sampled.append(int(top_i[0]))
        inp = Variable(top_i)
    return {"losses": losses, "norms": norms, "sampled": sampled,
            "is_var": isinstance(output, Variable), "hidden": np_of(hidden),
            "params": {k: np_of(v) for k, v in model.state_dict().items()}}
