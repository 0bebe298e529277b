"""``python -m dyngraph.run_torch``: the import hook, PyTorch's module layout and the names
preambles use, each compared with torch 2.13 where torch has the same name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dyngraph
from dyngraph import run_torch

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _program(tmp_path, source: str, name: str = "prog.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_hook_maps_modules_and_restores_real_torch(tmp_path):
    real = sys.modules["torch"]
    prog = _program(tmp_path, """
        import sys
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import torch.backends.cudnn as cudnn
        from torch.utils.data.dataloader import DataLoader
        from torch.utils.data.sampler import RandomSampler
        from torch.utils.data import dataset
        from torch.nn.modules.dropout import Dropout
        from torch.nn.parallel import DistributedDataParallel, DataParallel
        from torch.cuda.amp import autocast
        from torch.utils.tensorboard import SummaryWriter
        cudnn.benchmark = True
        result = dict(argv=sys.argv[1:], linear=nn.Linear, relu=F.relu, loader=DataLoader,
                      dropout=Dropout, version=torch.__version__, cudnn_mod=cudnn,
                      dataset=dataset.TensorDataset, main=__name__)
    """)
    g = run_torch.run_path(prog, ["--x", 3])
    r = g["result"]
    assert r["argv"] == ["--x", "3"] and r["main"] == "__main__"
    assert r["linear"] is dyngraph.nn.Linear and r["relu"] is dyngraph.nn.functional.relu
    assert r["loader"] is dyngraph.data.DataLoader and r["dropout"] is dyngraph.nn.Dropout
    assert r["dataset"] is dyngraph.data.TensorDataset
    assert dyngraph.backends.cudnn.benchmark is True      # the write went through to dyngraph
    dyngraph.backends.cudnn.benchmark = False
    assert r["version"] >= "2.0" and r["version"] >= "2.13" and not r["version"] < "2.9"
    assert sys.modules["torch"] is real and "torch.utils.tensorboard" not in sys.modules or \
        sys.modules["torch.utils.tensorboard"].__name__ == "torch.utils.tensorboard"


@pytest.mark.parametrize("source, name", [
    ("import torch\ntorch.fft_nope(1)\n", "torch.fft_nope"),
    ("import torch.nn.functional as F\nF.not_a_function(1)\n", "torch.nn.functional.not_a_function"),
    ("import torch\ntorch.ones(2).frobnicate()\n", "torch.Tensor.frobnicate"),
    ("from torch.nn.functional import nope_fn\n", "torch.nn.functional.nope_fn"),
])
def test_first_missing_name_is_named(tmp_path, source, name):
    prog = _program(tmp_path, source)
    with pytest.raises((run_torch.MissingTorchNameError, run_torch.MissingTorchModuleError),
                       match=name.replace(".", r"\.") + " is not provided by dyngraph"):
        run_torch.run_path(prog)


def test_missing_module_is_named(tmp_path):
    prog = _program(tmp_path, "import torch.no_such_module\n")
    with pytest.raises(run_torch.MissingTorchModuleError, match="'torch.no_such_module'"):
        run_torch.run_path(prog)
    # a program's own fallback still works: the error is an ImportError / AttributeError
    prog = _program(tmp_path, """
        try:
            import torch.no_such_module
        except ImportError:
            ok = hasattr(__import__("torch"), "not_there") is False
    """, "fallback.py")
    assert run_torch.run_path(prog)["ok"]


def test_command_line_runs_a_program_and_reports_the_name(tmp_path):
    prog = _program(tmp_path, """
        import argparse
        import torch
        if __name__ == "__main__":
            p = argparse.ArgumentParser(); p.add_argument("--n", type=int); a = p.parse_args()
            print("sum", torch.arange(a.n).sum().item(), type(torch.ones(1)).__module__)
            torch.missing_thing
    """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-m", "dyngraph.run_torch", prog, "--n", "4"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert "sum 6 dyngraph.tensor" in res.stdout
    assert res.returncode == 1
    assert "MissingTorchNameError: torch.missing_thing is not provided by dyngraph" in res.stderr


def test_preamble_names_match_torch():
    for lib in (torch, dyngraph):
        assert lib.accelerator.is_available() is False and lib.accelerator.current_accelerator() is None
        assert lib.accelerator.device_count() == 0
        with pytest.raises(RuntimeError, match="accelerator"):
            lib.accelerator.current_device_index()
        assert lib.backends.cudnn.is_available() is False and lib.backends.mps.is_available() is False
        assert lib.backends.cuda.is_built() is False
        lib.backends.cuda.matmul.allow_tf32 = True
        assert lib.get_float32_matmul_precision() == "high"
        lib.set_float32_matmul_precision("highest")
        assert lib.backends.cuda.matmul.allow_tf32 is False
        assert lib.version.cuda is None
        t = lib.ones(1)
        assert (t.is_cpu, t.is_cuda, t.is_meta) == (True, False, False)


def test_copy_casts_across_dtypes_like_torch():
    pairs = [("float32", "int64", [3.7, -2.5, 0.0]), ("float64", "bool", [0.0, 2.0, -1.0]),
             ("int64", "float16", [1, 70000, -3]), ("bool", "float32", [True, False, True]),
             ("float32", "uint8", [1.9, 200.2, 0.0])]
    for src, dst, vals in pairs:
        d = dyngraph.zeros(3, dtype=getattr(dyngraph, dst)).copy_(dyngraph.tensor(vals, dtype=getattr(dyngraph, src)))
        t = torch.zeros(3, dtype=getattr(torch, dst)).copy_(torch.tensor(vals, dtype=getattr(torch, src)))
        np.testing.assert_array_equal(d.numpy(), t.numpy(), err_msg=f"{src}->{dst}")
    assert dyngraph.zeros((), dtype=dyngraph.long).copy_(dyngraph.tensor(3.7)).item() == 3
    # load_state_dict of an integer buffer that went through a float conversion
    bn = dyngraph.nn.BatchNorm1d(2)
    state = {k: v.double() for k, v in bn.state_dict().items()}
    state["num_batches_tracked"] = dyngraph.tensor(5.0)
    bn.load_state_dict(state)
    assert bn.num_batches_tracked.dtype == dyngraph.int64 and bn.num_batches_tracked.item() == 5


def test_share_memory_is_seen_by_forked_processes():
    mp = dyngraph.multiprocessing
    model = dyngraph.nn.Linear(3, 2)
    assert not model.weight.is_shared()
    assert model.share_memory() is model and model.weight.is_shared() and model.bias.is_shared()
    w = model.weight

    def bump(rank, t):
        with dyngraph.no_grad():
            t.add_(rank + 1)

    before = w.detach().numpy().copy()
    ctx = mp.get_context("fork")
    for r in range(2):
        p = ctx.Process(target=bump, args=(r, w))
        p.start()
        p.join()
        assert p.exitcode == 0
    np.testing.assert_allclose(w.detach().numpy(), before + 3)


def _fails(rank):
    if rank == 1:
        raise ValueError("rank one failed")


def test_spawn_reraises_a_child_error():
    with pytest.raises(dyngraph.multiprocessing.ProcessRaisedException, match="rank one failed"):
        dyngraph.multiprocessing.spawn(_fails, nprocs=2, start_method="fork")
    assert dyngraph.multiprocessing.get_sharing_strategy() in torch.multiprocessing.get_all_sharing_strategies()


def test_module_layout_names_match_torch():
    import torch.nn.modules as tm

    for fam in ("linear", "conv", "dropout", "loss", "batchnorm", "activation", "container", "rnn",
                "pooling", "normalization", "sparse", "transformer"):
        tmod, dmod = getattr(tm, fam), getattr(dyngraph.nn.modules, fam)
        for name in dmod.__all__:
            assert getattr(tmod, name).__name__ == getattr(dmod, name).__name__ == name
    assert issubclass(dyngraph.nn.BatchNorm2d, dyngraph.nn.modules.batchnorm._BatchNorm)
    assert dyngraph.nn.modules.utils._pair(3) == tm.utils._pair(3) == (3, 3)
    dp = dyngraph.nn.DataParallel(dyngraph.nn.Linear(2, 1))
    tp = torch.nn.DataParallel(torch.nn.Linear(2, 1))
    assert list(dp.state_dict()) == list(tp.state_dict())
    sd = dict(dp.state_dict())
    dyngraph.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "module.")
    assert list(sd) == ["weight", "bias"]


def test_factories_take_size_keyword_and_tensor_sizes():
    for lib in (torch, dyngraph):
        t = lib.tensor([1, 3])
        shapes = [lib.empty(size=(2, 3)).shape, lib.zeros(size=[2]).shape, lib.ones(size=(1, 2)).shape,
                  lib.rand(size=(2,)).shape, lib.randn(size=(3, 1)).shape, lib.randint(5, size=(2,)).shape,
                  lib.randint(1, 5, size=(4,)).shape, lib.LongTensor(t.max(), 2).shape,
                  t.new_zeros(size=(2,)).shape, lib.zeros(t.max(), 2).shape]
        assert [tuple(s) for s in shapes] == [(2, 3), (2,), (1, 2), (2,), (3, 1), (2,), (4,), (3, 2), (2,), (3, 2)]
        assert lib.randint(5, size=(50,)).max().item() < 5 and lib.randint(5, size=(1,)).dtype == lib.int64
    with pytest.raises(TypeError, match="size"):
        dyngraph.zeros(2, size=(2,))


def test_random_sampler_with_replacement_draws_lazily():
    import tracemalloc

    tracemalloc.start()
    try:
        s = dyngraph.utils.data.RandomSampler(range(10), replacement=True, num_samples=int(1e10))
        loader = dyngraph.utils.data.DataLoader(dyngraph.utils.data.TensorDataset(dyngraph.arange(10.0)),
                                                batch_size=4, sampler=s)
        (batch,) = next(iter(loader))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(s) == int(1e10) and peak < 50e6 and tuple(batch.shape) == (4,)
    g = dyngraph.Generator().manual_seed(0)
    draws = list(dyngraph.utils.data.RandomSampler(range(3), replacement=True, num_samples=100, generator=g))
    assert len(draws) == 100 and set(draws) == {0, 1, 2}
    no_repl = list(dyngraph.utils.data.RandomSampler(range(4), num_samples=10))
    assert sorted(no_repl[:4]) == sorted(no_repl[4:8]) == [0, 1, 2, 3] and len(no_repl) == 10


def test_dropout2d_on_2d_input_warns_and_drops_elements():
    dyngraph.manual_seed(0)
    for lib in (torch, dyngraph):
        with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
            y = lib.nn.Dropout2d(0.5)(lib.ones(64, 64))
        rows_mixed = ((y == 0).any(1) & (y != 0).any(1)).float().mean().item()
        assert rows_mixed > 0.9          # element-wise, not whole rows
        assert sorted(set(y.unique().tolist())) == [0.0, 2.0]


def test_range_indices_match_torch():
    res = []
    for lib in (torch, dyngraph):
        x = lib.zeros(3, 4)
        x[range(3), lib.tensor([0, 2, 3])] = 1
        x[range(1, 3), 0] += 5
        res.append((x.tolist(), tuple(x[range(2)].shape), x[:, range(0, 4, 2)].tolist()))
    assert res[0] == res[1]


def test_bfloat16_dtype_and_promotion_match_torch():
    vals = [1.5, 2.25, 3.1, -7.0]
    d, t = dyngraph.tensor(vals, dtype=dyngraph.bfloat16), torch.tensor(vals, dtype=torch.bfloat16)
    assert d.float().tolist() == t.float().tolist() and d.element_size() == t.element_size() == 2
    assert d.is_floating_point() and dyngraph.is_floating_point(d) and dyngraph.bfloat16.is_floating_point
    assert repr(d).replace("dyngraph", "torch") == repr(t)
    for other in ("float16", "float32", "int64", "bool"):
        od, ot = dyngraph.ones(4, dtype=getattr(dyngraph, other)), torch.ones(4, dtype=getattr(torch, other))
        assert (d * od).dtype.name == str((t * ot).dtype).split(".")[1]
        assert (d + od).float().tolist() == (t + ot).float().tolist()
    assert (d * 2.5).dtype == dyngraph.bfloat16 and dyngraph.tensor(1.0).bfloat16().dtype == dyngraph.bfloat16
    assert dyngraph.finfo(dyngraph.bfloat16).eps == torch.finfo(torch.bfloat16).eps
    assert dyngraph.zeros(2).copy_(d[:2]).tolist() == torch.zeros(2).copy_(t[:2]).tolist()


def test_fx_imports_and_refuses_with_the_alternative(tmp_path):
    prog = _program(tmp_path, """
        import torch
        import torch.fx
        from torch.fx import symbolic_trace, Interpreter

        @torch.fx.wrap
        def helper(x):
            return x

        class Probe(Interpreter):          # defined at import time, as libraries do
            pass

        symbolic_trace(torch.nn.Linear(2, 2))
    """)
    with pytest.raises(dyngraph.fx.FxUnsupportedError, match=r"torch\.fx\.symbolic_trace: .*dg\.compile"):
        run_torch.run_path(prog)
    with pytest.raises(dyngraph.fx.FxUnsupportedError, match=r"Interpreter \(subclass Probe\)"):
        class Probe(dyngraph.fx.Interpreter):
            pass
        Probe(dyngraph.nn.Linear(2, 2))


def test_cuda_queries_without_a_gpu_match_torch_cpu_build():
    if dyngraph.cuda.is_available():
        pytest.skip("checks the CPU-only answers")
    for lib in (torch, dyngraph):
        assert lib.cuda.is_bf16_supported() is False and lib.cuda.is_initialized() is False
        assert lib.cuda.memory_allocated() == lib.cuda.max_memory_allocated() == lib.cuda.memory_reserved() == 0
        for name, kwargs in (("get_device_name", {}), ("get_device_capability", {}), ("mem_get_info", {}),
                             ("Event", {"enable_timing": True})):
            with pytest.raises((RuntimeError, AssertionError)):
                getattr(lib.cuda, name)(**kwargs)
    assert dyngraph.utils.data.DistributedSampler is dyngraph.distributed.DistributedSampler
    handle = dyngraph.nn.Linear(2, 2).register_forward_hook(lambda m, i, o: None)
    assert isinstance(handle, dyngraph.utils.hooks.RemovableHandle)


def test_attention_kernel_choice_and_type_modules(tmp_path):
    prog = _program(tmp_path, """
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.common_types import _size_2_t
        from torch.types import Number

        def conv_size(k: _size_2_t, scale: Number = 1) -> int:
            return k * scale

        q = torch.arange(24.0).reshape(1, 2, 3, 4) / 10
        plain = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
            chosen = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        result = (torch.equal(plain, chosen), int(SDPBackend.EFFICIENT_ATTENTION), conv_size(3))
    """)
    assert run_torch.run_path(prog)["result"] == (True, 2, 3)
    import torch.nn.attention as ta

    assert {b.name: int(b) for b in dyngraph.nn.attention.SDPBackend} == \
        {n: int(getattr(ta.SDPBackend, n)) for n in dir(ta.SDPBackend) if n.isupper()}


def test_submodules_kept_elsewhere_in_dyngraph(tmp_path):
    prog = _program(tmp_path, """
        import torch
        from torch.distributions.normal import Normal
        from torch.distributions.categorical import Categorical
        from torch.amp.grad_scaler import GradScaler
        from torch.cuda.amp.autocast_mode import autocast
        from torch.optim.adamw import AdamW
        result = (Normal, Categorical, GradScaler, AdamW, torch.distributions.kl.kl_divergence)
    """)
    r = run_torch.run_path(prog)["result"]
    assert r == (dyngraph.distributions.Normal, dyngraph.distributions.Categorical, dyngraph.amp.GradScaler,
                 dyngraph.optim.AdamW, dyngraph.distributions.kl_divergence)
    prog = _program(tmp_path, "from torch.distributions.normal import NoSuchThing\n", "missing.py")
    with pytest.raises(run_torch.MissingTorchModuleError, match=r"torch\.distributions\.normal\.NoSuchThing"):
        run_torch.run_path(prog)


def test_star_import_and_submodule_attribute(tmp_path):
    prog = _program(tmp_path, """
        from torch import *
        from torch.nn import *
        import torch
        result = (tensor([1.0, 2.0]).sum().item(), Linear, float32, torch.optim.swa_utils.SWALR)
    """)
    r = run_torch.run_path(prog)["result"]
    assert r == (3.0, dyngraph.nn.Linear, dyngraph.float32, dyngraph.optim.swa_utils.SWALR)


def test_scientific_notation_pads_like_torch():
    for vals in ([-1.5e-5, 2e6, 3.0], [[-1e-8, 1.0], [2.0, 3.0]], [1e10, -1.0], [1e10, float("nan"), -1.0],
                 [float("-inf"), 1e-9, 1.0], [-1e-5, -1e3], [1e-5, 1e3]):
        assert repr(dyngraph.tensor(vals)) == repr(torch.tensor(vals))


def test_fork_rng_restores_the_stream():
    for lib in (torch, dyngraph):
        lib.manual_seed(0)
        first = lib.rand(3)
        lib.manual_seed(0)
        with lib.random.fork_rng():
            inside = lib.rand(3)
        after = lib.rand(3)
        assert lib.equal(first, after) and lib.equal(inside, first)
        lib.manual_seed(0)
        with lib.random.fork_rng(enabled=False):
            lib.rand(3)
        assert not lib.equal(lib.rand(3), first)


def test_hub_refuses_code_and_reads_cached_safetensors(tmp_path, monkeypatch):
    import dyngraph.hub as hub

    with pytest.raises(hub.HubUnsupportedError, match=r"hub\.load\('pytorch/vision'\).*never executes code"):
        hub.load("pytorch/vision", "resnet18", pretrained=True)
    with pytest.raises(hub.HubUnsupportedError, match="does not download"):
        hub.download_url_to_file("https://example.com/w.pt", str(tmp_path / "w.pt"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "th" / "hub")
    url = "https://example.com/models/net.safetensors"
    with pytest.raises(hub.HubUnsupportedError, match=r"checkpoints/net\.safetensors does not exist"):
        hub.load_state_dict_from_url(url)
    net = dyngraph.nn.Linear(3, 2)
    os.makedirs(tmp_path / "th" / "hub" / "checkpoints")
    dyngraph.save(net.state_dict(), str(tmp_path / "th" / "hub" / "checkpoints" / "net.safetensors"))
    sd = hub.load_state_dict_from_url(url)
    assert dyngraph.equal(sd["weight"], net.weight)
    hub.set_dir(tmp_path / "other")
    try:
        assert hub.get_dir() == str(tmp_path / "other")
    finally:
        hub._HUB_DIR = None


def test_fft_real_helpers_match_torch():
    import dyngraph.fft

    for n in (0, 1, 4, 5):
        for d in (1.0, 0.25):
            for name in ("fftfreq", "rfftfreq"):
                a, b = getattr(torch.fft, name)(n, d), getattr(dyngraph.fft, name)(n, d)
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-7)
                assert str(b.dtype).split(".")[1] == str(a.dtype).split(".")[1]
    assert dyngraph.fft.fftfreq(3, dtype=dyngraph.float64).dtype == dyngraph.float64
    x = np.arange(24.0).reshape(2, 3, 4)
    for dim in (None, 0, -1, (1, 2)):
        for name in ("fftshift", "ifftshift"):
            tx = torch.tensor(x, requires_grad=True)
            dx = dyngraph.tensor(x, requires_grad=True)
            ty, dy = getattr(torch.fft, name)(tx, dim=dim), getattr(dyngraph.fft, name)(dx, dim=dim)
            np.testing.assert_array_equal(dy.detach().numpy(), ty.detach().numpy())
            w = np.random.default_rng(0).standard_normal(x.shape)
            (ty * torch.tensor(w)).sum().backward()
            (dy * dyngraph.tensor(w)).sum().backward()
            np.testing.assert_array_equal(dx.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("source, pattern", [
    ("import torch\ntorch.fft.rfft(torch.ones(4))\n", r"torch\.fft\.rfft .*no complex dtypes.*fftfreq"),
    ("import torch\ntorch.linalg.eigvals(torch.eye(2))\n", r"torch\.linalg\.eigvals .*use torch\.linalg\.eigvalsh"),
    ("import torch\nx = torch.zeros(2, dtype=torch.complex64)\n", r"torch\.complex64 .*no complex dtypes"),
    ("import torch\ntorch.ones(2, 2).to_sparse_csc()\n", r"to_sparse_csc .*COO and 2-D CSR"),
])
def test_known_gaps_say_why(tmp_path, source, pattern):
    with pytest.raises(run_torch.MissingTorchNameError, match=pattern):
        run_torch.run_path(_program(tmp_path, source))


def test_compile_disable_returns_the_function():
    def f(x):
        return x * 2

    assert dyngraph.compile(f, disable=True) is f and dyngraph.compile(disable=True)(f) is f
    assert dyngraph.compile(f) is not f


_MISUSE = {
    "matmul shapes": lambda t: t.ones(2, 3) @ t.ones(2, 3),
    "cat shapes": lambda t: t.cat([t.ones(2, 3), t.ones(2, 4)]),
    "bad dim": lambda t: t.ones(2, 3).sum(5),
    "index out of range": lambda t: t.ones(3)[5],
    "view of a transpose": lambda t: t.ones(2, 3).t().view(6),
    "linear dtype": lambda t: t.nn.Linear(3, 2)(t.ones(2, 3, dtype=t.float64)),
    "embedding float indices": lambda t: t.nn.Embedding(3, 2)(t.tensor([0.0, 1.0])),
    "item of many": lambda t: t.ones(2).item(),
    "bitwise on float": lambda t: t.ones(2) & t.ones(2),
    "integer division by zero": lambda t: t.ones(2, dtype=t.long) // 0,
    "unknown device": lambda t: t.device("blah"),
    "randint empty range": lambda t: t.randint(5, 2, (3,)),
    "TensorDataset sizes": lambda t: t.utils.data.TensorDataset(t.ones(2), t.ones(3)),
    "singular inverse": lambda t: t.linalg.inv(t.zeros(2, 2)),
    "not positive-definite": lambda t: t.linalg.cholesky(-t.eye(2)),
    "backward of non-scalar": lambda t: t.ones(2, requires_grad=True).mul(2).backward(),
    "in-place on a leaf": lambda t: t.ones(2, requires_grad=True).add_(1),
}


@pytest.mark.parametrize("case", list(_MISUSE))
def test_misuse_raises_an_instance_of_torchs_class(case):
    with pytest.raises(Exception) as te:
        _MISUSE[case](torch)
    with pytest.raises(Exception) as de:
        _MISUSE[case](dyngraph)
    expected = type(te.value)
    if expected.__name__ == "_LinAlgError":
        assert isinstance(de.value, dyngraph.linalg.LinAlgError) and isinstance(de.value, RuntimeError)
    else:
        assert isinstance(de.value, expected), f"{case}: torch {expected.__name__}, dyngraph {type(de.value).__mro__}"


def _consumer(q_in, q_out):
    t = q_in.get()
    with dyngraph.no_grad():
        t.mul_(10)            # in place, in the child: the parent's tensor must see it
    q_out.put((t.is_shared(), tuple(t.shape)))


def test_shared_tensors_travel_through_a_queue_as_shared_memory():
    mp = dyngraph.multiprocessing
    ctx = mp.get_context("fork")
    model = dyngraph.nn.Linear(3, 2)
    model.share_memory()
    plain = dyngraph.arange(4.0)
    view = model.weight[1]                      # a view into a shared segment
    for sent, shared in ((model.weight, True), (view, True), (plain, False)):
        before = sent.detach().numpy().copy()
        q_in, q_out = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=_consumer, args=(q_in, q_out))
        p.start()
        q_in.put(sent)
        is_shared, shape = q_out.get(timeout=60)
        p.join(timeout=60)
        assert p.exitcode == 0 and shape == tuple(sent.shape) and is_shared is shared
        expected = before * 10 if shared else before
        np.testing.assert_allclose(sent.detach().numpy(), expected)
    from multiprocessing.reduction import ForkingPickler

    got = ForkingPickler.loads(ForkingPickler.dumps(model.bias))
    assert isinstance(got, dyngraph.nn.Parameter) and got.requires_grad and got.is_shared()
    with dyngraph.no_grad():
        got.add_(1)
    assert dyngraph.equal(got, model.bias)


def test_compiler_dynamo_and_interop_preamble_names(tmp_path):
    prog = _program(tmp_path, """
        import torch
        import torch._dynamo
        torch._dynamo.config.suppress_errors = True
        torch._dynamo.config.cache_size_limit = 64
        torch.set_num_interop_threads(2)

        @torch.compiler.disable
        def plain(x):
            return x * 2

        @torch.compiler.disable(recursive=False)
        def plain2(x):
            return x + 1

        f = torch.compile(lambda x: plain(x) + plain2(x))
        result = (f(torch.ones(2)).tolist(), torch.compiler.is_compiling(), torch.get_num_interop_threads(),
                  torch._dynamo.config.suppress_errors)
    """)
    assert run_torch.run_path(prog)["result"] == ([4.0, 4.0], False, 2, True)
    for lib in (torch, dyngraph):
        with pytest.raises(RuntimeError):
            lib.set_num_interop_threads(0)
    dyngraph._dynamo.config.suppress_errors = False
