"""create_graph=True backward of the cnn ops (ampy/nn/_ops_cnn.py).

The fused backward kernels give numbers, not a graph. While the engine
records a backward (`_state.create_graph`: a gradient penalty, a
Hessian-vector product), each rule switches to a form that can be
differentiated again:

- the linear ops (pools, padding, interpolation) return their fused
  gradient through an `_Adjoint` node: the gradient of L^T g with respect to
  g is L itself, applied by dispatching the op's forward (max pooling gathers
  at the forward's argmax indices instead), so every order stays exact;
- batch_norm and group_norm compute their gradient from differentiable ops
  (torch's formulas, derivatives.yaml), halves in float32.
"""
from .. import _C
from .. import _dtype as D
from .._creation import arange
from .._dispatch import dispatch, get_op
from ..autograd._grad_mode import _state
from ..autograd._ops import O, upcast
from ..autograd.function import Function

__all__ = ["adjoint", "with_graph", "max_pool_apply", "batch_norm", "group_norm"]


class _Adjoint(Function):
    """y = transpose(g) for a linear op; its gradient is apply(gg)."""

    @staticmethod
    def forward(ctx, g, transpose, apply):
        ctx.apply = apply
        return transpose(g)

    @staticmethod
    def backward(ctx, gg):
        return ctx.apply(gg), None, None


def adjoint(apply):
    """Decorator for the fused rule of a linear op whose first output is dx:
    under create_graph the rule's dx becomes an _Adjoint node whose gradient
    is apply(ctx, gg)."""
    def wrap(fused):
        def rule(ctx, g):
            if not _state.create_graph:
                return fused(ctx, g)
            rest = (None,) * (len(ctx.args) - 1)
            dx = _Adjoint.apply(g, lambda gr: fused(ctx, gr)[0], lambda gg: apply(ctx, gg))
            return (dx,) + rest

        rule.__name__ = rule.__qualname__ = fused.__name__
        rule.__doc__ = fused.__doc__
        rule.__wrapped__ = fused
        return rule

    return wrap


def with_graph(composite):
    """Decorator for a fused rule: `composite` runs while a backward is recorded."""
    def wrap(fused):
        def rule(ctx, g):
            return composite(ctx, g) if _state.create_graph else fused(ctx, g)

        rule.__name__ = rule.__qualname__ = fused.__name__
        rule.__doc__ = fused.__doc__
        rule.__wrapped__ = fused
        return rule

    return wrap


def reapply(name):
    """apply(ctx, gg): the op `name` itself on gg with the node's other arguments."""
    def apply(ctx, gg):
        return dispatch(get_op(name), gg, *ctx.args[1:])
    return apply


def max_pool_apply(ctx, gg):
    """gg at the forward's argmax indices (the max pool as a linear map)."""
    x, _, _, saved = ctx.args
    idx = saved.a
    h, w = x.shape[-2], x.shape[-1]
    planes = idx.numel() // max(idx.shape[-1] * idx.shape[-2], 1) if idx.ndim >= 2 else 1
    flat = O.reshape(gg, (planes, h * w))
    rows = arange(planes, dtype=D.int64).reshape(planes, 1)
    return O.reshape(flat[rows, idx.reshape(planes, -1)], tuple(idx.shape))


def _need(ctx, k):
    n = tuple(ctx.needs_input_grad)
    return len(n) > k and bool(n[k])


def _bcast(v, ndim, c):
    return O.reshape(upcast(v), (1, c) + (1,) * (ndim - 2))


def _normalised_grad(gw, xhat, rstd, dims):
    """rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) over dims."""
    inner = O.sub(O.sub(gw, O.mean(gw, dims, keepdim=True)),
                  O.mul(xhat, O.mean(O.mul(gw, xhat), dims, keepdim=True)))
    return O.mul(rstd, inner)


def batch_norm(ctx, g):
    x, w, b, _, _, training, _, eps, saved = ctx.args
    c, nd = x.shape[1], x.ndim
    dims = (0,) + tuple(range(2, nd))
    x32, g32 = upcast(x), upcast(g)
    if training:
        mean = O.mean(x32, dims, keepdim=True)
        xc = O.sub(x32, mean)
        rstd = O.rsqrt(O.add(O.mean(O.mul(xc, xc), dims, keepdim=True), float(eps)))
    else:  # the running statistics: constants
        mean = _bcast(_C.cast(saved.a, x32.dtype), nd, c)
        rstd = _bcast(_C.cast(saved.b, x32.dtype), nd, c)
        xc = O.sub(x32, mean)
    xhat = O.mul(xc, rstd)
    gw = g32 if w is None else O.mul(g32, _bcast(w, nd, c))
    dx = dw = db = None
    if _need(ctx, 0):
        dx = _normalised_grad(gw, xhat, rstd, dims) if training else O.mul(gw, rstd)
    if w is not None and _need(ctx, 1):
        dw = O.sum(O.mul(g32, xhat), dims)
    if b is not None and _need(ctx, 2):
        db = O.sum(g32, dims)
    return dx, dw, db, None, None, None, None, None, None


def group_norm(ctx, g):
    x, groups, w, b, eps, _ = ctx.args
    n, c, nd = x.shape[0], x.shape[1], x.ndim
    shape = tuple(x.shape)
    x32, g32 = upcast(x), upcast(g)
    xr = O.reshape(x32, (n, groups, -1))
    mean = O.mean(xr, (2,), keepdim=True)
    xc = O.sub(xr, mean)
    rstd = O.rsqrt(O.add(O.mean(O.mul(xc, xc), (2,), keepdim=True), float(eps)))
    xhat = O.mul(xc, rstd)
    gw = g32 if w is None else O.mul(g32, _bcast(w, nd, c))
    dx = dw = db = None
    if _need(ctx, 0):
        dx = O.reshape(_normalised_grad(O.reshape(gw, (n, groups, -1)), xhat, rstd, (2,)),
                       shape)
    dims = (0,) + tuple(range(2, nd))
    if w is not None and _need(ctx, 2):
        dw = O.sum(O.mul(g32, O.reshape(xhat, shape)), dims)
    if b is not None and _need(ctx, 3):
        db = O.sum(g32, dims)
    return dx, None, dw, db, None, None
