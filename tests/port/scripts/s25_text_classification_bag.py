"""Text classification with ``nn.EmbeddingBag``, as the official text tutorial writes it: a
vocabulary built from a token iterator, ``collate_batch`` producing ``(label_list, text_list,
offsets)`` with ``torch.cat`` and ``offsets[:-1].cumsum(dim=0)``, ``EmbeddingBag(mode="mean")``
+ ``Linear`` with ``init_weights`` (``uniform_``, ``zero_``), ``SGD`` + ``StepLR(1.0, gamma=0.1)``,
``clip_grad_norm_(model.parameters(), 0.1)``, ``(predicted_label.argmax(1) == label).sum().item()``,
``random_split`` + ``DataLoader(collate_fn=...)``, and a temporal conv net with the older
``nn.utils.weight_norm`` (``Chomp1d``, dilated ``Conv1d`` residual blocks) on the same tokens.

    python s25_text_classification_bag.py --epochs 3 --out textbag.json
"""

import argparse
import json
import time
from collections import Counter

import numpy as np
import torch
from torch import nn
from torch.nn.utils import weight_norm
from torch.utils.data import DataLoader

WORDS = ("good great fine nice happy bad awful poor sad angry the a of and to is it this movie film "
         "was very plot acting").split()


def make_corpus(rng, n):
    data = []
    for _ in range(n):
        label = int(rng.integers(0, 2))
        words = list(rng.choice(WORDS[10:], int(rng.integers(3, 9))))
        words += list(rng.choice(WORDS[:5] if label else WORDS[5:10], int(rng.integers(1, 3))))
        rng.shuffle(words)
        data.append((label + 1, " ".join(words)))
    return data


class Vocab:
    def __init__(self, counter, specials=("<unk>",)):
        self.itos = list(specials) + sorted(counter, key=lambda w: (-counter[w], w))
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.default_index = 0

    def __call__(self, tokens):
        return [self.stoi.get(t, self.default_index) for t in tokens]

    def __len__(self):
        return len(self.itos)


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super().__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.0):
        super().__init__()
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size, stride=stride, padding=padding,
                                           dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)
        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size, stride=stride, padding=padding,
                                           dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)
        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TCNClassifier(nn.Module):
    def __init__(self, vocab_size, emb, channels, num_class, kernel_size=2):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, emb, padding_idx=0)
        layers = []
        for i, out_ch in enumerate(channels):
            dilation = 2 ** i
            in_ch = emb if i == 0 else channels[i - 1]
            layers += [TemporalBlock(in_ch, out_ch, kernel_size, 1, dilation, (kernel_size - 1) * dilation)]
        self.network = nn.Sequential(*layers)
        self.linear = nn.Linear(channels[-1], num_class)

    def forward(self, tokens):
        y = self.network(self.emb(tokens).transpose(1, 2))
        return self.linear(y[:, :, -1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--split", choices=["random", "ordered"], default="ordered")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    train_iter, test_iter = make_corpus(rng, 48), make_corpus(rng, 16)
    tokenizer = str.split
    counter = Counter()
    for _, text in train_iter:
        counter.update(tokenizer(text))
    vocab = Vocab(counter)
    text_pipeline = lambda x: vocab(tokenizer(x))
    label_pipeline = lambda x: int(x) - 1

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for _label, _text in batch:
            label_list.append(label_pipeline(_label))
            processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
            text_list.append(processed_text)
            offsets.append(processed_text.size(0))
        label_list = torch.tensor(label_list, dtype=torch.int64)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        text_list = torch.cat(text_list)
        return label_list.to(device), text_list.to(device), offsets.to(device)

    model = TextClassificationModel(len(vocab), 8, 2).to(device)
    init = np.random.default_rng(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(init.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
    if args.split == "random":
        num_train = int(len(train_iter) * 0.75)
        split_train_, split_valid_ = torch.utils.data.random_split(train_iter, [num_train, len(train_iter) - num_train])
    else:
        split_train_, split_valid_ = train_iter[:36], train_iter[36:]
    train_dataloader = DataLoader(split_train_, batch_size=args.batch_size, shuffle=False, collate_fn=collate_batch)
    valid_dataloader = DataLoader(split_valid_, batch_size=args.batch_size, shuffle=False, collate_fn=collate_batch)
    test_dataloader = DataLoader(test_iter, batch_size=args.batch_size, shuffle=False, collate_fn=collate_batch)

    def train(dataloader, epoch):
        model.train()
        total_acc, total_count, losses = 0, 0, []
        start_time = time.time()
        for idx, (label, text, offsets) in enumerate(dataloader):
            optimizer.zero_grad()
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
            losses.append(loss.item())
            if idx % 2 == 0 and idx > 0:
                elapsed = time.time() - start_time
                print(f"| epoch {epoch:3d} | {idx:5d}/{len(dataloader):5d} batches | accuracy {total_acc / total_count:8.3f}"
                      f" | {elapsed:.2f}s")
        return losses

    def evaluate(dataloader):
        model.eval()
        total_acc, total_count = 0, 0
        with torch.no_grad():
            for label, text, offsets in dataloader:
                predicted_label = model(text, offsets)
                total_acc += (predicted_label.argmax(1) == label).sum().item()
                total_count += label.size(0)
        return total_acc / total_count

    total_accu = None
    history = []
    for epoch in range(1, args.epochs + 1):
        losses = train(train_dataloader, epoch)
        accu_val = evaluate(valid_dataloader)
        if total_accu is not None and total_accu > accu_val:
            scheduler.step()
        else:
            total_accu = accu_val
        history.append({"losses": losses, "val": accu_val, "lr": scheduler.get_last_lr()[0]})
    test_acc = evaluate(test_dataloader)

    tcn = TCNClassifier(len(vocab), 6, [6, 6], 2).to(device)
    with torch.no_grad():
        for _name, p in sorted(tcn.named_parameters()):
            p.copy_(torch.from_numpy(init.uniform(-0.4, 0.4, tuple(p.shape)).astype(np.float32)))
    tokens = torch.tensor([[0] * (10 - len(ids)) + ids for ids in (text_pipeline(t)[:10] for _, t in train_iter[:16])])
    labels = torch.tensor([label_pipeline(lab) for lab, _ in train_iter[:16]])
    opt = torch.optim.Adam(tcn.parameters(), lr=1e-2)
    tcn_losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = criterion(tcn(tokens), labels)
        loss.backward()
        opt.step()
        tcn_losses.append(loss.item())
    result = {"history": history, "test_acc": test_acc, "vocab": len(vocab), "tcn": tcn_losses,
              "tcn_keys": sorted(tcn.state_dict())[:6]}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
