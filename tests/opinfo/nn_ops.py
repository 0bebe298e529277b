"""Op records for the fused neural-network primitives of ``dyngraph/ops/nn.py``."""

from __future__ import annotations

import numpy as np

from tests.opinfo import OpInfo, Sample, randn


def _F(m):
    return m.nn.functional


def _softmax_samples(rng, dt):
    return [
        Sample((randn(rng, (3, 4), dt),), {"dim": 1}),
        Sample((randn(rng, (2, 3, 4), dt),), {"dim": 0}, desc="dim0"),
        Sample((randn(rng, (2, 3, 4), dt) * 30,), {"dim": -1}, desc="large"),
        Sample((randn(rng, (5,), dt),), {"dim": 0}, desc="1d"),
        Sample((randn(rng, (0, 3), dt),), {"dim": 1}, desc="empty"),
        Sample((randn(rng, (4, 3), dt).T,), {"dim": 1}, desc="noncontig"),
    ]


def _linear_samples(rng, dt):
    return [
        Sample((randn(rng, (3, 4), dt), randn(rng, (2, 4), dt), randn(rng, (2,), dt))),
        Sample((randn(rng, (2, 3, 4), dt), randn(rng, (5, 4), dt), randn(rng, (5,), dt)),
               desc="batched"),
        Sample((randn(rng, (4,), dt), randn(rng, (3, 4), dt), randn(rng, (3,), dt)), desc="1d"),
    ]


def _linear_nobias_samples(rng, dt):
    return [Sample((randn(rng, (3, 4), dt), randn(rng, (2, 4), dt))),
            Sample((randn(rng, (2, 2, 4), dt), randn(rng, (3, 4), dt)), desc="batched")]


def _embedding_samples(rng, dt):
    return [
        Sample((np.array([[0, 2, 1], [3, 0, 2]]), randn(rng, (4, 3), dt))),
        Sample((np.array([1, 1, 3]), randn(rng, (5, 2), dt)), desc="repeat"),
    ]


def _nll_samples(rng, dt):
    def logp(shape):
        x = randn(rng, shape, dt)
        return x - np.log(np.exp(x).sum(axis=1, keepdims=True))

    return [
        Sample((logp((4, 3)), np.array([0, 2, 1, 2]))),
        Sample((logp((2, 3, 2)), np.array([[0, 2], [1, 1]])), desc="nd"),
        Sample((logp((4, 3)), np.array([0, -100, 1, 2])), desc="ignore"),
    ]


def _ce_samples(rng, dt):
    return [
        Sample((randn(rng, (4, 3), dt), np.array([0, 2, 1, 2]))),
        Sample((randn(rng, (2, 3, 2), dt), np.array([[0, 2], [1, 1]])), desc="nd"),
    ]


def _weighted_nll(m, x, t, w):
    return _F(m).nll_loss(x, t, weight=w)


OPS = [
    OpInfo("nn.softmax", lambda m, x, dim: _F(m).softmax(x, dim), _softmax_samples),
    OpInfo("nn.log_softmax", lambda m, x, dim: _F(m).log_softmax(x, dim), _softmax_samples),
    OpInfo("nn.log_softmax_method", lambda m, x, dim: x.log_softmax(dim), _softmax_samples),
    OpInfo("nn.linear", lambda m, x, w, b: _F(m).linear(x, w, b), _linear_samples),
    OpInfo("nn.linear_nobias", lambda m, x, w: _F(m).linear(x, w), _linear_nobias_samples),
    OpInfo("nn.embedding", lambda m, i, w: _F(m).embedding(i, w), _embedding_samples),
    # padding rows get no gradient by definition (not the derivative): no finite differences
    OpInfo("nn.embedding_padding", lambda m, i, w: _F(m).embedding(i, w, padding_idx=0),
           _embedding_samples, fd=False),
    OpInfo("nn.embedding_scale_freq",
           lambda m, i, w: _F(m).embedding(i, w, scale_grad_by_freq=True), _embedding_samples,
           fd=False),
    OpInfo("nn.nll_loss_mean", lambda m, x, t: _F(m).nll_loss(x, t), _nll_samples),
    OpInfo("nn.nll_loss_sum", lambda m, x, t: _F(m).nll_loss(x, t, reduction="sum"),
           _nll_samples),
    OpInfo("nn.nll_loss_none", lambda m, x, t: _F(m).nll_loss(x, t, reduction="none"),
           _nll_samples),
    OpInfo("nn.nll_loss_weight", _weighted_nll,
           lambda rng, dt: [Sample(s.args + (np.array([0.5, 2.0, 1.5], dtype=dt),), desc=s.desc)
                            for s in _nll_samples(rng, dt)],
           grad_argnums=(0,)),
    OpInfo("nn.cross_entropy", lambda m, x, t: _F(m).cross_entropy(x, t), _ce_samples),
    OpInfo("nn.cross_entropy_smooth",
           lambda m, x, t: _F(m).cross_entropy(x, t, label_smoothing=0.2), _ce_samples),
    # the fused node's other reductions and ignored rows (ops/nn.py cross_entropy_p)
    OpInfo("nn.cross_entropy_none",
           lambda m, x, t: _F(m).cross_entropy(x, t, reduction="none"), _ce_samples),
    OpInfo("nn.cross_entropy_sum_ignore",
           lambda m, x, t: _F(m).cross_entropy(x, t, reduction="sum", ignore_index=1), _ce_samples),
    OpInfo("nn.cross_entropy_mean_ignore",
           lambda m, x, t: _F(m).cross_entropy(x, t, ignore_index=2), _ce_samples),
]


# Composite functions of dg.nn.functional: same checks (values, grads against torch and
# finite differences, second order), so compositions stay twice differentiable.
def _one(*shapes, gen=randn):
    def samples(rng, dt):
        return [Sample(tuple(gen(rng, s, dt) for s in shapes))]
    return samples


def _probs(rng, shape, dt):
    return rng.uniform(0.1, 0.9, size=shape).astype(dt)


def _bce_samples(rng, dt):
    return [Sample((randn(rng, (3, 4), dt) * 3, _probs(rng, (3, 4), dt)))]


def _kl_samples(rng, dt):
    p = _probs(rng, (3, 4), dt)
    return [Sample((np.log(_probs(rng, (3, 4), dt)), p / p.sum(1, keepdims=True)))]


OPS += [
    OpInfo("nn.layer_norm", lambda m, x, w, b: _F(m).layer_norm(x, (4,), w, b),
           _one((3, 4), (4,), (4,))),
    OpInfo("nn.layer_norm_2d_noaffine", lambda m, x: _F(m).layer_norm(x, (3, 4)),
           _one((2, 3, 4))),
    OpInfo("nn.group_norm", lambda m, x, w, b: _F(m).group_norm(x, 2, w, b),
           _one((2, 4, 3), (4,), (4,))),
    OpInfo("nn.batch_norm_train", lambda m, x, w, b: _F(m).batch_norm(x, None, None, w, b, True),
           _one((4, 3), (3,), (3,))),
    OpInfo("nn.bilinear", lambda m, x1, x2, w, b: _F(m).bilinear(x1, x2, w, b),
           _one((2, 3), (2, 2), (2, 3, 2), (2,))),
    OpInfo("nn.prelu", lambda m, x, w: _F(m).prelu(x, w), _one((2, 3, 2), (3,))),
    OpInfo("nn.mish", lambda m, x: _F(m).mish(x), _one((3, 4))),
    OpInfo("nn.hardswish", lambda m, x: _F(m).hardswish(x), _one((3, 4))),
    OpInfo("nn.logsigmoid", lambda m, x: _F(m).logsigmoid(x * 10), _one((3, 4))),
    OpInfo("nn.cosine_similarity", lambda m, a, b: _F(m).cosine_similarity(a, b),
           _one((3, 4), (3, 4))),
    OpInfo("nn.bce_with_logits",
           lambda m, x, t: _F(m).binary_cross_entropy_with_logits(x, t), _bce_samples),
    OpInfo("nn.smooth_l1", lambda m, x, t: _F(m).smooth_l1_loss(x, t, beta=0.5),
           _one((3, 4), (3, 4))),
    OpInfo("nn.kl_div", lambda m, x, t: _F(m).kl_div(x, t, reduction="batchmean"), _kl_samples),
    OpInfo("nn.embedding_bag_sum",
           lambda m, i, w: _F(m).embedding_bag(i, w, mode="sum"),
           lambda rng, dt: [Sample((np.array([[0, 2], [1, 1]]), randn(rng, (3, 2), dt)))]),
]
