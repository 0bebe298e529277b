"""A word-level LSTM language model trained with truncated BPTT, in the layout of the
classic example: a ``Corpus`` dictionary, ``batchify``, ``get_batch``, ``repackage_hidden``,
``clip_grad_norm_``, manual SGD on ``p.data``, learning-rate annealing, and the whole model
saved with ``torch.save(model, f)`` and reloaded with ``torch.load`` under
``torch.serialization.safe_globals``.

    python s07_word_language_model.py --epochs 2 --save model.pt --out lm.json
"""

import argparse
import json
import math

import numpy as np
import torch
import torch.nn as nn

TEXT = """the quick brown fox jumps over the lazy dog
a lazy dog sleeps in the sun while the fox runs
the sun rises over the hills and the dog wakes
quick foxes and lazy dogs share the quiet hills
"""


class Dictionary:
    def __init__(self):
        self.word2idx, self.idx2word = {}, []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, text):
        self.dictionary = Dictionary()
        lines = text.strip().split("\n")
        self.train = self.tokenize(lines[:3])
        self.valid = self.tokenize(lines[3:])

    def tokenize(self, lines):
        idss = []
        for line in lines:
            words = line.split() + ["<eos>"]
            idss.append(torch.tensor([self.dictionary.add_word(w) for w in words]).type(torch.int64))
        return torch.cat(idss)


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def main():
    parser = argparse.ArgumentParser(description="word-level language model")
    parser.add_argument("--model", type=str, default="LSTM", help="RNN_TANH, RNN_RELU, LSTM, GRU")
    parser.add_argument("--emsize", type=int, default=12)
    parser.add_argument("--nhid", type=int, default=12)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=5.0)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=4, metavar="N")
    parser.add_argument("--bptt", type=int, default=5)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--tied", action="store_true")
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--save", type=str, default="model.pt")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cpu")

    corpus = Corpus(TEXT)
    train_data = batchify(corpus.train, args.batch_size, device)
    val_data = batchify(corpus.valid, 2, device)
    ntokens = len(corpus.dictionary)
    kind = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(args.model, args.model)
    model = RNNModel(kind, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)
    rng = np.random.default_rng(0)
    for prm in model.parameters():
        prm.data.copy_(torch.from_numpy(rng.uniform(-0.1, 0.1, tuple(prm.shape))))
    criterion = nn.NLLLoss()

    def evaluate(data_source):
        model.eval()
        total_loss = 0.0
        hidden = model.init_hidden(2)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args.bptt)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    def train(lr, losses):
        model.train()
        hidden = model.init_hidden(args.batch_size)
        for i in range(0, train_data.size(0) - 1, args.bptt):
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())

    lr, best_val_loss, losses, vals = args.lr, None, [], []
    for _ in range(1, args.epochs + 1):
        train(lr, losses)
        val_loss = evaluate(val_data)
        vals.append([val_loss, math.exp(val_loss)])
        if not best_val_loss or val_loss < best_val_loss:
            with open(args.save, "wb") as f:
                torch.save(model, f)
            best_val_loss = val_loss
        else:
            lr /= 4.0
    with torch.serialization.safe_globals([RNNModel, Dictionary, getattr(nn, kind), nn.Embedding, nn.Linear,
                                           nn.Dropout, nn.NLLLoss]):
        with open(args.save, "rb") as f:
            model = torch.load(f)
    result = {"losses": losses, "vals": vals, "reloaded": evaluate(val_data), "lr": lr, "ntokens": ntokens,
              "type": type(model).__name__}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
