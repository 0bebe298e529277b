"""Run under mpiexec -n 2: DDP with 2 ranks x batch B equals one process with batch 2B."""

import numpy as np

import dyngraph as dg
import dyngraph.distributed as dist
import dyngraph.nn as nn

dist.init_process_group()
rank, world = dist.get_rank(), dist.get_world_size()
B, STEPS = 8, 10


def make_model(seed):
    dg.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3)).double()


rng = np.random.default_rng(0)
X = rng.standard_normal((STEPS, world * B, 5))
Y = rng.integers(0, 3, size=(STEPS, world * B))

# DDP: every rank starts from different weights; DDP broadcasts rank 0's.
ddp = dist.DistributedDataParallel(make_model(100 + rank), bucket_cap_mb=0.0005)
opt = dg.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
for s in range(STEPS):
    xb = dg.tensor(X[s, rank * B:(rank + 1) * B])
    yb = dg.tensor(Y[s, rank * B:(rank + 1) * B])
    opt.zero_grad()
    nn.functional.cross_entropy(ddp(xb), yb).backward()
    opt.step()

# Reference: one process, batch 2B, rank 0's initial weights.
ref = make_model(100)
ropt = dg.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
for s in range(STEPS):
    ropt.zero_grad()
    nn.functional.cross_entropy(ref(dg.tensor(X[s])), dg.tensor(Y[s])).backward()
    ropt.step()

for (name, p), q in zip(ddp.module.named_parameters(), ref.parameters()):
    np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=name)
assert len(ddp._buckets) > 1, "the test should exercise several buckets"

# no_sync: accumulate two local backwards, then one synchronised backward
params = list(ddp.module.parameters())


def local_grads(s):
    loss = nn.functional.cross_entropy(ddp.module(dg.tensor(X[s, rank * B:(rank + 1) * B])),
                                       dg.tensor(Y[s, rank * B:(rank + 1) * B]))
    return [g.numpy() for g in dg.autograd.grad(loss, params)]


expected = []
for a, b in zip(local_grads(0), local_grads(1)):   # reference: mean over ranks of the sum
    t = dg.tensor(a + b)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    expected.append(t.numpy())
opt.zero_grad()
with ddp.no_sync():
    nn.functional.cross_entropy(ddp(dg.tensor(X[0, rank * B:(rank + 1) * B])),
                                dg.tensor(Y[0, rank * B:(rank + 1) * B])).backward()
nn.functional.cross_entropy(ddp(dg.tensor(X[1, rank * B:(rank + 1) * B])),
                            dg.tensor(Y[1, rank * B:(rank + 1) * B])).backward()
for p, e in zip(params, expected):
    np.testing.assert_allclose(p.grad.numpy(), e, rtol=1e-10, atol=1e-12)
print(f"ddp OK rank {rank}")
