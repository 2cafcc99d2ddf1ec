"""create_graph=True backward of the fused nn ops (ampy/nn/_ops.py).

The fused backward kernels give numbers, not a graph: under
`autograd.grad(..., create_graph=True)` (a gradient penalty, a Hessian-vector
product) their result would be a constant, and the second derivative would be
silently wrong. While the engine records the backward (`_state.create_graph`),
each op's rule here computes the same gradient from differentiable ampy ops
(`O.*`, which dispatch and record then), so it can be differentiated again.
Outside create_graph the fused kernels run as before.

The formulas are torch's (derivatives.yaml / the composite losses): halves
compute in float32 as the fused kernels do; the engine casts the result back.
"""
import math

from .. import _C
from .. import _dtype as D
from .. import _C
from .._creation import arange
from ..autograd._grad_mode import _state
from ..autograd._ops import O, upcast
from ..autograd.function import Function

__all__ = ["with_graph"]

_ROW = (1,)


def _need(ctx, k):
    n = tuple(ctx.needs_input_grad)
    return len(n) > k and bool(n[k])


# ---------------------------------------------------------------- layer_norm
def layer_norm(ctx, g):
    x, shape, w, b = (tuple(ctx.args) + (None,) * 6)[:4]
    eps = ctx.args[4] if len(ctx.args) > 4 else 1e-5
    shp = tuple(shape)
    n = math.prod(shp)
    xr = O.reshape(upcast(x), (-1, n))
    gr = O.reshape(upcast(g), (-1, n))
    mean = O.mean(xr, _ROW, keepdim=True)
    xc = O.sub(xr, mean)
    rstd = O.rsqrt(O.add(O.mean(O.mul(xc, xc), _ROW, keepdim=True), float(eps)))
    xhat = O.mul(xc, rstd)
    dx = dw = db = None
    if _need(ctx, 0):
        gw = gr if w is None else O.mul(gr, O.reshape(upcast(w), (n,)))
        inner = O.sub(O.sub(gw, O.mean(gw, _ROW, keepdim=True)),
                      O.mul(xhat, O.mean(O.mul(gw, xhat), _ROW, keepdim=True)))
        dx = O.reshape(O.mul(rstd, inner), tuple(x.shape))
    if w is not None and _need(ctx, 2):
        dw = O.reshape(O.sum(O.mul(gr, xhat), 0), shp)
    if b is not None and _need(ctx, 3):
        db = O.reshape(O.sum(gr, 0), shp)
    return dx, None, dw, db, None, None


# ------------------------------------------------- cross_entropy / nll_loss
def _onehot(t, c, ignore, dtype):
    """(M, C) float: 1 at each row's target class, rows of ignore_index 0."""
    cls = arange(c, dtype=D.int64)
    if t._device_index >= 0:
        cls = O.to_device(cls, t.device)
    cls = O.reshape(cls, (1, c))
    hit = O.logical_and(O.eq(cls, O.reshape(t, (-1, 1))), O.reshape(O.ne(t, ignore), (-1, 1)))
    return O.to_dtype(hit, dtype)


def _row_weight(onehot, w):
    """weight[target] per row (0 for ignored rows), as (M, 1)."""
    if w is None:
        return O.sum(onehot, _ROW, keepdim=True)
    return O.sum(O.mul(onehot, O.reshape(upcast(w), (1, -1))), _ROW, keepdim=True)


def _per_row(g, red):
    """The incoming gradient shaped to scale (M, C) rows."""
    return O.reshape(upcast(g), (-1, 1)) if red == _C.NN_REDUCTION_NONE else upcast(g)


def _target_matrix(x, t, w, ignore, red, ls):
    """T with loss = -sum(T * log_softmax(x)) (T constant): the nll part at
    the target classes plus the label-smoothing part spread over all
    classes, each normalised as torch's cross_entropy does."""
    c = x.shape[1]
    dt = D.float32 if x.dtype in (D.float16, D.bfloat16) else x.dtype
    onehot = _onehot(t, c, ignore, dt)
    wt = _row_weight(onehot, w)
    nll = O.mul(onehot, O.mul(wt, 1.0 - ls))
    total = O.sum(wt) if red == _C.NN_REDUCTION_MEAN else None
    if red == _C.NN_REDUCTION_MEAN:
        nll = O.div(nll, total)
    if ls == 0:
        return nll
    valid = O.sum(onehot, _ROW, keepdim=True)  # 1 for rows not ignored
    smooth = O.mul(valid, ls / c)
    if w is not None:
        smooth = O.mul(smooth, O.reshape(upcast(w), (1, -1)))
    if red == _C.NN_REDUCTION_MEAN:  # (without weight, total: the rows not ignored)
        smooth = O.div(smooth, total)
    return O.add(nll, smooth)


def cross_entropy(ctx, g):
    x, t, w, ignore, red, ls = ctx.args[:6]
    if not _need(ctx, 0):
        return (None,) * 7
    tm = _target_matrix(x, t, w, int(ignore), int(red), float(ls))
    p = O.softmax(upcast(x), 1)
    dx = O.mul(_per_row(g, red), O.sub(O.mul(p, O.sum(tm, _ROW, keepdim=True)), tm))
    return dx, None, None, None, None, None, None


def nll_loss(ctx, g):
    x, t, w, ignore, red = ctx.args[:5]
    if not _need(ctx, 0):
        return (None,) * 5
    dt = D.float32 if x.dtype in (D.float16, D.bfloat16) else x.dtype
    onehot = _onehot(t, x.shape[1], int(ignore), dt)
    coef = onehot if w is None else O.mul(onehot, O.reshape(upcast(w), (1, -1)))
    if int(red) == 1:
        coef = O.div(coef, O.sum(coef))
    return O.neg(O.mul(_per_row(g, int(red)), coef)), None, None, None, None


# ----------------------------------------------------------------- embedding
def embedding(ctx, g):
    w, idx, pad = ctx.args
    if not _need(ctx, 0):
        return None, None, None
    return _EmbeddingGrad.apply(g, idx, w.shape[0], pad, w.dtype), None, None


def _embedding_grad_class():
    class EmbeddingGrad(Function):
        """dW = rows of g summed into their index (padding row zero); its
        own gradient is the lookup of the incoming rows."""

        @staticmethod
        def forward(ctx, g, idx, num, pad, dtype):
            ctx.idx, ctx.pad = idx, pad
            gc = g if g.dtype is dtype else _C.cast(g, dtype)
            gc = gc if gc.is_contiguous() else gc.contiguous()
            return _C.nn_embedding_bwd(idx if idx.is_contiguous() else idx.contiguous(), gc,
                                       num, -1 if pad is None else pad)

        @staticmethod
        def backward(ctx, gg):
            if ctx.pad is not None:
                gg = O.setitem(O.clone(gg), ctx.pad, 0)
            return O.embedding(gg, ctx.idx, None), None, None, None, None

    return EmbeddingGrad


_EmbeddingGrad = _embedding_grad_class()


# ---------------------------------------------------------- dropout, mse_loss
def dropout(ctx, g):
    _, mask, scale = ctx.args
    return O.dropout(g, mask, scale), None, None  # recorded: its own rule again


def mse_loss(ctx, g):
    x, y, red = ctx.args
    diff = O.sub(x, y)
    coef = 2.0 / math.prod(x.shape) if int(red) == 1 else 2.0
    dx = O.mul(O.mul(g, coef), diff)
    return (dx if _need(ctx, 0) else None), (O.neg(dx) if _need(ctx, 1) else None), None


# ------------------------------------------------------------- the switch
def with_graph(composite):
    """Decorator for a fused rule of ampy/nn/_ops.py: the rule runs the fused
    kernel, or `composite` while the backward is being recorded."""
    def wrap(fused):
        def rule(ctx, g):
            if _state.create_graph:
                return composite(ctx, g)
            return fused(ctx, g)

        rule.__name__ = rule.__qualname__ = fused.__name__
        rule.__doc__ = fused.__doc__
        rule.__wrapped__ = fused
        return rule

    return wrap
