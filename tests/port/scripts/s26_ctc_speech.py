"""A small speech-recognition style model trained with CTC, as ASR tutorials write it: a
``Conv1d`` front-end over "spectrogram" frames, a bidirectional ``nn.LSTM(batch_first=True)``,
``F.log_softmax(..., dim=2).transpose(0, 1)`` into ``nn.CTCLoss(blank=0, zero_infinity=True)``
with ``input_lengths``/``target_lengths`` tensors, ``pad_sequence`` for the labels,
``OneCycleLR``, ``clip_grad_norm_``, and greedy decoding with ``argmax`` +
``torch.unique_consecutive`` + blank removal, scored by an edit distance.

    python s26_ctc_speech.py --epochs 3 --out ctc.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

ALPHABET = "_abcdefg"          # index 0 is the CTC blank


class SpeechModel(nn.Module):
    def __init__(self, n_feats=6, hidden=16, n_class=len(ALPHABET)):
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv1d(n_feats, hidden, kernel_size=3, padding=1), nn.GELU())
        self.rnn = nn.LSTM(hidden, hidden, num_layers=1, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(2 * hidden, n_class)

    def forward(self, x):            # x: (batch, feats, time)
        x = self.cnn(x).transpose(1, 2)
        x, _ = self.rnn(x)
        return self.classifier(x)    # (batch, time, class)


def make_batch(rng, n):
    """Each label symbol becomes 2-3 frames of a noisy template; lengths vary."""
    templates = rng.standard_normal((len(ALPHABET), 6))
    feats, labels, in_lens, tg_lens = [], [], [], []
    for _ in range(n):
        text = rng.integers(1, len(ALPHABET), int(rng.integers(2, 5)))
        frames = []
        for c in text:
            frames += [templates[c] + 0.1 * rng.standard_normal(6) for _ in range(int(rng.integers(2, 4)))]
            frames.append(templates[0] + 0.1 * rng.standard_normal(6))
        feats.append(np.array(frames, dtype=np.float32))
        labels.append(torch.tensor(text, dtype=torch.long))
        in_lens.append(len(frames))
        tg_lens.append(len(text))
    T = max(in_lens)
    x = np.zeros((n, 6, T), dtype=np.float32)
    for i, f in enumerate(feats):
        x[i, :, :len(f)] = f.T
    return torch.from_numpy(x), pad_sequence(labels, batch_first=True), torch.tensor(in_lens), torch.tensor(tg_lens)


def greedy_decode(log_probs, lengths):
    out = []
    for lp, n in zip(log_probs.argmax(-1), lengths.tolist()):
        ids = torch.unique_consecutive(lp[:n])
        out.append("".join(ALPHABET[i] for i in ids.tolist() if i != 0))
    return out


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, cb in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (ca != cb))
    return d[-1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(7)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    batches = [make_batch(rng, 6) for _ in range(args.steps)]
    test = make_batch(rng, 4)
    model = SpeechModel().to(device)
    init = np.random.default_rng(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(init.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    criterion = nn.CTCLoss(blank=0, zero_infinity=True).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, steps_per_epoch=len(batches),
                                                    epochs=args.epochs, anneal_strategy="linear")
    history = []
    for epoch in range(args.epochs):
        model.train()
        for spectrograms, labels, input_lengths, label_lengths in batches:
            spectrograms, labels = spectrograms.to(device), labels.to(device)
            optimizer.zero_grad()
            output = model(spectrograms)
            output = F.log_softmax(output, dim=2)
            output = output.transpose(0, 1)          # (time, batch, n_class)
            loss = criterion(output, labels, input_lengths, label_lengths)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            history.append([loss.item(), norm.item(), scheduler.get_last_lr()[0]])
        print(f"epoch {epoch}: loss {history[-1][0]:.4f}")
    model.eval()
    with torch.no_grad():
        x, labels, in_lens, tg_lens = test
        log_probs = F.log_softmax(model(x), dim=2)
        test_loss = criterion(log_probs.transpose(0, 1), labels, in_lens, tg_lens).item()
        decoded = greedy_decode(log_probs, in_lens)
    truth = ["".join(ALPHABET[i] for i in row[:n].tolist()) for row, n in zip(labels, tg_lens.tolist())]
    cer = sum(edit_distance(d, t) for d, t in zip(decoded, truth)) / sum(len(t) for t in truth)
    result = {"history": history, "test_loss": test_loss, "decoded": decoded, "cer": cer}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
