"""A transformer encoder text classifier as tutorials write it: a ``PositionalEncoding``
module with a ``register_buffer("pe", ...)`` built from ``torch.exp(torch.arange(...) *
(-math.log(10000.0) / d_model))``, ``nn.TransformerEncoder(nn.TransformerEncoderLayer(
batch_first=True, activation="gelu"), num_layers, enable_nested_tensor=False)``, a
``src_key_padding_mask`` from ``tokens == pad``, mean pooling over the unpadded positions,
``CrossEntropyLoss(label_smoothing=0.1)``, AdamW with a linear warm-up ``LambdaLR``,
``clip_grad_norm_``, evaluation with ``argmax`` and accuracy under ``torch.inference_mode()``.

    python s18_transformer_classifier.py --epochs 3 --out tfcls.json
"""

import argparse
import json
import math

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PAD = 0


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, :x.size(1)]
        return self.dropout(x)


class TransformerClassifier(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, nclass, dropout=0.0):
        super().__init__()
        self.model_type = "Transformer"
        self.embedding = nn.Embedding(ntoken, d_model, padding_idx=PAD)
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout, activation="gelu",
                                                    batch_first=True)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers, enable_nested_tensor=False)
        self.d_model = d_model
        self.classifier = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, nclass))

    def forward(self, src):
        mask = src == PAD
        x = self.embedding(src) * math.sqrt(self.d_model)
        x = self.pos_encoder(x)
        x = self.transformer_encoder(x, src_key_padding_mask=mask)
        keep = (~mask).unsqueeze(-1).type_as(x)
        pooled = (x * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.classifier(pooled)


def make_data(rng, n, vocab, max_len):
    lengths = rng.integers(3, max_len + 1, n)
    tokens = np.zeros((n, max_len), dtype=np.int64)
    labels = np.zeros(n, dtype=np.int64)
    for i, L in enumerate(lengths):
        seq = rng.integers(1, vocab, L)
        tokens[i, :L] = seq
        labels[i] = int((seq < vocab // 2).sum() * 2 > L) + int(seq[0] % 2 == 0) * 2
    return torch.from_numpy(tokens), torch.from_numpy(labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(42)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    xtr, ytr = make_data(rng, 48, 20, 10)
    xva, yva = make_data(rng, 16, 20, 10)
    train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch_size)
    val_loader = DataLoader(TensorDataset(xva, yva), batch_size=args.batch_size)
    model = TransformerClassifier(20, 16, 2, 32, 2, 4, args.dropout).to(device)
    init = np.random.default_rng(2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                continue
            p.copy_(torch.from_numpy(init.normal(0, 0.2, tuple(p.shape)).astype(np.float32)))
        model.embedding.weight[PAD].zero_()
    print(f"The model has {sum(p.numel() for p in model.parameters() if p.requires_grad):,} trainable parameters")
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    total_steps = args.epochs * len(train_loader)

    def lr_lambda(step):
        if step < args.warmup:
            return float(step + 1) / float(max(1, args.warmup))
        return max(0.0, float(total_steps - step) / float(max(1, total_steps - args.warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    history = []
    for epoch in range(args.epochs):
        model.train()
        epoch_loss, norms = 0.0, []
        for src, tgt in train_loader:
            src, tgt = src.to(device), tgt.to(device)
            optimizer.zero_grad(set_to_none=True)
            output = model(src)
            loss = criterion(output, tgt)
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
            optimizer.step()
            scheduler.step()
            epoch_loss += loss.item() * src.size(0)
        model.eval()
        correct = 0
        with torch.inference_mode():
            for src, tgt in val_loader:
                logits = model(src.to(device))
                correct += (logits.argmax(dim=-1) == tgt.to(device)).sum().item()
        history.append({"loss": epoch_loss / len(train_loader.dataset), "norms": norms,
                        "val_acc": correct / len(val_loader.dataset), "lr": scheduler.get_last_lr()[0]})
        print(f"| epoch {epoch:3d} | loss {history[-1]['loss']:5.3f} | val acc {history[-1]['val_acc']:.3f}")
    with torch.no_grad():
        probs = torch.softmax(model(xva[:3]), dim=-1)
    result = {"history": history, "probs": probs.tolist(), "pe_row": model.pos_encoder.pe[0, 3].tolist()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
