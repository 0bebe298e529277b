"""cross_entropy's eager short path (issue 13) gives PyTorch's values, gradients and errors."""

import numpy as np
import pytest
import torch

import dyngraph as dg
import dyngraph.nn.functional as F


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,c,ignore", [(1, 5, -100), (4, 7, -100), (4, 7, 2), (1, 5, 3),
                                        (3, 1, -100)])
def test_values_and_grads_match_torch(dtype, n, c, ignore):
    rng = np.random.default_rng(n * 10 + c)
    x = (rng.standard_normal((n, c)) * 3).astype(dtype)
    t = rng.integers(0, c, size=n)
    if ignore >= 0:
        t[0] = ignore  # the ignored class is hit: the primitive drops that row
    a = dg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    la = F.cross_entropy(a, dg.tensor(t), ignore_index=ignore)
    lb = torch.nn.functional.cross_entropy(b, torch.tensor(t), ignore_index=ignore)
    np.testing.assert_allclose(la.detach().numpy(), lb.detach().numpy(), rtol=1e-6, equal_nan=True)
    if not np.isnan(la.item()):
        la.backward()
        lb.backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_short_path_builds_the_same_value_as_the_composition():
    x = dg.randn(1, 5)
    t = dg.tensor([3])
    ref = -dg.log_softmax(x, dim=1)[0, 3]
    assert F.cross_entropy(x, t).item() == ref.item()


@pytest.mark.parametrize("bad", [5, -1])
def test_out_of_range_targets_still_raise(bad):
    with pytest.raises(IndexError, match="out of range for 5 classes"):
        F.cross_entropy(dg.zeros(1, 5), dg.tensor([bad]))
    with pytest.raises(IndexError, match="out of range for 5 classes"):
        F.cross_entropy(dg.zeros(2, 5), dg.tensor([0, bad]))


def test_wrong_target_dtype_and_shape_still_raise():
    with pytest.raises(RuntimeError, match="int64"):
        F.cross_entropy(dg.zeros(1, 5), dg.tensor([1], dtype=dg.int32))
    with pytest.raises(ValueError):
        F.cross_entropy(dg.zeros(2, 5), dg.tensor([1]))
    with pytest.raises(RuntimeError, match="floating-point"):
        F.cross_entropy(dg.zeros(1, 5, dtype=dg.int64), dg.tensor([1]))
