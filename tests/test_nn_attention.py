"""MultiheadAttention, Transformer layers and scaled_dot_product_attention against PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import dyngraph as dg
from tests.test_nn_conv import compare_modules, copy_weights

E = 8


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _mask(seed=0):
    kpm = np.zeros((3, 4), bool)
    kpm[1, 2:] = True
    kpm[2, 3] = True
    return kpm


MHA_CASES = [
    ("self", dict(), lambda m, q: m(q, q, q)),
    ("self_per_head", dict(), lambda m, q: m(q, q, q, average_attn_weights=False)),
    ("no_weights", dict(bias=False), lambda m, q: m(q, q, q, need_weights=False)),
    ("cross_masks", dict(), None),
    ("kdim_vdim_batch_first", dict(kdim=3, vdim=5, batch_first=True), None),
    ("bias_kv_zero_attn", dict(add_bias_kv=True, add_zero_attn=True), None),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw,call", MHA_CASES, ids=[c[0] for c in MHA_CASES])
def test_multihead_attention_matches_torch(name, kw, call, dtype):
    tmod = torch.nn.MultiheadAttention(E, 2, **kw)
    dmod = dg.nn.MultiheadAttention(E, 2, **kw)
    assert list(dmod.state_dict()) == list(tmod.state_dict())
    if name == "cross_masks":
        inputs = [_x(5, 3, E), _x(4, 3, E, seed=1), _x(4, 3, E, seed=2), _mask(), _x(5, 4, seed=3)]
        call = lambda m, q, k, v, kpm, am: m(q, k, v, key_padding_mask=kpm, attn_mask=am)
    elif name == "kdim_vdim_batch_first":
        inputs = [_x(3, 5, E), _x(3, 4, 3, seed=1), _x(3, 4, 5, seed=2), _mask()]
        call = lambda m, q, k, v, kpm: m(q, k, v, key_padding_mask=kpm)
    elif name == "bias_kv_zero_attn":
        inputs = [_x(5, 3, E), _x(4, 3, E, seed=1), np.triu(np.ones((5, 4), bool), 1)]
        call = lambda m, q, k, am: m(q, k, k, attn_mask=am)
    else:
        inputs = [_x(5, 3, E)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare_modules(tmod, dmod, inputs, dtype, call=call)


def test_multihead_attention_unbatched_bool_mask_and_eval_dropout():
    tmod = torch.nn.MultiheadAttention(E, 4, dropout=0.3)
    dmod = dg.nn.MultiheadAttention(E, 4, dropout=0.3)
    causal = np.triu(np.ones((5, 5), bool), 1)
    compare_modules(tmod.eval(), dmod.eval(), [_x(5, E), causal], "float64",
                    call=lambda m, q, am: m(q, q, q, attn_mask=am))
    # training mode: dropout is random, but stays the identity in expectation and keeps shapes
    dmod.train()
    q = dg.tensor(_x(5, 2, E))
    out, w = dmod(q, q, q)
    assert tuple(out.shape) == (5, 2, E) and tuple(w.shape) == (2, 5, 5)


def test_multihead_attention_state_dict_round_trip_and_init():
    dmod = dg.nn.MultiheadAttention(E, 2).double()
    tmod = torch.nn.MultiheadAttention(E, 2).double()
    tmod.load_state_dict({k: torch.tensor(v.numpy()) for k, v in dmod.state_dict().items()})
    q = _x(4, 2, E)
    a = tmod(*(torch.tensor(q),) * 3)[0].detach().numpy()
    b = dmod(*(dg.tensor(q),) * 3)[0].detach().numpy()
    np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    assert np.all(dmod.in_proj_bias.detach().numpy() == 0)
    assert np.all(dmod.out_proj.bias.detach().numpy() == 0)
    bound = np.sqrt(6 / (E + 3 * E))   # xavier_uniform_ on (3E, E)
    assert np.abs(dmod.in_proj_weight.detach().numpy()).max() <= bound
    tsep = torch.nn.MultiheadAttention(E, 2, kdim=3, vdim=5)
    dsep = dg.nn.MultiheadAttention(E, 2, kdim=3, vdim=5)
    assert list(dsep.state_dict()) == list(tsep.state_dict())
    assert dsep.in_proj_weight is None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(activation, norm_first, dtype):
    kw = dict(dim_feedforward=16, dropout=0.0, activation=activation, norm_first=norm_first,
              batch_first=True)
    tmod = torch.nn.TransformerEncoderLayer(E, 2, **kw)
    dmod = dg.nn.TransformerEncoderLayer(E, 2, **kw)
    kpm = np.zeros((3, 5), bool)
    kpm[0, 3:] = True
    compare_modules(tmod, dmod, [_x(3, 5, E), kpm], dtype,
                    call=lambda m, x, k: m(x, src_key_padding_mask=k))


def test_encoder_stack_decoder_and_transformer_match_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tenc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, 2, 16, 0.0), 2,
                                           norm=torch.nn.LayerNorm(E))
    denc = dg.nn.TransformerEncoder(dg.nn.TransformerEncoderLayer(E, 2, 16, 0.0), 2,
                                    norm=dg.nn.LayerNorm(E))
    causal = np.triu(np.full((5, 5), -np.inf), 1)
    compare_modules(tenc, denc, [_x(5, 3, E), causal], "float64",
                    call=lambda m, x, c: m(x, mask=c, is_causal=True))
    tdec = torch.nn.TransformerDecoderLayer(E, 2, 16, 0.0, norm_first=True)
    ddec = dg.nn.TransformerDecoderLayer(E, 2, 16, 0.0, norm_first=True)
    compare_modules(tdec, ddec, [_x(5, 3, E), _x(4, 3, E, seed=1), causal], "float64",
                    call=lambda m, t, mem, c: m(t, mem, tgt_mask=c))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tt = torch.nn.Transformer(E, 2, 1, 1, 16, 0.0)
    dt = dg.nn.Transformer(E, 2, 1, 1, 16, 0.0)
    assert list(dt.state_dict()) == list(tt.state_dict())
    mask = dg.nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    compare_modules(tt, dt, [_x(5, 2, E), _x(4, 2, E, seed=1), mask.numpy().astype(np.float64)], "float64",
                    call=lambda m, s, t, c: m(s, t, tgt_mask=c))


SDPA = [
    ("plain", {}, None),
    ("causal", {"is_causal": True}, None),
    ("scale", {"scale": 0.3}, None),
    ("bool_mask", {}, "bool"),
    ("float_mask", {}, "float"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw,mask", SDPA, ids=[s[0] for s in SDPA])
def test_scaled_dot_product_attention_matches_torch(name, kw, mask, dtype):
    q, k, v = _x(2, 3, 5, 4), _x(2, 3, 6, 4, seed=1), _x(2, 3, 6, 4, seed=2)
    inputs = [q, k, v]
    if mask == "bool":
        m = np.random.default_rng(3).random((5, 6)) > 0.3
        m[:, 0] = True
        inputs.append(m)
    elif mask == "float":
        inputs.append(_x(1, 3, 5, 6, seed=4))
    if mask:
        call = lambda mod, q, k, v, m: mod.F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    else:
        call = lambda mod, q, k, v: mod.F.scaled_dot_product_attention(q, k, v, **kw)

    class _T(torch.nn.Module):
        F = torch.nn.functional

    class _D(dg.nn.Module):
        F = dg.nn.functional

    compare_modules(_T(), _D(), inputs, dtype, call=call)


@pytest.mark.parametrize("make,args,pattern", [
    (lambda: dg.nn.MultiheadAttention(E, 2), (dg.randn(5, 3, 6),) * 3, r"MultiheadAttention: expected query.*E = 8.*\[5, 3, 6\]"),
    (lambda: dg.nn.MultiheadAttention(E, 2), (dg.zeros(5, 3, E, dtype=dg.int64),) * 3, r"MultiheadAttention.*floating point.*int64"),
    (lambda: dg.nn.MultiheadAttention(E, 2), (dg.randn(5, 3, E),) * 3 + (None, True, dg.zeros(4, 4)),
     r"2D attn_mask is \[4, 4\], but should be \[5, 5\]"),
])
def test_attention_errors(make, args, pattern):
    with pytest.raises(RuntimeError, match=pattern):
        make()(*args)
    with pytest.raises(AssertionError, match="divisible"):
        dg.nn.MultiheadAttention(E, 3)


def test_attention_copy_weights_helper_is_consistent():
    """The copy helper itself: after copying, parameter values agree exactly."""
    tmod = torch.nn.MultiheadAttention(E, 2).double()
    dmod = dg.nn.MultiheadAttention(E, 2).double()
    copy_weights(tmod, dmod)
    for (n, a), (m, b) in zip(tmod.named_parameters(), dmod.named_parameters(), strict=True):
        assert n == m
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())
