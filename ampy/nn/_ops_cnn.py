"""The cnn ops in the op table: batch_norm, group_norm, max_pool2d,
avg_pool2d, adaptive_avg_pool2d, the padding ops and 2-d interpolation, each
a forward (one call into the C kernels of csrc/cnn_*.c, or of cuda/cnn_*.cu
for CUDA tensors: the _C binding decides) and its backward rule.

The op names are torch's ATen names, so `defop` gives each torch's autocast
policy from ampy/_policy_lists.py: on the CPU reflection_pad1d/2d and
replication_pad1d/2d/3d run in float32 and the others in their input's
dtype (batch_norm and group_norm too: torch's CPU list leaves them out, and
its kernels take a half input with float32 parameters, giving a half output);
on CUDA group_norm and the upsample ops run in float32.

The arguments arrive checked and normalised by ampy/nn/_functional_cnn.py
(output sizes computed, windows as 8-tuples). What a backward needs beyond
the arguments (batch statistics, argmax indices) travels in a `Saved`
holder. Under create_graph=True the rules switch to the differentiable
forms of ampy/nn/_ops_cnn_graph.py; constant padding's gradient is constant
padding with the pads negated, an op itself.
"""
from .. import _C
from .._dispatch import CPU_CUDA, backward, defop, dispatch, get_op
from . import _ops_cnn_graph as G

__all__ = ["PAD_MODES", "PAD_OPS"]

PAD_MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}


def _c(t):
    return t if t is None or t.is_contiguous() else t.contiguous()


def _g(g, dtype):
    g = g if g.dtype is dtype else _C.cast(g, dtype)
    return g if g.is_contiguous() else g.contiguous()


def _probe(b):
    """A one-element tensor of unsaved bias b's dtype (the bias gradient's
    dtype; the kernel never reads the bias), or None."""
    if b is None:
        return None
    return _C.empty((1,), b.dtype) if b._device_index < 0 else _C._empty_device((1,), b.dtype,
                                                                             b._device_index)


def _need(ctx, k):
    n = tuple(ctx.needs_input_grad)
    return len(n) > k and bool(n[k])


# ---------------------------------------------------------------- batch_norm
@defop("batch_norm", devices=CPU_CUDA, names=("ampy.nn.functional.batch_norm",))
def batch_norm_fwd(input, weight, bias, running_mean, running_var, training, momentum, eps,
                   saved=None):
    """(x - mean) * invstd * weight + bias per channel (dim 1); training uses
    the batch statistics and updates the running ones in place."""
    y, mean, invstd = _C.cnn_batch_norm_fwd(_c(input), _c(weight), _c(bias), running_mean,
                                            running_var, bool(training), float(momentum),
                                            float(eps))
    if saved is not None:
        saved.a, saved.b = mean, invstd
    return y


@backward("batch_norm", save=(0, 1))  # (torch saves input and weight, not bias)
@G.with_graph(G.batch_norm)
def batch_norm_bwd(ctx, g):
    x, w, b, _, _, training, _, _, saved = ctx.args
    dx, dw, db = _C.cnn_batch_norm_bwd(_c(x), _g(g, x.dtype), _c(w), _probe(b), bool(training),
                                       saved.a, saved.b, _need(ctx, 0),
                                       _need(ctx, 1) and w is not None,
                                       _need(ctx, 2) and b is not None)
    return dx, dw, db, None, None, None, None, None, None


# ---------------------------------------------------------------- group_norm
@defop("group_norm", devices=CPU_CUDA, names=("ampy.nn.functional.group_norm",))
def group_norm_fwd(input, num_groups, weight=None, bias=None, eps=1e-5, saved=None):
    """Normalises each (sample, group) of channels, then weight and bias per channel."""
    y, mean, rstd = _C.cnn_group_norm_fwd(_c(input), int(num_groups), _c(weight), _c(bias),
                                          float(eps))
    if saved is not None:
        saved.a, saved.b = mean, rstd
    return y


@backward("group_norm", save=(0, 2))
@G.with_graph(G.group_norm)
def group_norm_bwd(ctx, g):
    x, groups, w, b, _, saved = ctx.args
    dx, dw, db = _C.cnn_group_norm_bwd(_c(x), _g(g, x.dtype), int(groups), _c(w), _probe(b),
                                       saved.a, saved.b, _need(ctx, 0),
                                       _need(ctx, 2) and w is not None,
                                       _need(ctx, 3) and b is not None)
    return dx, None, dw, db, None, None


# ---------------------------------------------------------------- max_pool2d
@defop("max_pool2d", devices=CPU_CUDA, names=("ampy.nn.functional.max_pool2d",))
def max_pool2d_fwd(input, window, out_hw, saved):
    """The largest element of each window; saved.a gets the argmax indices."""
    y, idx = _C.cnn_max_pool2d_fwd(_c(input), window, out_hw[0], out_hw[1])
    saved.a = idx
    return y


@backward("max_pool2d", save=(0,))  # (torch saves the input: version-checked)
@G.adjoint(G.max_pool_apply)
def max_pool2d_bwd(ctx, g):
    x, _, _, saved = ctx.args
    h, w = x.shape[-2], x.shape[-1]
    return _C.cnn_max_pool2d_bwd(_g(g, x.dtype), saved.a, h, w), None, None, None


# ---------------------------------------------------------------- avg_pool2d
@defop("avg_pool2d", devices=CPU_CUDA, names=("ampy.nn.functional.avg_pool2d",))
def avg_pool2d_fwd(input, window, out_hw, count_include_pad, divisor_override):
    """The mean of each window (torch's divisor rule)."""
    return _C.cnn_avg_pool2d_fwd(_c(input), window, out_hw[0], out_hw[1],
                                 bool(count_include_pad), int(divisor_override or 0))


@backward("avg_pool2d", save=(0,))
@G.adjoint(G.reapply("avg_pool2d"))
def avg_pool2d_bwd(ctx, g):
    x, window, _, inc, div = ctx.args
    dx = _C.cnn_avg_pool2d_bwd(_g(g, x.dtype), window, x.shape[-2], x.shape[-1], bool(inc),
                               int(div or 0))
    return dx, None, None, None, None


# ------------------------------------------------------- adaptive_avg_pool2d
@defop("adaptive_avg_pool2d", devices=CPU_CUDA, names=("ampy.nn.functional.adaptive_avg_pool2d",))
def adaptive_avg_pool2d_fwd(input, out_hw):
    """The mean of each adaptive window (rows floor(i H/OH) to ceil((i+1) H/OH))."""
    return _C.cnn_adaptive_avg_pool2d_fwd(_c(input), out_hw[0], out_hw[1])


@backward("adaptive_avg_pool2d", save=(0,))
@G.adjoint(G.reapply("adaptive_avg_pool2d"))
def adaptive_avg_pool2d_bwd(ctx, g):
    x = ctx.args[0]
    return _C.cnn_adaptive_avg_pool2d_bwd(_g(g, x.dtype), x.shape[-2], x.shape[-1]), None


# ------------------------------------------------------------------- padding
# torch's ATen op per (mode, padded dims): its autocast policy follows the name
PAD_OPS = {("constant", k): "constant_pad_nd" for k in (1, 2, 3)}
PAD_OPS.update({("reflect", k): f"reflection_pad{k}d" for k in (1, 2, 3)})
PAD_OPS.update({("replicate", k): f"replication_pad{k}d" for k in (1, 2, 3)})
PAD_OPS.update({("circular", k): "_pad_circular" for k in (1, 2, 3)})


def _pad_fwd(input, pad, mode, value=0.0):
    return _C.cnn_pad_fwd(_c(input), tuple(pad), PAD_MODES[mode], float(value))


def _pad_bwd(ctx, g):
    x, pad, mode = ctx.args[:3]
    k = len(pad) // 2
    dx = _C.cnn_pad_bwd(_g(g, x.dtype), tuple(x.shape[x.ndim - k:]), tuple(pad),
                        PAD_MODES[mode])
    return (dx,) + (None,) * (len(ctx.args) - 1)


for _name in sorted(set(PAD_OPS.values()) - {"constant_pad_nd"}):
    defop(_name, devices=CPU_CUDA, names=("ampy.nn.functional.pad",))(_pad_fwd)
    # torch's reflection/replication backward saves the input; circular is its composite
    backward(_name, save=() if _name == "_pad_circular" else (0,))(
        G.adjoint(G.reapply(_name))(_pad_bwd))


@defop("constant_pad_nd", devices=CPU_CUDA, names=("ampy.nn.functional.pad",))
def constant_pad_fwd(input, pad, mode="constant", value=0.0):
    """Constant padding of the last len(pad) // 2 dims (negative pads crop)."""
    return _C.cnn_pad_fwd(_c(input), tuple(pad), 0, float(value))


@backward("constant_pad_nd", save=())
def constant_pad_bwd(ctx, g):
    """The gradient is the output gradient cropped back: constant padding
    with the pads negated (an op, so create_graph=True differentiates it)."""
    x, pad = ctx.args[:2]
    dx = dispatch(get_op("constant_pad_nd"), g, tuple(-p for p in pad), "constant", 0.0)
    return (dx if dx.dtype is x.dtype else dx.to(x.dtype),) + (None,) * (len(ctx.args) - 1)


# -------------------------------------------------------------- interpolate
_INTERP = {"nearest": 0, "bilinear": 1}


def _interp_fwd(input, out_hw, mode, align_corners, scales):
    return _C.cnn_interp2d_fwd(_c(input), out_hw[0], out_hw[1], _INTERP[mode],
                               bool(align_corners), float(scales[0]), float(scales[1]))


def _interp_bwd(ctx, g):
    x, _, mode, align, scales = ctx.args
    dx = _C.cnn_interp2d_bwd(_g(g, x.dtype), x.shape[-2], x.shape[-1], _INTERP[mode],
                             bool(align), float(scales[0]), float(scales[1]))
    return dx, None, None, None, None


for _name in ("upsample_nearest2d", "upsample_bilinear2d"):
    defop(_name, devices=CPU_CUDA, names=("ampy.nn.functional.interpolate",))(_interp_fwd)
    backward(_name, save=())(G.adjoint(G.reapply(_name))(_interp_bwd))
