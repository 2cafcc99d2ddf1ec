"""Backward rules of the ops in ampy/_tensor.py: views, casts, copies, indexing.

A view's gradient is the incoming gradient given the input's shape back:
reshaped, transposed back, summed over expanded dims, or scattered into zeros
for narrow/select/getitem. Casts are differentiable: the gradient is cast back
to the input's dtype (so an fp32 parameter used in fp16 gets an fp32 .grad).

Advanced indexing with repeated indices must accumulate (x[[0, 0]] sends
twice the gradient to x[0]): `index_put_accumulate` below is one call of
libampy's ampy_index_put_accumulate (index.h), which adds every repeat in
index order, as torch's CPU index_put_(accumulate=True).
"""
from .. import _C
from .. import _dtype as D
from .. import _indexing
from .._creation import arange
from .._dispatch import backward
from ._ops import O, detached, sum_to, wrap_dim, zeros
from .function import Function


@backward("view", "reshape", "flatten", "unsqueeze", "squeeze", save=(), is_view=True)
def _reshape_back(ctx, g):
    return (O.reshape(g, tuple(ctx.args[0].shape)),)


@backward("transpose", save=(), is_view=True)
def _transpose_back(ctx, g):
    _, d0, d1 = ctx.args
    return (O.transpose(g, d0, d1),)


@backward("permute", save=(), is_view=True)
def _permute_back(ctx, g):
    x, dims = ctx.args
    if len(dims) == 1 and not isinstance(dims[0], int):
        dims = tuple(dims[0])
    n = x.ndim
    inv = [0] * n
    for i, d in enumerate(dims):
        inv[wrap_dim(d, n)] = i
    return (O.permute(g, tuple(inv)),)


@backward("expand", save=(), is_view=True)
def _expand_back(ctx, g):
    return (sum_to(g, ctx.args[0].shape),)


@backward("narrow", save=(), is_view=True)
def _narrow_back(ctx, g):
    x, dim, start, length = ctx.args
    d = wrap_dim(dim, x.ndim)
    start = start.item() if hasattr(start, "item") else start
    if start < 0:
        start += x.shape[d]
    key = (slice(None),) * d + (slice(start, start + length),)
    return (_scatter_into_zeros(x, key, g),)


@backward("select", save=(), is_view=True)
def _select_back(ctx, g):
    x, dim, index = ctx.args
    d = wrap_dim(dim, x.ndim)
    return (_scatter_into_zeros(x, (slice(None),) * d + (index,), g),)


@backward("getitem", save=(1,), is_view=True)  # (index tensors: version-checked)
def _getitem_back(ctx, g):
    x, key = ctx.args
    if not _is_advanced(key):  # a view: each element at most once (torch's zeros + copy_)
        return (_scatter_into_zeros(x, key, g), None)
    if g._requires_grad:  # create_graph=True: a recorded scatter
        return (_index_put_graph().apply(g, tuple(x.shape), key), None)
    return (index_put_accumulate(zeros(x.shape, g.dtype, g), key, g), None)


_INDEX_PUT = []


def _index_put_graph():
    """zeros(shape)[key] += g as a custom Function, so that create_graph=True
    backward through advanced indexing can be differentiated again: its own
    gradient is gg[key]."""
    if not _INDEX_PUT:
        class IndexPutAccumulate(Function):
            @staticmethod
            def forward(ctx, g, shape, key):
                ctx.key = key
                return index_put_accumulate(zeros(shape, g.dtype, g), key, detached(g))

            @staticmethod
            def backward(ctx, gg):
                return O.getitem(gg, ctx.key), None, None

        _INDEX_PUT.append(IndexPutAccumulate)
    return _INDEX_PUT[0]


def _scatter_into_zeros(x, key, g):
    z = zeros(x.shape, g.dtype, g)
    return O.setitem(z, key, g)


@backward("setitem", save=(1,), inplace=True)
def _setitem_back(ctx, g):
    x, key, value = ctx.args
    gx = O.setitem(O.clone(g), key, 0) if ctx.needs_input_grad[0] else None
    gv = None
    if hasattr(value, "shape") and value.dtype.is_floating_point:
        gv = O.getitem(g, key)
        vshape = tuple(value.shape)
        if len(vshape) > gv.ndim:  # value had extra leading 1s
            gv = O.reshape(gv, (1,) * (len(vshape) - gv.ndim) + tuple(gv.shape))
        gv = sum_to(gv, vshape)
    return gx, None, gv


@backward("to_dtype", save=())
def _to_dtype_back(ctx, g):
    x = ctx.args[0]
    return (O.to_dtype(g, x.dtype) if g.dtype is not x.dtype else g, None)


@backward("to_device", save=())
def _to_device_back(ctx, g):
    return (O.to_device(g, ctx.args[0].device), None)


@backward("clone", save=())
def _clone_back(ctx, g):
    return (g,)


@backward("copy_", save=(), inplace=True)
def _copy_back(ctx, g):
    dst, src = ctx.args
    gdst = zeros(dst.shape, dst.dtype, g) if ctx.needs_input_grad[0] else None
    gsrc = g if hasattr(src, "shape") and src.dtype.is_floating_point else None
    return gdst, gsrc


# ------------------------------------------------- indexing with accumulation
def _is_advanced(key):
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        if isinstance(k, (list, _C.TensorBase)) or type(k).__name__ == "ndarray":
            return True
    return False


def accumulate_plan(z, key, g):
    """The first half of z[key] += g for an advanced key (index_put_accumulate):
    (perm, k, idx, v) with perm the view of z written through its k index
    dims (first), idx the k index tensors of P rows, and v = g laid out as
    [P, rest...]; None when there are no rows."""
    if g.requires_grad:
        raise NotImplementedError("create_graph=True through advanced indexing is not "
                                  "supported by ampy's autograd (no differentiable "
                                  "index_put with accumulate)")
    perm, idx, bshape, place = _indexing.index_plan(z, key)
    nb = len(bshape)
    k = len(idx)
    rest = list(perm.shape[k:])
    # g is laid out like the getitem result: bring it to [P, rest...]
    if place:
        order = list(range(place, place + nb)) + list(range(place)) + \
            list(range(place + nb, g.ndim))
        g = O.permute(g, tuple(order))
    P = idx[0].shape[0] if idx else 0
    if P == 0:
        return None
    v = O.reshape(O.clone(g) if not g.is_contiguous() else g, tuple([P] + rest))
    return perm, k, idx, v


def index_put_accumulate(z, key, g):
    """z[key] += g, summing rows whose index tuples repeat (one C pass,
    repeats added in index order as torch's index_put_(accumulate=True)).
    Returns z."""
    if not _is_advanced(key):
        cur = O.getitem(z, key)
        return O.setitem(z, key, O.add(cur, g))
    plan = accumulate_plan(z, key, g)
    if plan is None:
        return z
    perm, k, idx, v = plan
    if v.dtype is not z.dtype:
        v = _C.cast(v, z.dtype)
    _C.index_scatter(perm, k, idx, v, True)
    z._bump_version()
    return z


# ------------------------------------------------------------- as_strided
def _extent(size, stride, offset):
    """One past the last storage element a geometry reaches (offset when empty)."""
    if any(s == 0 for s in size):
        return offset
    return offset + sum((s - 1) * st for s, st in zip(size, stride)) + 1


def _may_overlap(size, stride):
    """False when no two elements of the geometry share a storage position
    (dims of size 1 ignored; each stride passes the span of the smaller ones)."""
    dims = sorted((st, s) for s, st in zip(size, stride) if s > 1)
    span = 0
    for st, s in dims:
        if st <= span:
            return True
        span += (s - 1) * st
    return False


def _positions(size, stride, offset, n, like):
    """The storage position of each element of a geometry, as int64 on
    like's device."""
    pos = arange(n, dtype=D.int64)._view(tuple(size), tuple(stride), offset)
    return pos if like._device_index < 0 else O.to_device(pos, like.device)


def _scatter_flat(n, pos, g):
    """zeros(n) with g's elements added at their positions (repeats sum)."""
    g = O.reshape(g, (-1,))
    key = (O.reshape(pos, (-1,)),)
    if g._requires_grad:
        return _index_put_graph().apply(g, (n,), key)
    return index_put_accumulate(zeros((n,), g.dtype, g), key, g)


@backward("as_strided", save=(), is_view=True)
def _as_strided_back(ctx, g):
    """torch's as_strided_backward: sum the gradient into the storage
    positions the view reads; an input that itself overlaps (expanded)
    shares each position's gradient among the elements on it; read the
    input's geometry back."""
    x, _, stride, offset, geometry = (tuple(ctx.args) + (None,) * 5)[:5]
    if geometry is None:
        raise RuntimeError("as_strided: the input's strides and storage offset were not "
                           "recorded (call Tensor.as_strided, not the op directly)")
    in_stride, in_offset = geometry
    size, stride, in_size = tuple(g.shape), tuple(stride), tuple(x.shape)
    out_offset = in_offset if offset is None else int(offset)
    base = min(in_offset, out_offset)
    n = max(_extent(in_size, in_stride, in_offset), _extent(size, stride, out_offset)) - base
    storage = _scatter_flat(n, _positions(size, stride, out_offset - base, n, g), g)
    if _may_overlap(in_size, in_stride):
        count = _scatter_flat(n, _positions(in_size, in_stride, in_offset - base, n, g),
                              O.add(zeros(in_size, g.dtype, g), 1))
        storage = O.div(storage, O.where(O.eq(count, 0), O.add(_zero_like(count), 1), count))
    return (O.getitem(storage, (_positions(in_size, in_stride, in_offset - base, n, g),)),
            None, None, None, None)


def _zero_like(t):
    return zeros((), t.dtype, t)
