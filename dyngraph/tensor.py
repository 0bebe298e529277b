"""The Tensor: an array plus the autograd bookkeeping of define-by-run.

A Tensor wraps a NumPy (or CuPy) array.  The hot attributes are slots with
short private names, read directly by the dispatcher:

- ``_data``: the array;
- ``_rg``: requires grad;
- ``_fn`` / ``_nr``: the graph node that produced it and which of its outputs
  it is (``None`` for leaves);
- ``_grad``: accumulated gradient (leaves, or non-leaves after ``retain_grad``);
- ``_vc``: the version counter cell, shared with views, bumped by in-place ops;
- ``_base``: the tensor this one is a view of;
- ``_hooks``: gradient hooks of a leaf.

Operation methods (``x.exp()``, ``x + y``, ``x.sum(dim=1)``...) are attached by
the ``dyngraph.ops`` modules that define them, so each primitive lives in one
place.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import dtypes as _dt
from ._core.graph import LeafHooks, RemovableHandle, retain_grad_ref, version
from ._core.state import STATE, alias, concrete, set_grad
from .backend import device as _device
from .backend import device_of
from .backend import host_array as _host
from .printing import tensor_repr
from .size import Size

__all__ = ["Tensor"]

_new = object.__new__


class Tensor:
    """A multi-dimensional array that records the operations applied to it.

    >>> x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    tensor([2., 4., 6.])
    """

    __slots__ = ("_data", "_rg", "_fn", "_nr", "_grad", "_vc", "_base", "_hooks", "__weakref__")
    __array_priority__ = 1000  # make ndarray (op) Tensor defer to Tensor's reflected ops

    @staticmethod
    def _make(data, requires_grad, fn, nr, cls=None):
        t = _new(cls or Tensor)
        t._data = data
        t._rg = requires_grad
        t._fn = fn
        t._nr = nr
        t._grad = None
        t._vc = None
        t._base = None
        t._hooks = None
        return t

    # -- autograd attributes --------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set whether autograd records operations on this (leaf) tensor."""
        requires_grad = bool(requires_grad)
        if self._fn is not None and not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables; to use a "
                "non-leaf tensor without gradients, call .detach() on it")
        if requires_grad and not _dt.is_floating_point_dtype(self._data.dtype):
            raise RuntimeError(
                f"only tensors of floating point dtype can require gradients; this tensor "
                f"is {self.dtype} (shape {list(self.shape)}): convert it with .float() first")
        self._rg = requires_grad
        return self

    @property
    def grad_fn(self):
        return self._fn

    @property
    def grad(self):
        if self._fn is not None and self._grad is None and not _retains(self):
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the gradient for a non-leaf Tensor, use .retain_grad() on it.",
                UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad must be a Tensor or None, got {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"assigned grad has shape {list(value.shape)} but the tensor has shape "
                    f"{list(self.shape)}")
        set_grad(self, value)

    @property
    def is_leaf(self) -> bool:
        return self._fn is None

    @property
    def output_nr(self) -> int:
        return self._nr

    @property
    def _version(self) -> int:
        return version(self)

    @property
    def retains_grad(self) -> bool:
        return _retains(self)

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if self._fn is None:
            if not self._rg:
                raise RuntimeError("can't retain_grad on a Tensor that has requires_grad=False")
            return
        retain_grad_ref(self._fn, self._nr, self)

    def register_hook(self, hook):
        """Run ``hook(grad)`` when this tensor's gradient is computed.

        The hook may return a new gradient to use in its place.

        >>> h = x.register_hook(lambda g: g * 2)
        >>> h.remove()
        """
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._fn is not None:
            return self._fn._add_pre_hook(self._nr, hook)
        hooks = self._leaf_hooks()
        hooks.pre.append(hook)
        return RemovableHandle(hooks.pre, fn=hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Run ``hook(tensor)`` after this leaf's ``.grad`` has been accumulated.

        Used by data-parallel training to start communicating a gradient as soon
        as it is ready.
        """
        if self._fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        hooks = self._leaf_hooks()
        hooks.post.append(hook)
        return RemovableHandle(hooks.post, fn=hook)

    def _leaf_hooks(self):
        if self._hooks is None:
            self._hooks = LeafHooks()
        return self._hooks

    def detach(self) -> Tensor:
        """A tensor sharing this one's data, cut from the graph."""
        t = Tensor._make(self._data, False, None, 0)
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        t._vc = vc
        if STATE.interpreter is not None:
            alias(self, t)      # a pending value (dg.autobatch) must reach the alias too
        return t

    def detach_(self) -> Tensor:
        if self._base is not None and self._base._rg:
            raise RuntimeError("can't detach_() a view of a tensor that requires grad; use detach()")
        self._fn = None
        self._nr = 0
        self._rg = False
        return self

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        if isinstance(value, Tensor):
            self._data = value._data
            alias(value, self)      # a pending value (dg.autobatch) must reach self too
        else:
            self._data = np.asarray(value)

    # -- array properties -----------------------------------------------------
    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    @property
    def dtype(self):
        return _dt._BY_NP[self._data.dtype]

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    @property
    def device(self):
        return device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        return _dt.is_floating_point_dtype(self._data.dtype)   # kind "f", or ml_dtypes' bfloat16

    def is_complex(self) -> bool:
        return False

    def is_contiguous(self, memory_format=None) -> bool:
        return bool(self._data.flags.c_contiguous)

    def stride(self, dim: int | None = None):
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[_wrap_dim(dim, self._data.ndim, "stride")]

    def data_ptr(self) -> int:
        return int(self._data.__array_interface__["data"][0]) if type(self._data) is np.ndarray \
            else int(self._data.data.ptr)

    def get_device(self) -> int:
        d = self.device
        return -1 if d.type == "cpu" else (d.index or 0)

    # -- conversion to Python / NumPy -------------------------------------------
    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar "
                f"(item() needs exactly one element; shape is {list(self.shape)})")
        d = concrete(self, "item")
        return d.reshape(()).item() if type(d) is np.ndarray else d.item()

    def tolist(self):
        return _host(concrete(self, "tolist")).tolist()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The underlying NumPy array (shared, not copied)."""
        if self._rg and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        d = concrete(self, "numpy")
        if type(d) is not np.ndarray:
            if force:
                return _host(d)
            raise TypeError(
                f"can't convert {self.device} tensor to numpy: use .cpu() to copy it to host memory first")
        return d

    def __array__(self, dtype=None, copy=None):
        a = _host(concrete(self, "numpy"))
        if dtype is not None:
            a = a.astype(dtype, copy=False)
        if copy:
            a = a.copy()
        return a

    def __dlpack__(self, *args, **kwargs):
        if self._rg:
            raise RuntimeError("Can't export a tensor that requires grad with DLPack; detach() it first")
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {self._data.size} elements is ambiguous "
                f"(shape {list(self.shape)}); use .any() or .all()")
        return bool(concrete(self, "bool").reshape(()))

    def __float__(self) -> float:
        if self._data.size != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars "
                             f"(float() of a tensor of shape {list(self.shape)})")
        return float(self.item())

    def __int__(self) -> int:
        if self._data.size != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars "
                             f"(int() of a tensor of shape {list(self.shape)})")
        return int(self.item())

    def __index__(self) -> int:
        d = self._data
        if d.dtype.kind not in "iub" or d.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        # item() without its second size check (hot: ``data[i:i + n]`` with tensor bounds)
        return int(concrete(self, "item").item())

    def __complex__(self):
        return complex(self.item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    __hash__ = object.__hash__  # identity: tensors are graph vertices (``==`` is elementwise)

    def __reduce_ex__(self, protocol):
        # Pickling (used by DataLoader worker queues) carries data only, never the graph.
        return (_rebuild, (_host(self._data), self._rg))

    def __deepcopy__(self, memo):
        if self._fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol; detach() or clone() it first")
        t = Tensor._make(self._data.copy(), self._rg, None, 0, type(self))
        if self._grad is not None:
            t._grad = Tensor._make(self._grad._data.copy(), False, None, 0)
        memo[id(self)] = t
        return t

    # -- repr -------------------------------------------------------------------
    def __repr__(self) -> str:
        if STATE.interpreter is not None:
            concrete(self, "repr")  # printing shows values: the interpreter must know

        return tensor_repr(self)

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0:  # PyTorch formats 0-d tensors as their number: f"{t}" == "3"
            return format(self.item(), spec)
        return repr(self) if not spec else format(repr(self), spec)

    # -- device / dtype movement ------------------------------------------------------------
    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def type(self, dtype=None, non_blocking=False, **kwargs):
        if dtype is None:
            return f"dyngraph.{_TYPE_NAMES.get(self.dtype.name, 'Tensor')}"
        if isinstance(dtype, str):   # "torch.DoubleTensor" / "dyngraph.LongTensor" (legacy names)
            names = {v: k for k, v in _TYPE_NAMES.items()}
            short = dtype.rsplit(".", 1)[-1]
            if short not in names:
                raise ValueError(f"Tensor.type: invalid type {dtype!r}; expected one of "
                                 f"{sorted(names)} (optionally prefixed by 'torch.')")
            dtype = getattr(_dt, names[short])
        elif isinstance(dtype, type):  # a legacy class: x.type(torch.DoubleTensor)
            dtype = dtype.dtype
        return self.to(dtype)

    def float(self) -> Tensor:
        return self.to(_dt.float32)

    def double(self) -> Tensor:
        return self.to(_dt.float64)

    def half(self) -> Tensor:
        return self.to(_dt.float16)

    def int(self) -> Tensor:
        return self.to(_dt.int32)

    def long(self) -> Tensor:
        return self.to(_dt.int64)

    def short(self) -> Tensor:
        return self.to(_dt.int16)

    def char(self) -> Tensor:
        return self.to(_dt.int8)

    def byte(self) -> Tensor:
        return self.to(_dt.uint8)

    def bool(self) -> Tensor:
        return self.to(_dt.bool)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)


_TYPE_NAMES = {
    "float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
    "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
    "uint8": "ByteTensor", "bool": "BoolTensor",
}


def parse_to_args(args, kwargs) -> tuple:
    """``(dtype, device, copy)`` from the arguments of ``Tensor.to`` / ``Module.to``:
    a dtype, a device (string, ``dg.device`` or GPU index), another tensor, keywords."""
    kwargs = dict(kwargs)
    dtype = kwargs.pop("dtype", None)
    dev = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype, dev = a.dtype, a.device
        elif isinstance(a, (_dt.dtype, type, np.dtype)):
            dtype = a
        elif isinstance(a, str) and a in _dt._BY_NAME:
            dtype = a
        elif isinstance(a, (str, _device)):
            dev = a
        elif isinstance(a, int) and not isinstance(a, bool):
            dev = f"cuda:{a}"
        elif isinstance(a, bool):
            pass  # positional non_blocking / copy flags of older signatures
        else:
            raise TypeError(f"to() received an invalid argument {a!r}")
    if isinstance(dev, int) and not isinstance(dev, bool):
        dev = f"cuda:{dev}"
    return dtype, dev, copy


def _retains(t) -> bool:
    fn = t._fn
    return fn is not None and fn.retained is not None and t._nr in fn.retained


def _rebuild(data, requires_grad):
    t = Tensor._make(np.array(data), False, None, 0)
    if requires_grad:
        t._rg = True
    return t


def _wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    """Normalise a possibly negative dimension index, with PyTorch's error message."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"{op + ': ' if op else ''}Dimension out of range (expected to be in range of "
            f"[{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim
