"""``Module``: the base class of every layer, with PyTorch's registration machinery.

Assigning a :class:`Parameter`, a :class:`Buffer` or a ``Module`` to an attribute
registers it; ``state_dict()``/``load_state_dict()`` use PyTorch's key names
(``layer1.0.weight``, ``bn.running_mean``), so checkpoints move between the two.

>>> class Net(dg.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = dg.nn.Linear(4, 2)
...     def forward(self, x):
...         return self.fc(x).relu()
>>> [k for k, _ in Net().named_parameters()]
['fc.weight', 'fc.bias']

Errors raised inside a layer's ``forward`` are re-raised (same type) with the
layer and its path inside the model that was called, e.g.
``Linear(in_features=4, out_features=3) at 'encoder.fc': expected input with last
dimension 4, got shape [2, 5]``.
"""

from __future__ import annotations

import itertools
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import dtypes as _dt
from .._core.graph import RemovableHandle
from .._core.state import set_grad
from ..autograd.grad_mode import STATE, no_grad
from ..tensor import Tensor, _host, parse_to_args
from ._backward_hooks import BackwardHook
from .parameter import Buffer, Parameter

__all__ = ["Module", "RemovableHandle"]

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"
_ANNOTATED = (RuntimeError, ValueError, TypeError, IndexError)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text: str, n: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * n
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _add_hook(hooks: OrderedDict, hook, prepend: bool, *extra_dicts) -> RemovableHandle:
    handle = RemovableHandle(hooks, *extra_dicts)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


# -- "no hooks anywhere": the one check of Module.__call__ ----------------------------------
# ``_MAYBE_HOOKED`` holds everything that could make a module call do more than
# ``forward(*args, **kwargs)``: every non-empty hook dict (each module's four and the global
# ones are _HookDicts, which enter it when they gain an entry and leave when they are empty
# again; weakly, so a dropped module's hooks leave with it), every module created but not
# yet through Module.__init__ (its call must explain the missing super().__init__()), and
# every module one of whose hook dicts was replaced by a mapping of another type.  While it is
# empty, __call__ is one global truth test and the forward call; otherwise every call takes
# the checks of PyTorch's _call_impl.  An entry too many only costs those checks; no way of
# adding a hook bypasses it (register_*, item assignment, update, setdefault, copy,
# deepcopy and pickling all go through _HookDict.__setitem__).
_MAYBE_HOOKED: dict = {}


_weakref = weakref.ref


def _forget(key: int) -> Callable:
    return lambda _ref: _MAYBE_HOOKED.pop(key, None)


def _note(obj) -> None:
    key = id(obj)
    if key not in _MAYBE_HOOKED:
        _MAYBE_HOOKED[key] = weakref.ref(obj, _forget(key))


class _HookDict(OrderedDict):
    """The OrderedDict of a module's (or the global) hooks, keyed by handle id, that keeps
    ``_MAYBE_HOOKED`` told whether it holds any."""

    def __setitem__(self, key, value) -> None:
        OrderedDict.__setitem__(self, key, value)
        _note(self)

    def setdefault(self, key, default=None):
        out = OrderedDict.setdefault(self, key, default)
        _note(self)
        return out

    def _emptied(self) -> None:
        if not self:
            _MAYBE_HOOKED.pop(id(self), None)

    def __delitem__(self, key) -> None:
        OrderedDict.__delitem__(self, key)
        self._emptied()

    def pop(self, *args):
        out = OrderedDict.pop(self, *args)
        self._emptied()
        return out

    def popitem(self, last: bool = True):
        out = OrderedDict.popitem(self, last)
        self._emptied()
        return out

    def clear(self) -> None:
        OrderedDict.clear(self)
        self._emptied()


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")


def _settled(module) -> None:
    """Take ``module`` out of ``_MAYBE_HOOKED`` once its __dict__ is a whole module's: the
    dicts of Module.__init__, every hook dict a _HookDict (which reports its own hooks)."""
    d = module.__dict__
    if "_parameters" in d and all(type(d.get(n)) is _HookDict for n in _HOOK_DICTS):
        _MAYBE_HOOKED.pop(id(module), None)

# PyTorch's global module hooks (torch.nn.modules.module.register_module_*_hook): they run
# for every module call, before the module's own hooks of the same kind
_global_forward_pre_hooks: _HookDict = _HookDict()
_global_forward_hooks: _HookDict = _HookDict()
_global_forward_hooks_with_kwargs: dict = {}
_global_forward_hooks_always_called: dict = {}
_global_backward_pre_hooks: _HookDict = _HookDict()
_global_backward_hooks: _HookDict = _HookDict()


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """A forward pre-hook for every module: ``hook(module, args)`` runs before each
    ``forward`` (before the module's own pre-hooks) and may return replacement args.

    >>> h = dg.nn.module.register_module_forward_pre_hook(lambda m, a: None)
    >>> h.remove()
    """
    return _add_hook(_global_forward_pre_hooks, hook, False)


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """A forward hook for every module: ``hook(module, args, output)`` (or
    ``hook(module, args, kwargs, output)`` with ``with_kwargs``) runs after each ``forward``,
    before the module's own forward hooks, and may return a new output; with
    ``always_call`` it also runs when ``forward`` raises.

    >>> h = dg.nn.module.register_module_forward_hook(lambda m, a, o: None)
    >>> h.remove()
    """
    handle = _add_hook(_global_forward_hooks, hook, False, _global_forward_hooks_with_kwargs,
                       _global_forward_hooks_always_called)
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """A backward pre-hook for every module: ``hook(module, grad_output)``, before the
    module's own backward pre-hooks; may return replacement ``grad_output``.

    >>> h = dg.nn.module.register_module_full_backward_pre_hook(lambda m, g: None)
    >>> h.remove()
    """
    return _add_hook(_global_backward_pre_hooks, hook, False)


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """A full backward hook for every module: ``hook(module, grad_input, grad_output)``,
    before the module's own backward hooks; may return replacement ``grad_input``.

    >>> h = dg.nn.module.register_module_full_backward_hook(lambda m, gi, go: None)
    >>> h.remove()
    """
    return _add_hook(_global_backward_hooks, hook, False)


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """PyTorch's deprecated non-full global backward hook: refused with an error that names
    the replacement (:func:`register_module_full_backward_hook`).

    >>> dg.nn.module.register_module_backward_hook(print)   # raises NotImplementedError
    """
    raise NotImplementedError(
        "register_module_backward_hook (the deprecated, non-full hook) is not supported; use "
        "register_module_full_backward_hook, whose grad_input/grad_output are well defined")


# -- fast reads of registered attributes ------------------------------------------------------
# ``self.fc`` / ``self.weight`` of a registered submodule, parameter or buffer is not in the
# instance __dict__ (PyTorch keeps them in _modules/_parameters/_buffers), so the normal lookup
# fails, builds an AttributeError and only then calls Module.__getattr__: ~0.45 us a read
# (CPython 3.11).  The first such read of ``name`` on an instance of class ``K`` puts a
# _RegisteredReader for ``name`` on ``K``: a non-data descriptor, so the normal lookup finds it
# after the instance __dict__ (plain attributes still win, as in PyTorch) and calls its
# __get__, which reads the three dicts live (~0.13 us).  Nothing is copied, so every way of
# changing the dicts (assignment, del, register_*, direct ``_modules[name] = m`` writes,
# _apply, load_state_dict, functional_call's swaps, pickling, copy) is seen at once; an instance
# of K that has no such name gets what it got before (the descriptor raises AttributeError and
# CPython falls back to __getattr__).  The descriptor is only put where the name is no attribute
# of any class in K's MRO, and on a subclass whose later MRO classes define the name it returns
# their attribute (what the normal lookup would have found), so class attributes, methods and
# properties (parametrize's included) keep their precedence.  What it changes: the class
# __dict__ (and dir(K)) lists the name; ``hasattr(K, name)`` stays False.
_MAX_READERS = 256   # per class: a class read through many names (generated ones) stops there
_readers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # class -> readers on it


class _RegisteredReader:
    """``obj.<name>`` of a registered parameter, buffer or submodule without the failed lookup
    and ``__getattr__``: the values are read from the module's dicts at each access."""

    __slots__ = ("name", "home")

    def __init__(self, name: str, home: type) -> None:
        self.name = name
        self.home = home        # the class it was put on

    def __get__(self, obj, cls=None):
        # (CPython passes type(obj) as cls; a read on the class itself, or through a subclass,
        # takes _slow)
        if cls is self.home and obj is not None:
            # PyTorch's __getattr__ order: parameters, buffers, modules
            n = self.name
            d = obj.__dict__
            try:
                p = d["_parameters"]
                if n in p:
                    return p[n]
                b = d["_buffers"]
                if n in b:
                    return b[n]
                m = d["_modules"]
                if n in m:
                    return m[n]
            except KeyError:
                pass
            # not registered on this instance: the normal lookup's failure (CPython then calls
            # __getattr__, which raises PyTorch's message)
            raise AttributeError(n)
        return self._slow(obj, cls)

    def _slow(self, obj, cls):
        if obj is None:
            raise AttributeError(f"type object '{cls.__name__}' has no attribute '{self.name}'")
        cls = type(obj)
        v = self._later(cls)
        if v is _NOTHING and cls.__getattr__ is not Module.__getattr__:
            # a subclass with its own __getattr__: PyTorch calls it for every registered name
            raise AttributeError(self.name)
        if v is _NOTHING:
            # a subclass whose other classes do not define the name: its own reader serves the
            # next reads (kept on the subclass, so a dropped class, e.g. one of parametrize's,
            # takes its readers with it); this read is served from the dicts
            _install_reader(cls, self.name)
            n = self.name
            d = obj.__dict__
            for kind in ("_parameters", "_buffers", "_modules"):
                t = d.get(kind)
                if t is not None and n in t:
                    return t[n]
            raise AttributeError(n)
        # a class later in the MRO defines the name: what the normal lookup would have returned
        get = getattr(type(v), "__get__", None)
        return v if get is None else get(v, obj, cls)

    def _later(self, cls: type):
        """The first attribute ``name`` of a class after ``home`` in ``cls``'s MRO (not a reader)."""
        mro = cls.__mro__
        try:
            start = mro.index(self.home) + 1
        except ValueError:
            start = 0
        for k in mro[start:]:
            v = k.__dict__.get(self.name, _NOTHING)
            if v is not _NOTHING and type(v) is not _RegisteredReader:
                return v
        return _NOTHING


_NOTHING = object()


def _install_reader(cls: type, name: str) -> None:
    """Put a _RegisteredReader for ``name`` on ``cls`` where that changes no lookup: ``name`` is
    an attribute of no class in its MRO (readers of base classes aside)."""
    if type(name) is not str or not name.isidentifier() or name[:2] == "__":
        return
    if type(cls.__dict__.get(name)) is _RegisteredReader or cls.__getattr__ is not Module.__getattr__:
        return               # (a class with its own __getattr__ gets every such read, as in PyTorch)
    for k in cls.__mro__:
        v = k.__dict__.get(name, _NOTHING)
        if v is not _NOTHING and type(v) is not _RegisteredReader:
            return           # a class attribute: the normal lookup finds it (as in PyTorch)
    try:
        count = _readers.get(cls, 0)
        if count >= _MAX_READERS:
            return
        type.__setattr__(cls, name, _RegisteredReader(name, cls))
        _readers[cls] = count + 1
    except (TypeError, AttributeError):
        return               # a class that refuses new attributes keeps the __getattr__ path


class Module:
    """Base class for all neural-network modules (PyTorch's ``nn.Module``).

    Subclasses call ``super().__init__()`` first, assign parameters and
    submodules as attributes, and define ``forward``.
    """

    training: bool
    _version: int = 1
    call_super_init: bool = False

    def __new__(cls, *args, **kwargs):
        # (object.__new__ takes no arguments: the constructor's go to __init__)
        self = object.__new__(cls)
        # not initialised until Module.__init__ runs: see _MAYBE_HOOKED (_note inlined)
        key = id(self)
        _MAYBE_HOOKED[key] = _weakref(self, lambda _ref: _MAYBE_HOOKED.pop(key, None))
        return self

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments: Module.__init__ "
                "takes no arguments (did you forget to pass them to your own __init__?)")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = _HookDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_forward_hooks"] = _HookDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_hooks_always_called"] = {}
        d["_backward_hooks"] = _HookDict()
        d["_backward_pre_hooks"] = _HookDict()
        _MAYBE_HOOKED.pop(id(self), None)

    # ------------------------------------------------------------------
    # forward / call
    # ------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        # one check while no module anywhere has hooks (see _MAYBE_HOOKED), else PyTorch's
        # checks; the frame of this function marks a module call for dg.viz.record, so the
        # hooked path runs below it
        if _MAYBE_HOOKED:
            d = self.__dict__
            try:
                hooked = d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"] \
                    or d["_backward_pre_hooks"] or _global_forward_pre_hooks \
                    or _global_forward_hooks or _global_backward_hooks or _global_backward_pre_hooks
            except KeyError:
                raise AttributeError(
                    f"{type(self).__name__} is not initialised: call super().__init__() at the "
                    "start of its __init__") from None
            if hooked:
                try:
                    return self._call_with_hooks(args, kwargs)
                except _ANNOTATED as exc:
                    _annotate(exc, self)
                    raise
        try:
            if kwargs:
                return self.forward(*args, **kwargs)
            return self.forward(*args)  # (no empty kwargs dict to unpack: ~20 ns)
        except _ANNOTATED as exc:
            _annotate(exc, self)
            raise

    _call_impl = __call__

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # PyTorch's __call__ calls self._call_impl: a subclass that overrides _call_impl (and
        # not __call__) gets a __call__ that goes through it; every other class keeps the
        # one-check __call__ above
        if "_call_impl" in cls.__dict__ and "__call__" not in cls.__dict__:
            cls.__call__ = _call_through_call_impl

    def _call_with_hooks(self, args, kwargs):
        # PyTorch's _call_impl, in its order: global hooks before the module's own of each
        # kind; always_call forward hooks also run when a pre-hook, forward or another forward
        # hook raised
        result = None
        called = set()
        try:
            for hid, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                if hid in self._forward_pre_hooks_with_kwargs:
                    res = hook(self, args, kwargs)
                    if res is not None:
                        if not (isinstance(res, tuple) and len(res) == 2):
                            raise RuntimeError(
                                "forward pre-hook must return None or a tuple of (new_args, "
                                f"new_kwargs), but got {res}.")
                        args, kwargs = res
                else:
                    res = hook(self, args)
                    if res is not None:
                        args = res if isinstance(res, tuple) else (res,)
            bw = None
            if (self._backward_hooks or self._backward_pre_hooks or _global_backward_hooks
                    or _global_backward_pre_hooks) and STATE.grad_enabled \
                    and STATE.interpreter is None:
                bw = BackwardHook(self, [*_global_backward_hooks.values(), *self._backward_hooks.values()],
                                  [*_global_backward_pre_hooks.values(),
                                   *self._backward_pre_hooks.values()])
                args = bw.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hid, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                called.add(hid)
                if hid in self._forward_hooks_with_kwargs or hid in _global_forward_hooks_with_kwargs:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res
            if bw is not None:
                result = bw.setup_output_hook(result)
            return result
        except Exception:
            for hid, hook in list(_global_forward_hooks.items()):
                if hid in _global_forward_hooks_always_called and hid not in called:
                    try:
                        hook(self, args, result)
                    except Exception as hook_exc:
                        warnings.warn(
                            "global module forward hook with ``always_call=True`` raised an "
                            f"exception that was silenced as another error was raised in forward: "
                            f"{hook_exc}", stacklevel=2)
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called and hid not in called:
                    try:
                        if hid in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, result)
                        else:
                            hook(self, args, result)
                    except Exception as hook_exc:
                        warnings.warn(
                            "module forward hook with ``always_call=True`` raised an exception "
                            f"that was silenced as another error was raised in forward: {hook_exc}",
                            stacklevel=2)
            raise

    # ------------------------------------------------------------------
    # attribute registration
    # ------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if "_parameters" in d:
            p = d["_parameters"]
            if name in p:
                _install_reader(type(self), name)
                return p[name]
            b = d["_buffers"]
            if name in b:
                _install_reader(type(self), name)
                return b[name]
            m = d["_modules"]
            if name in m:
                _install_reader(type(self), name)
                return m[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(name, d, d["_buffers"], d["_modules"], d["_non_persistent_buffers_set"])
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' "
                    "(dyngraph.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(name, d, params, d["_buffers"], d["_non_persistent_buffers_set"])
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(dyngraph.nn.Module or None expected)")
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer):
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            _remove_from(name, d, params, modules)
            self.register_buffer(name, value, value.persistent)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(dyngraph.Tensor or None expected)")
            buffers[name] = value
            return
        if name in _HOOK_DICTS and type(value) is not _HookDict:
            # a hook dict replaced by a mapping that does not report its hooks: this module's
            # calls (and so all) take the checks while it holds one
            _note(self)
        object.__setattr__(self, name, value)
        if name == "__dict__":
            # a module built by __new__ and given a whole __dict__ (a deepcopy may do this)
            _settled(self)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        if name in d.get("_parameters", ()):
            del d["_parameters"][name]
        elif name in d.get("_buffers", ()):
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif name in d.get("_modules", ()):
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._buffers) \
            + list(self._modules)
        return sorted(k for k in set(keys) if not k[:1].isdigit())

    def __setstate__(self, state):
        d = self.__dict__
        d.update(state)
        # hook dicts of another type (a checkpoint of an older version) become _HookDicts,
        # missing ones empty, as PyTorch fills in attributes old checkpoints lack
        for name in _HOOK_DICTS:
            v = d.get(name)
            if type(v) is not _HookDict:
                d[name] = _HookDict() if v is None else _HookDict(v)
        for name in ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
                     "_forward_hooks_always_called"):
            d.setdefault(name, {})
        _settled(self)

    def _check_name(self, name, kind: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is part of the module's state but not a parameter.

        >>> self.register_buffer("running_mean", dg.zeros(num_features))
        """
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                "(dyngraph Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or ``None``: a declared but absent parameter, like ``bias=False``)."""
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(dyngraph.nn.Parameter or None required)")
        if param._fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                "created explicitly. To express '{name}' as a function of another Tensor, compute "
                "the value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module, reachable as an attribute ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    # ------------------------------------------------------------------
    # traversal
    # ------------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, mod in mods:
            for k, v in get_members(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k, v)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter of this module (and its submodules when ``recurse``), once each."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(name, parameter)`` pairs with dotted names like ``layer1.0.weight``."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first, as ``(dotted_path, module)``."""
        if memo is None:
            memo = set()
        # iterative pre-order walk (deep models must not hit the recursion limit)
        stack = [(prefix, self)]
        while stack:
            path, mod = stack.pop()
            if remove_duplicate:
                if id(mod) in memo:
                    continue
                memo.add(id(mod))
            yield path, mod
            kids = [(path + ("." if path else "") + name, sub)
                    for name, sub in mod._modules.items() if sub is not None]
            stack.extend(reversed(kids))

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is this module)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: Module) -> None:
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if not hasattr(parent, name) and name not in parent._modules:
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return p

    def get_buffer(self, target: str) -> Tensor:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`"
                                 if not hasattr(mod, name) else "`" + name + "` is not a buffer")
        return mod._buffers[name]

    # ------------------------------------------------------------------
    # state dict
    # ------------------------------------------------------------------
    def get_extra_state(self) -> Any:
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state: Any) -> None:
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called.")

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state():
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by dotted name (detached, sharing memory).

        >>> list(dg.nn.Linear(2, 3).state_dict())
        ['weight', 'bias']
        """
        if args:  # PyTorch's deprecated positional form (destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        for path, mod in self.named_modules(remove_duplicate=False):
            mod._save_to_state_dict(destination, prefix + (path + "." if path else ""), keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        """Copy this module's own entries from ``state_dict`` (override to convert old formats)."""
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = itertools.chain(self._parameters.items(), persistent.items())
        assign = bool(local_metadata.get("assign_to_params_buffers", False))
        for name, param in local:
            if param is None:
                continue
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            arr = _as_host_array(value)
            if arr is None:
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected a Tensor or array '
                    f"from checkpoint but received {_typename(value)}")
                continue
            if arr.shape != param._data.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {list(arr.shape)} "
                    f"from checkpoint, the shape in current model is {list(param.shape)}.")
                continue
            try:
                with no_grad():
                    if assign:
                        # no copy: the parameter now uses the checkpoint's memory (and dtype),
                        # as PyTorch's assign=True; the Parameter object itself is kept
                        param._data = arr if arr.flags.writeable else np.array(arr)
                    else:
                        param.copy_(Tensor._make(np.asarray(arr), False, None, 0))
            except Exception as exc:
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model '
                    f"are {list(param.shape)} and whose dimensions in the checkpoint are "
                    f"{list(arr.shape)}, an exception occurred : {exc.args}.")
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if self._has_extra_state():
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            own = set(self._parameters) | set(persistent) | set(self._modules)
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    first = key[len(prefix):].split(".", 1)[0]
                    if first not in own:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy parameters and buffers from ``state_dict`` into this module.

        Values may be dyngraph tensors, NumPy arrays, or anything with ``__array__``
        (PyTorch tensors included).  Returns ``(missing_keys, unexpected_keys)``;
        with ``strict=True`` any missing or unexpected key, or a shape mismatch,
        raises a RuntimeError that lists them all.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list = []
        unexpected: list = []
        errors: list = []
        metadata = getattr(state_dict, "_metadata", None) or {}
        state_dict = OrderedDict(state_dict)
        for path, mod in self.named_modules(remove_duplicate=False):
            prefix = path + "." if path else ""
            local_meta = dict(metadata.get(path, {}))
            if assign:
                local_meta["assign_to_params_buffers"] = True
            mod._load_from_state_dict(state_dict, prefix, local_meta, True, missing, unexpected,
                                      errors)
        # a module reached twice (shared) reports its keys twice: keep each once
        missing = list(dict.fromkeys(missing))
        unexpected = list(dict.fromkeys(unexpected))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------
    # modes, dtype/device movement, gradients
    # ------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and all submodules (affects Dropout, BatchNorm)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.__dict__["training"] = mode
        for m in self.children():  # each child's own train() runs (subclasses may override it)
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to ``None`` by default)."""
        for p in self.parameters():
            g = p._grad
            if g is None:
                continue
            if set_to_none:
                set_grad(p, None)
            else:
                if g._fn is not None:
                    g = g.detach()
                    set_grad(p, g)
                g._rg = False
                g._data[...] = 0

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Module:
        """Replace every parameter's data, gradient and buffer by ``fn(tensor)``."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                p._data = fn(p)._data  # keep the Parameter object (optimizers hold it)
                if p._grad is not None:
                    set_grad(p, Tensor._make(fn(p._grad)._data, False, None, 0))
            for name, b in self._buffers.items():
                if b is not None:
                    new = fn(b)
                    if isinstance(b, Buffer) and not isinstance(new, Buffer):
                        new = Buffer(new, persistent=b.persistent)
                    self._buffers[name] = new
        return self

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every submodule (children first) and then on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast parameters and buffers: ``m.to(dg.float64)``, ``m.to("cuda")``.

        Only floating-point tensors change dtype (integer buffers such as
        ``num_batches_tracked`` keep theirs), as in PyTorch.
        """
        dtype, dev, _ = parse_to_args(args, kwargs)
        np_dtype = None
        if dtype is not None:
            np_dtype = _dt.to_numpy_dtype(dtype)
            if not _dt.is_floating_point_dtype(np_dtype):
                raise TypeError(
                    "nn.Module.to only accepts floating point or complex dtypes, but got desired "
                    f"dtype={_dt.from_numpy_dtype(np_dtype)}")

        def convert(t: Tensor) -> Tensor:
            out = t
            if (np_dtype is not None and _dt.is_floating_point_dtype(t._data.dtype)
                    and t._data.dtype != np_dtype):
                out = out.to(np_dtype)
            if dev is not None:
                out = out.to(dev)
            return out

        return self._apply(convert)

    def float(self) -> Module:
        return self._apply(lambda t: t.float() if _dt.is_floating_point_dtype(t._data.dtype) else t)

    def double(self) -> Module:
        return self._apply(lambda t: t.double() if _dt.is_floating_point_dtype(t._data.dtype) else t)

    def half(self) -> Module:
        return self._apply(lambda t: t.half() if _dt.is_floating_point_dtype(t._data.dtype) else t)

    def bfloat16(self) -> Module:
        """Cast floating parameters and buffers to bfloat16 (``nn.Linear(4, 2).bfloat16()``)."""
        return self._apply(lambda t: t.to(_dt.bfloat16) if _dt.is_floating_point_dtype(t._data.dtype)
                           else t)

    def type(self, dst_type) -> Module:
        return self._apply(lambda t: t.to(dst_type))

    def cpu(self) -> Module:
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> Module:
        return self._apply(lambda t: t.cuda(device))

    def share_memory(self) -> Module:
        """Move parameters and buffers to shared memory (``Tensor.share_memory_``), so that
        forked worker processes train the same weights (Hogwild)."""
        return self._apply(lambda t: t.share_memory_())

    # ------------------------------------------------------------------
    # hooks
    # ------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` (or ``hook(module, args, kwargs)``) runs before ``forward``.

        It may return replacement args (or ``(args, kwargs)`` with ``with_kwargs``).
        """
        handle = _add_hook(self._forward_pre_hooks, hook, prepend,
                           self._forward_pre_hooks_with_kwargs)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` runs after ``forward``; may return a new output."""
        handle = _add_hook(self._forward_hooks, hook, prepend, self._forward_hooks_with_kwargs,
                           self._forward_hooks_always_called)
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_full_backward_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs when the input gradients are ready.

        ``grad_input`` has one entry per positional argument of ``forward`` (``None``
        for non-tensors); the hook may return replacement ``grad_input``.
        """
        return _add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output)`` runs when the output gradients arrive; may replace them."""
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    def register_backward_hook(self, hook) -> RemovableHandle:
        raise NotImplementedError(
            "register_backward_hook (the deprecated, non-full hook) is not supported; use "
            "register_full_backward_hook, whose grad_input/grad_output are well defined")

    # ------------------------------------------------------------------
    # repr
    # ------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """Extra text inside this module's ``repr`` (override in layers)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(mod), 2)
                       for key, mod in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return self._get_name() + "(" + body + ")"

    def _short_repr(self) -> str:
        """One-line description used in error messages: ``Linear(in_features=4, ...)``."""
        try:
            extra = self.extra_repr()
        except Exception:
            extra = ""
        if "\n" in extra:
            extra = ""
        return f"{self._get_name()}({extra})"


def _typename(v) -> str:
    t = type(v)
    if t.__module__ in ("builtins",):
        return t.__name__
    return f"{t.__module__}.{t.__qualname__}"


def _remove_from(name, *dicts) -> None:
    for d in dicts:
        if d is None:
            continue
        if isinstance(d, set):
            d.discard(name)
        elif name in d:
            del d[name]


def _as_host_array(value):
    if isinstance(value, Tensor):
        return _host(value._data)
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a PyTorch tensor
        return value.detach().cpu().numpy()
    if hasattr(value, "__array__") or isinstance(value, (int, float, list)):
        return np.asarray(value)
    return None


def _call_through_call_impl(self, *args, **kwargs):
    """``__call__`` of a subclass that overrides ``_call_impl`` (PyTorch's ``_wrapped_call_impl``)."""
    return self._call_impl(*args, **kwargs)


def _annotate(exc: BaseException, module: Module) -> None:
    """Prefix ``exc``'s message with the failing layer and its path from ``module``.

    Each enclosing module's ``__call__`` calls this as the exception passes, so
    the path is relative to the outermost module the user called.
    """
    d = exc.__dict__ if hasattr(exc, "__dict__") else None
    if d is None:
        return
    inner = d.get("_dg_module")
    if inner is None:
        if not exc.args or not isinstance(exc.args[0], str):
            return
        d["_dg_module"] = inner = module
        d["_dg_message"] = exc.args[0]
    path = ""
    if inner is not module:
        for p, m in module.named_modules():
            if m is inner:
                path = p
                break
        else:
            return
    where = f" at '{path}'" if path else ""
    msg = f"{inner._short_repr()}{where}: {d['_dg_message']}"
    exc.args = (msg,) + tuple(exc.args[1:])
