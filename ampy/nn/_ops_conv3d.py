"""The 3-d convolution ops, conv3d and conv_transpose3d (forward, backward
rule, and the composite that create_graph=True differentiates), each run as
the 2-d kernels (ampy._C.conv2d_*, csrc/conv.c) with the depth unfolded into
the channels, so no 3-d kernel is needed.

Declared in the canonical form that nn.functional builds from torch's
arguments (ampy/nn/_conv_functional.py): stride, dilation and the padding BEFORE
the volume per spatial dim, and the output's spatial size:

    conv3d(input, weight, bias, stride, padding, dilation, groups, out_size)
    conv_transpose3d(input, weight, bias, stride, padding, out_size, groups, dilation)

conv3d: y[n, :, od] = sum over the depth taps kd of a 2-d convolution of the
input plane x[n, :, od*sd + kd*dd - pd] with w[:, :, kd]. The input is copied
once into X' = (N*Do, G*kD*Cg, H, W) (channels-last memory, which the 2-d
kernel reads in place): channel (g, kd, c) of image (n, od) is
x[n, g*Cg + c, od*sd + kd*dd - pd], zero outside the depth; the weight into
W' = (O, kD*Cg, kH, kW). One conv2d of X' with W' then sums the depth taps
inside its GEMM's K: float32 accumulation, the bias added in float32, ONE
rounding per output element, halves on the AVX512-BF16/AMX paths, and CUDA
through conv2d's twin. X' holds kD*Do/D times the input's elements.

conv_transpose3d (the input gradient of conv3d): output depth d receives
input depth i through tap kd when i*sd - pd + kd*dd = d. The output depths
with (d + pd) % sd == r see the taps K_r = {kd : kd*dd % sd == r}, input
depth i = j + (d0 + pd - kd*dd) / sd for the j-th of them (d0 the first),
so per residue r one conv2d input-gradient call over the unfolded input
(N*Dr, G*|K_r|*Cig, Hi, Wi) gives those depths; each output element comes
from one call (one rounding) and no zero tap is multiplied.

The weight gradient is conv2d's weight gradient of X' with the output
gradient as (N*Do, O, Ho, Wo): the batch, output depths and taps all summed
in float32, rounded once. Under create_graph=True the rule is written in the
ops themselves, as the 2-d one: the input gradient of conv3d is
conv_transpose3d and vice versa, and the weight gradient is a conv3d of the
batch-transposed input with the batch-transposed gradient as its kernel.
Autocast: torch's lists put conv3d and conv_transpose3d in lower precision on
cpu and cuda (defop applies them).
"""
from .. import _C
from .._creation import zeros
from .._dispatch import CPU_CUDA, backward, defop
from .._shape import contiguous_strides
from ..autograd._ops import O
from . import _ops_graph as G
from ._ops_conv import _as, _c, _need

__all__ = []

_NONE5 = (None,) * 5


def _geom2(stride, padding, dilation, groups):
    """The 2-d geometry of the height and width dims."""
    return (int(stride[1]), int(stride[2]), int(padding[1]), int(padding[2]),
            int(dilation[1]), int(dilation[2]), int(groups))


def _flat(t, shape):
    """A contiguous t viewed as `shape`."""
    return t._view(tuple(shape), contiguous_strides(tuple(shape)), 0)


def _copy(v):
    """A contiguous copy of the view v (in v's dimension order)."""
    return _C.cast(v, v.dtype)


def _pad_depth(x, before, after):
    if before or after:
        return _C.cnn_pad_fwd(_c(x), (0, 0, 0, 0, int(before), int(after)), 0, 0.0)
    return x


def _unfold(x, groups, k, s, p, d, do):
    """X' = (N*do, G*k*Cg, H, W), channels-last memory: channel (g, j, c) of
    image (n, od) holds x[n, g*Cg + c, od*s + j*d - p] (0 outside the depth)."""
    n, c, depth, h, w = x.shape
    cg = c // groups
    x = _pad_depth(x, p, max(0, (do - 1) * s + (k - 1) * d + 1 - p - depth))
    st = x.stride()
    u = _copy(x._view((n, do, h, w, groups, k, cg),
                      (st[0], s * st[2], st[3], st[4], cg * st[1], d * st[2], st[1]), 0))
    ct = groups * k * cg
    return u._view((n * do, ct, h, w), (h * w * ct, 1, w * ct, ct), 0)


def _wfold(w):
    """W' = (O, kD*Cg, kH, kW): W'[o, kd*Cg + c] = w[o, c, kd]."""
    o, cg, k, kh, kw = w.shape
    st = w.stride()
    return _flat(_copy(w._view((o, k, cg, kh, kw), (st[0], st[2], st[1], st[3], st[4]), 0)),
                 (o, k * cg, kh, kw))


def _to_rows(g):
    """(N, O, D, H, W) -> contiguous (N*D, O, H, W)."""
    n, o, d, h, w = g.shape
    st = g.stride()
    v = g._view((n, d, o, h, w), (st[0], st[2], st[1], st[3], st[4]), 0)
    return _flat(v if v.is_contiguous() else _copy(v), (n * d, o, h, w))


def _rows_view(y, n, d):
    """The contiguous (N*D, O, H, W) y viewed as (N, O, D, H, W)."""
    _, o, h, w = y.shape
    return y._view((n, o, d, h, w), (d * o * h * w, h * w, o * h * w, w, 1), 0)


def _forward(x, w, b, stride, padding, dilation, groups, out):
    do, ho, wo = (int(v) for v in out)
    xu = _unfold(x, groups, w.shape[2], int(stride[0]), int(padding[0]), int(dilation[0]), do)
    y = _C.conv2d_fwd(xu, _wfold(w), _c(b), (ho, wo), _geom2(stride, padding, dilation, groups))
    v = _rows_view(y, x.shape[0], do)
    return v if do == 1 else _copy(v)


def _wgrad(x, g, wshape, stride, padding, dilation, groups):
    """d(conv3d(x, w))/dw for the output gradient g (both of one dtype)."""
    o, cg, k, kh, kw = wshape
    xu = _unfold(x, groups, k, int(stride[0]), int(padding[0]), int(dilation[0]), g.shape[2])
    dw = _C.conv2d_bwd_weight(xu, _to_rows(g), (o, k * cg, kh, kw),
                              _geom2(stride, padding, dilation, groups))
    st = contiguous_strides((o, k, cg, kh, kw))
    return _copy(dw._view(tuple(wshape), (st[0], st[2], st[1], st[3], st[4]), 0))


# ------------------------------------------------------------------ conv3d
@defop("conv3d", devices=CPU_CUDA, names=("ampy.nn.functional.conv3d",))
def conv3d_fwd(input, weight, bias, stride, padding, dilation, groups, out_size):
    """Cross-correlation of a 5-d input with a 5-d weight, plus bias: one
    conv2d over the depth-unfolded input."""
    return _forward(input, weight, bias, stride, padding, dilation, groups, out_size)


def weight_grad3(x, g, wshape, stride, padding, dilation, groups):
    """d(conv3d(x, w))/dw in ops: with x as (Cg, G*N, D, H, W) and g as
    (G*Og, N, Do, Ho, Wo), their grouped conv3d with stride and dilation
    swapped, cut to the kernel size, is dw transposed."""
    n, c = x.shape[0], x.shape[1]
    o = g.shape[1]
    cg, og = c // groups, o // groups
    xs, gs = tuple(x.shape[2:]), tuple(g.shape[2:])
    xt = O.reshape(O.permute(O.reshape(x, (n, groups, cg) + xs), (2, 1, 0, 3, 4, 5)),
                   (cg, groups * n) + xs)
    gt = O.reshape(O.permute(O.reshape(g, (n, groups, og) + gs), (1, 2, 0, 3, 4, 5)),
                   (o, n) + gs)
    dwt = O.conv3d(xt, gt, None, dilation, padding, stride, groups, tuple(wshape[2:]))
    return O.permute(dwt, (1, 0, 2, 3, 4))


def _conv3d_composite(ctx, g):
    x, w, b, stride, padding, dilation, groups, _ = ctx.args
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = O.conv_transpose3d(g, w, None, stride, padding, tuple(x.shape[2:]), groups,
                                dilation)
    if _need(ctx, 1):
        gw = weight_grad3(x, g, tuple(w.shape), stride, padding, dilation, groups)
    if b is not None and _need(ctx, 2):
        gb = O.sum(g, (0, 2, 3, 4))
    return (gx, gw, gb) + _NONE5


@backward("conv3d", save=(0, 1))
@G.with_graph(_conv3d_composite)
def conv3d_bwd(ctx, g):
    x, w, b, stride, padding, dilation, groups, _ = ctx.args
    g = _as(g, x.dtype)
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = _transpose(g, w, None, stride, padding, tuple(x.shape[2:]), groups, dilation)
    if _need(ctx, 1):
        gw = _wgrad(x, g, tuple(w.shape), stride, padding, dilation, groups)
    if b is not None and _need(ctx, 2):
        gb = _C.conv_bwd_bias(g)
    return (gx, gw, gb) + _NONE5


# -------------------------------------------------------- conv_transpose3d
def _class_input(t, taps, d0, dr, k_geom, groups):
    """The input of residue class (taps, d0, dr) unfolded: contiguous
    (N*dr, G*M*Cig, Hi, Wi), channel (g, m, ci) of image (n, j) holding
    t[n, g*Cig + ci, j + (d0 + p - taps[m]*d) / s] (0 outside the depth);
    taps in descending order, so the depth offset grows by q per tap."""
    s, p, d = k_geom
    n, cin, di, hi, wi = t.shape
    cig, m = cin // groups, len(taps)
    base = [(d0 + p - kd * d) // s for kd in taps]
    q = base[1] - base[0] if m > 1 else 0
    lo, hi_pad = max(0, -base[0]), max(0, base[-1] + dr - di)
    t = _pad_depth(t, lo, hi_pad)
    st = t.stride()
    u = _copy(t._view((n, dr, groups, m, cig, hi, wi),
                      (st[0], st[2], cig * st[1], q * st[2], st[1], st[3], st[4]),
                      (base[0] + lo) * st[2]))
    return _flat(u, (n * dr, groups * m * cig, hi, wi))


def _class_weight(w, taps, groups):
    """(G*M*Cig, Cog, kH, kW): row (g, m, ci) is w[g*Cig + ci, :, taps[m]]
    (taps descending, evenly spaced)."""
    cin, cog, _, kh, kw = w.shape
    cig, m = cin // groups, len(taps)
    st = w.stride()
    step = taps[0] - taps[1] if m > 1 else 0
    v = w._view((groups, m, cig, cog, kh, kw),
                (cig * st[0], -step * st[2], st[0], st[1], st[3], st[4]), taps[0] * st[2])
    return _flat(_copy(v), (groups * m * cig, cog, kh, kw))


def _empty(shape, like):
    if like._device_index < 0:
        return _C.empty(shape, like.dtype)
    return _C._empty_device(shape, like.dtype, like._device_index)


def _classes(k, s, p, d, dout):
    """[(taps descending, d0, dr)] per residue class of the output depths."""
    out = []
    for r in range(s):
        d0 = (r - p) % s
        if d0 < dout:
            out.append(([kd for kd in range(k - 1, -1, -1) if (kd * d) % s == r], d0,
                        (dout - d0 + s - 1) // s))
    return out


def _transpose(t, w, b, stride, padding, out, groups, dilation):
    """conv_transpose3d(t, w) + b with the output's spatial size `out`."""
    n = t.shape[0]
    cout = w.shape[1] * groups
    k, s, p, d = w.shape[2], int(stride[0]), int(padding[0]), int(dilation[0])
    dout, ho, wo = (int(v) for v in out)
    geom = _geom2(stride, padding, dilation, groups)
    classes = _classes(k, s, p, d, dout)
    shape = (n, cout, dout, ho, wo)
    if any(not taps for taps, _, _ in classes):  # depths no tap reaches: the bias, or 0
        y = zeros(shape, dtype=t.dtype, device=t.device) if b is None else _empty(shape, t)
    else:
        y = None if s == 1 else _empty(shape, t)
    for taps, d0, dr in classes:
        if y is not None:
            ys = y.stride()
            dst = y._view((n, cout, dr, ho, wo), (ys[0], ys[1], s * ys[2], ys[3], ys[4]),
                          d0 * ys[2])
        if not taps:
            if b is not None:
                _C.copy_(dst, _c(b)._view((cout, 1, 1, 1), (1, 0, 0, 0), 0))
            continue
        part = _C.conv2d_bwd_input(_class_input(t, taps, d0, dr, (s, p, d), groups),
                                   _class_weight(w, taps, groups), _c(b),
                                   (n * dr, cout, ho, wo), geom)
        v = _rows_view(part, n, dr)
        if y is None:  # unit depth stride: one class, the whole output
            return v if dr == 1 else _copy(v)
        _C.copy_(dst, v)
    return y


@defop("conv_transpose3d", devices=CPU_CUDA, names=("ampy.nn.functional.conv_transpose3d",))
def conv_transpose3d_fwd(input, weight, bias, stride, padding, out_size, groups, dilation):
    """The input gradient of conv3d(., weight) for `input`, plus bias."""
    return _transpose(input, weight, bias, stride, padding, out_size, groups, dilation)


def _conv_t3d_composite(ctx, g):
    x, w, b, stride, padding, _, groups, dilation = ctx.args
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = O.conv3d(g, w, None, stride, padding, dilation, groups, tuple(x.shape[2:]))
    if _need(ctx, 1):
        gw = weight_grad3(g, x, tuple(w.shape), stride, padding, dilation, groups)
    if b is not None and _need(ctx, 2):
        gb = O.sum(g, (0, 2, 3, 4))
    return (gx, gw, gb) + _NONE5


@backward("conv_transpose3d", save=(0, 1))
@G.with_graph(_conv_t3d_composite)
def conv_transpose3d_bwd(ctx, g):
    x, w, b, stride, padding, _, groups, dilation = ctx.args
    g = _as(g, x.dtype)
    gx = gw = gb = None
    if _need(ctx, 0):
        gx = _forward(g, w, None, stride, padding, dilation, groups, tuple(x.shape[2:]))
    if _need(ctx, 1):
        gw = _wgrad(g, x, tuple(w.shape), stride, padding, dilation, groups)
    if b is not None and _need(ctx, 2):
        gb = _C.conv_bwd_bias(g)
    return (gx, gw, gb) + _NONE5
