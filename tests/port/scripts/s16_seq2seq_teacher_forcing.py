"""Seq2seq translation in the style of the classic tutorial: ``Lang`` vocabularies built from
sentence pairs, ``EncoderRNN`` (``nn.GRU(batch_first=True)``), ``BahdanauAttention`` with
``Wa``/``Ua``/``Va``, ``AttnDecoderRNN`` unrolled step by step with teacher forcing chosen by
``random.random() < teacher_forcing_ratio``, ``topk(1)`` + ``squeeze(-1).detach()`` feedback,
``F.log_softmax`` + ``nn.NLLLoss``, two optimizers, ``evaluate`` with ``EOS`` early stop and
the attention weights.

    python s16_seq2seq_teacher_forcing.py --n-iters 30 --out seq2seq.json
"""

import argparse
import json
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

SOS_token = 0
EOS_token = 1
MAX_LENGTH = 7
PAIRS = [("je suis froid", "i am cold"), ("il est grand", "he is tall"), ("elle est petite", "she is small"),
         ("nous sommes ici", "we are here"), ("je suis ici", "i am here"), ("il est froid", "he is cold"),
         ("elle est grande", "she is tall"), ("nous sommes grands", "we are tall")]


class Lang:
    def __init__(self, name):
        self.name = name
        self.word2index = {}
        self.word2count = {}
        self.index2word = {0: "SOS", 1: "EOS"}
        self.n_words = 2

    def addSentence(self, sentence):
        for word in sentence.split(" "):
            self.addWord(word)

    def addWord(self, word):
        if word not in self.word2index:
            self.word2index[word] = self.n_words
            self.word2count[word] = 1
            self.index2word[self.n_words] = word
            self.n_words += 1
        else:
            self.word2count[word] += 1


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None, teacher_forcing=True):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs)
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None and teacher_forcing:
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        output = self.out(output)
        return output, hidden, attn_weights


def indexesFromSentence(lang, sentence):
    return [lang.word2index[word] for word in sentence.split(" ")]


def tensorFromSentence(lang, sentence):
    indexes = indexesFromSentence(lang, sentence)
    indexes.append(EOS_token)
    return torch.tensor(indexes, dtype=torch.long).view(1, -1)


def get_batches(input_lang, output_lang, batch_size):
    n = len(PAIRS)
    input_ids = np.zeros((n, MAX_LENGTH), dtype=np.int32)
    target_ids = np.zeros((n, MAX_LENGTH), dtype=np.int32)
    for idx, (inp, tgt) in enumerate(PAIRS):
        inp_ids = indexesFromSentence(input_lang, inp) + [EOS_token]
        tgt_ids = indexesFromSentence(output_lang, tgt) + [EOS_token]
        input_ids[idx, :len(inp_ids)] = inp_ids
        target_ids[idx, :len(tgt_ids)] = tgt_ids
    data = torch.utils.data.TensorDataset(torch.LongTensor(input_ids), torch.LongTensor(target_ids))
    return torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=False)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden-size", type=int, default=16)
    parser.add_argument("--n-epochs", type=int, default=12)
    parser.add_argument("--teacher-forcing-ratio", type=float, default=0.5)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    random.seed(0)
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    input_lang, output_lang = Lang("fra"), Lang("eng")
    for a, b in PAIRS:
        input_lang.addSentence(a)
        output_lang.addSentence(b)
    loader = get_batches(input_lang, output_lang, batch_size=4)
    encoder = EncoderRNN(input_lang.n_words, args.hidden_size, args.dropout).to(device)
    decoder = AttnDecoderRNN(args.hidden_size, output_lang.n_words, args.dropout).to(device)
    init = np.random.default_rng(5)
    with torch.no_grad():
        for p in list(encoder.parameters()) + list(decoder.parameters()):
            p.copy_(torch.from_numpy(init.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    losses, forcing = [], []
    for epoch in range(1, args.n_epochs + 1):
        total_loss = 0
        for input_tensor, target_tensor in loader:
            input_tensor, target_tensor = input_tensor.to(device), target_tensor.to(device)
            encoder_optimizer.zero_grad()
            decoder_optimizer.zero_grad()
            use_tf = random.random() < args.teacher_forcing_ratio
            forcing.append(use_tf)
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor, use_tf)
            loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
            loss.backward()
            encoder_optimizer.step()
            decoder_optimizer.step()
            total_loss += loss.item()
        losses.append(total_loss / len(loader))
        print(f"epoch {epoch} loss {losses[-1]:.4f}")

    encoder.eval()
    decoder.eval()
    decoded, attn_rows = [], []
    with torch.no_grad():
        for src, _ in PAIRS[:4]:
            input_tensor = tensorFromSentence(input_lang, src).to(device)
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            decoder_outputs, decoder_hidden, decoder_attn = decoder(encoder_outputs, encoder_hidden)
            _, topi = decoder_outputs.topk(1)
            decoded_ids = topi.squeeze()
            words = []
            for idx in decoded_ids:
                if idx.item() == EOS_token:
                    words.append("<EOS>")
                    break
                words.append(output_lang.index2word[idx.item()])
            decoded.append(" ".join(words))
            attn_rows.append(decoder_attn[0, 0].tolist())
    result = {"losses": losses, "forcing": forcing, "decoded": decoded, "attn": attn_rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
