"""Backward rules of the tensor ops in ampy/_sorting.py, ampy/_scatter.py and
ampy/_tril.py, written in ops so that create_graph=True differentiates them.

sort/topk send each gradient element back to the position its value came
from (a scatter into zeros along dim); gather's gradient is scatter_add of
the incoming gradient (repeated indices add up); scatter's and scatter_add's
src gradients gather the incoming gradient at the index; masked_fill's
gradient is zero where the value was written (and their sum goes to a 0-d
value tensor); tril/triu keep the gradient's own triangle.
"""
from .._dispatch import backward
from ._ops import O, sum_to, zeros


def _arg(ctx, i, name, default=None):
    a = ctx.args
    if len(a) > i:
        return a[i]
    kw = ctx.kwargs
    return kw.get(name, default) if kw else default


def _zero(g):
    return zeros((), g.dtype, g)


def _to_positions(shape, dim, indices, g):
    """zeros of `shape` with g[c] at c with c[dim] = indices[c]."""
    return O.scatter(zeros(shape, g.dtype, g), dim, indices, g)


@backward("sort", save=(), save_out=True)
def _sort(ctx, *grads):
    x = ctx.args[0]
    return (_to_positions(tuple(x.shape), _arg(ctx, 1, "dim", -1), ctx.out[1], grads[0]),)


@backward("topk", save=(), save_out=True)
def _topk(ctx, *grads):
    x = ctx.args[0]
    return (_to_positions(tuple(x.shape), _arg(ctx, 2, "dim", -1), ctx.out[1], grads[0]),)


def _pad_to(t, shape):
    """t (a leading block of `shape`) padded with zeros to `shape`."""
    for d, n in enumerate(shape):
        if t.shape[d] < n:
            rest = tuple(n - t.shape[d] if k == d else s for k, s in enumerate(t.shape))
            t = O.cat([t, zeros(rest, t.dtype, t)], d)
    return t


def _src_grad(g, dim, index, src):
    if g.numel() == 0:  # nothing was written (an empty input): no index is read
        return zeros(tuple(src.shape), g.dtype, g)
    gs = O.gather(g, dim, index)
    return _pad_to(gs, tuple(src.shape)) if tuple(gs.shape) != tuple(src.shape) else gs


@backward("gather", save=(0, 2))  # (input: version-checked, as torch saves it)
def _gather(ctx, g):
    x, dim, index = ctx.args[:3]
    return O.scatter_add(zeros(tuple(x.shape), g.dtype, g), dim, index, g), None, None


@backward("scatter", save=(2,))
def _scatter(ctx, g):
    _, dim, index, src = ctx.args[:4]
    if _arg(ctx, 4, "reduce") is not None:
        raise RuntimeError("derivative for aten::scatter is not implemented")
    need = ctx.needs_input_grad
    gx = gs = None
    if need[0]:
        gx = O.scatter(g, dim, index, O.expand(_zero(g), tuple(index.shape)))
    if len(need) > 3 and need[3]:
        gs = _src_grad(g, dim, index, src)
    return gx, None, None, gs


@backward("scatter_add", save=(2,))
def _scatter_add(ctx, g):
    _, dim, index, src = ctx.args[:4]
    need = ctx.needs_input_grad
    gs = _src_grad(g, dim, index, src) if len(need) > 3 and need[3] else None
    return g, None, None, gs


@backward("masked_fill", save=(1,))
def _masked_fill(ctx, g):
    x, mask, value = ctx.args[:3]
    need = ctx.needs_input_grad
    gx = sum_to(O.where(mask, _zero(g), g), tuple(x.shape)) if need[0] else None
    gv = None
    if len(need) > 2 and need[2]:
        gv = O.sum(O.where(mask, g, _zero(g)))
    return gx, None, gv


@backward("tril", save=())
def _tril(ctx, g):
    return (O.tril(g, _arg(ctx, 1, "diagonal", 0)),)


@backward("triu", save=())
def _triu(ctx, g):
    return (O.triu(g, _arg(ctx, 1, "diagonal", 0)),)


# ---- scatter_reduce: torch's scatter_reduce_backward -----------------------------
def _index_block(t, index):
    """t's leading block of index's shape (src may be larger than index)."""
    if tuple(t.shape) == tuple(index.shape):
        return t
    return t[tuple(slice(0, n) for n in index.shape)]


def _reduce_grads(reduce, x, dim, index, src, include_self, out, g):
    """(grad_self, grad_src of index's shape) as torch's scatter_reduce_backward."""
    if reduce == "sum":
        return g, O.gather(g, dim, index)
    if reduce == "mean":
        n = O.scatter_add(zeros(tuple(g.shape), g.dtype, g) if not include_self
                          else O.add(zeros(tuple(g.shape), g.dtype, g), 1), dim, index,
                          O.add(zeros(tuple(index.shape), g.dtype, g), 1))
        n = O.masked_fill(n, O.eq(n, 0), 1)
        return O.div(g, n), O.div(O.gather(g, dim, index), O.gather(n, dim, index))
    if reduce == "prod":
        masked_x = O.masked_fill(x, O.eq(x, 0), 1)
        masked_x_out = O.scatter_reduce(masked_x, dim, index, src, "prod", include_self)
        gx = O.div(O.mul(g, masked_x_out), masked_x)
        src_zero = O.eq(src, 0)
        zeros_at = O.gather(O.scatter_add(zeros(tuple(x.shape), x.dtype, x), dim, index,
                                          O.to_dtype(src_zero, x.dtype)), dim, index)
        single = O.logical_and(src_zero, O.eq(zeros_at, 1))
        masked_src_out = O.scatter_reduce(x, dim, index, O.masked_fill(src, single, 1), "prod",
                                          include_self)
        gs = O.where(single, O.gather(O.mul(g, masked_src_out), dim, index),
                     O.div(O.gather(O.mul(g, out), dim, index), O.masked_fill(src, src_zero, 1)))
        return gx, gs
    value = O.gather(out, dim, index)  # amax / amin: split evenly among the ties
    x_is = O.to_dtype(O.eq(x, out), x.dtype)
    src_is = O.to_dtype(O.eq(src, value), x.dtype)
    spread = O.div(g, O.scatter_add(x_is, dim, index, src_is))
    return O.mul(x_is, spread), O.mul(src_is, O.gather(spread, dim, index))


@backward("scatter_reduce", save=(0, 2, 3), save_out=True)
def _scatter_reduce(ctx, g):
    x, dim, index, src, reduce = ctx.args[:5]
    include_self = _arg(ctx, 5, "include_self", True)
    need = ctx.needs_input_grad
    if g.numel() == 0:
        gx, gs = g, zeros(tuple(index.shape), g.dtype, g)
    else:
        gx, gs = _reduce_grads(reduce, x, dim, index, _index_block(src, index), include_self,
                               ctx.out[0], g)
    if not include_self:
        gx = O.scatter(gx, dim, index, O.expand(_zero(g), tuple(index.shape)))
    gs = _pad_to(gs, tuple(src.shape)) if tuple(gs.shape) != tuple(src.shape) else gs
    return (gx if need[0] else None), None, None, (gs if len(need) > 3 and need[3] else None)
