"""The nn ops in the op table: forward (one call into ampy._C) and backward
rule of layer_norm, cross_entropy, nll_loss, embedding, dropout, mse_loss and
hardswish.

Rules follow ampy.autograd's protocol: `rule(ctx, grad)` returns one gradient
per positional argument; `rule.save` lists the positional arguments whose
values the rule reads. What the backward needs beyond the arguments (layer
norm's mean/rstd, cross entropy's per-row logsumexp) travels in a `_Saved`
holder passed as a plain (non-tensor) argument: the forward fills it, the
node keeps it, and the output tensor itself is not saved (so an in-place op
on the output does not invalidate the graph, as in torch).

Autocast policies are torch's lists, applied by `defop`: cross_entropy,
nll_loss and mse_loss run in float32 on CPU and CUDA, layer_norm in float32
on CUDA only (torch's CPU list leaves it out), embedding and dropout run as
they come. Each fused rule switches to its composite of ampy/nn/_ops_graph.py
while a create_graph=True backward is being recorded.
"""
from .. import _C
from .. import _dtype as D
from .._dispatch import CPU_CUDA, backward, defop
from .._shape import contiguous_strides, numel
from ..autograd._ops import O, upcast, zeros
from . import _ops_graph as G

__all__ = ["Saved", "REDUCTIONS"]

REDUCTIONS = {"none": _C.NN_REDUCTION_NONE, "mean": _C.NN_REDUCTION_MEAN,
              "sum": _C.NN_REDUCTION_SUM}
_F32 = D.float32


class Saved:
    """Values a forward computes for its backward (not graph inputs)."""

    __slots__ = ("a", "b")

    def __init__(self):
        self.a = self.b = None

    def __repr__(self):
        return "Saved()"


def _c(t):
    """t contiguous (None stays None; a contiguous t is returned as it is)."""
    return t if t is None or t.is_contiguous() else t.contiguous()


def _as(g, dtype):
    g = g if g.dtype is dtype else _C.cast(g, dtype)
    return g if g.is_contiguous() else g.contiguous()


# ---------------------------------------------------------------- layer_norm
@defop("layer_norm", devices=CPU_CUDA, names=("ampy.nn.functional.layer_norm",))
def layer_norm_fwd(input, normalized_shape, weight=None, bias=None, eps=1e-5, saved=None):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dims."""
    n = numel(normalized_shape)
    x = _c(input)
    y, mean, rstd = _C.nn_layer_norm_fwd(x, n, _c(weight), _c(bias),
                                         float(eps), saved is not None)
    if saved is not None:
        saved.a, saved.b = mean, rstd
    return y


@backward("layer_norm", save=(0, 2, 3))  # (bias: not read, but version-checked as torch does)
@G.with_graph(G.layer_norm)
def layer_norm_bwd(ctx, g):
    x, shape, w, b, eps, saved = (tuple(ctx.args) + (None,) * 6)[:6]
    need = tuple(ctx.needs_input_grad) + (False,) * 4
    n = numel(shape)
    x = _c(x)
    mean, rstd = (saved.a, saved.b) if saved is not None else (None, None)
    dx, dw, db = _C.nn_layer_norm_bwd(x, n, _c(w), _as(g, x.dtype), mean, rstd, float(eps),
                                      bool(need[0]), bool(need[2]) and w is not None,
                                      bool(need[3]) and b is not None)
    shp = tuple(shape)
    return (dx, None, None if dw is None else dw._view(shp, contiguous_strides(shp), 0),
            None if db is None else db._view(shp, contiguous_strides(shp), 0), None, None)


# ------------------------------------------------- cross_entropy / nll_loss
@defop("cross_entropy", devices=CPU_CUDA, names=("ampy.nn.functional.cross_entropy",))
def cross_entropy_fwd(input, target, weight=None, ignore_index=-100, reduction=1,
                      label_smoothing=0.0, saved=None):
    """Fused log_softmax + nll_loss over rows (M, C); class-index targets."""
    out, lse = _C.nn_cross_entropy_fwd(_c(input), target, _c(weight),
                                       int(ignore_index), float(label_smoothing), int(reduction),
                                       saved is not None)
    if saved is not None:
        saved.a = lse
    return out


@backward("cross_entropy", save=(0, 1, 2))
@G.with_graph(G.cross_entropy)
def cross_entropy_bwd(ctx, g):
    x, t, w, ignore, red, ls, saved = ctx.args
    x = _c(x)
    dx = _C.nn_cross_entropy_bwd(x, t, _c(w), int(ignore), float(ls), int(red),
                                 _as(g, x.dtype), None if saved is None else saved.a)
    return dx, None, None, None, None, None, None


@defop("nll_loss", devices=CPU_CUDA, names=("ampy.nn.functional.nll_loss",))
def nll_loss_fwd(input, target, weight=None, ignore_index=-100, reduction=1):
    """loss = -weight[t] * input[i, t] over rows (M, C) of log-probabilities."""
    return _C.nn_nll_loss_fwd(_c(input), target, _c(weight),
                              int(ignore_index), int(reduction))


@backward("nll_loss", save=(0, 1, 2))  # (input: not read, but version-checked as torch does)
@G.with_graph(G.nll_loss)
def nll_loss_bwd(ctx, g):
    x, t, w, ignore, red = ctx.args
    probe = (_C.empty(tuple(x.shape), x.dtype) if x._device_index < 0  # shape/dtype carrier
             else _C._empty_device(tuple(x.shape), x.dtype, x._device_index))
    dx = _C.nn_nll_loss_bwd(probe, t, _c(w), int(ignore), int(red), _as(g, x.dtype))
    return dx, None, None, None, None


# ----------------------------------------------------------------- embedding
@defop("embedding", devices=CPU_CUDA, names=("ampy.nn.functional.embedding",))
def embedding_fwd(weight, indices, padding_idx=None):
    """Rows of weight picked by int64 indices (any shape)."""
    return _C.nn_embedding_fwd(_c(indices), _c(weight))


@backward("embedding", save=(1,))
@G.with_graph(G.embedding)
def embedding_bwd(ctx, g):
    w, idx, pad = ctx.args
    num = w.shape[0]
    dw = _C.nn_embedding_bwd(_c(idx), _as(g, w.dtype), num, -1 if pad is None else pad)
    return dw, None, None


# ------------------------------------------------------------------- dropout
@defop("dropout", devices=CPU_CUDA, names=("ampy.nn.functional.dropout",))
def dropout_fwd(input, mask, scale):
    """input * mask * scale with a precomputed uint8 keep-mask (see
    ampy.nn.functional.dropout, which draws it with Philox)."""
    return _C.nn_mask_scale(_c(input), mask, float(scale))


@backward("dropout", save=(1,))
@G.with_graph(G.dropout)
def dropout_bwd(ctx, g):
    _, mask, scale = ctx.args
    return _C.nn_mask_scale(_c(g), mask, float(scale)), None, None


# ------------------------------------------------------------------ mse_loss
@defop("mse_loss", devices=CPU_CUDA, names=("ampy.nn.functional.mse_loss",))
def mse_loss_fwd(input, target, reduction=1):
    """(input - target)^2, reduced; input and target of one shape and dtype."""
    x, y = _c(input), _c(target)
    if x.dtype is _F32 and x._device_index < 0:  # same bits, no per-element dtype switch
        return _C.fused_mse_fwd(x, y, int(reduction))
    return _C.nn_mse_fwd(x, y, int(reduction))


@backward("mse_loss", save=(0, 1))
@G.with_graph(G.mse_loss)
def mse_loss_bwd(ctx, g):
    x, y, red = ctx.args
    need = ctx.needs_input_grad
    x, y = _c(x), _c(y)
    fn = _C.fused_mse_bwd if x.dtype is _F32 and x._device_index < 0 else _C.nn_mse_bwd
    dx, dy = fn(x, y, int(red), _as(g, x.dtype), bool(need[0]), bool(need[1]))
    return dx, dy, None


# ----------------------------------------------------------------- hardswish
# An element-wise activation that torch exposes only as
# nn.functional.hardswish(input, inplace=False): x * clamp(x + 3, 0, 6) / 6
# (ewise.h's list and ewise_expr.h's formula; the CUDA kernel runs the same
# formula). Not on torch's autocast lists: it runs in its input's dtype.
_HARDSWISH = _C.EWISE_OPS["hardswish"]


@defop("hardswish", devices=CPU_CUDA, names=("ampy.nn.functional.hardswish",))
def hardswish_fwd(input):
    """x * min(max(x + 3, 0), 6) / 6, halves computed in float32, rounded once."""
    return _C.ewise(_HARDSWISH, None, None, None, input)


@defop("hardswish_", devices=CPU_CUDA, names=("ampy.nn.functional.hardswish",))
def hardswish_fwd_(input):
    """hardswish in place (nn.functional.hardswish(x, inplace=True))."""
    return _C.ewise(_HARDSWISH, input, None, None, input)


@backward("hardswish", save=(0,))
def hardswish_bwd(ctx, g):
    """torch's hardswish_backward: 0 for x <= -3, g (x/3 + 1/2) for
    -3 < x < 3, g for x >= 3, computed in float32 for halves like torch's
    kernel. A NaN x gives a NaN gradient (torch's vectorised float kernel;
    its scalar tail and its bfloat16 kernel give g). The rule is made of ops,
    so create_graph=True differentiates it (to torch's where(-3 < x < 3,
    g gg / 3, 0))."""
    x, g32 = upcast(ctx.args[0]), upcast(g)
    inside = O.mul(g32, O.add(O.div(x, 3.0), 0.5))
    return (O.where(O.le(x, -3.0), zeros((), g32.dtype, g32),
                    O.where(O.ge(x, 3.0), g32, inside)),)
