"""A char-RNN in the style of the popular tutorials: a ``CharRNN(nn.Module)`` with
``nn.Embedding`` + ``nn.GRU(num_layers=2, dropout=...)`` + ``nn.Linear``, ``init_hidden`` with
``weight.new_zeros``, random chunks of a text, ``nn.utils.clip_grad_norm_`` returning the norm,
``time``-stamped progress, temperature sampling with ``torch.multinomial`` on
``output.div(t).exp()``, and ``torch.manual_seed`` reproducibility (two sampled strings from
the same seed must be equal).

    python s15_char_rnn_gru.py --n-epochs 20 --out charrnn.json
"""

import argparse
import json
import math
import random
import string
import time

import numpy as np
import torch
import torch.nn as nn

all_characters = string.printable
n_characters = len(all_characters)
TEXT = ("the quick brown fox jumps over the lazy dog. pack my box with five dozen liquor jugs. "
        "how vexingly quick daft zebras jump! sphinx of black quartz, judge my vow. ") * 3


class CharRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, model="gru", n_layers=2, dropout=0.0):
        super().__init__()
        self.model = model.lower()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.n_layers = n_layers
        self.encoder = nn.Embedding(input_size, hidden_size)
        if self.model == "gru":
            self.rnn = nn.GRU(hidden_size, hidden_size, n_layers, dropout=dropout)
        elif self.model == "lstm":
            self.rnn = nn.LSTM(hidden_size, hidden_size, n_layers, dropout=dropout)
        self.decoder = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        batch_size = input.size(0)
        encoded = self.encoder(input)
        output, hidden = self.rnn(encoded.view(1, batch_size, -1), hidden)
        output = self.decoder(output.view(batch_size, -1))
        return output, hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        if self.model == "lstm":
            return (weight.new_zeros(self.n_layers, batch_size, self.hidden_size),
                    weight.new_zeros(self.n_layers, batch_size, self.hidden_size))
        return weight.new_zeros(self.n_layers, batch_size, self.hidden_size)


def char_tensor(s):
    tensor = torch.zeros(len(s)).long()
    for c in range(len(s)):
        try:
            tensor[c] = all_characters.index(s[c])
        except ValueError:
            continue
    return tensor


def random_training_set(chunk_len, batch_size):
    inp = torch.LongTensor(batch_size, chunk_len)
    target = torch.LongTensor(batch_size, chunk_len)
    for bi in range(batch_size):
        start_index = random.randint(0, len(TEXT) - chunk_len - 1)
        end_index = start_index + chunk_len + 1
        chunk = TEXT[start_index:end_index]
        inp[bi] = char_tensor(chunk[:-1])
        target[bi] = char_tensor(chunk[1:])
    return inp, target


def time_since(since):
    s = time.time() - since
    m = math.floor(s / 60)
    s -= m * 60
    return "%dm %ds" % (m, s)  # noqa: UP031


def generate(decoder, prime_str="A", predict_len=20, temperature=0.8, greedy=False):
    hidden = decoder.init_hidden(1)
    prime_input = char_tensor(prime_str).unsqueeze(0)
    predicted = prime_str
    for p in range(len(prime_str) - 1):
        _, hidden = decoder(prime_input[:, p], hidden)
    inp = prime_input[:, -1]
    for _ in range(predict_len):
        output, hidden = decoder(inp, hidden)
        if greedy:
            top_i = output.argmax(-1)[0].item()
        else:
            output_dist = output.data.view(-1).div(temperature).exp()
            top_i = torch.multinomial(output_dist, 1)[0]
        predicted_char = all_characters[top_i]
        predicted += predicted_char
        inp = char_tensor(predicted_char).unsqueeze(0)
    return predicted


def main():
    argparser = argparse.ArgumentParser()
    argparser.add_argument("--model", type=str, default="gru")
    argparser.add_argument("--n_epochs", "--n-epochs", type=int, default=15)
    argparser.add_argument("--print_every", type=int, default=5)
    argparser.add_argument("--hidden_size", type=int, default=24)
    argparser.add_argument("--n_layers", type=int, default=2)
    argparser.add_argument("--learning_rate", type=float, default=0.01)
    argparser.add_argument("--chunk_len", type=int, default=12)
    argparser.add_argument("--batch_size", type=int, default=8)
    argparser.add_argument("--clip", type=float, default=0.5)
    argparser.add_argument("--out", default=None)
    args = argparser.parse_args()
    random.seed(7)
    torch.manual_seed(7)

    decoder = CharRNN(n_characters, args.hidden_size, n_characters, model=args.model, n_layers=args.n_layers)
    init = np.random.default_rng(3)
    with torch.no_grad():
        for p in decoder.parameters():
            p.copy_(torch.from_numpy(init.uniform(-0.2, 0.2, tuple(p.shape)).astype(np.float32)))
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=args.learning_rate)
    criterion = nn.CrossEntropyLoss()

    def train(inp, target):
        hidden = decoder.init_hidden(args.batch_size)
        decoder.zero_grad()
        loss = 0
        for c in range(args.chunk_len):
            output, hidden = decoder(inp[:, c], hidden)
            loss += criterion(output.view(args.batch_size, -1), target[:, c])
        loss.backward()
        norm = nn.utils.clip_grad_norm_(decoder.parameters(), args.clip)
        decoder_optimizer.step()
        return loss.item() / args.chunk_len, norm.item()

    start = time.time()
    all_losses, norms, greedy = [], [], []
    loss_avg = 0
    print("Training for %d epochs..." % args.n_epochs)  # noqa: UP031
    for epoch in range(1, args.n_epochs + 1):
        loss, norm = train(*random_training_set(args.chunk_len, args.batch_size))
        loss_avg += loss
        all_losses.append(loss)
        norms.append(norm)
        if epoch % args.print_every == 0:
            print("[%s (%d %d%%) %.4f]" % (time_since(start), epoch, epoch / args.n_epochs * 100, loss))  # noqa: UP031
            with torch.no_grad():
                greedy.append(generate(decoder, "th", 15, greedy=True))
            print(greedy[-1], "\n")
    with torch.no_grad():
        torch.manual_seed(123)
        s1 = generate(decoder, "the", 25)
        torch.manual_seed(123)
        s2 = generate(decoder, "the", 25)
    result = {"losses": all_losses, "norms": norms, "greedy": greedy, "same_seed_same_sample": s1 == s2,
              "sample_len": len(s1)}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
