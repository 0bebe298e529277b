"""Run an unmodified PyTorch program on dyngraph: ``python -m dyngraph.run_torch program.py [args]``.

An import hook maps ``torch`` and every ``torch.X.Y`` to dyngraph's module of the same
path (``torch.utils.data.dataloader`` → ``dyngraph.utils.data.dataloader``) for this
process, then the program runs as ``__main__`` with its own ``sys.argv``.  The first
PyTorch name dyngraph lacks stops the program with an error that names it::

    $ python -m dyngraph.run_torch train.py --epochs 2
    dyngraph.run_torch.MissingTorchNameError: torch.fft.rfft2 is not provided by dyngraph
    (dyngraph.fft has no attribute 'rfft2'); see docs/porting.md

``-m package.module`` runs a module instead of a file, as ``python -m`` does.
:func:`run_path` does the same inside a running interpreter (the tests use it), and
:func:`torch_is_dyngraph` is the import hook as a context manager.

``torch.X`` is a thin module object that forwards reads and writes to ``dyngraph.X``
(``torch.backends.cudnn.benchmark = True`` sets dyngraph's flag) and remembers
functions and classes it has looked up, so the indirection costs one dictionary
lookup per use.  ``torch.__version__`` reports the PyTorch API dyngraph follows
(``2.13.0+dyngraph...``) so version checks in programs pick the current API.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import re
import runpy
import sys
import types

__all__ = ["MissingTorchNameError", "MissingTorchModuleError", "torch_is_dyngraph", "run_path", "run_module",
           "main", "TORCH_API_VERSION"]

# The PyTorch release whose surface dyngraph follows (what the tests compare against).
TORCH_API_VERSION = "2.13.0"


class MissingTorchNameError(AttributeError):
    """A PyTorch name the program uses that dyngraph does not provide."""


class MissingTorchModuleError(ModuleNotFoundError):
    """A PyTorch module path the program imports that has no dyngraph counterpart."""


# PyTorch submodules whose names dyngraph keeps in one module of another path
# (``from torch.distributions.normal import Normal`` finds ``dyngraph.distributions.Normal``).
_LAYOUT = {
    **{f"torch.distributions.{m}": "dyngraph.distributions"
       for m in ("normal", "categorical", "bernoulli", "beta", "binomial", "cauchy", "dirichlet", "exponential",
                 "gamma", "geometric", "independent", "laplace", "log_normal", "multivariate_normal",
                 "one_hot_categorical", "poisson", "transformed_distribution", "uniform", "chi2", "studentT",
                 "mixture_same_family")},
    "torch.amp.grad_scaler": "dyngraph.amp",
    "torch.amp.autocast_mode": "dyngraph.amp",
    "torch.cuda.amp.grad_scaler": "dyngraph.cuda.amp",
    "torch.cuda.amp.autocast_mode": "dyngraph.cuda.amp",
    "torch.optim.adamw": "dyngraph.optim",
}


# PyTorch names dyngraph lacks for a known reason: the error names the reason and what to use.
_NO_COMPLEX = ("dyngraph has no complex dtypes, so the transforms that return or take complex "
               "tensors are not provided (torch.fft.fftfreq/rfftfreq/fftshift/ifftshift are)")
_GAPS = {
    "torch.fft.": _NO_COMPLEX,
    "torch.linalg.eig": "dyngraph has no complex dtypes; for a symmetric matrix use torch.linalg.eigh / eigvalsh",
    "torch.linalg.eigvals": "dyngraph has no complex dtypes; for a symmetric matrix use torch.linalg.eigvalsh",
    "torch.view_as_complex": "dyngraph has no complex dtypes",
    "torch.view_as_real": "dyngraph has no complex dtypes",
    **{f"torch.{n}": "dyngraph has no complex dtypes"
       for n in ("complex", "complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf")},
    "torch.polar": "dyngraph has no complex dtypes",
    "torch.stft": "dyngraph has no complex dtypes",
    "torch.istft": "dyngraph has no complex dtypes",
    "torch.sparse_csc_tensor": "dyngraph's sparse layouts are COO and 2-D CSR (torch.sparse_csr_tensor)",
    "torch.Tensor.to_sparse_csc": "dyngraph's sparse layouts are COO and 2-D CSR (x.to_sparse_csr())",
    "torch.sparse_bsr_tensor": "dyngraph's sparse layouts are COO and 2-D CSR (torch.sparse_csr_tensor)",
    "torch.nn.utils.parametrizations.orthogonal": "it needs torch.linalg.matrix_exp / householder_product, "
                                                  "which dyngraph lacks (weight_norm and spectral_norm are there)",
    "torch.linalg.matrix_exp": "not implemented in dyngraph yet",
}


def _gap_note(torch_name: str) -> str:
    """`` -- reason`` for a name dyngraph lacks on purpose, else ``""``."""
    for key, why in _GAPS.items():
        if torch_name == key or (key.endswith(".") and torch_name.startswith(key)) \
                or torch_name.startswith(key + "_"):
            return f" -- {why}"
    return ""


def _dg_name(torch_name: str) -> str:
    return _LAYOUT.get(torch_name) or "dyngraph" + torch_name[len("torch"):]


def _torch_name(dg_name: str) -> str:
    return "torch" + dg_name[len("dyngraph"):]


class _Version(str):
    """``torch.__version__``: a string that compares as a version (like ``TorchVersion``)."""

    @staticmethod
    def _key(v) -> tuple:
        nums = re.match(r"[\d.]*", str(v)).group(0).strip(".")
        return tuple(int(p) for p in nums.split(".") if p)

    def _cmp(self, other, op):
        if not isinstance(other, (str, tuple)):
            return NotImplemented
        mine, theirs = self._key(self), (other if isinstance(other, tuple) else self._key(other))
        width = max(len(mine), len(theirs))
        return op(mine + (0,) * (width - len(mine)), tuple(theirs) + (0,) * (width - len(theirs)))

    def __lt__(self, other):
        return self._cmp(other, tuple.__lt__)

    def __le__(self, other):
        return self._cmp(other, tuple.__le__)

    def __gt__(self, other):
        return self._cmp(other, tuple.__gt__)

    def __ge__(self, other):
        return self._cmp(other, tuple.__ge__)

    def __eq__(self, other):
        if isinstance(other, str) and not re.match(r"\d", other):
            return str.__eq__(self, other)
        return self._cmp(other, tuple.__eq__)

    def __hash__(self):
        return str.__hash__(self)


# Attributes the import machinery sets on the alias itself (never forwarded to dyngraph).
_OWN = frozenset({"__name__", "__spec__", "__loader__", "__file__", "__path__", "__package__",
                  "__cached__", "__builtins__", "__doc__", "__version__"})


def _cacheable(value) -> bool:
    # Functions, classes and modules do not change under the program; plain values (flags)
    # are read through every time so writes by dyngraph itself stay visible.
    return isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType))


class _TorchModule(types.ModuleType):
    """``torch.X``: forwards attribute reads and writes to ``dyngraph.X``."""

    def __init__(self, name: str, target):
        super().__init__(name)
        self.__dict__["_dg_target"] = target
        self.__dict__["__path__"] = []      # every torch.X may have submodules (found by the hook)
        if getattr(target, "__doc__", None):
            self.__dict__["__doc__"] = target.__doc__
        if name == "torch":
            import dyngraph  # noqa: PLC0415  (the runner loads the package its scripts run against, once a script starts)

            self.__dict__["__version__"] = _Version(f"{TORCH_API_VERSION}+dyngraph.{dyngraph.__version__}")

    def __getattr__(self, attr: str):
        target = self.__dict__["_dg_target"]
        try:
            value = getattr(target, attr)
        except AttributeError as exc:
            if attr == "__all__":    # `from torch import *`: the public names, as Python would take them
                return [n for n in dir(target) if not n.startswith("_")]
            if attr.startswith("__") and attr.endswith("__"):
                raise
            sub = f"{self.__name__}.{attr}"
            if sub in _LAYOUT or hasattr(target, "__path__"):
                # a submodule PyTorch's package imports eagerly (torch.optim.swa_utils), or one
                # kept elsewhere in dyngraph: import it now
                try:
                    mod = _alias(sub, _resolve(sub))
                except MissingTorchModuleError:
                    pass
                else:
                    self.__dict__[attr] = mod
                    return mod
            dg_where = getattr(target, "__name__", None) or type(target).__name__
            raise MissingTorchNameError(
                f"{self.__name__}.{attr} is not provided by dyngraph ({dg_where} has no attribute "
                f"{attr!r}){_gap_note(sub)}; see docs/porting.md for the names dyngraph maps",
                name=attr, obj=self) from exc
        if isinstance(value, types.ModuleType) and value.__name__.startswith("dyngraph."):
            value = _alias(_torch_name(value.__name__), value)
        if _cacheable(value):
            self.__dict__[attr] = value
        return value

    def __setattr__(self, attr: str, value) -> None:
        if attr in _OWN or isinstance(value, _TorchModule):
            self.__dict__[attr] = value      # the import system records a submodule alias
            return
        self.__dict__.pop(attr, None)
        setattr(self.__dict__["_dg_target"], attr, value)

    def __delattr__(self, attr: str) -> None:
        self.__dict__.pop(attr, None)
        delattr(self.__dict__["_dg_target"], attr)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_dg_target"])) | set(self.__dict__) - {"_dg_target"})

    def __repr__(self) -> str:
        target = self.__dict__["_dg_target"]
        return f"<module {self.__name__!r} (dyngraph: {getattr(target, '__name__', target)!r})>"


def _alias(torch_name: str, target) -> _TorchModule:
    """The (unique) alias module for ``torch_name``, registered in ``sys.modules``."""
    mod = sys.modules.get(torch_name)
    if isinstance(mod, _TorchModule) and mod.__dict__["_dg_target"] is target:
        return mod
    mod = _TorchModule(torch_name, target)
    mod.__dict__["__spec__"] = importlib.machinery.ModuleSpec(torch_name, _LOADER, is_package=True)
    mod.__dict__["__loader__"] = _LOADER
    mod.__dict__["__package__"] = torch_name
    sys.modules[torch_name] = mod
    return mod


def _resolve(torch_name: str):
    """dyngraph's object for a ``torch.X.Y`` module path (a module, or an attribute that stands
    for one such as ``dg.cuda.amp``); raises :class:`MissingTorchModuleError`."""
    dg_name = _dg_name(torch_name)
    try:
        return importlib.import_module(dg_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not (dg_name == missing or dg_name.startswith(missing + ".")):
            raise   # a dependency of the dyngraph module is missing: report it as it is
        parent, _, leaf = dg_name.rpartition(".")
        if parent:
            try:
                value = getattr(importlib.import_module(parent), leaf)
            except (ImportError, AttributeError):
                pass
            else:
                if not isinstance(value, (types.FunctionType, type)):
                    return value
        raise MissingTorchModuleError(
            f"No module named {torch_name!r}: dyngraph has no counterpart of this PyTorch module "
            f"({dg_name} does not exist); see docs/porting.md", name=torch_name) from None


class _TorchLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return _alias(spec.name, _resolve(spec.name))

    def exec_module(self, module) -> None:
        pass   # the dyngraph module ran when it was imported


_LOADER = _TorchLoader()


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Maps ``torch`` and ``torch.*`` imports onto dyngraph (first on ``sys.meta_path``)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        return importlib.machinery.ModuleSpec(fullname, _LOADER, is_package=True)


def _is_torch_key(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


@contextlib.contextmanager
def torch_is_dyngraph():
    """Inside the block ``import torch`` (and ``torch.X.Y``) gives dyngraph's modules.

    A real PyTorch already imported in this interpreter is set aside and put back
    afterwards, so a test can run one program with both libraries.

    >>> with torch_is_dyngraph():
    ...     import torch
    ...     torch.ones(2).sum().item()
    2.0
    """
    import dyngraph  # noqa: F401,PLC0415  (so the first alias finds it imported)

    saved = {k: sys.modules.pop(k) for k in [k for k in sys.modules if _is_torch_key(k)]}
    finder = _TorchFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if _is_torch_key(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


_TENSOR_ATTR = re.compile(r"^'(\w+)' object has no attribute '(\w+)'")
_MODULE_ATTR = re.compile(r"^module '(dyngraph[\w.]*)' has no attribute '(\w+)'")
_IMPORT_NAME = re.compile(r"^cannot import name '(\w+)' from '((?:dyngraph|torch)[\w.]*)'")


def _missing_name(exc: BaseException) -> str | None:
    """The PyTorch name behind an AttributeError/ImportError raised by a dyngraph object."""
    msg = str(exc)
    if isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        owner = obj if isinstance(obj, type) else type(obj)
        m = _TENSOR_ATTR.match(msg)
        if m and obj is not None and owner.__module__.startswith("dyngraph"):
            import dyngraph  # noqa: PLC0415  (the runner loads the package its scripts run against, once a script starts)

            if issubclass(owner, dyngraph.Tensor):
                return f"torch.Tensor.{m.group(2)}"
            return f"{_torch_name(owner.__module__)}.{owner.__name__}.{m.group(2)}"
        m = _MODULE_ATTR.match(msg)
        if m:
            return f"{_torch_name(m.group(1))}.{m.group(2)}"
    elif isinstance(exc, ImportError):
        m = _IMPORT_NAME.match(msg)
        if m:
            module = m.group(2)
            return f"{_torch_name(module) if module.startswith('dyngraph') else module}.{m.group(1)}"
    return None


def _explain(exc: BaseException) -> BaseException | None:
    if isinstance(exc, (MissingTorchNameError, MissingTorchModuleError)):
        return None
    name = _missing_name(exc)
    if name is None:
        return None
    cls = MissingTorchNameError if isinstance(exc, AttributeError) else MissingTorchModuleError
    new = cls(f"{name} is not provided by dyngraph ({exc}){_gap_note(name)}; see docs/porting.md for the "
              "names dyngraph maps")
    if cls is MissingTorchModuleError:
        new.name = name
    return new


def _run(runner, target: str, args) -> dict:
    old_argv = sys.argv
    sys.argv = [target, *map(str, args)]
    try:
        with torch_is_dyngraph():
            try:
                return runner()
            except (AttributeError, ImportError) as exc:
                new = _explain(exc)
                if new is None:
                    raise
                raise new from exc
    finally:
        sys.argv = old_argv


def run_path(path: str, args=(), run_name: str = "__main__") -> dict:
    """Run the PyTorch program at ``path`` on dyngraph with ``sys.argv[1:] = args``; returns its
    globals (as :func:`runpy.run_path` does).

    >>> g = run_path("train.py", ["--epochs", "1"])
    """
    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)    # as `python program.py` puts the program's folder first
    try:
        return _run(lambda: runpy.run_path(path, run_name=run_name), path, args)
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(directory)


def run_module(module: str, args=()) -> dict:
    """Run ``python -m module`` on dyngraph (see :func:`run_path`)."""
    return _run(lambda: runpy.run_module(module, run_name="__main__", alter_sys=True), module, args)


_USAGE = "usage: python -m dyngraph.run_torch (program.py | -m module) [args...]"


def main(argv=None) -> int:
    """The command line: ``python -m dyngraph.run_torch program.py [args]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE + "\n\n" + __doc__.split("\n\n")[1])
        return 0 if argv else 2
    if argv[0] == "-m":
        if len(argv) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        run_module(argv[1], argv[2:])
    else:
        run_path(argv[0], argv[1:])
    return 0


if __name__ == "__main__":
    # Run the importable copy so its exception classes are dyngraph.run_torch's, not __main__'s.
    from dyngraph.run_torch import main as _main

    sys.exit(_main())
