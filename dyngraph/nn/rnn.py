"""Recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's parameters and numerics.

Parameter names (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``,
``bias_hh_l0``, ``..._reverse``), shapes, gate order (LSTM: i, f, g, o; GRU:
r, z, n with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``) and default
initialisation (U(-1/sqrt(hidden), 1/sqrt(hidden))) are PyTorch's, so state
dicts load both ways.  Inputs may be padded ``(T, B, *)`` / ``(B, T, *)``
(``batch_first``), unbatched ``(T, *)``, or a :class:`PackedSequence`.

Each layer and direction is one fused primitive (``dyngraph.ops.rnn``): the
input projection for all steps is one GEMM, the time loop runs in NumPy and
backward is one pass of back-propagation through time.

>>> lstm = dg.nn.LSTM(10, 20, num_layers=2)
>>> out, (h, c) = lstm(dg.randn(5, 3, 10))
>>> out.shape, h.shape
(dyngraph.Size([5, 3, 20]), dyngraph.Size([2, 3, 20]))
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..dtypes import is_floating_point_dtype as _is_float_dtype
from ..ops.nn import linear_p
from ..ops.registry import bind
from ..ops.rnn import gru_layer, gru_layer_p, lstm_cell, lstm_layer_sizes, rnn_layer
from ..surface.indexing import index_select
from ..surface.nn import linear
from ..surface.shape import cat, reshape, stack, transpose, unsqueeze
from ..tensor import Tensor
from . import functional as F
from . import init
from ._factory import new_param
from .module import Module
from .utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _zeros(shape, like: Tensor) -> Tensor:
    return Tensor._make(np.zeros(shape, dtype=like._data.dtype), False, None, 0)


def _dt(t) -> str:
    return str(t.dtype).replace("dyngraph.", "")


class RNNBase(Module):
    """Shared machinery of :class:`RNN`, :class:`LSTM` and :class:`GRU`."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                f"{name}: dropout should be a number in range [0, 1] representing the probability "
                f"of an element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(input_size, int) or input_size <= 0:
            raise ValueError(f"{name}: input_size must be a positive int, got {input_size!r}")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if proj_size < 0:
            raise ValueError(f"{name}: proj_size should be a positive integer or zero to disable projections")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        d = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        real = proj_size or hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else real * d
            for direction in range(d):
                sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = {f"weight_ih{sfx}": (gate, in_size), f"weight_hh{sfx}": (gate, real)}
                if bias:
                    shapes[f"bias_ih{sfx}"] = (gate,)
                    shapes[f"bias_hh{sfx}"] = (gate,)
                if proj_size:
                    shapes[f"weight_hr{sfx}"] = (proj_size, hidden_size)
                for n, shp in shapes.items():
                    setattr(self, n, new_param(shp, device, dtype))
                self._flat_weights_names.extend(shapes)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        ws = self._flat_weights
        return [ws[i:i + per] for i in range(0, len(ws), per)]

    def flatten_parameters(self) -> None:
        """No-op (kept for PyTorch compatibility: weights are always usable as they are)."""

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # -- forward -------------------------------------------------------------
    def _prepare(self, input, hx):
        """Return (data (S, I), batch_sizes, max_batch, layout info, hx list)."""
        name = type(self).__name__
        if isinstance(input, PackedSequence):
            data = input.data
            sizes = input._sizes()
            info = ("packed", input)
            b = sizes[0]
        else:
            if not isinstance(input, Tensor):
                raise TypeError(f"{name}: expected a Tensor or PackedSequence, got {type(input).__name__}")
            nd = input._data.ndim
            if nd not in (2, 3):
                raise ValueError(
                    f"{name}: Expected input to be 2D (unbatched) or 3D (batched), got {nd}D input "
                    f"of shape {list(input.shape)}")
            unbatched = nd == 2
            if unbatched:
                input = unsqueeze(input, 0 if self.batch_first else 1)
            x = transpose(input, 0, 1) if self.batch_first else input
            t, b = x._data.shape[:2]
            data = reshape(x, (t * b, x._data.shape[2]))
            sizes = (b,) * t
            info = ("padded", (t, b, unbatched))
        w = self._parameters[self._flat_weights_names[0]]
        if not _is_float_dtype(data._data.dtype):
            raise RuntimeError(
                f"{name}: expected a floating-point input, got dtype {_dt(data)}; convert it with .float()")
        if data._data.dtype != w._data.dtype:
            raise RuntimeError(
                f"{name}: input dtype {_dt(data)} does not match the weight dtype {_dt(w)}; convert "
                "the input (x.to(dtype)) or the module (module.to(dtype))")
        if data._data.shape[-1] != self.input_size:
            raise RuntimeError(
                f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                f"got {data._data.shape[-1]}")
        if not sizes:
            raise RuntimeError(
                f"{name}: Expected sequence length to be larger than 0 in RNN (got input of shape "
                f"{list(input.shape)})")
        # a batch of 0 sequences runs through as is: empty output and states, as in PyTorch
        return data, sizes, b, info

    def _state(self, h, b, info, what="hidden"):
        """Check one initial state and bring it into the packed sort order (None stays None:
        zeros, made by :meth:`_run` without indexing nodes)."""
        if h is None:   # zeros: _run makes one (B, H) array per state for every layer and direction
            return None
        name = type(self).__name__
        d = 2 if self.bidirectional else 1
        size = self.proj_size if (what == "hidden" and self.proj_size) else self.hidden_size
        want = (self.num_layers * d, b, size)
        w = self._parameters[self._flat_weights_names[0]]
        if not isinstance(h, Tensor):
            raise TypeError(f"{name}: the initial {what} state must be a Tensor, got {type(h).__name__}")
        if info[0] == "padded" and info[1][2]:
            if h._data.ndim != 2:
                raise RuntimeError(
                    f"{name}: for unbatched 2-D input, hx should also be 2-D but got a "
                    f"{h._data.ndim}-D tensor of shape {list(h.shape)}")
            h = unsqueeze(h, 1)
        if tuple(h._data.shape) != want:
            raise RuntimeError(f"{name}: Expected {what} size {want}, got {list(h.shape)}")
        if h._data.dtype != w._data.dtype:
            raise RuntimeError(f"{name}: {what} state dtype {_dt(h)} does not match the weight dtype {_dt(w)}")
        if info[0] == "packed" and info[1].sorted_indices is not None:
            h = index_select(h, 1, info[1].sorted_indices)
        return h

    def _finish(self, out, states, info):
        """Wrap the packed output rows and final states like PyTorch does."""
        if info[0] == "packed":
            packed = info[1]
            if packed.unsorted_indices is not None:
                states = [index_select(s, 1, packed.unsorted_indices) for s in states]
            return packed._with_data(out), states
        t, b, unbatched = info[1]
        out = reshape(out, (t, b, out._data.shape[-1]))
        if self.batch_first:
            out = transpose(out, 0, 1)
        if unbatched:
            out = out[0] if self.batch_first else out[:, 0]
            states = [s[:, 0] for s in states]
        return out, states

    def _run(self, data, sizes, init_states):
        """All layers and directions; ``init_states`` is a list of (L*D, B, H) tensors, or None
        for zeros (hidden state first, then the LSTM's cell state)."""
        d = 2 if self.bidirectional else 1
        finals = [[] for _ in init_states]
        x = data
        p = self._parameters
        b = sizes[0]
        w = p[self._flat_weights_names[0]]
        zero = [None if s is not None else
                _zeros((b, self.proj_size if j == 0 and self.proj_size else self.hidden_size), w)
                for j, s in enumerate(init_states)]   # read, never written: shared by all layers
        for layer in range(self.num_layers):
            outs = []
            for direction in range(d):
                sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                k = layer * d + direction
                h0s = [s[k] if s is not None else z for s, z in zip(init_states, zero, strict=True)]
                res = self._layer(x, h0s, p[f"weight_ih{sfx}"], p[f"weight_hh{sfx}"],
                                  p.get(f"bias_ih{sfx}"), p.get(f"bias_hh{sfx}"), sizes, direction == 1, sfx)
                outs.append(res[0])
                for j, s in enumerate(res[1:]):
                    finals[j].append(s)
            x = outs[0] if d == 1 else cat(outs, 1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, [stack(f, 0) for f in finals]


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    >>> rnn = dg.nn.RNN(4, 8, nonlinearity='relu', batch_first=True)
    >>> rnn(dg.randn(2, 5, 4))[0].shape
    dyngraph.Size([2, 5, 8])
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         0, device, dtype)
        self.nonlinearity = nonlinearity

    def _layer(self, x, h0s, w_ih, w_hh, b_ih, b_hh, sizes, reverse, sfx):
        b = None if b_ih is None else b_ih + b_hh
        return rnn_layer(linear(x, w_ih, b), h0s[0], w_hh, sizes, reverse, self.nonlinearity)

    def forward(self, input, hx=None):
        data, sizes, b, info = self._prepare(input, hx)
        h0 = self._state(hx, b, info)
        out, (hn,) = self._run(data, sizes, [h0])
        out, (hn,) = self._finish(out, [hn], info)
        return out, hn


class LSTM(RNNBase):
    """Long short-term memory (PyTorch's ``nn.LSTM``); gate order i, f, g, o.

    Returns ``output, (h_n, c_n)``.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)

    def _layer(self, x, h0s, w_ih, w_hh, b_ih, b_hh, sizes, reverse, sfx):
        b = None if b_ih is None else b_ih + b_hh
        w_hr = self._parameters.get(f"weight_hr{sfx}") if self.proj_size else None
        return lstm_layer_sizes(linear(x, w_ih, b), h0s[0], h0s[1], w_hh, sizes, reverse, w_hr)

    def forward(self, input, hx=None):
        data, sizes, b, info = self._prepare(input, hx)
        if hx is None:
            h0 = c0 = None
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM: hx must be a tuple (h_0, c_0) of tensors")
            h0, c0 = hx
        h0 = self._state(h0, b, info, "hidden")
        c0 = self._state(c0, b, info, "cell")
        out, (hn, cn) = self._run(data, sizes, [h0, c0])
        out, (hn, cn) = self._finish(out, [hn, cn], info)
        return out, (hn, cn)


class GRU(RNNBase):
    """Gated recurrent unit (PyTorch's ``nn.GRU``); gate order r, z, n.

    Returns ``output, h_n``.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)

    def _layer(self, x, h0s, w_ih, w_hh, b_ih, b_hh, sizes, reverse, sfx):
        return gru_layer(linear(x, w_ih, b_ih), h0s[0], w_hh, b_hh, sizes, reverse)

    def forward(self, input, hx=None):
        data, sizes, b, info = self._prepare(input, hx)
        h0 = self._state(hx, b, info)
        out, (hn,) = self._run(data, sizes, [h0])
        out, (hn,) = self._finish(out, [hn], info)
        return out, hn


# ---------------------------------------------------------------------------
# cells: one step, same fused primitives with a single time step
# ---------------------------------------------------------------------------

class RNNCellBase(Module):
    """Shared parameters of the cells: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = new_param((num_chunks * hidden_size, input_size), device, dtype)
        self.weight_hh = new_param((num_chunks * hidden_size, hidden_size), device, dtype)
        if bias:
            self.bias_ih = new_param((num_chunks * hidden_size,), device, dtype)
            self.bias_hh = new_param((num_chunks * hidden_size,), device, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def _fast_ok(self, p, x, states) -> bool:
        """Whether a call passes every check of :meth:`_check` and of ``F.linear`` on both
        products without building anything: a 2-D input of the weights' dtype and
        ``input_size`` columns, 2-D states of shape ``(batch, hidden_size)``, the weights and
        biases of the shapes ``F.linear`` accepts.  Only then do the cells bind their
        primitives directly (the same nodes); anything else, and every error, goes through
        :meth:`_check` and ``F.linear``.  ``states[0]`` is the state multiplied by
        ``weight_hh``; LSTMCell's products check its dtype, GRUCell's and RNNCell's do not."""
        w_ih, w_hh = p["weight_ih"], p["weight_hh"]     # only shapes and dtypes are read
        xs, wis, whs = x._data.shape, w_ih._data.shape, w_hh._data.shape
        d = self.__dict__
        n, hid = d.get("input_size"), d.get("hidden_size")
        if not (len(xs) == 2 and x._data.dtype is w_ih._data.dtype and len(wis) == 2 and len(whs) == 2
                and xs[1] == wis[1] == n and whs[1] == hid):
            return False
        for st in states:
            if type(st) is not Tensor or st._data.shape != (xs[0], hid):
                return False
        b_ih, b_hh = p["bias_ih"], p["bias_hh"]
        return (b_ih is None or b_ih._data.shape == wis[:1]) and (b_hh is None or b_hh._data.shape == whs[:1])

    def _check(self, input, states):
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected a Tensor input, got {type(input).__name__}")
        if input._data.ndim not in (1, 2):
            raise ValueError(
                f"{name}: Expected input to be 1D or 2D, got {input._data.ndim}D instead "
                f"(shape {list(input.shape)})")
        w = self._parameters["weight_ih"]
        if input._data.dtype != w._data.dtype:
            raise RuntimeError(
                f"{name}: input dtype {_dt(input)} does not match the weight dtype {_dt(w)}")
        if input._data.shape[-1] != self.input_size:
            raise RuntimeError(
                f"{name}: input has inconsistent input_size: got {input._data.shape[-1]} expected "
                f"{self.input_size}")
        batched = input._data.ndim == 2
        if not batched:
            input = unsqueeze(input, 0)
        b = input._data.shape[0]
        out = []
        for s in states:
            if s is None:
                s = _zeros((b, self.hidden_size), w)
            else:
                if s._data.ndim != (2 if batched else 1):
                    raise RuntimeError(
                        f"{name}: the state must be {2 if batched else 1}-D for a "
                        f"{input._data.ndim}-D input, got shape {list(s.shape)}")
                if not batched:
                    s = unsqueeze(s, 0)
                if tuple(s._data.shape) != (b, self.hidden_size):
                    raise RuntimeError(
                        f"{name}: Expected hidden size {(b, self.hidden_size)}, got {list(s.shape)}")
            out.append(s)
        return input, out, batched


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), batched = self._check(input, [hx])
        p = self._parameters
        b = None if p["bias_ih"] is None else p["bias_ih"] + p["bias_hh"]
        _, hn = rnn_layer(linear(x, p["weight_ih"], b), h, p["weight_hh"], (x._data.shape[0],),
                          False, self.nonlinearity)
        return hn if batched else hn[0]


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``.

    >>> cell = dg.nn.LSTMCell(3, 5)
    >>> h, c = cell(dg.randn(2, 3))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        p = self._parameters
        if type(input) is Tensor and type(hx) is tuple and len(hx) == 2:
            h, c = hx
            if self._fast_ok(p, input, hx) and h._data.dtype is p["weight_hh"]._data.dtype:
                # batched, every check passed (_fast_ok): the nodes below, without _check's
                # and F.linear's work
                w, b = p["bias_ih"], p["bias_hh"]
                gates = bind(linear_p, (input, p["weight_ih"]) if w is None else (input, p["weight_ih"], w)) \
                    + bind(linear_p, (h, p["weight_hh"]) if b is None else (h, p["weight_hh"], b))
                return lstm_cell(gates, c)
        h0, c0 = (None, None) if hx is None else hx
        x, (h, c), batched = self._check(input, [h0, c0])
        # Written out (not the fused layer primitive) so that, as in PyTorch, h' is computed
        # from c': gradients w.r.t. a cell state (autograd.grad(..., c), c.retain_grad())
        # then include the path through h'.  Parameter gradients are the same either way.
        gates = linear(x, p["weight_ih"], p["bias_ih"]) + linear(h, p["weight_hh"], p["bias_hh"])
        hn, cn = lstm_cell(gates, c)
        return (hn, cn) if batched else (hn[0], cn[0])


class GRUCell(RNNCellBase):
    """One GRU step (gate order r, z, n)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        p = self._parameters
        if type(input) is Tensor and self._fast_ok(p, input, (hx,)):
            # batched, every check passed (_fast_ok): the nodes below, without _check's,
            # F.linear's and gru_layer's work
            b = p["bias_ih"]
            xw = bind(linear_p, (input, p["weight_ih"]) if b is None else (input, p["weight_ih"], b))
            return bind(gru_layer_p, (xw, hx, p["weight_hh"], p["bias_hh"]),
                        {"batch_sizes": (input._data.shape[0],), "reverse": False})[1]
        x, (h,), batched = self._check(input, [hx])
        _, hn = gru_layer(linear(x, p["weight_ih"], p["bias_ih"]), h, p["weight_hh"], p["bias_hh"],
                          (x._data.shape[0],))
        return hn if batched else hn[0]
