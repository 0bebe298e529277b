"""L-BFGS: limited-memory quasi-Newton steps, optionally with a strong-Wolfe line search.

Works on one flat vector holding all parameters (as PyTorch does), so every
parameter must be dense and the optimizer has a single parameter group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..autograd.grad_mode import enable_grad
from ..ops.inplace import bump_version
from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_minimum(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                   bounds: tuple[float, float] | None = None) -> float:
    """Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to ``bounds``
    (default: the interval between the points); the midpoint when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(pos, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(evaluate: Callable, t: float, d: np.ndarray, f: float, g: np.ndarray, gtd: float,
                  c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9, max_ls: int = 25):
    """Line search along ``d`` from step ``t`` satisfying the strong Wolfe conditions
    (Nocedal & Wright, algorithms 3.5 and 3.6: bracketing, then zoom by cubic interpolation).

    ``evaluate(t)`` returns the loss and flat gradient at ``x + t d`` (restoring ``x``).
    Returns ``(loss, flat_grad, t, evaluations)``.
    """
    d_norm = np.abs(d).max()
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    # bracketing phase: grow t until an interval holding a good point is found
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bf, bg, bgtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bf, bg, bgtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    # zoom phase: shrink the bracket until the strong Wolfe conditions hold
    insufficient_progress = False
    low, high = (0, 1) if bf[0] <= bf[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(bracket[0], bf[0], bgtd[0], bracket[1], bf[1], bgtd[1])
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            # too close to an end: move away from it unless the last step made progress there
            if insufficient_progress or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bf[low]:
            bracket[high], bf[high], bg[high], bgtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bf[0] <= bf[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bf[high], bg[high], bgtd[high] = bracket[low], bf[low], bg[low], bgtd[low]
            bracket[low], bf[low], bg[low], bgtd[low] = t, f_new, g_new, gtd_new
    return bf[low], bg[low], bracket[low], evals


def _vec(arr: np.ndarray) -> Tensor:
    return Tensor._make(np.array(arr), False, None, 0)


def _arr(value) -> np.ndarray:
    """A stored vector (Tensor, or array from a loaded state dict) as a NumPy array."""
    return np.asarray(getattr(value, "_data", value))


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's algorithm and options.  ``step(closure)`` runs up to
    ``max_iter`` quasi-Newton iterations; ``closure`` must zero the gradients, compute the
    loss, call ``backward()`` and return the loss.

    Each iteration builds the direction ``d = -H g`` from the last ``history_size``
    curvature pairs (two-loop recursion), then moves by ``lr`` (``min(1, 1/|g|_1) * lr``
    on the very first iteration), or by a strong-Wolfe line search step when
    ``line_search_fn="strong_wolfe"``.  It stops early when the gradient's largest entry
    is at most ``tolerance_grad`` or the step or loss change falls below ``tolerance_change``.

    >>> opt = dg.optim.LBFGS(model.parameters(), lr=1, line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad(); loss = loss_fn(model(x), y); loss.backward(); return loss
    >>> opt.step(closure)
    """

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None):
        if not (isinstance(lr, (int, float)) and lr >= 0.0):
            raise ValueError(f"LBFGS: Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: only line_search_fn='strong_wolfe' (or None) is supported, got "
                             f"{line_search_fn!r}")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size,
                        line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups): pass one "
                             "list of parameters")
        self._params = self.param_groups[0]["params"]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._params = self.param_groups[0]["params"]

    # -- flat views of the parameters -------------------------------------------
    def _flat_grad(self) -> np.ndarray:
        parts = [np.zeros(p._data.size, p._data.dtype) if p._grad is None else p._grad._data.reshape(-1)
                 for p in self._params]
        return np.concatenate(parts)

    def _add_to_params(self, t: float, d: np.ndarray) -> None:
        """``p += t * d`` for the slice of ``d`` that belongs to each parameter."""
        offset = 0
        for p in self._params:
            n = p._data.size
            p._data += t * d[offset:offset + n].reshape(p._data.shape)
            bump_version(p)
            offset += n

    def _set_params(self, saved: list[np.ndarray]) -> None:
        for p, arr in zip(self._params, saved, strict=True):
            np.copyto(p._data, arr)
            bump_version(p)

    # -- the step ------------------------------------------------------------------
    def step(self, closure: Callable[[], Any]):  # type: ignore[override]
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss of the first closure call."""
        if closure is None:
            raise RuntimeError("LBFGS.step requires a closure that re-evaluates the model and returns the loss")
        for hook in list(self._step_pre_hooks.values()):
            hook(self, (), {})

        def evaluate():
            with enable_grad():
                return closure()

        group = self.param_groups[0]
        lr = group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            self._run_post_hooks()
            return orig_loss

        d = _arr(state["d"]) if "d" in state else None
        t = float(_arr(state["t"])) if "t" in state else None
        # copies: a state dict shares these objects, and the history is edited below
        old_dirs = [_arr(v) for v in state.get("old_dirs", [])]
        old_stps = [_arr(v) for v in state.get("old_stps", [])]
        ro = [float(_arr(v)) for v in state.get("ro", [])]
        H_diag = float(_arr(state.get("H_diag", 1.0)))
        prev_flat_grad = _arr(state["prev_flat_grad"]) if "prev_flat_grad" in state else None
        prev_loss = state.get("prev_loss")
        al = [None if a is None else float(_arr(a)) for a in state["al"]] if "al" in state else None

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            # direction: -H g by the two-loop recursion over the curvature history
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, H_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:  # keep only pairs with positive curvature
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                if al is None:
                    al = [None] * history_size
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q -= al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss

            t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction any more
                break

            ls_evals = 0
            if group["line_search_fn"] is not None:
                x0 = [p._data.copy() for p in self._params]

                def at(step_t, x0=x0, d=d):
                    self._add_to_params(step_t, d)
                    value = float(evaluate())
                    g = self._flat_grad()
                    self._set_params(x0)
                    return value, g

                loss, flat_grad, t, ls_evals = _strong_wolfe(at, t, d, loss, flat_grad, gtd)
                self._add_to_params(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_to_params(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        # Python floats and fresh tensors, so the state dict saves and loads cleanly
        state["d"] = _vec(d)
        state["t"] = float(t)
        state["old_dirs"] = [_vec(v) for v in old_dirs]
        state["old_stps"] = [_vec(v) for v in old_stps]
        state["ro"] = [float(v) for v in ro]
        state["H_diag"] = float(H_diag)
        state["prev_flat_grad"] = _vec(prev_flat_grad)
        state["prev_loss"] = float(prev_loss)
        if al is not None:
            state["al"] = [None if a is None else float(_arr(a)) for a in al]
        self._run_post_hooks()
        return orig_loss

    def _run_post_hooks(self) -> None:
        for hook in list(self._step_post_hooks.values()):
            hook(self, (), {})
