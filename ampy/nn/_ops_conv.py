"""The convolution ops: conv1d, conv2d, conv_transpose1d and conv_transpose2d
(forward, backward rule, and the composite that create_graph=True
differentiates).

Each op is declared in a canonical form that nn.functional (ampy/nn/_conv_args.py)
builds from torch's arguments: the stride, dilation and the padding BEFORE
the image per spatial dim, and the output's spatial size (so padding="same"
with an even kernel, whose padding after the image is one larger, and
output_padding of a transposed convolution need no extra argument):

    conv2d(input, weight, bias, stride, padding, dilation, groups, out_size)
    conv1d(input, weight, bias, stride, padding, dilation, groups, out_size)
    conv_transpose1d(input, weight, bias, stride, padding, out_size, groups, dilation)
    conv_transpose2d(input, weight, bias, stride, padding, out_size, groups, dilation)

The kernels are ampy._C.conv2d_* (csrc/conv.c: im2col + ampy's GEMM with
fp32 accumulation, halves on the AVX512-BF16/AMX paths); conv1d runs them
with a height of 1, and so does conv_transpose1d with conv_transpose2d's
kernels. conv_transpose2d is the input gradient of the conv2d
whose weight it is given. Autocast: torch's lists put every convolution in
lower precision on cpu and cuda (defop applies them).

Backward: grad_input, grad_weight and grad_bias come from the fused kernels.
Under create_graph=True the rule is instead written in the ops themselves:
the input gradient of conv2d is conv_transpose2d and vice versa, and the
weight gradient is a conv2d of the batch-transposed input with the
batch-transposed gradient as its kernel (stride and dilation swapped, the
output cut to the kernel size), so the second derivative is exact.
"""
from .. import _C
from .. import _views as V
from .._dispatch import CPU_CUDA, backward, defop
from ..autograd._ops import O
from . import _ops_graph as G

__all__ = []


def _c(t):
    return t if t is None or t.is_contiguous() else t.contiguous()


def _as(g, dtype):
    g = g if g.dtype is dtype else _C.cast(g, dtype)
    return g if g.is_contiguous() else g.contiguous()


def _geom(stride, padding, dilation, groups):
    return (int(stride[0]), int(stride[1]), int(padding[0]), int(padding[1]),
            int(dilation[0]), int(dilation[1]), int(groups))


def _need(ctx, k):
    n = tuple(ctx.needs_input_grad)
    return len(n) > k and bool(n[k])


# ------------------------------------------------------------------ conv2d
@defop("conv2d", devices=CPU_CUDA, names=("ampy.nn.functional.conv2d",))
def conv2d_fwd(input, weight, bias, stride, padding, dilation, groups, out_size):
    """Cross-correlation of a 4-d input with a 4-d weight, plus bias."""
    geom = _geom(stride, padding, dilation, groups)
    return _C.conv2d_fwd(input, _c(weight), _c(bias), tuple(out_size), geom)


def _conv2d_grads(x, w, g, geom, need_x, need_w, need_b):
    gx = gw = gb = None
    g = _as(g, x.dtype)
    if need_x:
        gx = _C.conv2d_bwd_input(g, _c(w), None, tuple(x.shape), geom)
    if need_w:
        gw = _C.conv2d_bwd_weight(x, g, tuple(w.shape), geom)
    if need_b:
        gb = _C.conv_bwd_bias(g)
    return gx, gw, gb


def _conv2d_composite(ctx, g):
    x, w, b, stride, padding, dilation, groups, _ = ctx.args
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = O.conv_transpose2d(g, w, None, stride, padding, tuple(x.shape[2:]), groups,
                                dilation)
    if _need(ctx, 1):
        gw = weight_grad(x, g, tuple(w.shape), stride, padding, dilation, groups)
    if b is not None and _need(ctx, 2):
        gb = O.sum(g, (0, 2, 3))
    return gx, gw, gb, None, None, None, None, None


@backward("conv2d", save=(0, 1))
@G.with_graph(_conv2d_composite)
def conv2d_bwd(ctx, g):
    x, w, b, stride, padding, dilation, groups, _ = ctx.args
    gx, gw, gb = _conv2d_grads(x, w, g, _geom(stride, padding, dilation, groups),
                               _need(ctx, 0), _need(ctx, 1), b is not None and _need(ctx, 2))
    return gx, gw, gb, None, None, None, None, None


def weight_grad(x, g, wshape, stride, padding, dilation, groups):
    """d(conv2d(x, w))/dw for the output gradient g, in ops: with x as
    (Cg, G*N, H, W) and g as (G*Og, N, OH, OW), their grouped conv2d with
    stride and dilation swapped, cut to the kernel size, is dw transposed."""
    n, c = x.shape[0], x.shape[1]
    o = g.shape[1]
    cg, og = c // groups, o // groups
    xt = O.reshape(O.permute(O.reshape(x, (n, groups, cg) + tuple(x.shape[2:])),
                             (2, 1, 0, 3, 4)), (cg, groups * n) + tuple(x.shape[2:]))
    gt = O.reshape(O.permute(O.reshape(g, (n, groups, og) + tuple(g.shape[2:])),
                             (1, 2, 0, 3, 4)), (o, n) + tuple(g.shape[2:]))
    dwt = O.conv2d(xt, gt, None, dilation, padding, stride, groups, tuple(wshape[2:]))
    return O.permute(dwt, (1, 0, 2, 3))


# ------------------------------------------------------------------ conv1d
def _as4d(t):
    """(N, C, L) viewed as (N, C, 1, L)."""
    s = t.stride()
    return t._view((t.shape[0], t.shape[1], 1, t.shape[2]),
                   (s[0], s[1], s[2] * t.shape[2], s[2]), 0)


def _as3d(t):
    return V.reshape(t, (t.shape[0], t.shape[1], t.shape[3]))


def _geom1(stride, padding, dilation, groups):
    return (1, int(stride[0]), 0, int(padding[0]), 1, int(dilation[0]), int(groups))


@defop("conv1d", devices=CPU_CUDA, names=("ampy.nn.functional.conv1d",))
def conv1d_fwd(input, weight, bias, stride, padding, dilation, groups, out_size):
    """conv2d of the input viewed with a height of 1."""
    geom = _geom1(stride, padding, dilation, groups)
    y = _C.conv2d_fwd(_as4d(input), _as4d(_c(weight)), _c(bias), (1, int(out_size[0])), geom)
    return _as3d(y)


def _conv1d_composite(ctx, g):
    x, w, b, stride, padding, dilation, groups, _ = ctx.args
    gx = gw = gb = None
    if _need(ctx, 0):
        x4 = O.unsqueeze(g, 2)
        gx = O.squeeze(O.conv_transpose2d(x4, O.unsqueeze(w, 2), None, (1,) + tuple(stride),
                                          (0,) + tuple(padding), (1, x.shape[2]), groups,
                                          (1,) + tuple(dilation)), 2)
    if _need(ctx, 1):
        gw = O.squeeze(weight_grad(O.unsqueeze(x, 2), O.unsqueeze(g, 2),
                                   (w.shape[0], w.shape[1], 1, w.shape[2]), (1,) + tuple(stride),
                                   (0,) + tuple(padding), (1,) + tuple(dilation), groups), 2)
    if b is not None and _need(ctx, 2):
        gb = O.sum(g, (0, 2))
    return gx, gw, gb, None, None, None, None, None


@backward("conv1d", save=(0, 1))
@G.with_graph(_conv1d_composite)
def conv1d_bwd(ctx, g):
    x, w, b, stride, padding, dilation, groups, _ = ctx.args
    g4 = _as4d(_as(g, x.dtype))
    gx, gw, gb = _conv2d_grads(_as4d(x), _as4d(_c(w)), g4,
                               _geom1(stride, padding, dilation, groups), _need(ctx, 0),
                               _need(ctx, 1), b is not None and _need(ctx, 2))
    return (None if gx is None else _as3d(gx), None if gw is None else _as3d(gw), gb,
            None, None, None, None, None)


# -------------------------------------------------------- conv_transpose2d
@defop("conv_transpose2d", devices=CPU_CUDA, names=("ampy.nn.functional.conv_transpose2d",))
def conv_transpose2d_fwd(input, weight, bias, stride, padding, out_size, groups, dilation):
    """The input gradient of conv2d(., weight) for `input`, plus bias."""
    geom = _geom(stride, padding, dilation, groups)
    shape = (input.shape[0], weight.shape[1] * int(groups)) + tuple(int(s) for s in out_size)
    return _C.conv2d_bwd_input(_c(input), _c(weight), _c(bias), shape, geom)


def _conv_t_composite(ctx, g):
    x, w, b, stride, padding, _, groups, dilation = ctx.args
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = O.conv2d(g, w, None, stride, padding, dilation, groups, tuple(x.shape[2:]))
    if _need(ctx, 1):
        gw = weight_grad(g, x, tuple(w.shape), stride, padding, dilation, groups)
    if b is not None and _need(ctx, 2):
        gb = O.sum(g, (0, 2, 3))
    return gx, gw, gb, None, None, None, None, None


@backward("conv_transpose2d", save=(0, 1))
@G.with_graph(_conv_t_composite)
def conv_transpose2d_bwd(ctx, g):
    x, w, b, stride, padding, _, groups, dilation = ctx.args
    geom = _geom(stride, padding, dilation, groups)
    g = _as(g, x.dtype)
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = _C.conv2d_fwd(g, _c(w), None, tuple(x.shape[2:]), geom)
    if _need(ctx, 1):
        gw = _C.conv2d_bwd_weight(g, _c(x), tuple(w.shape), geom)
    if b is not None and _need(ctx, 2):
        gb = _C.conv_bwd_bias(g)
    return gx, gw, gb, None, None, None, None, None



# -------------------------------------------------------- conv_transpose1d
@defop("conv_transpose1d", devices=CPU_CUDA, names=("ampy.nn.functional.conv_transpose1d",))
def conv_transpose1d_fwd(input, weight, bias, stride, padding, out_size, groups, dilation):
    """conv_transpose2d of the input viewed with a height of 1."""
    geom = _geom1(stride, padding, dilation, groups)
    shape = (input.shape[0], weight.shape[1] * int(groups), 1, int(out_size[0]))
    y = _C.conv2d_bwd_input(_as4d(_c(input)), _as4d(_c(weight)), _c(bias), shape, geom)
    return _as3d(y)


def _conv_t1d_composite(ctx, g):
    x, w, b, stride, padding, _, groups, dilation = ctx.args
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = O.conv1d(g, w, None, stride, padding, dilation, groups, tuple(x.shape[2:]))
    if _need(ctx, 1):
        gw = O.squeeze(weight_grad(O.unsqueeze(g, 2), O.unsqueeze(x, 2),
                                   (w.shape[0], w.shape[1], 1, w.shape[2]), (1,) + tuple(stride),
                                   (0,) + tuple(padding), (1,) + tuple(dilation), groups), 2)
    if b is not None and _need(ctx, 2):
        gb = O.sum(g, (0, 2))
    return gx, gw, gb, None, None, None, None, None


@backward("conv_transpose1d", save=(0, 1))
@G.with_graph(_conv_t1d_composite)
def conv_transpose1d_bwd(ctx, g):
    x, w, b, stride, padding, _, groups, dilation = ctx.args
    geom = _geom1(stride, padding, dilation, groups)
    g4 = _as4d(_as(g, x.dtype))
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = _as3d(_C.conv2d_fwd(g4, _as4d(_c(w)), None, (1, x.shape[2]), geom))
    if _need(ctx, 1):
        gw = _as3d(_C.conv2d_bwd_weight(g4, _as4d(_c(x)), (w.shape[0], w.shape[1], 1,
                                                             w.shape[2]), geom))
    if b is not None and _need(ctx, 2):
        gb = _C.conv_bwd_bias(g4)
    return gx, gw, gb, None, None, None, None, None
