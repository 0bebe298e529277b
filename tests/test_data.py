"""dg.data: datasets, samplers, collation, DataLoader (ordering, seeds, workers, errors, shutdown),
the bundled/file datasets and transforms."""

from __future__ import annotations

import collections
import gzip
import os
import struct

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    get_worker_info,
    random_split,
)
from dyngraph.data import transforms as T
from dyngraph.data.datasets import IDXError, TreeFormatError, parse_tree, read_idx

FMNIST = "/usr/share/datasets/fashion-mnist"
SST_ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "sst")


class Range(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i


class Failing(Range):
    def __getitem__(self, i):
        if i == 5:
            raise KeyError(f"sample {i} is broken")
        return i


class SeedEcho(Range):
    def __getitem__(self, i):
        info = get_worker_info()
        return np.array([i, info.id, info.num_workers, info.seed % 1000003, dg.randint(0, 10**6, (1,)).item()])


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


def _flat(loader):
    return [int(v) for b in loader for v in np.asarray(b).ravel()]


# -- datasets and samplers ------------------------------------------------------------------
def test_tensor_subset_concat_datasets():
    x, y = dg.arange(10).reshape(5, 2), dg.tensor([0, 1, 0, 1, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 5 and ds[2][0].tolist() == [4, 5] and ds[2][1].item() == 0
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(x, dg.zeros(4))
    sub = Subset(ds, [4, 0])
    assert len(sub) == 2 and sub[0][1].item() == 1
    cat = ConcatDataset([Range(3), Range(2)])
    assert [cat[i] for i in range(5)] == [0, 1, 2, 0, 1] and cat[-1] == 1 and len(Range(3) + Range(4)) == 7
    with pytest.raises(IndexError):
        cat[5]


def test_random_split_lengths_fractions_and_generator():
    a, b = random_split(Range(10), [3, 7], generator=dg.Generator().manual_seed(1))
    assert len(a) == 3 and len(b) == 7 and sorted(list(a.indices) + list(b.indices)) == list(range(10))
    parts = random_split(Range(11), [0.5, 0.3, 0.2], generator=dg.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [6, 3, 2]      # floor, then remainders round-robin (PyTorch)
    again = random_split(Range(11), [0.5, 0.3, 0.2], generator=dg.Generator().manual_seed(1))
    assert [p.indices for p in parts] == [p.indices for p in again]
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(Range(10), [3, 3])


def test_samplers():
    assert list(SequentialSampler(Range(4))) == [0, 1, 2, 3]
    g = dg.Generator().manual_seed(3)
    perm = list(RandomSampler(Range(10), generator=g))
    assert sorted(perm) == list(range(10))
    assert perm == list(RandomSampler(Range(10), generator=dg.Generator().manual_seed(3)))
    assert perm != list(RandomSampler(Range(10), generator=g))           # the generator advanced
    draws = list(RandomSampler(Range(3), replacement=True, num_samples=50, generator=g))
    assert len(draws) == 50 and set(draws) <= {0, 1, 2}
    assert len(list(RandomSampler(Range(3), num_samples=7))) == 7
    assert sorted(SubsetRandomSampler([5, 7, 9], generator=g)) == [5, 7, 9]
    w = list(WeightedRandomSampler([0.0, 0.0, 1.0, 0.0], 20, generator=g))
    assert w == [2] * 20
    assert sorted(WeightedRandomSampler([1, 2, 3], 3, replacement=False)) == [0, 1, 2]
    with pytest.raises(ValueError, match="num_samples"):
        WeightedRandomSampler([1.0], 0)
    assert list(BatchSampler(range(5), 2, False)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(range(5), 2, True)) == [[0, 1], [2, 3]] and len(BatchSampler(range(5), 2, True)) == 2
    dg.manual_seed(5)
    a = list(RandomSampler(Range(20)))
    dg.manual_seed(5)
    assert a == list(RandomSampler(Range(20)))


def test_default_collate():
    Point = collections.namedtuple("Point", "x y")
    batch = [{"img": np.ones((2, 2), np.float32), "label": 1, "w": 0.5, "name": "a", "p": Point(1, dg.ones(3)),
              "t": (dg.tensor([1.0]), [True])},
             {"img": np.zeros((2, 2), np.float32), "label": 2, "w": 1.5, "name": "b", "p": Point(2, dg.zeros(3)),
              "t": (dg.tensor([2.0]), [False])}]
    out = default_collate(batch)
    assert tuple(out["img"].shape) == (2, 2, 2) and out["img"].dtype == dg.float32
    assert out["label"].dtype == dg.int64 and out["label"].tolist() == [1, 2]
    assert out["w"].dtype == dg.float64 and out["name"] == ["a", "b"]
    assert isinstance(out["p"], Point) and out["p"].x.tolist() == [1, 2] and tuple(out["p"].y.shape) == (2, 3)
    assert isinstance(out["t"], list) and out["t"][0].tolist() == [[1.0], [2.0]] and out["t"][1][0].tolist() == [True, False]
    assert default_collate([np.float32(1), np.float32(2)]).dtype == dg.float32
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([dg.ones(2), dg.ones(3)])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object()])


# -- DataLoader in the main process ---------------------------------------------------------
def test_loader_batches_order_drop_last_len():
    loader = DataLoader(Range(10), batch_size=4)
    batches = [b.tolist() for b in loader]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and len(loader) == 3
    loader = DataLoader(Range(10), batch_size=4, drop_last=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]] and len(loader) == 2
    assert [b for b in DataLoader(Range(3), batch_size=None)] == [0, 1, 2]
    loader = DataLoader(Range(6), batch_sampler=[[5, 4], [0]])
    assert [b.tolist() for b in loader] == [[5, 4], [0]]
    assert [b for b in DataLoader(Range(4), batch_size=2, collate_fn=lambda x: sum(x))] == [1, 5]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Range(4), sampler=SequentialSampler(Range(4)), shuffle=True)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(Range(4), prefetch_factor=2)


def test_shuffle_reproducible_with_seed_and_generator():
    def order(**kw):
        return _flat(DataLoader(Range(50), batch_size=7, shuffle=True, **kw))

    assert order(generator=dg.Generator().manual_seed(0)) == order(generator=dg.Generator().manual_seed(0))
    assert order(generator=dg.Generator().manual_seed(0)) != order(generator=dg.Generator().manual_seed(1))
    dg.manual_seed(42)
    first = order()
    dg.manual_seed(42)
    assert order() == first and sorted(first) == list(range(50))
    g = dg.Generator().manual_seed(0)
    loader = DataLoader(Range(50), batch_size=7, shuffle=True, generator=g)
    assert _flat(loader) != _flat(loader)       # new order each epoch


def test_iterable_dataset_single_process():
    assert _flat(DataLoader(Stream(7), batch_size=3)) == list(range(7))
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(3), shuffle=True)


# -- worker processes -----------------------------------------------------------------------
_BASELINE: set = set()


@pytest.fixture(autouse=True)
def _baseline_children():
    # Only children started by the test itself count (other tests in this process may own some).
    import multiprocessing as mp
    _BASELINE.clear()
    _BASELINE.update(p.pid for p in mp.active_children())
    yield


def _children():
    import multiprocessing as mp
    return [p for p in mp.active_children() if p.pid not in _BASELINE]


def test_workers_same_order_as_main_process():
    expected = [b.tolist() for b in DataLoader(Range(23), batch_size=3, shuffle=True,
                                               generator=dg.Generator().manual_seed(7))]
    got = [b.tolist() for b in DataLoader(Range(23), batch_size=3, shuffle=True, num_workers=2,
                                          prefetch_factor=3, generator=dg.Generator().manual_seed(7))]
    assert got == expected
    assert _children() == []


def test_worker_info_seeds_and_init_fn_reproducible():
    calls = []

    def run():
        loader = DataLoader(SeedEcho(6), batch_size=1, num_workers=2, generator=dg.Generator().manual_seed(11),
                            worker_init_fn=lambda wid: calls.append(wid))
        return [b[0].tolist() for b in loader]

    a, b = run(), run()
    assert a == b                                   # same seed -> same per-worker random numbers
    assert [r[0] for r in a] == list(range(6))
    assert {r[1] for r in a} == {0, 1} and {r[2] for r in a} == {2}
    assert {r[3] for r in a if r[1] == 0} != {r[3] for r in a if r[1] == 1}   # seeds differ per worker
    assert get_worker_info() is None
    assert calls == []        # init_fn runs in the workers, not here


def test_iterable_dataset_with_workers():
    got = sorted(_flat(DataLoader(Stream(11), batch_size=2, num_workers=2)))
    assert got == list(range(11))


def test_worker_error_reraised_with_traceback():
    loader = DataLoader(Failing(10), batch_size=2, num_workers=2)
    with pytest.raises(KeyError) as info:
        list(loader)
    text = str(info.value)
    assert "Caught KeyError in DataLoader worker process" in text
    assert "sample 5 is broken" in text and "Traceback" in text and "__getitem__" in text
    assert _children() == []


def test_worker_init_fn_error_reraised():
    def bad_init(wid):
        raise ValueError(f"init failed in {wid}")

    with pytest.raises(ValueError, match="init failed"):
        list(DataLoader(Range(4), batch_size=2, num_workers=2, worker_init_fn=bad_init))
    assert _children() == []


def test_shutdown_on_early_break_and_gc():
    loader = DataLoader(Range(100), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    pids = [w.pid for w in it._workers]
    assert len(pids) == 2 and all(w.is_alive() for w in it._workers)
    del it
    import gc
    gc.collect()
    assert _children() == []
    for pid in pids:                     # reaped: no zombies left behind
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_dead_worker_detected():
    loader = DataLoader(Range(100), batch_size=1, num_workers=2)
    it = iter(loader)
    next(it)
    for w in it._workers:
        w.kill()
        w.join()
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid \d+\) is killed by signal: Killed"):
        for _ in range(100):
            next(it)
    assert _children() == []


def test_persistent_workers_reused_across_epochs():
    loader = DataLoader(Range(9), batch_size=2, num_workers=2, persistent_workers=True)
    first = [b.tolist() for b in loader]
    pids = [w.pid for w in loader._iterator._workers]
    second = [b.tolist() for b in loader]
    assert first == second == [[0, 1], [2, 3], [4, 5], [6, 7], [8]]
    assert [w.pid for w in loader._iterator._workers] == pids
    loader._iterator._shutdown_workers()
    assert _children() == []


def test_tensors_cross_process_boundary():
    ds = TensorDataset(dg.arange(12, dtype=dg.float32).reshape(6, 2), dg.arange(6))
    batches = list(DataLoader(ds, batch_size=4, num_workers=2))
    assert batches[0][0].dtype == dg.float32 and batches[0][0].tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert batches[1][1].tolist() == [4, 5]


# -- bundled and file datasets ---------------------------------------------------------------
def test_digits_split_deterministic():
    tr, te = dg.data.datasets.digits("train"), dg.data.datasets.digits("test")
    assert len(tr) + len(te) == 1797 and 340 < len(te) < 380
    x, y = tr[0]
    assert tuple(x.shape) == (1, 8, 8) and x.dtype == dg.float32 and 0 <= x.numpy().min() and x.numpy().max() <= 1
    assert isinstance(y, int)
    assert np.array_equal(dg.data.datasets.digits("test").labels, te.labels)
    counts = np.bincount(te.labels)
    assert counts.min() >= 30                                   # stratified
    xb, yb = next(iter(DataLoader(tr, batch_size=16)))
    assert tuple(xb.shape) == (16, 1, 8, 8) and yb.dtype == dg.int64


def _write_idx(path, arr, type_code=0x08, gz=False):
    head = bytes([0, 0, type_code, arr.ndim]) + b"".join(struct.pack(">I", s) for s in arr.shape)
    data = head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()
    (gzip.open if gz else open)(path, "wb").write(data)
    return data


def test_idx_reader_raw_gz_and_errors(tmp_path):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    data = _write_idx(tmp_path / "a-idx3-ubyte", a)
    _write_idx(tmp_path / "a-idx3-ubyte.gz", a, gz=True)
    assert np.array_equal(read_idx(tmp_path / "a-idx3-ubyte"), a)
    assert np.array_equal(read_idx(tmp_path / "a-idx3-ubyte.gz"), a)
    f = np.linspace(0, 1, 6).reshape(2, 3)
    _write_idx(tmp_path / "f.idx", f, type_code=0x0E)
    assert np.array_equal(read_idx(tmp_path / "f.idx"), f)
    (tmp_path / "trunc").write_bytes(data[:-3])
    with pytest.raises(IDXError, match=r"trunc: offset 16: expected 24 bytes of data for shape \[2, 3, 4\]"):
        read_idx(tmp_path / "trunc")
    (tmp_path / "magic").write_bytes(b"\x01\x00" + data[2:])
    with pytest.raises(IDXError, match="magic: offset 0: expected magic bytes 0x00 0x00"):
        read_idx(tmp_path / "magic")
    (tmp_path / "type").write_bytes(b"\x00\x00\x07" + data[3:])
    with pytest.raises(IDXError, match="type: offset 2: expected an IDX type code"):
        read_idx(tmp_path / "type")
    (tmp_path / "badgz.gz").write_bytes(gzip.compress(data)[:-10])
    with pytest.raises(IDXError, match="badgz.gz: gzip stream is truncated"):
        read_idx(tmp_path / "badgz.gz")


def test_mnist_from_custom_root(tmp_path):
    imgs = np.random.default_rng(0).integers(0, 256, (5, 28, 28)).astype(np.uint8)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", imgs)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.arange(5, dtype=np.uint8), gz=True)
    ds = dg.data.datasets.MNIST(tmp_path, train=False, transform=T.ToTensor())
    x, y = ds[3]
    assert y == 3 and tuple(x.shape) == (1, 28, 28)
    np.testing.assert_allclose(x.numpy()[0], imgs[3] / 255.0, rtol=1e-6)
    with pytest.raises(FileNotFoundError, match="train-images"):
        dg.data.datasets.MNIST(tmp_path, train=True)


@pytest.mark.skipif(not os.path.isdir(FMNIST), reason="Fashion-MNIST not installed "
                    "(apt-get install dataset-fashion-mnist puts it in /usr/share/datasets/fashion-mnist)")
def test_fashion_mnist_files():
    test = dg.data.datasets.FashionMNIST(train=False)
    assert len(test) == 10000 and tuple(test.data.shape) == (10000, 28, 28) and test.data.dtype == dg.uint8
    assert np.bincount(test.targets.numpy()).tolist() == [1000] * 10


def test_sst_trees():
    t = parse_tree("(3 (2 The) (4 (3 (2 very) (4 good)) (2 .)))")
    assert t.label == 3 and t.leaves() == ["The", "very", "good", "."]
    assert [n.label for n in t.postorder()] == [2, 2, 4, 3, 2, 4, 3] and len(t) == 7 and t.depth() == 4
    assert str(parse_tree(str(t))) == str(t) == "(3 (2 The) (4 (3 (2 very) (4 good)) (2 .)))"
    for bad, what in [("(3 (2 The) (4 good)", "more '\\)'"), ("(x (2 a))", "integer label"),
                      ("(3 (2 a b))", "leaf holds exactly one word"), ("(3 (2 a)))", "unbalanced"),
                      ("3 (2 a)", "word must be inside a leaf"), ("(3)", "a word or child trees"),
                      ("(3 (2 a)) (2 b)", "end of line")]:
        with pytest.raises(TreeFormatError, match=f"src:7: column \\d+: expected .*{what}"):
            parse_tree(bad, "src", 7)


def test_sst_file_errors(tmp_path):
    (tmp_path / "train.txt").write_text("(3 (2 fine) (2 tree))\n\n(2 (2 broken) (3 tree)\n")
    with pytest.raises(TreeFormatError, match=r"train.txt:3: column \d+: expected 1 more '\)'"):
        dg.data.datasets.SST(root=tmp_path, split="train")
    with pytest.raises(FileNotFoundError, match="dev.txt"):
        dg.data.datasets.SST(root=tmp_path, split="dev")


@pytest.mark.skipif(not os.path.isdir(SST_ROOT), reason="SST data not found at ../shared/data/sst")
def test_sst_real_data_default_root():
    dev = dg.data.datasets.SST(split="dev")
    assert len(dev) == 1101 and dev[0].label in range(5)
    assert all(n.label in range(5) for t in dev.trees[:50] for n in t.postorder())
    assert "lovely" in dev[0].leaves()


def test_sst_all_real_splits_parse_including_no_break_space_words():
    sizes = {sp: len(dg.data.datasets.SST(split=sp)) for sp in ("train", "dev", "test")}
    assert sizes == {"train": 9645, "dev": 1101, "test": 2210}
    tree = dg.data.datasets.parse_tree("(2 (2 8\xa01\\/2) (3 good))")
    assert tree.children[0].word == "8\xa01\\/2"


def test_transforms():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(3, 3, 2)          # HWC
    t = T.ToTensor()(img)
    assert tuple(t.shape) == (2, 3, 3) and t.dtype == dg.float32
    np.testing.assert_allclose(t.numpy()[1], img[:, :, 1] / 255.0, rtol=1e-6)
    n = T.Normalize((0.5, 0.25), (0.5, 2.0))(t)
    np.testing.assert_allclose(n.numpy()[1], (img[:, :, 1] / 255.0 - 0.25) / 2.0, rtol=1e-6)
    g = dg.Generator().manual_seed(0)
    crops = {tuple(T.RandomCrop(3, padding=1, generator=g)(t).numpy()[0].ravel().round(4)) for _ in range(40)}
    assert len(crops) > 3 and all(len(c) == 9 for c in crops)
    same = T.RandomCrop(3)(t)
    np.testing.assert_array_equal(same.numpy(), t.numpy())
    flips = [T.RandomHorizontalFlip(p=0.5, generator=g)(t).numpy()[0, 0, 0] for _ in range(40)]
    assert len(set(flips)) == 2
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(t).numpy(), t.numpy()[..., ::-1])
    pipe = T.Compose([T.ToTensor(), T.Lambda(lambda x: x * 2)])
    np.testing.assert_allclose(pipe(img).numpy(), t.numpy() * 2)
    with pytest.raises(ValueError, match="larger than the input"):
        T.RandomCrop(5)(t)
    with pytest.raises(ValueError, match="division by zero"):
        T.Normalize((0.0,), (0.0,))


def test_utils_data_alias():
    assert dg.utils.data.DataLoader is DataLoader and dg.utils.data.TensorDataset is TensorDataset


class Slow(Range):
    def __getitem__(self, i):
        import time
        time.sleep(1.0)
        return i


def test_timeout_raises_and_cleans_up():
    loader = DataLoader(Slow(4), batch_size=1, num_workers=1, timeout=0.3)
    with pytest.raises(RuntimeError, match="timed out after 0.3 seconds"):
        next(iter(loader))
    assert _children() == []


class SlowFirst(Range):
    def __getitem__(self, i):
        if i == 0:
            import time
            time.sleep(0.5)
        return i


def test_out_of_order_delivery():
    got = [int(b) for b in DataLoader(SlowFirst(6), batch_size=None, num_workers=2, in_order=False)]
    assert sorted(got) == list(range(6)) and got[0] != 0       # the slow batch did not hold the others
    got = [int(b) for b in DataLoader(SlowFirst(6), batch_size=None, num_workers=2)]
    assert got == list(range(6))


class Big(Range):
    def __getitem__(self, i):
        return np.full(1 << 18, i, dtype=np.float64)      # 2 MiB per sample: fills the pipe


def test_early_break_with_large_batches_is_fast():
    import time
    loader = DataLoader(Big(64), batch_size=4, num_workers=2, prefetch_factor=4)
    it = iter(loader)
    next(it)
    t0 = time.perf_counter()
    it._shutdown_workers()
    assert time.perf_counter() - t0 < 3.0
    assert _children() == []
