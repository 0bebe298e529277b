"""More whole PyTorch programs (``tests/port/scripts/s13...``) run unchanged through
``dyngraph.run_torch`` and compared number by number with ``python script.py`` on torch 2.13.

The helpers are those of ``test_port_programs``; printed progress lines that a script stores
are compared text-for-text with the numbers in them compared to the script's tolerance (a
float32 loss printed to six places may differ in the last place).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from tests.test_port_programs import SCRIPTS, _compare, _run_script, restore_switches  # noqa: F401

torch = pytest.importorskip("torch")

_NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")

# (script, arguments, extra arguments for the torch run only, rtol, keys holding each library's own
# random numbers: compared by type only -- an early stop may also change their length)
RUNS = [
    # the GCN of s04 over a CSR adjacency (x.to_sparse_csr()) with each product spelling
    *[("s04_gcn_sparse.py", ["--dropout", "0", "--layout", "csr", "--product", pr, "--epochs", "15"], [], 2e-5, ())
      for pr in ("spmm", "sparse.mm", "matmul")],
    ("s13_vae_digits.py", ["--noise", "numpy"], [], 2e-5, ()),
    ("s13_vae_digits.py", ["--epochs", "1"], [], 2e-5, ("train", "test", "log", "stats", "grid", "mu")),
    # torch's inductor is not run-to-run reproducible on CPU: the reference is torch eager
    ("s14_resnet_cifar_style.py", [], ["--no-compile"], 2e-5, ()),
    ("s14_resnet_cifar_style.py", ["--sched", "cosine", "--epochs", "3", "--no-compile"], [], 2e-5, ()),
    ("s15_char_rnn_gru.py", [], [], 2e-5, ()),
    ("s16_seq2seq_teacher_forcing.py", [], [], 2e-5, ()),
    ("s17_reinforce.py", ["--actions", "numpy"], [], 2e-5, ()),
    ("s17_reinforce.py", ["--episodes", "3"], [], 2e-5, ("reinforce", "actor_critic", "gauss", "log_std",
                                                           "sample_shape")),
    ("s18_transformer_classifier.py", [], [], 2e-5, ()),
    ("s19_tabular_autocast.py", ["--split", "ordered"], [], 2e-5, ()),
    # random_split draws from each library's own stream: sizes must agree, the rest differs
    ("s19_tabular_autocast.py", [], [], 2e-5, ("history", "best", "test_acc", "bn_mean", "epochs_run")),
    ("s20_realnvp_flow.py", [], [], 2e-5, ()),
    ("s20_realnvp_flow.py", ["--prior", "independent"], [], 2e-5, ()),
    ("s20_realnvp_flow.py", ["--noise", "torch", "--iters", "3"], [], 2e-5, ("samples",)),
    # in float32 the policy loss is a small difference of O(1) terms (log(1 - tanh^2 + 1e-6)):
    # it agrees to 5e-6 absolute; in float64 everything agrees to 1e-9
    ("s21_sac_continuous.py", ["--noise", "numpy"], [], (2e-5, 5e-6), ()),
    ("s21_sac_continuous.py", ["--noise", "numpy", "--double"], [], 1e-9, ()),
    ("s21_sac_continuous.py", ["--updates", "3"], [], 2e-5, ("history", "target_w", "manual", "transform")),
    ("s22_sngan_hinge_ema.py", ["--noise", "numpy"], [], 2e-5, ()),
    ("s22_sngan_hinge_ema.py", ["--noise", "numpy", "--sn-api", "hook"], [], 2e-5, ()),
    ("s22_sngan_hinge_ema.py", ["--iters", "2"], [], 2e-5, ("history", "sigma")),
    ("s23_gp_regression.py", [], [], 1e-9, ()),
    ("s24_spatial_transformer.py", [], [], 2e-5, ()),
    ("s24_spatial_transformer.py", ["--epochs", "1", "--dropout", "0.5"], [], 2e-5,
     ("history", "tests", "warped", "theta")),
    ("s25_text_classification_bag.py", [], [], 2e-5, ()),
    ("s25_text_classification_bag.py", ["--split", "random", "--epochs", "1"], [], 2e-5, ("history", "test_acc")),
    ("s26_ctc_speech.py", [], [], 2e-5, ()),
    # the MDN's float32 run drifts chaotically after ~15 RMSprop steps, and a mixture mean near 0
    # is a cancellation of O(1) terms: 12 epochs at 5e-6 absolute in float32, all 30 at 1e-9 in float64
    ("s27_mixture_density.py", ["--epochs", "12"], [], (2e-5, 5e-6), ()),
    ("s27_mixture_density.py", ["--double"], [], 1e-9, ()),
    ("s27_mixture_density.py", ["--epochs", "2", "--noise", "torch"], [], 2e-5, ("draw",)),
    ("s28_distill_mixup.py", ["--perm", "numpy"], [], 2e-5, ()),
    ("s28_distill_mixup.py", ["--epochs", "1"], [], 2e-5, ("student", "acc", "kl_log_target", "wnorm")),
    ("s29_metric_learning_sampler.py", [], [], 2e-5, ()),
]


def _compare_text(a, b, rtol: float, where: str):
    """Strings equal except for the numbers in them, which agree to ``rtol``."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        return {k: _compare_text(a[k], b[k], rtol, f"{where}.{k}") for k in a}
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        return [_compare_text(x, y, rtol, f"{where}[{i}]") for i, (x, y) in enumerate(zip(a, b))]
    if isinstance(a, str) and isinstance(b, str) and _NUMBER.search(a):
        assert _NUMBER.sub("#", a) == _NUMBER.sub("#", b), f"{where}: {a!r} vs {b!r}"
        na, nb = [float(v) for v in _NUMBER.findall(a)], [float(v) for v in _NUMBER.findall(b)]
        digits = max((len(v.split(".")[1]) for v in _NUMBER.findall(a)), default=0)
        np.testing.assert_allclose(nb, na, rtol=rtol, atol=1.01 * 10.0 ** -digits, err_msg=where)
        return "<text>"
    return a


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("script, args, torch_args, rtol, random_keys", RUNS,
                         ids=[f"{s[:3]}-{'-'.join(a).replace('--', '')}" for s, a, _, _, _ in RUNS])
def test_more_scripts_run_unchanged_and_match_torch(script, args, torch_args, rtol, random_keys, tmp_path,
                                                    monkeypatch, restore_switches):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    path = os.path.join(SCRIPTS, script)
    expected = _run_script(path, args + torch_args, str(tmp_path / "torch.json"), with_dyngraph=False)
    got = _run_script(path, args, str(tmp_path / "dyngraph.json"), with_dyngraph=True)
    assert expected.keys() == got.keys()
    for k in random_keys:
        assert type(expected.pop(k)) is type(got.pop(k)), k
    rtol, atol = rtol if isinstance(rtol, tuple) else (rtol, rtol * 1e-2)
    expected_t = _compare_text(expected, got, rtol, script)
    got_t = _compare_text(got, got, rtol, script)
    _compare(expected_t, got_t, rtol, atol, script)
