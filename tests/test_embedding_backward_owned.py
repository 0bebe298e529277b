"""embedding's gradient table is handed over as an owning array (issue 13: no 2.5 MB copy)."""

import numpy as np
import torch

import dyngraph as dg
from dyngraph.ops.nn import embedding_backward_p


def test_table_is_returned_without_a_view():
    g = np.ones((3, 4), dtype=np.float32)
    out = embedding_backward_p.impl(g, np.array([0, 2, 2]), num_weights=5)
    assert out.base is None and out.flags.owndata
    np.testing.assert_array_equal(out[2], 2 * g[0])


def test_weight_grad_matches_torch_and_owns_its_memory():
    idx = np.array([3, 1, 3, 0])
    a = dg.nn.Embedding(6, 4)
    b = torch.nn.Embedding(6, 4)
    with torch.no_grad():
        b.weight.copy_(torch.tensor(a.weight.detach().numpy()))
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    (a(dg.tensor(idx)) * dg.tensor(w)).sum().backward()
    (b(torch.tensor(idx)) * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(a.weight.grad.numpy(), b.weight.grad.numpy())
    # the second backward accumulates in place into that array
    (a(dg.tensor(idx)) * dg.tensor(w)).sum().backward()
    np.testing.assert_array_equal(a.weight.grad.numpy(), 2 * b.weight.grad.numpy())
