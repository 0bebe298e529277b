"""A char-level language model: Embedding + LSTM(batch_first) + Linear, truncated
backprop through time with (h, c) carried and detached between chunks; then a GRU
variant; then greedy generation."""


from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    text = "hello world, hello dyngraph. the quick brown fox jumps over the lazy dog. " * 2
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    vocab = len(chars)

    class CharRNN(nn.Module):
        def __init__(self, cell="lstm", emb=8, hidden=16, layers=2):
            super().__init__()
            self.embed = nn.Embedding(vocab, emb)
            rnn_cls = nn.LSTM if cell == "lstm" else nn.GRU
            self.rnn = rnn_cls(emb, hidden, num_layers=layers, batch_first=True, dropout=0.0)
            self.fc = nn.Linear(hidden, vocab)

        def forward(self, x, state=None):
            out, state = self.rnn(self.embed(x), state)
            return self.fc(out), state

    out = {}
    seq_len, batch = 10, 4
    n = (len(data) - 1) // (batch * seq_len) * batch * seq_len
    inputs = data[:n].view(batch, -1)
    targets = data[1:n + 1].view(batch, -1)
    for cell in ("lstm", "gru"):
        model = CharRNN(cell).double()
        shared.model(torch, cell, model)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        loss_fn = nn.CrossEntropyLoss()
        hidden = 16
        if cell == "lstm":
            state = (torch.zeros(2, batch, hidden, dtype=torch.float64),
                     torch.zeros(2, batch, hidden, dtype=torch.float64))
        else:
            state = torch.zeros(2, batch, hidden, dtype=torch.float64)
        losses = []
        for i in range(0, inputs.size(1), seq_len):
            x = inputs[:, i:i + seq_len]
            y = targets[:, i:i + seq_len]
            if isinstance(state, tuple):
                state = tuple(s.detach() for s in state)
            else:
                state = state.detach()
            logits, state = model(x, state)
            loss = loss_fn(logits.reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            losses.append(loss.item())
        out[cell + "_losses"] = losses
        out[cell + "_fc"] = np_of(model.fc.weight)
        # greedy generation from "h"
        model.eval()
        with torch.no_grad():
            idx = torch.tensor([[stoi["h"]]])
            st = None
            generated = []
            for _ in range(15):
                logits, st = model(idx, st)
                idx = logits[:, -1].argmax(dim=-1, keepdim=True)
                generated.append(chars[idx.item()])
        out[cell + "_text"] = "".join(generated)
    return out
