"""Run under mpiexec -n 2: mismatched models and collectives raise the same error on every rank
(no hang, no silent result), and the group stays usable afterwards."""

import numpy as np

import dyngraph as dg
import dyngraph.distributed as dist
import dyngraph.nn as nn

dist.init_process_group()
rank, world = dist.get_rank(), dist.get_world_size()


def expect_error(fn, *needles):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        for n in needles:
            assert n in msg, (n, msg)
        print(f"rank {rank} raised: {msg}", flush=True)
        return
    raise AssertionError(f"rank {rank}: no error for {needles}")


# DDP over different models: PyTorch raises at construction; so must we, on every rank
expect_error(lambda: dist.DistributedDataParallel(nn.Linear(4, 4 + rank)),
             "DDP expects the same model", "'weight'", "[4, 4]", "[5, 4]", "rank 1")
expect_error(lambda: dist.DistributedDataParallel(
    nn.Sequential(*[nn.Linear(3, 3) for _ in range(1 + rank)])), "rank 0 has 2 parameters", "rank 1 has 4")
expect_error(lambda: dist.DistributedDataParallel(nn.Linear(3, 3), bucket_cap_mb=25 if rank else 1e-5),
             "gradient buckets differ")

# all_reduce: same number of elements, different shapes (used to reduce silently)
expect_error(lambda: dist.all_reduce(dg.ones((2, 3) if rank == 0 else (3, 2))),
             "all_reduce", "rank 0: all_reduce of shape [2, 3] float32 with op=SUM",
             "rank 1: all_reduce of shape [3, 2] float32 with op=SUM")
# different counts (used to abort with MPI's "Message truncated"), dtypes, ops, collectives, roots
expect_error(lambda: dist.all_reduce(dg.ones(4 + rank)), "shape [4]", "shape [5]")
expect_error(lambda: dist.all_reduce(dg.ones(3, dtype=dg.float32 if rank else dg.float64)), "float64", "float32")
expect_error(lambda: dist.all_reduce(dg.ones(3), op=dist.ReduceOp.SUM if rank else dist.ReduceOp.MAX),
             "op=MAX", "op=SUM")
expect_error(lambda: dist.all_reduce(dg.ones(3)) if rank else dist.broadcast(dg.ones(3), src=0),
             "rank 0: broadcast of shape [3] float32 with src=0",
             "rank 1: all_reduce of shape [3] float32 with op=SUM")
expect_error(lambda: dist.broadcast(dg.ones(3), src=rank), "src=0", "src=1")

# still usable: a correct model and collectives give the right values
dg.manual_seed(rank)
model = dist.DistributedDataParallel(nn.Linear(3, 2))
w = model.module.weight.detach().numpy().copy()
ref = dg.tensor(w)
dist.broadcast(ref, src=0)
np.testing.assert_array_equal(ref.numpy(), w)             # rank 0's weights everywhere
t = dg.ones(2, 3) * (rank + 1)
dist.all_reduce(t)
np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 3.0))
objs = [{"epoch": 7}] if rank == 0 else [None]
dist.broadcast_object_list(objs, src=0)
assert objs == [{"epoch": 7}]
dist.barrier()
print(f"mismatch OK rank {rank}", flush=True)
