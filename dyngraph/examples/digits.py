"""The flagship demo: train a small CNN on handwritten digits, checkpoint it, reload it.

    python -m dyngraph.examples.digits                       # scikit-learn's 8x8 digits, ~15 s
    python -m dyngraph.examples.digits --dataset fashion-mnist              # CNN, 2 epochs, ~90%

It is an ordinary PyTorch-style training loop with ``import dyngraph as dg``:
``dg.data.DataLoader`` batches and shuffles (seeded), ``dg.nn`` builds the model,
``dg.optim.Adam`` with a ``OneCycleLR`` schedule trains it, a tqdm bar shows the
running loss and accuracy, then the test accuracy is printed, the model and
optimizer are saved with ``dg.save`` (a safetensors file), reloaded into a fresh
model with ``dg.load``, and the two models' predictions are compared.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import dyngraph as dg
from dyngraph import nn
from dyngraph.data import DataLoader, Subset
from dyngraph.data import transforms as T

DATASETS = ("digits", "fashion-mnist")
DEFAULTS = {  # per dataset: epochs, batch size, peak learning rate, model
    "digits": dict(epochs=12, batch_size=32, lr=0.01, model="cnn"),
    "fashion-mnist": dict(epochs=2, batch_size=128, lr=0.005, model="cnn"),
}


def make_model(kind: str, image_size: int) -> nn.Module:
    """The CNN (conv 1→16, pool, conv 16→32, pool, dropout, two linear layers) or an MLP baseline."""
    if kind == "cnn":
        side = image_size // 4
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(0.25), nn.Linear(32 * side * side, 64), nn.ReLU(), nn.Linear(64, 10))
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(image_size * image_size, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    raise ValueError(f"unknown model {kind!r}: use 'cnn' or 'mlp'")


def load_data(name: str):
    """(train dataset, test images tensor, test labels tensor, image side)."""
    if name == "digits":
        train = dg.data.datasets.digits("train")
        test = dg.data.datasets.digits("test")
        return train, test.data, test.targets, 8
    if name == "fashion-mnist":
        tf = T.Compose([T.ToTensor(), T.Normalize((0.286,), (0.353,))])
        train = dg.data.datasets.FashionMNIST(train=True, transform=tf)
        test = dg.data.datasets.FashionMNIST(train=False)
        images = (test.data.numpy().astype(np.float32) / 255.0 - 0.286) / 0.353
        return train, dg.tensor(images[:, None]), test.targets, 28
    raise ValueError(f"unknown dataset {name!r}: choose from {', '.join(DATASETS)}")


def predict(model: nn.Module, images: dg.Tensor, batch_size: int = 1000) -> np.ndarray:
    """Logits for ``images`` (evaluation mode, no graph)."""
    model.eval()
    outs = []
    with dg.no_grad():
        for start in range(0, images.shape[0], batch_size):
            outs.append(model(images[start:start + batch_size]).numpy())
    model.train()
    return np.concatenate(outs)


def train(args, out=sys.stdout) -> dict:
    """Train, evaluate, checkpoint, reload; returns the figures (used by the tests)."""
    from tqdm import tqdm  # noqa: PLC0415  (tqdm: optional dependency, imported on first use)

    dg.manual_seed(args.seed)
    t0 = time.perf_counter()
    train_set, test_x, test_y, side = load_data(args.dataset)
    if args.train_size and args.train_size < len(train_set):
        pick = np.random.default_rng(args.seed).permutation(len(train_set))[: args.train_size]
        train_set = Subset(train_set, pick.tolist())
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=False,
                        num_workers=args.num_workers, generator=dg.Generator().manual_seed(args.seed))
    model = make_model(args.model, side)
    opt = dg.optim.Adam(model.parameters(), lr=args.lr)
    sched = dg.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                             steps_per_epoch=len(loader))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"dyngraph {dg.__version__}: {args.model.upper()} ({n_params:,} parameters) on {args.dataset} "
          f"({len(train_set)} train / {test_x.shape[0]} test images, {side}x{side})", file=out)
    for epoch in range(args.epochs):
        seen = correct = 0
        total_loss = 0.0
        bar = tqdm(loader, desc=f"epoch {epoch + 1}/{args.epochs}", unit="batch", file=out,
                   leave=True, disable=args.quiet, dynamic_ncols=True, mininterval=0.2)
        for images, labels in bar:
            logits = model(images)
            loss = nn.functional.cross_entropy(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            n = labels.shape[0]
            seen += n
            total_loss += loss.item() * n
            correct += int((logits.detach().numpy().argmax(1) == labels.numpy()).sum())
            bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.2%}", refresh=False)
        bar.close()
    train_time = time.perf_counter() - t0
    logits = predict(model, test_x)
    accuracy = float((logits.argmax(1) == test_y.numpy()).mean())
    print(f"test accuracy: {accuracy:.2%} ({int(round(accuracy * test_x.shape[0]))}/{test_x.shape[0]}), "
          f"trained in {train_time:.1f} s", file=out)

    path = args.checkpoint or os.path.join(tempfile.gettempdir(), f"dyngraph-{args.dataset}-{args.model}.safetensors")
    dg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "epoch": args.epochs, "test_accuracy": accuracy,
             "config": {"dataset": args.dataset, "model": args.model, "seed": args.seed}}, path)
    print(f"saved checkpoint: {path} ({os.path.getsize(path) / 1024:.0f} KiB)", file=out)

    checkpoint = dg.load(path)
    dg.manual_seed(args.seed + 1)                  # a fresh model with different initial weights
    fresh = make_model(checkpoint["config"]["model"], side)
    fresh.load_state_dict(checkpoint["model"])
    reloaded = predict(fresh, test_x)
    same = bool(np.array_equal(reloaded.argmax(1), logits.argmax(1)))
    max_diff = float(np.abs(reloaded - logits).max())
    print(f"reloaded into a fresh model: predictions identical: {same} (max |logit difference| = {max_diff:.1e})",
          file=out)
    first = test_y.numpy()[:12]
    print(f"first test labels:      {' '.join(map(str, first))}", file=out)
    print(f"reloaded model predicts: {' '.join(map(str, reloaded.argmax(1)[:12]))}", file=out)
    return {"accuracy": accuracy, "identical": same, "max_diff": max_diff, "checkpoint": path,
            "seconds": time.perf_counter() - t0, "train_seconds": train_time}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m dyngraph.examples.digits", description=__doc__.split("\n")[0])
    p.add_argument("--dataset", choices=DATASETS, default="digits")
    p.add_argument("--model", choices=("cnn", "mlp"), default=None, help="default: cnn")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None, help="peak learning rate of the one-cycle schedule")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default=None, help="where to save (default: a file in the temp directory)")
    p.add_argument("--train-size", type=int, default=None, help="train on a random subset of this size")
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    for key, value in DEFAULTS[args.dataset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main(argv=None) -> dict:
    return train(parse_args(argv))


if __name__ == "__main__":
    main()
