"""Library code reads tensor values only through ``concrete(t, why)`` (DESIGN principle 6).

An AST scan of ``dyngraph/ops``, ``dyngraph/surface`` and ``dyngraph/nn``: every read of ``x._data``
(or of the accessor helpers ``_data(x)``, ``_np(x)``, ``_raw(x)`` that return it)
must be one of

* a metadata read (``x._data.shape``, ``.dtype``, ``.ndim``, ``.size``...);
* a write into the slot (``x._data = ...``);
* inside a primitive's array implementation or a derivative/batching rule
  (those run on arrays by design: ``@primitive``, ``defvjp``/``defvjp_argnum``/
  ``defbatch`` arguments, ``*_vjp``/``*_jvp`` helpers, ``backward_node``);
* or listed in :data:`ALLOWED` below, by file and function, with the reason.

A new value read anywhere else fails this test: use
``dyngraph._core.state.concrete(t, "why")`` (graph capture then guards on the
value, automatic batching forces it), or compute with primitives.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "dyngraph"
META = {"shape", "dtype", "ndim", "size", "itemsize", "strides", "flags", "nbytes", "device",
        "__cuda_array_interface__", "base"}
ACCESSORS = {"_data", "_np", "_raw"}   # ``lambda a: a._data if isinstance(a, Tensor) else a``
RULE_REGISTRARS = {"defvjp", "defvjp_argnum", "defjvp", "defjvp_argnum", "defbatch", "Primitive",
                   "primitive"}

# (file relative to dyngraph/, function) -> why its value reads are not decisions
ALLOWED = {
    # -- value checks: they only raise an error, never change a result ------------------
    ("surface/pooling.py", "_max_unpool_nd"): "check: indices within the output volume",
    ("surface/indexing.py", "_check_gather_like"): "check: no negative / out-of-range index",
    ("surface/indexing.py", "_check_index_1d"): "check: index within the dimension",
    ("surface/indexing.py", "_check_index_dims"): "check: index shape vs the input's",
    ("surface/indexing.py", "index_reduce"): "check: index within the dimension",
    ("surface/indexing.py", "one_hot"): "check: classes in [0, num_classes) (the count uses concrete)",
    ("surface/nn.py", "embedding"): "check: indices within the table",
    ("nn/sparse.py", "forward"): "check: Embedding's inlined lookup, indices within the table "
                                 "(a pending index's Lazy data takes F.embedding)",
    ("surface/nn.py", "check_nll_args"): "check: target classes in range (ld/td alias shape reads)",
    ("nn/_functional_loss.py", "binary_cross_entropy"): "check: probabilities in [0, 1]",
    ("nn/_functional_loss.py", "gaussian_nll_loss"): "check: var is non-negative",
    ("surface/shape.py", "_view_method"): "check: can the array be viewed without a copy",
    # -- aliases read only for shape/dtype (the scan cannot follow the alias) ------------
    ("surface/shape.py", "cat"): "alias: ref.ndim",
    ("surface/linalg.py", "svd"): "alias: x.shape / x.dtype for the zero U, V",
    ("surface/elementwise.py", "result_type"): "alias: only the operands' dtypes are read",
    ("surface/indexing.py", "_index_tensor"): "empty float index cast to int64 (no values)",
    ("nn/linear.py", "forward"): "alias: d.ndim / d.shape / d.dtype",
    # -- eager-only fast paths: taken only when no interpreter is active ---------------
    ("surface/indexing.py", "_assign"): "eager fast path (STATE.interpreter is None)",
    ("surface/indexing.py", "masked_fill_"): "eager fast path (STATE.interpreter is None)",
    # -- the in-place / view machinery: moves arrays between slots, reads no values ------
    ("surface/inplace.py", "_rebase_view"): "view bookkeeping",
    ("surface/inplace.py", "_write"): "stores a computed array into the target (on_inplace told)",
    ("surface/inplace.py", "apply_inplace"): "stores a computed array into the target",
    ("surface/inplace.py", "copy_"): "stores the source into the target (on_inplace told)",
    ("surface/inplace.py", "fill_"): "stores a constant (on_inplace told)",
    ("surface/inplace.py", "share_memory_"): "moves the array into shared memory (same values)",
    ("surface/inplace.py", "is_shared"): "inspects the array's buffer, not its values",
    ("surface/shape.py", "_view_inplace"): "x.unsqueeze_(): x takes the view's array",
    # -- raw buffer/parameter updates outside primitives (version counters bumped, so
    #    graph capture sees the write and runs the call eagerly) --------------------------
    ("nn/functional.py", "_update_running"): "BatchNorm running statistics",
    ("nn/functional.py", "batch_norm"): "BatchNorm running statistics",
    ("nn/functional.py", "instance_norm"): "InstanceNorm running statistics",
    ("nn/normalization.py", "forward"): "num_batches_tracked += 1",
    ("nn/normalization.py", "reset_running_stats"): "writes constants",
    ("surface/nn.py", "embedding_renorm_"): "max_norm: rescales weight rows in place",
    ("nn/init.py", "_write"): "initialisation writes",
    ("nn/init.py", "_sample"): "initialisation: fills the tensor with samples",
    ("nn/sparse.py", "_fill_padding_idx_with_zero"): "initialisation writes",
    ("nn/sparse.py", "reset_parameters"): "initialisation writes",
    # -- module / parameter plumbing: copies, device moves, state, no decisions -----------
    ("nn/module.py", "_apply"): "Module.to/float/...: converts every parameter",
    ("nn/module.py", "_as_host_array"): "state_dict export",
    ("nn/module.py", "zero_grad"): "zeroes .grad in place",
    ("nn/parameter.py", "__deepcopy__"): "copy.deepcopy",
    ("nn/parameter.py", "__reduce_ex__"): "pickling for DataLoader workers (data only)",
    ("nn/parameter.py", "_source_array"): "Parameter(t) shares t's array",
    ("nn/_backward_hooks.py", "_identity"): "module backward hooks: identity on arrays",
    ("nn/_backward_hooks.py", "_unwrap"): "module backward hooks: grads as arrays",
    ("nn/utils/convert_parameters.py", "vector_to_parameters"): "parameters become views of vec",
    # -- gradient clipping: reads and scales .grad arrays outside primitives, like
    #    Optimizer.step (raw updates with version bumps) ------------------------------------
    ("nn/utils/clip_grad.py", "get_total_norm"): "the norm of the gradients",
    ("nn/utils/clip_grad.py", "clip_grad_value_"): "clamps .grad in place",
    # -- helpers called only by rules and impls (arrays in, arrays out) ------------------
    ("ops/indexing.py", "_unique_positions"): "rule helper of index_fill",
    ("ops/nn.py", "_keep_rows"): "rule helper of embedding",
    ("ops/nn.py", "_coefs"): "rule helper of nll_loss",
}


def _rule_names(tree) -> set:
    """Names of functions that are primitive impls or rules in this module."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                f = d.func if isinstance(d, ast.Call) else d
                if (getattr(f, "id", None) or getattr(f, "attr", None)) in RULE_REGISTRARS:
                    names.add(node.name)
        elif isinstance(node, ast.Call):
            f = node.func
            if (getattr(f, "attr", None) or getattr(f, "id", None)) in RULE_REGISTRARS:
                names.update(a.id for a in node.args if isinstance(a, ast.Name))
    return names


def _is_rule_name(name: str) -> bool:
    return name == "backward_node" or name.endswith(("_vjp", "_jvp", "_batch", "_rule")) \
        or name.startswith(("_vjp", "_jvp"))


def value_reads(path: pathlib.Path) -> list:
    """``(function, line)`` of every value read of ``._data`` not inside an impl or rule."""
    tree = ast.parse(path.read_text())
    rules = _rule_names(tree)
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr == "_data":
            p = parents.get(n)
            if isinstance(p, ast.Attribute) and p.attr in META:
                continue
            if isinstance(n.ctx, ast.Store):
                continue
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ACCESSORS:
            pass
        else:
            continue
        chain, f = [], parents.get(n)
        while f is not None:
            if isinstance(f, (ast.FunctionDef, ast.Lambda)):
                chain.append(f)
            f = parents.get(f)
        names = [getattr(c, "name", "<lambda>") for c in chain]
        if any(nm in rules or _is_rule_name(nm) for nm in names):
            continue
        if any(isinstance(c, ast.Lambda) and isinstance(parents.get(c), ast.Call)
               and getattr(parents[c].func, "attr", "") in RULE_REGISTRARS for c in chain):
            continue
        if names and names[0] in ACCESSORS and len(names) == 1:
            continue  # the accessor's own body: its call sites are checked instead
        found.append((names[-1] if names else "<module>", n.lineno))
    return found


def test_no_value_reads_behind_the_interpreter():
    files = (sorted(ROOT.glob("ops/*.py")) + sorted(ROOT.glob("surface/*.py"))
             + sorted(ROOT.glob("nn/**/*.py")))
    bad = []
    used = set()
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for fn, line in value_reads(path):
            if (rel, fn) in ALLOWED:
                used.add((rel, fn))
                continue
            bad.append(f"dyngraph/{rel}:{line} in {fn}()")
    assert not bad, (
        "tensor values read with ._data outside primitives, rules and the allow-list; use "
        "dyngraph._core.state.concrete(t, why) or primitives:\n  " + "\n  ".join(bad))
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"allow-list entries that no longer read values (remove them): {stale}"


def test_the_scan_sees_a_value_read(tmp_path):
    src = ("def f(t):\n    return int(t._data.max())\n"
           "def g(t):\n    return t._data.shape\n"
           "@primitive('p')\ndef p_impl(x):\n    return x._data\n")
    probe = tmp_path / "probe.py"
    probe.write_text(src)
    assert value_reads(probe) == [("f", 2)]
