"""The volume pool ops in the op table: max_pool3d (and
max_pool3d_with_indices, the same op under torch's second name), avg_pool3d,
adaptive_avg_pool3d and adaptive_max_pool2d, each a forward (one call into
csrc/cnn_pool3d.c) and its backward rule.

The names are torch's ATen names, so `defop` gives each torch's autocast
policy: on the CPU max_pool3d, avg_pool3d and adaptive_avg_pool3d run in
float32, max_pool3d_with_indices (F.max_pool3d(return_indices=True)) and
adaptive_max_pool2d in their input's dtype. The kernels have no CUDA twin:
the ops are declared CPU-only and ampy/cuda/_fallback.py runs them on the
host for CUDA tensors.

A max pool's backward is the 2-d max pool's scatter (cnn_max_pool2d_bwd)
with each volume read as a 1 x D*H*W plane: its indices are flat in the
volume. Arguments arrive checked by ampy/nn/_functional_pool.py; windows
as 12-tuples (kernel, stride, padding, dilation; each depth, height,
width).
"""
from .. import _C
from .. import _dtype as D
from .. import _views as V
from .._creation import arange
from .._dispatch import CPU, backward, defop
from ..autograd._ops import O
from . import _ops_cnn_graph as G

__all__ = []


def _c(t):
    return t if t.is_contiguous() else t.contiguous()


def _g(g, dtype):
    g = g if g.dtype is dtype else _C.cast(g, dtype)
    return g if g.is_contiguous() else g.contiguous()


def _win(window):
    w = tuple(int(v) for v in window)
    return w[0:3], w[3:6], w[6:9], w[9:12]


def _planes(t, k):
    """t's leading dims (all but the last k) multiplied."""
    n = 1
    for s in t.shape[:t.ndim - k]:
        n *= s
    return n


def _scatter(g, idx, x, k):
    """dx of a max pool over the last k dims of x: g added at the flat indices."""
    p, iv = _planes(x, k), 1
    for s in x.shape[x.ndim - k:]:
        iv *= s
    ov = g.numel() // p if p else 0
    dx = _C.cnn_max_pool2d_bwd(V.reshape(_g(g, x.dtype), (p, 1, ov)),
                               V.reshape(idx, (p, 1, ov)), 1, iv)
    return V.reshape(dx, tuple(x.shape))


def _gather_apply(k):
    """apply(ctx, gg) of a max pool as a linear map: gg at the argmax indices."""
    def apply(ctx, gg):
        x, idx = ctx.args[0], ctx.args[-1].a
        p, iv = _planes(x, k), 1
        for s in x.shape[x.ndim - k:]:
            iv *= s
        flat = O.reshape(gg, (p, iv))
        rows = arange(p, dtype=D.int64).reshape(p, 1)
        return O.reshape(flat[rows, idx.reshape(p, -1)], tuple(idx.shape))
    return apply


# ---------------------------------------------------------------- max_pool3d
def _max_pool3d_fwd(input, window, out_dhw, saved):
    """The largest element of each window; saved.a gets the argmax indices."""
    k, s, p, d = _win(window)
    y, idx = _C.cnn_max_pool3d_fwd(_c(input), k, s, p, d, tuple(int(v) for v in out_dhw))
    saved.a = idx
    return y


def _max_pool3d_bwd(ctx, g):
    x, _, _, saved = ctx.args
    return _scatter(g, saved.a, x, 3), None, None, None


for _name in ("max_pool3d", "max_pool3d_with_indices"):
    defop(_name, devices=CPU, names=("ampy.nn.functional.max_pool3d",))(_max_pool3d_fwd)
    backward(_name, save=(0,))(G.adjoint(_gather_apply(3))(_max_pool3d_bwd))


# ---------------------------------------------------------------- avg_pool3d
@defop("avg_pool3d", devices=CPU, names=("ampy.nn.functional.avg_pool3d",))
def avg_pool3d_fwd(input, window, out_dhw, count_include_pad, divisor_override):
    """The mean of each window (torch's divisor rule). Half inputs raise as
    torch's CPU kernel does (here, after autocast has cast them to float32)."""
    if input.dtype in (D.float16, D.bfloat16):
        name = "Half" if input.dtype is D.float16 else "BFloat16"
        raise NotImplementedError(f'"avg_pool3d_out_frame" not implemented for \'{name}\'')
    k, s, p, _ = _win(window)
    return _C.cnn_avg_pool3d_fwd(_c(input), k, s, p, tuple(int(v) for v in out_dhw),
                                 bool(count_include_pad), int(divisor_override or 0))


@backward("avg_pool3d", save=(0,))
@G.adjoint(G.reapply("avg_pool3d"))
def avg_pool3d_bwd(ctx, g):
    x, window, _, inc, div = ctx.args
    k, s, p, _ = _win(window)
    dx = _C.cnn_avg_pool3d_bwd(_g(g, x.dtype), k, s, p, tuple(x.shape[-3:]), bool(inc),
                               int(div or 0))
    return dx, None, None, None, None


# ------------------------------------------------------- adaptive_avg_pool3d
@defop("adaptive_avg_pool3d", devices=CPU, names=("ampy.nn.functional.adaptive_avg_pool3d",))
def adaptive_avg_pool3d_fwd(input, out_dhw):
    """The mean of each adaptive window (floor(i D / OD) to ceil((i+1) D / OD) per dim)."""
    return _C.cnn_adaptive_avg_pool3d_fwd(_c(input), tuple(int(v) for v in out_dhw))


@backward("adaptive_avg_pool3d", save=(0,))
@G.adjoint(G.reapply("adaptive_avg_pool3d"))
def adaptive_avg_pool3d_bwd(ctx, g):
    x = ctx.args[0]
    return _C.cnn_adaptive_avg_pool3d_bwd(_g(g, x.dtype), tuple(x.shape[-3:])), None


# ------------------------------------------------------- adaptive_max_pool2d
@defop("adaptive_max_pool2d", devices=CPU, names=("ampy.nn.functional.adaptive_max_pool2d",))
def adaptive_max_pool2d_fwd(input, out_hw, saved):
    """The largest element of each adaptive window (the volume kernel with
    depth 1); saved.a gets the flat argmax indices ih * W + iw."""
    x = _c(input)
    shape = tuple(x.shape)
    x3 = V.reshape(x, shape[:-2] + (1,) + shape[-2:])
    y, idx = _C.cnn_adaptive_max_pool3d_fwd(x3, (1, int(out_hw[0]), int(out_hw[1])))
    out = shape[:-2] + (int(out_hw[0]), int(out_hw[1]))
    saved.a = V.reshape(idx, out)
    return V.reshape(y, out)


@backward("adaptive_max_pool2d", save=(0,))
@G.adjoint(_gather_apply(2))
def adaptive_max_pool2d_bwd(ctx, g):
    x, _, saved = ctx.args
    return _scatter(g, saved.a, x, 2), None, None
