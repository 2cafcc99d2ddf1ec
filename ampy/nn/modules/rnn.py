"""Recurrent layers: RNN, LSTM, GRU and their single-step cells.

torch's parameter names, shapes, gate order and initialisation, so
state_dicts load both ways: weight_ih_l{k}[_reverse] (G*H, in),
weight_hh_l{k}[_reverse] (G*H, H), bias_ih_l{k}[_reverse],
bias_hh_l{k}[_reverse] (G*H), all U(-1/sqrt(H), 1/sqrt(H)).

A layer of one direction computes the input projection of every time step
as one GEMM (linear over the (T, B, in) sequence), then, on the CPU, the
rest of the layer as one op (ampy/nn/_ops_rnn.py's rnn_layer: the time loop
of hidden GEMMs and fused cells in C, its backward through time with the
hidden weight's gradient as one GEMM over all steps). On CUDA, and for
GRU/RNN states of another dtype than the projections (autocast), each step
is one hidden linear and the fused cell op. Dropout is applied to each
layer's output but the last (training mode only), as torch does. The LSTM's
states follow the dtype of its projections: under autocast they run in the
lower-precision dtype, as torch's CPU LSTM (mkldnn_rnn_layer, on the lower
precision list) returns them; GRU and RNN states promote as torch's
composite CPU cells do (on CUDA every state follows the projections, as
cuDNN's lower-precision RNNs do).

A PackedSequence input (ampy.nn.utils.rnn's) runs each direction step by
step: at step t the first batch_sizes[t] rows advance and the others keep
their state, so each sequence's final state is the one after its own last
(forward) or first (reverse) element, as torch's. The initial states are
taken in the packed (length-sorted) batch order, the final ones returned in
the caller's order. Under CPU autocast the GEMMs of a packed input run in
the lower precision but every state (the LSTM's too) promotes: torch's
packed-input overloads (lstm.data, gru.data, ...) are on no CPU autocast
list and run its composite cells, whose linears autocast lowers.
"""
import math
import numbers
import warnings

from ... import _creation as C
from ...amp.autocast_mode import is_autocast_enabled
from ..._math_reduce import cat, stack
from .. import _ops_rnn as R
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "lstm"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_MODES = {"LSTM": R.LSTM, "GRU": R.GRU, "RNN_TANH": R.TANH, "RNN_RELU": R.RELU}


def _reject_packed(input, name):
    """A PackedSequence of another library (torch's) is no ampy input."""
    if type(input).__name__ == "PackedSequence":
        raise TypeError(f"{name}: this PackedSequence is not ampy's; pack the input with "
                        f"ampy.nn.utils.rnn.pack_padded_sequence or pack_sequence")


def _check_proj(proj_size, hidden_size):
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")


def _check_args(input_size, hidden_size, num_layers, bias, batch_first, dropout):
    if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
            or not 0 <= dropout <= 1):
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
    for name, v in (("bias", bias), ("batch_first", batch_first)):
        if not isinstance(v, bool):
            raise TypeError(f"{name} should be of type bool, got: {type(v).__name__}")
    for name, v in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} should be of type int, got: {type(v).__name__}")
        if v <= 0:
            raise ValueError(f"{name} must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")


class RNNBase(Module):
    """The stack of recurrent layers shared by RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + str(mode))
        _check_args(input_size, hidden_size, num_layers, bias, batch_first, dropout)
        _check_proj(proj_size, hidden_size)
        self.mode = mode
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.proj_size = proj_size
        dirs = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        real = proj_size or hidden_size  # the hidden state's size
        self._flat_weights_names = []
        for layer in range(num_layers):
            n_in = input_size if layer == 0 else real * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih", (gate, n_in)), ("weight_hh", (gate, real))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                if proj_size:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                for name, shape in shapes:
                    setattr(self, name + sfx,
                            Parameter(C.empty(shape, dtype=dtype, device=device)))
                    self._flat_weights_names.append(name + sfx)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for name in self._flat_weights_names:
            init.uniform_(getattr(self, name), -stdv, stdv)

    def flatten_parameters(self):
        """torch's cuDNN weight-packing call: nothing to pack here (a no-op, as
        torch's is on the CPU)."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _layer_params(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        get = lambda n: getattr(self, n + sfx) if self.bias or n.startswith("weight") else None
        w_hr = getattr(self, "weight_hr" + sfx) if self.proj_size else None
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), w_hr

    def _shape_input(self, input):
        """(time-major 3-D input, batched?) after torch's checks."""
        name = type(self).__name__
        _reject_packed(input, name)
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D "
                             "instead")
        w = getattr(self, self._flat_weights_names[0])
        if input.dtype is not w.dtype and not _autocast_on():
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({input.dtype})")
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[-1] != self.input_size:
            raise RuntimeError("input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        return input, batched

    def _state(self, hx, batch, batched, like, what="hidden", cell=False):
        """hx checked against torch's expected (L*D, B, H) (H: proj_size for an
        LSTM's projected hidden state), or zeros."""
        dirs = 2 if self.bidirectional else 1
        size = self.hidden_size if cell else (self.proj_size or self.hidden_size)
        expected = (self.num_layers * dirs, batch, size)
        if hx is None:
            return C.zeros(expected, dtype=like.dtype, device=like.device)
        if not batched:
            hx = hx.unsqueeze(1)
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected {what} size {expected}, got {list(hx.shape)}")
        return hx

    def _run(self, x, h0, c0):
        """The layers over the time-major x: (output, [h_n], [c_n])."""
        mode = _MODES[self.mode]
        dirs = 2 if self.bidirectional else 1
        hn, cn = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                y, h, c = _direction(mode, x, self._layer_params(layer, d), h0[k],
                                     None if c0 is None else c0[k], d == 1)
                outs.append(y)
                hn.append(h)
                cn.append(c)
            x = outs[0] if dirs == 1 else cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, hn, cn

    def _forward_packed(self, input, hx):
        """The layers over a PackedSequence: (PackedSequence, h_n) or, for an
        LSTM, (PackedSequence, (h_n, c_n))."""
        data, name = input.data, type(self).__name__
        w = getattr(self, self._flat_weights_names[0])
        if data.dtype is not w.dtype and not _autocast_on():
            raise ValueError(f"RNN input dtype ({data.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({data.dtype})")
        if data.ndim != 2 or data.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.shape[-1]}")
        sizes = [int(v) for v in input.batch_sizes.tolist()]
        srt, uns = input.sorted_indices, input.unsorted_indices
        lstm = self.mode == "LSTM"
        if lstm and hx is not None:
            h0, c0 = hx
        else:
            h0, c0 = hx, None
        _check_state_dims(h0, True, "hx")
        h0 = self._state(h0, sizes[0], True, data, "hidden[0]" if lstm else "hidden")
        h0 = h0 if srt is None or hx is None else h0.index_select(1, srt)
        if lstm:
            c0 = self._state(c0, sizes[0], True, data, "hidden[1]", cell=True)
            c0 = c0 if srt is None or hx is None else c0.index_select(1, srt)
        mode, dirs = _MODES[self.mode], 2 if self.bidirectional else 1
        x, hn, cn = data, [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                y, h, c = _direction_packed(mode, x, sizes, self._layer_params(layer, d),
                                            h0[k], None if c0 is None else c0[k], d == 1)
                outs.append(y)
                hn.append(h)
                cn.append(c)
            x = outs[0] if dirs == 1 else cat(outs, 1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        out = PackedSequence(x, input.batch_sizes, srt, uns)
        back = (lambda t: t) if uns is None else (lambda t: t.index_select(1, uns))
        h = back(stack(hn, 0))
        return (out, (h, back(stack(cn, 0)))) if lstm else (out, h)

    def _output(self, y, batched):
        if not batched:
            return y.squeeze(1)
        return y.transpose(0, 1) if self.batch_first else y

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


def _direction(mode, x, params, h, c, reverse):
    """One layer, one direction over x (T, B, in): (y (T, B, H), h_T, c_T)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = params
    gx = F.linear(x, w_ih, b_ih)  # every time step in one GEMM
    if mode == R.LSTM or gx._device_index >= 0:  # (torch: mkldnn / cuDNN, lower precision)
        h = h.to(gx.dtype)
        c = None if c is None else c.to(gx.dtype)
    if gx._device_index < 0 and x.shape[0] > 0 and h.dtype is gx.dtype and w_hr is None:
        dt = gx.dtype  # the whole time loop in C (under autocast: the weights' lower-precision copies)
        w_hh, b_hh = w_hh.to(dt), None if b_hh is None else b_hh.to(dt)
        return R.layer(mode, gx, w_hh, b_hh, h, c, reverse)
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    ys = []
    for t in steps:
        gh = F.linear(h, w_hh, b_hh)
        if mode == R.LSTM:
            h, c = R.step(mode, gx[t], gh, cx=c)
            h = h if w_hr is None else F.linear(h, w_hr)  # torch's h_t = W_hr (o * tanh(c_t))
        else:
            h = R.step(mode, gx[t], gh, hx=h)
        ys.append(h)
    if reverse:
        ys.reverse()
    if not ys:
        return C.zeros((0,) + tuple(h.shape), dtype=h.dtype), h, c
    return stack(ys, 0), h, c


def _direction_packed(mode, data, sizes, params, h, c, reverse):
    """One layer, one direction over packed rows data (sum(sizes), in):
    (y (sum(sizes), H), h_n, c_n); at step t only the first sizes[t] rows
    of the state advance."""
    w_ih, w_hh, b_ih, b_hh, w_hr = params
    gx = F.linear(data, w_ih, b_ih)  # every row in one GEMM
    if gx._device_index >= 0:  # (CPU: states promote, as torch's composite cells)
        h = h.to(gx.dtype)
        c = None if c is None else c.to(gx.dtype)
    offs = [0]
    for b in sizes:
        offs.append(offs[-1] + b)
    ys = [None] * len(sizes)
    for t in (range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))):
        b = sizes[t]
        g, hb = gx[offs[t]:offs[t + 1]], h[:b]
        gh = F.linear(hb, w_hh, b_hh)
        if mode == R.LSTM:
            hb, cb = R.step(mode, g, gh, cx=c[:b])
            hb = hb if w_hr is None else F.linear(hb, w_hr)
            c = cb if b == c.shape[0] else cat([cb, c[b:]], 0)
        else:
            hb = R.step(mode, g, gh, hx=hb)
        h = hb if b == h.shape[0] else cat([hb, h[b:]], 0)
        ys[t] = hb
    return cat(ys, 0), h, c


class RNN(RNNBase):
    """Elman RNN: h' = tanh or relu(x W_ih^T + b_ih + h W_hh^T + b_hh)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None,
                 dtype=None):
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, batched = self._shape_input(input)
        _check_state_dims(hx, batched, "hx")
        h0 = self._state(hx, x.shape[1], batched, x)
        y, hn, _ = self._run(x, h0, None)
        h = stack(hn, 0)
        return self._output(y, batched), (h if batched else h.squeeze(1))


class GRU(RNNBase):
    """Gated recurrent unit, torch's gates r, z, n."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    forward = RNN.forward


class LSTM(RNNBase):
    """Long short-term memory, torch's gates i, f, g, o; returns
    (output, (h_n, c_n))."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, batched = self._shape_input(input)
        if hx is None:
            h0 = self._state(None, x.shape[1], batched, x)
            c0 = self._state(None, x.shape[1], batched, x, cell=True)
        else:
            h0, c0 = hx
            if (h0.ndim, c0.ndim) != ((3, 3) if batched else (2, 2)):
                kind = "batched 3-D" if batched else "unbatched 2-D"
                want = "3-D" if batched else "2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want} but "
                                   f"got ({h0.ndim}-D, {c0.ndim}-D) tensors")
            h0 = self._state(h0, x.shape[1], batched, x, "hidden[0]")
            c0 = self._state(c0, x.shape[1], batched, x, "hidden[1]", cell=True)
        y, hn, cn = self._run(x, h0, c0)
        h, c = stack(hn, 0), stack(cn, 0)
        if not batched:
            h, c = h.squeeze(1), c.squeeze(1)
        return self._output(y, batched), (h, c)


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
         batch_first):
    """torch.lstm (the padded-input overload): the stacked LSTM of nn.LSTM as a
    function of its flat parameter list (per layer and direction w_ih, w_hh,
    then b_ih, b_hh when has_biases). Returns (output, h_n, c_n)."""
    dirs = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    params = list(params)
    if len(params) != num_layers * dirs * per:
        raise RuntimeError(f"lstm: expected {num_layers * dirs * per} parameters, got "
                           f"{len(params)}")
    x = input.transpose(0, 1) if batch_first else input
    h0, c0 = hx
    hn, cn = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            p = params[k * per:(k + 1) * per]
            w = (p[0], p[1], p[2], p[3]) if has_biases else (p[0], p[1], None, None)
            y, h, c = _direction(R.LSTM, x, w + (None,), h0[k], c0[k], d == 1)
            outs.append(y)
            hn.append(h)
            cn.append(c)
        x = outs[0] if dirs == 1 else cat(outs, 2)
        if dropout > 0 and train and layer < num_layers - 1:
            x = F.dropout(x, dropout, True)
    return x.transpose(0, 1) if batch_first else x, stack(hn, 0), stack(cn, 0)


def _autocast_on():
    return is_autocast_enabled("cpu") or is_autocast_enabled("cuda")


# torch's scalar type names, for the matmul dtype message of the cells
_SCALAR_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half",
                 "bfloat16": "BFloat16"}


def _check_cell_dtypes(w, *ts):
    """torch's cells reach their GEMMs with these operands: mat1 and mat2 of one
    dtype, unless autocast casts them."""
    if _autocast_on():
        return
    for t in ts:
        if t.dtype is not w.dtype:
            name = lambda d: _SCALAR_NAMES.get(d.name, d.name)
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                               f"{name(t.dtype)} and {name(w.dtype)}")


def _check_state_dims(hx, batched, what):
    if hx is None:
        return
    want = 3 if batched else 2
    if hx.ndim != want:
        kind = "batched 3-D" if batched else "unbatched 2-D"
        raise RuntimeError(f"For {kind} input, {what} should also be {want}-D but got "
                           f"{hx.ndim}-D tensor")


# --------------------------------------------------------------------- cells
class RNNCellBase(Module):
    """weight_ih (G*H, in), weight_hh (G*H, H), bias_ih, bias_hh (G*H)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gate = num_chunks * hidden_size
        self.weight_ih = Parameter(C.empty((gate, input_size), dtype=dtype, device=device))
        self.weight_hh = Parameter(C.empty((gate, hidden_size), dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(C.empty((gate,), dtype=dtype, device=device))
            self.bias_hh = Parameter(C.empty((gate,), dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _batched(self, input, states):
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for k, s in states:
            if s is not None and s.ndim not in (1, 2):
                raise ValueError(f"{name}: Expected {k} to be 1D or 2D, got {s.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        return input.ndim == 2

    def _zeros(self, input):
        return C.zeros((input.shape[0], self.hidden_size), dtype=input.dtype,
                       device=input.device)

    def _check_hidden(self, input, h, k):
        if h.shape[0] != input.shape[0]:
            raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{k} "
                               f"batch size {h.shape[0]}")
        if h.shape[1] != self.hidden_size:
            raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {h.shape[1]}, "
                               f"expected {self.hidden_size}")

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        batched = self._batched(input, (("hidden", hx),))
        x = input if batched else input.unsqueeze(0)
        h = self._zeros(x) if hx is None else (hx if batched else hx.unsqueeze(0))
        self._check_hidden(x, h, "")
        _check_cell_dtypes(self.weight_ih, x, h)
        fn = R.rnn_tanh_cell if self.nonlinearity == "tanh" else R.rnn_relu_cell
        y = fn(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return y if batched else y.squeeze(0)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        batched = self._batched(input, (("hidden", hx),))
        x = input if batched else input.unsqueeze(0)
        h = self._zeros(x) if hx is None else (hx if batched else hx.unsqueeze(0))
        self._check_hidden(x, h, "")
        _check_cell_dtypes(self.weight_ih, x, h)
        y = R.gru_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return y if batched else y.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        states = (("hx[0]", None), ("hx[1]", None)) if hx is None else \
            (("hx[0]", hx[0]), ("hx[1]", hx[1]))
        batched = self._batched(input, states)
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            h, c = self._zeros(x), self._zeros(x)
        else:
            h, c = hx if batched else (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        self._check_hidden(x, h, "[0]")
        self._check_hidden(x, c, "[1]")
        _check_cell_dtypes(self.weight_ih, x, h)
        hy, cy = R.lstm_cell(x, (h, c), self.weight_ih, self.weight_hh, self.bias_ih,
                             self.bias_hh)
        return (hy, cy) if batched else (hy.squeeze(0), cy.squeeze(0))
