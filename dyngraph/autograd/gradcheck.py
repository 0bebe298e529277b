"""Check analytical gradients against finite differences: ``gradcheck`` and ``gradgradcheck``.

Both follow ``torch.autograd.gradcheck``: every input that requires grad is
perturbed element by element (central differences, step ``eps``) to build the
numerical Jacobian of every floating-point output, the analytical Jacobian is
built from one backward pass per output element, and the two must satisfy
``|a - n| <= atol + rtol * |n|``.  Use float64 inputs: float32 rounding swamps
differences of size ``eps``.

>>> x = dg.randn(3, dtype=dg.float64, requires_grad=True)
>>> dg.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))
True
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from ..tensor import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck/gradgradcheck when analytical and numerical gradients differ."""


def _tensor_cls():
    return Tensor


def _as_inputs(inputs) -> tuple:
    if isinstance(inputs, _tensor_cls()):
        return (inputs,)
    return tuple(inputs)


def _float_outputs(out) -> list:
    Tensor = _tensor_cls()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, Tensor) and o.is_floating_point()]


def _plain(arr):
    return _tensor_cls()._make(arr, False, None, 0)


def _numerical(fn, inputs, diff_idx, eps):
    """``jac[i][j]``: (numel of input i) x (numel of output j), by central differences."""
    Tensor = _tensor_cls()
    base = [a._data.copy() if isinstance(a, Tensor) else a for a in inputs]

    def run(arrays):
        # inputs keep their requires_grad flag: gradgradcheck's function calls autograd.grad
        args = [_plain(a).requires_grad_(orig.requires_grad) if isinstance(orig, Tensor) else a
                for a, orig in zip(arrays, inputs, strict=True)]
        return [o._data.astype(np.float64) for o in _float_outputs(fn(*args))]

    n_out = len(run(base))
    jac = []
    for i in diff_idx:
        x = base[i]
        rows = []
        for k in range(x.size):
            vals = []
            for sign in (1.0, -1.0):
                pert = list(base)
                xp = x.copy()
                xp.reshape(-1)[k] += sign * eps
                pert[i] = xp
                vals.append(run(pert))
            rows.append([(p - m).reshape(-1) / (2 * eps) for p, m in zip(vals[0], vals[1], strict=True)])
        per_out = []
        for j in range(n_out):
            if x.size == 0:
                per_out.append(np.zeros((0, 0)))
            else:
                per_out.append(np.stack([r[j] for r in rows]))
        jac.append(per_out)
    return jac


def _analytical(fn, inputs, diff_idx):
    """Same layout as :func:`_numerical`, one ``autograd.grad`` per output element."""
    from . import grad  # noqa: PLC0415  (autograd/__init__ defines grad and imports this module)

    outs = _float_outputs(fn(*inputs))
    targets = [inputs[i] for i in diff_idx]
    jac = [[np.zeros((inputs[i].numel(), o.numel())) for o in outs] for i in diff_idx]
    for j, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for k in range(o.numel()):
            seed = np.zeros(o.numel(), o._data.dtype)
            seed[k] = 1
            gs = grad([o], targets, [_plain(seed.reshape(o._data.shape))], retain_graph=True,
                      allow_unused=True)
            for ii, g in enumerate(gs):
                if g is not None:
                    if tuple(g.shape) != tuple(targets[ii].shape):
                        raise GradcheckError(
                            f"Gradient for input {diff_idx[ii]} has shape {list(g.shape)} but the "
                            f"input has shape {list(targets[ii].shape)}")
                    jac[ii][j][:, k] = g._data.reshape(-1)
    return jac, len(outs)


def gradcheck(func: Callable, inputs, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked: bool | None = None) -> bool:
    """Compare ``func``'s gradients with central finite differences.

    Returns True when every (input, output) Jacobian matches; otherwise raises
    :class:`GradcheckError` showing both Jacobians (or returns False with
    ``raise_exception=False``).  The analytical Jacobian is computed twice and
    must agree within ``nondet_tol`` (reentrant backward).  The other PyTorch
    flags (``fast_mode``, ``check_undefined_grad``, batched and forward-AD
    checks...) are accepted so calls port unchanged, and do not change what is
    checked.

    >>> dg.autograd.gradcheck(dg.exp, (dg.rand(3, dtype=dg.float64, requires_grad=True),))
    True
    """
    inputs = _as_inputs(inputs)
    Tensor = _tensor_cls()
    diff_idx = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.")
    for i in diff_idx:
        if inputs[i].dtype.name != "float64":
            warnings.warn(
                f"Input {i} requires gradient and is {inputs[i].dtype}, not float64: finite "
                "differences at this precision are unreliable. Use float64 inputs.",
                UserWarning, stacklevel=2)

    def fail(msg):
        if raise_exception:
            raise GradcheckError(msg)
        return False

    if not check_backward_ad:
        return True
    analytical, n_out = _analytical(func, inputs, diff_idx)
    if nondet_tol >= 0:
        again, _ = _analytical(func, inputs, diff_idx)
        for ii, i in enumerate(diff_idx):
            for j in range(n_out):
                if not np.allclose(again[ii][j], analytical[ii][j], rtol=0, atol=nondet_tol):
                    return fail(
                        f"Backward is not reentrant, i.e., running backward with same input and "
                        f"grad_output multiple times gives different values, although analytical "
                        f"gradient matches numerical gradient. The tolerance for nondeterminism "
                        f"was {nondet_tol} (output {j} with respect to input {i}).")
    numerical = _numerical(func, inputs, diff_idx, eps)
    for ii, i in enumerate(diff_idx):
        for j in range(n_out):
            a, n = analytical[ii][j], numerical[ii][j]
            if a.shape != n.shape:
                n = n.reshape(a.shape)
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                err = np.abs(a - n)
                worst = np.unravel_index(np.argmax(err), err.shape) if err.size else ()
                with np.printoptions(precision=6, suppress=True, linewidth=120):
                    return fail(
                        f"Jacobian mismatch for output {j} with respect to input {i},\n"
                        f"numerical:{n}\nanalytical:{a}\n"
                        f"(rows: input elements, columns: output elements; largest difference "
                        f"{err.max():.3g} at {tuple(int(w) for w in worst)}; atol={atol}, "
                        f"rtol={rtol}, eps={eps})\n")
    return True


def gradgradcheck(func: Callable, inputs, grad_outputs=None, *, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:
    """Check second-order gradients: gradcheck of ``v ↦ vᵀ J`` (with random ``v`` by default).

    >>> x = dg.rand(3, dtype=dg.float64, requires_grad=True)
    >>> dg.autograd.gradgradcheck(lambda t: t ** 3, (x,))
    True
    """
    from . import grad  # noqa: PLC0415  (autograd/__init__ defines grad and imports this module)

    inputs = _as_inputs(inputs)
    Tensor = _tensor_cls()
    diff_idx = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad]
    if grad_outputs is None:
        outs = _float_outputs(func(*inputs))
        rng = np.random.default_rng(0)
        grad_outputs = []
        for o in outs:
            v = rng.standard_normal(tuple(o.shape)).astype(o._data.dtype)
            if gen_non_contig_grad_outputs and v.ndim >= 2:
                v = np.asfortranarray(v)
            grad_outputs.append(_plain(v).requires_grad_(True))
    else:
        grad_outputs = list(_as_inputs(grad_outputs))
    n_in = len(inputs)

    def first_order(*args):
        ins, gos = args[:n_in], args[n_in:]
        outs = _float_outputs(func(*ins))
        pairs = [(o, g) for o, g in zip(outs, gos, strict=True) if o.requires_grad]
        if not pairs:
            return ()
        gs = grad([o for o, _ in pairs], [ins[i] for i in diff_idx], [g for _, g in pairs],
                  create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_order, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol)
