"""Data-parallel training of the digits CNN over MPI.

    mpiexec -n 2 python -m dyngraph.examples.ddp_digits [--epochs 12] [--batch-size 32]

Every rank builds the flagship demo's CNN (``dyngraph.examples.digits``); DDP
broadcasts rank 0's weights, each rank trains on its own shard of the training
set (``DistributedSampler``), gradients are averaged during ``backward()``, and
rank 0 evaluates, saves a checkpoint, and reports the test accuracy.  With
``--batch-size B`` per rank the global batch is ``world * B``; the learning
rate is kept as for one process with batch ``B`` times ``world`` ("linear
scaling"), so the accuracy matches the single-process run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import dyngraph as dg
import dyngraph.distributed as dist
from dyngraph import nn
from dyngraph.data import DataLoader
from dyngraph.examples.digits import load_data, make_model, predict


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=16, help="per rank")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", default=os.path.join(tempfile.gettempdir(), "dyngraph_ddp_digits.safetensors"))
    args = ap.parse_args(argv)

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    dg.manual_seed(args.seed + rank)  # different dropout masks per rank; weights come from rank 0
    train, test_x, test_y, side = load_data("digits")
    model = dist.DistributedDataParallel(make_model("cnn", side))
    sampler = dist.DistributedSampler(train, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    opt = dg.optim.Adam(model.parameters(), lr=args.lr)
    sched = dg.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                             steps_per_epoch=len(loader))
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total, n = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(y)
            n += len(y)
        mean = dg.tensor([total, n], dtype=dg.float64)
        dist.all_reduce(mean)
        if rank == 0:
            print(f"epoch {epoch + 1:2d}/{args.epochs}  train loss {mean[0].item() / mean[1].item():.4f}",
                  flush=True)
    elapsed = time.perf_counter() - t0
    acc = float((predict(model.module, test_x).argmax(1) == test_y.numpy()).mean())
    if rank == 0:
        dg.save(model.module.state_dict(), args.checkpoint)  # checkpoint from rank 0 only
    dist.barrier()
    restored = make_model("cnn", side)
    restored.load_state_dict(dg.load(args.checkpoint))  # every rank loads it
    same = np.array_equal(predict(restored, test_x), predict(model.module, test_x))
    if rank == 0:
        print(f"{world} ranks, {elapsed:.1f} s training; test accuracy {acc * 100:.2f}%; "
              f"reloaded checkpoint gives identical predictions: {same}")
    return acc


if __name__ == "__main__":
    main()
