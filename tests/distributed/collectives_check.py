"""Run under mpiexec: checks every collective's values for several dtypes and shapes."""

import numpy as np

import dyngraph as dg
import dyngraph.distributed as dist

dist.init_process_group()
rank, world = dist.get_rank(), dist.get_world_size()

for dt in (dg.float32, dg.float64, dg.int64):
    for shape in ((), (3,), (2, 3, 4)):
        base = np.arange(int(np.prod(shape)) or 1).reshape(shape).astype(dt.np)

        def mk(r, base=base, dt=dt):
            return dg.tensor(base + r * 10, dtype=dt)

        expect_sum = sum(base + r * 10 for r in range(world))
        for op, ref in ((dist.ReduceOp.SUM, expect_sum),
                        (dist.ReduceOp.MAX, base + (world - 1) * 10),
                        (dist.ReduceOp.MIN, base)):
            t = mk(rank)
            dist.all_reduce(t, op=op)
            np.testing.assert_array_equal(t.numpy(), ref)
        t = mk(rank)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        if dt.is_floating_point:
            np.testing.assert_allclose(t.numpy(), expect_sum / world)
        t = mk(rank)
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        np.testing.assert_array_equal(t.numpy(), expect_sum)

        t = mk(rank)
        dist.broadcast(t, src=world - 1)
        np.testing.assert_array_equal(t.numpy(), base + (world - 1) * 10)

        out = [dg.zeros(shape, dtype=dt) for _ in range(world)]
        dist.all_gather(out, mk(rank))
        for r in range(world):
            np.testing.assert_array_equal(out[r].numpy(), base + r * 10)

        outt = dg.zeros((world,) + shape, dtype=dt)
        dist.all_gather_into_tensor(outt, mk(rank))
        np.testing.assert_array_equal(outt.numpy(), np.stack([base + r * 10 for r in range(world)]))

        inputs = [dg.tensor(base + rank * 10 + k, dtype=dt) for k in range(world)]
        res = dg.zeros(shape, dtype=dt)
        dist.reduce_scatter(res, inputs)
        np.testing.assert_array_equal(res.numpy(), sum(base + r * 10 + rank for r in range(world)))

        glist = [dg.zeros(shape, dtype=dt) for _ in range(world)] if rank == 0 else None
        dist.gather(mk(rank), glist, dst=0)
        if rank == 0:
            for r in range(world):
                np.testing.assert_array_equal(glist[r].numpy(), base + r * 10)

        recv = dg.zeros(shape, dtype=dt)
        slist = [mk(r) for r in range(world)] if rank == 0 else None
        dist.scatter(recv, slist, src=0)
        np.testing.assert_array_equal(recv.numpy(), base + rank * 10)

dist.barrier()
print(f"collectives OK rank {rank}")
