"""The recurrent cells in the op table: one fused time step of an LSTM, a GRU
or an Elman RNN (csrc/rnn.c through ampy._C.rnn_cell_fwd / rnn_cell_bwd),
and torch's functional cells built on them (ampy.lstm_cell, gru_cell,
rnn_tanh_cell, rnn_relu_cell); and a whole layer of one direction as one op
(rnn_layer, CPU: csrc/rnn_layer.c), which nn.LSTM / GRU / RNN run.

A step takes the input projection gx = x W_ih^T + b_ih and the hidden
projection gh = h W_hh^T + b_hh (ordinary linear ops: the layers of
ampy/nn/modules/rnn.py compute gx for all time steps as one GEMM) and the
previous state; the kernel applies the gates in torch's order (LSTM i f g o,
GRU r z n with n = tanh(x_n + r (W_hn h + b_hn)), RNN tanh/relu) and keeps
the activations its backward reads in a `Saved` holder. The backward kernel
returns the gradients of gx and gh (and of the previous state where the
cell uses it directly); the GEMMs' own rules do the rest, so backpropagation
through time is the autograd graph of the steps.

All tensors of one step share a dtype: `step` casts them to the promoted
type first on the CPU, which gives torch's result dtypes under autocast
(bfloat16 projections and a float32 state give a float32 state, as torch's
composite CPU cells do), and to the projections' dtype on CUDA (torch's
CUDA cells are lower precision). The ops are not on torch's autocast lists, so they run as they
come; create_graph=True switches each rule to a composite of differentiable
ops (`_composite_*`).
"""
from .. import _C
from .. import _dtype as D
from .._dispatch import CPU, CPU_CUDA, backward, defop, dispatch, get_op
from .._math_reduce import cat, stack
from ..autograd import is_grad_enabled
from ..autograd._ops import O, cast, upcast, zeros
from ..autograd._grad_mode import _state
from ._ops import Saved

__all__ = ["LSTM", "GRU", "TANH", "RELU", "step", "layer", "lstm_cell", "gru_cell",
           "rnn_tanh_cell", "rnn_relu_cell"]

LSTM, GRU, TANH, RELU = 0, 1, 2, 3


def _c(t):
    return t if t is None or t.is_contiguous() else t.contiguous()


def _as(g, dtype):
    if g is None:
        return None
    g = g if g.dtype is dtype else _C.cast(g, dtype)
    return g if g.is_contiguous() else g.contiguous()


def _with_graph(composite):
    """The fused rule, or `composite` while a create_graph=True backward is
    recorded (ampy/nn/_ops_graph.py's switch, for rules of several outputs)."""
    def wrap(fused):
        def rule(ctx, *grads):
            return (composite if _state.create_graph else fused)(ctx, *grads)

        rule.__name__ = rule.__qualname__ = fused.__name__
        rule.__doc__ = fused.__doc__
        rule.__wrapped__ = fused
        return rule

    return wrap


def _gates(a, k, h):
    """Gate k (of width h) of the (B, G*h) array a."""
    return O.narrow(a, 1, k * h, h)


def _one_minus(x):
    return O.add(O.neg(x), 1.0)


# ---------------------------------------------------------------------- LSTM
@defop("lstm_cell_fused", devices=CPU_CUDA, names=("ampy.lstm_cell",))
def lstm_cell_fused_fwd(gx, gh, cx, saved=None):
    """(h', c') of one LSTM step from the projections gx, gh (B, 4H) and c (B, H)."""
    hy, cy, ws = _C.rnn_cell_fwd(LSTM, _c(gx), _c(gh), None, _c(cx), saved is not None)
    if saved is not None:
        saved.a = ws
    return hy, cy


def _composite_lstm(ctx, gh_, gc):
    gx, gh, cx = (upcast(t) for t in ctx.args[:3])
    h = cx.shape[1]
    a = O.add(gh, gx)
    i, f, o = (O.sigmoid(_gates(a, k, h)) for k in (0, 1, 3))
    g = O.tanh(_gates(a, 2, h))
    tc = O.tanh(O.add(O.mul(f, cx), O.mul(i, g)))
    dct = O.add(upcast(gc), O.mul(O.mul(upcast(gh_), o), _one_minus(O.mul(tc, tc))))
    da = cat([O.mul(O.mul(dct, g), O.mul(i, _one_minus(i))),
              O.mul(O.mul(dct, cx), O.mul(f, _one_minus(f))),
              O.mul(O.mul(dct, i), _one_minus(O.mul(g, g))),
              O.mul(O.mul(upcast(gh_), tc), O.mul(o, _one_minus(o)))], 1)
    return da, da, O.mul(dct, f), None


@backward("lstm_cell_fused", save=(0, 1, 2))
@_with_graph(_composite_lstm)
def lstm_cell_fused_bwd(ctx, dh, dc):
    gx, gh, cx, saved = ctx.args
    dt = gx.dtype
    need = tuple(ctx.needs_input_grad)
    dgx, _, _, dcx = _C.rnn_cell_bwd(LSTM, saved.a, None, _c(cx), _as(dh, dt), _as(dc, dt),
                                     bool(need[2]))
    return dgx, dgx, dcx, None


# ----------------------------------------------------------------------- GRU
@defop("gru_cell_fused", devices=CPU_CUDA, names=("ampy.gru_cell",))
def gru_cell_fused_fwd(gx, gh, hx, saved=None):
    """h' of one GRU step from the projections gx, gh (B, 3H) and h (B, H)."""
    hy, _, ws = _C.rnn_cell_fwd(GRU, _c(gx), _c(gh), _c(hx), None, saved is not None)
    if saved is not None:
        saved.a = ws
    return hy


def _composite_gru(ctx, g):
    gx, gh, hx = (upcast(t) for t in ctx.args[:3])
    h = hx.shape[1]
    r = O.sigmoid(O.add(_gates(gh, 0, h), _gates(gx, 0, h)))
    z = O.sigmoid(O.add(_gates(gh, 1, h), _gates(gx, 1, h)))
    hn = _gates(gh, 2, h)
    n = O.tanh(O.add(_gates(gx, 2, h), O.mul(hn, r)))
    g = upcast(g)
    dn = O.mul(O.mul(g, _one_minus(z)), _one_minus(O.mul(n, n)))
    dz = O.mul(O.mul(g, O.sub(hx, n)), O.mul(z, _one_minus(z)))
    dr = O.mul(O.mul(dn, hn), O.mul(r, _one_minus(r)))
    return cat([dr, dz, dn], 1), cat([dr, dz, O.mul(dn, r)], 1), O.mul(g, z), None


@backward("gru_cell_fused", save=(0, 1, 2))
@_with_graph(_composite_gru)
def gru_cell_fused_bwd(ctx, g):
    gx, gh, hx, saved = ctx.args
    dgx, dgh, dhx, _ = _C.rnn_cell_bwd(GRU, saved.a, _c(hx), None, _as(g, gx.dtype), None,
                                       False)
    return dgx, dgh, dhx, None


# ----------------------------------------------------------------------- RNN
@defop("rnn_cell_fused", devices=CPU_CUDA, names=("ampy.rnn_tanh_cell", "ampy.rnn_relu_cell"))
def rnn_cell_fused_fwd(gx, gh, mode, saved=None):
    """h' = tanh(gx + gh) (mode TANH) or relu(gx + gh) (mode RELU)."""
    hy, _, ws = _C.rnn_cell_fwd(int(mode), _c(gx), _c(gh), None, None, saved is not None)
    if saved is not None:
        saved.a = ws
    return hy


def _composite_rnn(ctx, g):
    gx, gh, mode = ctx.args[:3]
    a = O.add(upcast(gh), upcast(gx))
    g = upcast(g)
    if int(mode) == TANH:
        y = O.tanh(a)
        da = O.mul(g, _one_minus(O.mul(y, y)))
    else:
        da = O.mul(g, O.to_dtype(O.gt(a, 0.0), a.dtype))
    return da, da, None, None


@backward("rnn_cell_fused", save=(0, 1), save_out=True)  # (torch keeps tanh/relu's output)
@_with_graph(_composite_rnn)
def rnn_cell_fused_bwd(ctx, g):
    gx, gh, mode, saved = ctx.args
    dgx, _, _, _ = _C.rnn_cell_bwd(int(mode), saved.a, None, None, _as(g, gx.dtype), None,
                                   False)
    return dgx, dgx, None, None


_OPS = {LSTM: get_op("lstm_cell_fused"), GRU: get_op("gru_cell_fused"),
        TANH: get_op("rnn_cell_fused"), RELU: get_op("rnn_cell_fused")}


def _promote(ts):
    dt = None
    for t in ts:
        if t is not None:
            dt = t.dtype if dt is None else D.promote_types(dt, t.dtype)
    return dt


def step(mode, gx, gh, hx=None, cx=None):
    """One fused step: (h', c') for LSTM, h' otherwise. gx, gh: (B, G*H);
    hx (GRU) / cx (LSTM): (B, H). Casts everything to the promoted dtype."""
    # CPU: torch's composite cells promote (bfloat16 projections and a float32
    # state give float32); CUDA: torch's cells are on the lower-precision list,
    # so everything runs in the projections' (autocast) dtype
    dt = gx.dtype if gx._device_index >= 0 else \
        _promote((gx, gh, hx if mode == GRU else None, cx if mode == LSTM else None))
    gx, gh = (t if t.dtype is dt else t.to(dt) for t in (gx, gh))
    grad = is_grad_enabled() and (gx.requires_grad or gh.requires_grad or
                                  (hx is not None and hx.requires_grad) or
                                  (cx is not None and cx.requires_grad))
    saved = Saved() if grad else None
    if mode == LSTM:
        return dispatch(_OPS[LSTM], gx, gh, cx if cx.dtype is dt else cx.to(dt), saved)
    if mode == GRU:
        return dispatch(_OPS[GRU], gx, gh, hx if hx.dtype is dt else hx.to(dt), saved)
    return dispatch(_OPS[mode], gx, gh, mode, saved)


# -------------------------------------------------------------- a whole layer
@defop("rnn_layer", devices=CPU, names=())
def rnn_layer_fwd(gx, w_hh, b_hh, h0, c0, mode, reverse, saved=None):
    """(y (T, B, H), h_T, c_T or None) of one layer and direction from the input
    projections gx (T, B, G*H) of every step; the hidden GEMMs, the cells and
    the time loop run in C (csrc/rnn_layer.c)."""
    y, cs, ws = _C.rnn_layer_fwd(int(mode), bool(reverse), _c(gx), _c(w_hh), _c(b_hh), _c(h0),
                                 _c(c0), saved is not None)
    last = 0 if reverse else y.shape[0] - 1
    if saved is not None:
        saved.a, saved.b = ws, cs
    return y, y[last].clone(), None if cs is None else cs[last].clone()


def _cell_ops(mode, gx, gh, h, c):
    """One step's (h', c') from differentiable ops (the composite backward's
    replay of the forward)."""
    hid = h.shape[1]
    if mode == LSTM:
        a = O.add(gh, gx)
        i, f, o = (O.sigmoid(_gates(a, k, hid)) for k in (0, 1, 3))
        c = O.add(O.mul(f, c), O.mul(i, O.tanh(_gates(a, 2, hid))))
        return O.mul(o, O.tanh(c)), c
    if mode == GRU:
        r = O.sigmoid(O.add(_gates(gh, 0, hid), _gates(gx, 0, hid)))
        z = O.sigmoid(O.add(_gates(gh, 1, hid), _gates(gx, 1, hid)))
        n = O.tanh(O.add(_gates(gx, 2, hid), O.mul(_gates(gh, 2, hid), r)))
        return O.add(O.mul(O.sub(h, n), z), n), None
    a = O.add(gh, gx)
    return (O.tanh(a) if mode == TANH else O.relu(a)), None


class _StepCtx:
    """What a per-step composite rule reads of its ctx."""
    __slots__ = ("args", "needs_input_grad")

    def __init__(self, args):
        self.args = args
        self.needs_input_grad = (True,) * len(args)


def _composite_layer(ctx, dy, dh, dc):
    gx, w_hh, b_hh, h0, c0, mode, reverse = ctx.args[:7]
    mode, steps, dt = int(mode), range(gx.shape[0]), gx.dtype
    order = list(reversed(steps)) if reverse else list(steps)
    h, c, rec = h0, c0, {}
    for t in order:  # the forward again, recorded (states rounded to dt as it stores them)
        gh = O.linear(h, w_hh, b_hh)
        rec[t] = (gx[t], gh, h, c)
        h, c = _cell_ops(mode, upcast(gx[t]), upcast(gh), upcast(h),
                         None if c is None else upcast(c))
        h, c = cast(h, dt), None if c is None else cast(c, dt)
    dh = None if dh is None else upcast(dh)
    dc = None if dc is None else upcast(dc)
    dgx, dw, db, w32 = {}, None, None, upcast(w_hh)
    for t in reversed(order):
        gxt, gh, hp, cp = rec[t]
        if dy is not None:
            dh = upcast(dy[t]) if dh is None else O.add(dh, upcast(dy[t]))
        g = dh if dh is not None else zeros(hp.shape, D.float32, hp)
        direct = None
        if mode == LSTM:
            dc = zeros(cp.shape, D.float32, cp) if dc is None else dc
            da, dgh, dc, _ = _composite_lstm(_StepCtx((gxt, gh, cp)), g, dc)
        elif mode == GRU:
            da, dgh, direct, _ = _composite_gru(_StepCtx((gxt, gh, hp)), g)
        else:
            da, dgh, _, _ = _composite_rnn(_StepCtx((gxt, gh, mode)), g)
        dgx[t] = da
        dh = O.matmul(dgh, w32)
        dh = dh if direct is None else O.add(dh, direct)
        step_w = O.matmul(O.transpose(dgh, 0, 1), upcast(hp))
        dw = step_w if dw is None else O.add(dw, step_w)
        step_b = O.sum(dgh, (0,))
        db = step_b if db is None else O.add(db, step_b)
    return (stack([dgx[t] for t in steps], 0), dw, None if b_hh is None else db, dh,
            None if c0 is None else dc, None, None, None)


@backward("rnn_layer", save=(0, 1, 2, 3, 4), save_out=True)
@_with_graph(_composite_layer)
def rnn_layer_bwd(ctx, dy, dh, dc):
    gx, w_hh, b_hh, h0, c0, mode, reverse, saved = ctx.args
    dt, need = gx.dtype, tuple(ctx.needs_input_grad)
    dgx, _, dh0, dc0, dw, db = _C.rnn_layer_bwd(
        int(mode), bool(reverse), saved.a, ctx.out[0], saved.b, _c(h0), _c(c0), _c(w_hh),
        _as(dy, dt), _as(dh, dt), _as(dc, dt), bool(need[3]), c0 is not None and bool(need[4]),
        bool(need[1]), b_hh is not None and bool(need[2]))
    return dgx, dw, db, dh0, dc0, None, None, None


def layer(mode, gx, w_hh, b_hh, h0, c0=None, reverse=False):
    """One layer and direction on the CPU, every tensor of gx's dtype:
    (y (T, B, H), h_T, c_T (LSTM) or None)."""
    grad = is_grad_enabled() and any(t is not None and t.requires_grad
                                     for t in (gx, w_hh, b_hh, h0, c0))
    return dispatch(get_op("rnn_layer"), gx, w_hh, b_hh, h0, c0, mode, bool(reverse),
                    Saved() if grad else None)


# ------------------------------------------------------ torch's functional cells
def _proj(x, w, b):
    return dispatch(get_op("linear"), x, w, b)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.lstm_cell: (h', c') for input (B, I) and hx = (h, c), each (B, H)."""
    h, c = hx
    return step(LSTM, _proj(input, w_ih, b_ih), _proj(h, w_hh, b_hh), cx=c)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.gru_cell: h' for input (B, I) and hx (B, H)."""
    return step(GRU, _proj(input, w_ih, b_ih), _proj(hx, w_hh, b_hh), hx=hx)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.rnn_tanh_cell: tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    return step(TANH, _proj(input, w_ih, b_ih), _proj(hx, w_hh, b_hh))


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.rnn_relu_cell: relu(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    return step(RELU, _proj(input, w_ih, b_ih), _proj(hx, w_hh, b_hh))
