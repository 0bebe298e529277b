"""A Kim-style text CNN: Embedding(padding_idx) -> several Conv1d widths -> ReLU ->
max over time -> cat -> Dropout(0) -> Linear; MultiLabelSoftMarginLoss-free BCE over
multi-hot targets; Embedding.from_pretrained(freeze=False) from NumPy vectors."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(25)
    V, E, L = 20, 6, 9
    pretrained = torch.from_numpy(rng.standard_normal((V, E)))

    class TextCNN(nn.Module):
        def __init__(self, widths=(2, 3, 4), channels=5, n_labels=3):
            super().__init__()
            self.emb = nn.Embedding.from_pretrained(pretrained, freeze=False, padding_idx=0)
            self.convs = nn.ModuleList([nn.Conv1d(E, channels, w) for w in widths])
            self.drop = nn.Dropout(0.0)
            self.fc = nn.Linear(channels * len(widths), n_labels)

        def forward(self, tokens):
            x = self.emb(tokens).transpose(1, 2)                   # (B, E, L)
            pooled = [F.relu(conv(x)).max(dim=2)[0] for conv in self.convs]
            return self.fc(self.drop(torch.cat(pooled, dim=1)))

    toks = rng.integers(1, V, (6, L))
    toks[0, 6:] = 0
    toks[3, 4:] = 0
    tokens = torch.from_numpy(toks)
    targets = torch.from_numpy((rng.random((6, 3)) > 0.5).astype(np.float64))
    model = TextCNN().double()
    shared.model(torch, "cnn", model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(4):
        loss = F.binary_cross_entropy_with_logits(model(tokens), targets, pos_weight=torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        preds = (torch.sigmoid(model(tokens)) > 0.5).long()
    return {"losses": losses, "preds": preds.tolist(), "emb_pad_row": np_of(model.emb.weight[0]),
            "emb": np_of(model.emb.weight), "multilabel": nn.MultiLabelSoftMarginLoss()(model(tokens), targets).item()}
