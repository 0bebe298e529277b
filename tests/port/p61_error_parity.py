"""Common mistakes raise the same kind of exception as PyTorch, with a message that
names the problem: wrong input width to Linear, mismatched matmul, CrossEntropyLoss
with targets of the wrong shape/dtype, conv with the wrong channel count, broadcasting
failures, `.item()` on many elements, `.numpy()` on a tensor that requires grad,
backward on a non-scalar, double backward, `view` of non-contiguous data, optimizer
given a non-iterable, dtype mismatches in matmul."""

import numpy as np

from tests.port.errcheck import err

RTOL = 1e-12


def run(torch, shared):
    nn = torch.nn
    F = nn.functional
    out = {}
    lin = nn.Linear(4, 3)
    out["linear_width"] = err(lambda: lin(torch.ones(2, 5)), "shape")
    out["linear_dtype"] = err(lambda: lin(torch.ones(2, 4, dtype=torch.float64)), "dtype")
    out["matmul"] = [err(lambda: torch.ones(2, 3) @ torch.ones(4, 2), "shape"),
                     err(lambda: torch.mm(torch.ones(2, 3), torch.ones(2, 3))),
                     err(lambda: torch.bmm(torch.ones(2, 3, 4), torch.ones(3, 4, 5))),
                     err(lambda: torch.ones(3) @ torch.ones(4)),
                     err(lambda: torch.mm(torch.ones(3), torch.ones(3, 2))),
                     err(lambda: torch.ones(2, 2) @ torch.ones(2, 2, dtype=torch.float64), "dtype")]
    logits = torch.randn(4, 3)
    out["ce_targets"] = [err(lambda: F.cross_entropy(logits, torch.tensor([0.0, 1.0, 2.0, 1.0]))),
                         err(lambda: F.cross_entropy(logits, torch.tensor([0, 1, 3, 1]))),
                         err(lambda: F.cross_entropy(logits, torch.tensor([0, 1, 2]))),
                         err(lambda: F.cross_entropy(logits, torch.zeros(4, 1, dtype=torch.long))),
                         err(lambda: F.nll_loss(logits, torch.tensor([0, 1, 2, 1], dtype=torch.int32)))]
    out["mse_broadcast_warn_shape"] = err(lambda: F.mse_loss(torch.ones(3, 2), torch.ones(4, 2)))
    out["bce_range"] = err(lambda: F.binary_cross_entropy(torch.tensor([1.5]), torch.tensor([1.0])))
    out["bce_shape"] = err(lambda: F.binary_cross_entropy_with_logits(torch.ones(3), torch.ones(4)))
    conv = nn.Conv2d(3, 2, 3)
    out["conv_channels"] = [err(lambda: conv(torch.ones(1, 4, 5, 5)), "channels"),
                            err(lambda: conv(torch.ones(1, 3, 2, 2)), "kernel"),
                            err(lambda: conv(torch.ones(3, 5)))]
    out["broadcast"] = [err(lambda: torch.ones(2, 3) + torch.ones(4), "size"),
                        err(lambda: torch.where(torch.ones(2, 3) > 0, torch.ones(4), 0.0), "size"),
                        err(lambda: torch.lerp(torch.ones(3), torch.ones(2), 0.5), "size"),
                        err(lambda: torch.maximum(torch.ones(3), torch.ones(2)), "size"),
                        err(lambda: torch.ones(2, 3).add_(torch.ones(2, 2, 3)))]
    out["item"] = [err(lambda: torch.ones(2).item(), "element"), torch.ones(1, 1).item()]
    w = torch.ones(2, requires_grad=True)
    out["numpy_grad"] = err(lambda: w.numpy(), "detach")
    out["backward_nonscalar"] = err(lambda: (w * 2).backward(), "scalar")
    out["backward_no_grad"] = err(lambda: torch.ones(2).sum().backward(), "grad")
    y = (w * w).sum()
    y.backward()
    out["double_backward"] = err(lambda: y.backward(), "second time")
    out["grad_unused"] = err(lambda: torch.autograd.grad((w * 2).sum(), [torch.ones(1, requires_grad=True)]),
                             "not have been used")
    out["optimizer_bad"] = [err(lambda: torch.optim.SGD(torch.ones(2, requires_grad=True), lr=0.1)),
                            err(lambda: torch.optim.SGD([], lr=0.1), "empty"),
                            err(lambda: torch.optim.Adam([w], lr=-1.0), "learning rate")]
    out["index_dtype"] = [err(lambda: torch.ones(3)[torch.tensor([0.0, 1.0])]),
                          err(lambda: torch.gather(torch.ones(2, 2), 1, torch.tensor([[0.0]])))]
    out["module_call"] = [err(lambda: nn.Linear(2, 2)(torch.ones(2, 2), torch.ones(2))),
                          err(lambda: nn.Module()(torch.ones(1)))]
    out["state_dict_type"] = err(lambda: nn.Linear(2, 2).load_state_dict({"weight": np.zeros((2, 2))}))
    out["param_assign"] = err(lambda: setattr(nn.Linear(2, 2), "weight", torch.ones(2, 2)), "parameter")
    out["embedding_oob"] = err(lambda: nn.Embedding(3, 2)(torch.tensor([3])), "index")
    out["embedding_float"] = err(lambda: nn.Embedding(3, 2)(torch.tensor([1.0])))
    out["cat_dtypes_ok"] = str(torch.cat([torch.ones(1), torch.ones(1, dtype=torch.float64)]).dtype).split(".")[-1]
    out["lstm_input"] = err(lambda: nn.LSTM(3, 4)(torch.ones(5, 2, 2)), "input")
    out["index_ops"] = [err(lambda: torch.gather(torch.ones(2, 2), 1, torch.tensor([[2]])), "out of bounds"),
                        err(lambda: torch.gather(torch.ones(2, 2), 1, torch.tensor([[-1]]))),
                        err(lambda: torch.ones(3).index_select(0, torch.tensor([0.0]))),
                        err(lambda: torch.zeros(3).scatter(0, torch.tensor([5]), 1.0), "out of bounds")]
    out["bn_channels"] = err(lambda: nn.BatchNorm1d(3)(torch.ones(4, 5)))
    out["multinomial_neg"] = err(lambda: torch.multinomial(torch.tensor([-1.0, 1.0]), 1))
    out["bn_batch1"] = err(lambda: nn.BatchNorm1d(3)(torch.ones(1, 3)), "more than 1 value")
    out["softmax_no_dim_ok"] = None
    out["reshape_bad"] = err(lambda: torch.ones(6).reshape(4, 2), "shape")
    out["tensor_ragged"] = err(lambda: torch.tensor([[1, 2], [3]]))
    out["zeros_neg"] = err(lambda: torch.zeros(-1), "negative")
    out["arange_bad"] = err(lambda: torch.arange(0, 5, 0))
    out["where_dtype"] = err(lambda: torch.where(torch.tensor([1, 0]), 1.0, 0.0), "bool")
    out["bool_ambiguous"] = err(lambda: bool(torch.ones(2)), "ambiguous")
    out["int_of_tensor"] = [int(torch.tensor(3.7)), float(torch.tensor([2])), err(lambda: int(torch.ones(2)))]
    return out
