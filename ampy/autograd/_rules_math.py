"""Backward rules of the element-wise and reduction ops (ampy/_math.py).

Each rule follows torch's derivatives.yaml formula and returns one gradient
per positional argument; the engine sums broadcast gradients down to the
input's shape and casts them to its dtype. Simple rules run in the dtype of
the forward (as torch's composite formulas do); rules that torch implements
as one fused kernel (tanh, sigmoid, gelu, softmax, ...) compute fp16/bf16 in
fp32 and round once (`upcast`), as those kernels do.
"""
import math

from .. import _C
from .. import _dtype as D
from .._creation import arange
from .._dispatch import backward
from ._grad_mode import _state
from ._ops import O, upcast, wrap_dim, zeros


def _arg(ctx, i, name, default=None):
    a = ctx.args
    if len(a) > i:
        return a[i]
    kw = ctx.kwargs
    return kw.get(name, default) if kw else default


def _zero(g):
    """A 0-d zero of g's dtype, for where()."""
    return zeros((), g.dtype, g)


def _masked(mask, g):
    """g where mask, exact zeros elsewhere (no inf*0 = nan)."""
    return O.where(mask, g, _zero(g))


def _is_t(x):
    return hasattr(x, "shape") and hasattr(x, "dtype")


# ------------------------------------------------------------- arithmetic
@backward("add", save=())
def _add(ctx, g):
    alpha = _arg(ctx, 2, "alpha", 1)
    return g, (g if alpha == 1 else O.mul(g, alpha))


@backward("sub", save=())
def _sub(ctx, g):
    alpha = _arg(ctx, 2, "alpha", 1)
    return g, (O.neg(g) if alpha == 1 else O.mul(g, -alpha))


@backward("mul", save=(0, 1))
def _mul(ctx, g):
    a, b = ctx.args[:2]
    n = ctx.needs_input_grad
    return (O.mul(g, b) if n[0] else None), (O.mul(g, a) if n[1] else None)


@backward("div", save=(0, 1))
def _div(ctx, g):
    a, b = ctx.args[:2]
    if _arg(ctx, 2, "rounding_mode") is not None:
        return (zeros(a.shape, g.dtype, g) if _is_t(a) else None,
                zeros(b.shape, g.dtype, g) if _is_t(b) else None)
    n = ctx.needs_input_grad
    ga = O.div(g, b) if n[0] else None
    gb = O.mul(O.neg(g), O.div(O.div(a, b), b)) if n[1] else None
    return ga, gb


@backward("pow", save=(0, 1), save_out=True)
def _pow(ctx, g):
    a, e = ctx.args[:2]
    n = ctx.needs_input_grad
    out = ctx.out[0]
    ga = gb = None
    if n[0]:
        if _is_t(e):
            ga = O.mul(g, O.mul(e, O.pow(a, O.sub(e, 1))))
        elif e == 0:
            ga = zeros(a.shape, g.dtype, g)
        else:
            ga = O.mul(g, O.mul(O.pow(a, e - 1), e))
    if n[1]:
        # d/de a**e = a**e * log(a), taken as 0 where a == 0 and e >= 0 (torch)
        if _is_t(a):
            val = O.mul(out, O.log(a))
            zero_here = O.eq(a, 0)
        else:
            val = O.mul(out, math.log(a) if a > 0 else (float("nan") if a < 0 else
                                                          float("-inf")))
            zero_here = a == 0
        if zero_here is not False:
            guarded = O.where(O.ge(e, 0), _zero(val), val)
            val = guarded if zero_here is True else O.where(zero_here, guarded, val)
        gb = O.mul(g, val)
    return ga, gb


@backward("neg", save=())
def _neg(ctx, g):
    return (O.neg(g),)


@backward("abs", save=(0,))
def _abs(ctx, g):
    x = ctx.args[0]
    sgn = O.sub(O.to_dtype(O.gt(x, 0), g.dtype), O.to_dtype(O.lt(x, 0), g.dtype))
    return (O.mul(g, sgn),)


# ------------------------------------------------------------ unary math
@backward("exp", save=(), save_out=True)
def _exp(ctx, g):
    return (O.mul(g, ctx.out[0]),)


@backward("log", save=(0,))
def _log(ctx, g):
    return (O.div(g, ctx.args[0]),)


@backward("log1p", save=(0,))
def _log1p(ctx, g):
    return (O.div(g, O.add(ctx.args[0], 1)),)


@backward("sqrt", save=(), save_out=True)
def _sqrt(ctx, g):
    return (O.div(g, O.mul(ctx.out[0], 2)),)


@backward("rsqrt", save=(), save_out=True)
def _rsqrt(ctx, g):
    r = ctx.out[0]
    return (O.mul(O.mul(g, -0.5), O.pow(r, 3)),)


@backward("sin", save=(0,))
def _sin(ctx, g):
    return (O.mul(g, O.cos(ctx.args[0])),)


@backward("cos", save=(0,))
def _cos(ctx, g):
    return (O.mul(g, O.neg(O.sin(ctx.args[0]))),)


@backward("tanh", save=(), save_out=True)
def _tanh(ctx, g):
    y = upcast(ctx.out[0])
    return (O.mul(upcast(g), O.sub(1, O.mul(y, y))),)


@backward("sigmoid", save=(), save_out=True)
def _sigmoid(ctx, g):
    y = upcast(ctx.out[0])
    return (O.mul(O.mul(upcast(g), O.sub(1, y)), y),)


_FUSED_DTYPES = (D.float32, D.float16, D.bfloat16)


def _fusable(a, g):
    """True when the one-pass kernels of ampy._C.fused_* take (a, g): CPU,
    contiguous, one shape and dtype (float32/float16/bfloat16), and the
    backward is not itself being recorded (create_graph needs the composite)."""
    return (not _state.create_graph and a._device_index < 0 and g._device_index < 0 and
            a.dtype is g.dtype and a.dtype in _FUSED_DTYPES and a.shape == g.shape and
            a.is_contiguous() and g.is_contiguous())


@backward("relu", save=(), save_out=True)
def _relu(ctx, g):
    y = ctx.out[0]
    if _fusable(y, g):  # same bits as the where() below, one pass
        return (_C.fused_relu_bwd(y, g),)
    return (_masked(O.gt(y, 0), g),)


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@backward("gelu", save=(0,))
def _gelu(ctx, g):
    approximate = _arg(ctx, 1, "approximate", "none")
    if approximate != "tanh" and _fusable(ctx.args[0], g):
        # the formula below in one pass (float32 math, halves rounded once)
        return _C.fused_gelu_bwd(ctx.args[0], g), None
    x = upcast(ctx.args[0])
    gu = upcast(g)
    if approximate == "tanh":
        beta, kappa = math.sqrt(2.0 / math.pi), 0.044715
        x2 = O.mul(x, x)
        t = O.tanh(O.mul(O.add(x, O.mul(O.mul(x2, x), kappa)), beta))
        left = O.mul(O.add(t, 1), 0.5)
        right = O.mul(O.mul(O.mul(x, 0.5), O.sub(1, O.mul(t, t))),
                      O.mul(O.add(O.mul(x2, 3 * kappa), 1), beta))
        return O.mul(gu, O.add(left, right)), None
    cdf = _normal_cdf(x)
    pdf = O.mul(O.exp(O.mul(O.mul(x, x), -0.5)), _INV_SQRT_2PI)
    return O.mul(gu, O.add(cdf, O.mul(x, pdf))), None


def _normal_cdf(x):
    return O.mul(O.add(O.erf(O.mul(x, _SQRT1_2)), 1), 0.5)


@backward("clamp", save=(0, 1, 2))
def _clamp(ctx, g):
    x = ctx.args[0]
    lo, hi = _arg(ctx, 1, "min"), _arg(ctx, 2, "max")
    gx = g
    if lo is not None:
        gx = _masked(O.ge(x, lo), gx)
    if hi is not None:
        gx = _masked(O.le(x, hi), gx)
    glo = _masked(O.lt(x, lo), g) if _is_t(lo) else None
    ghi = _masked(O.gt(x, hi), g) if _is_t(hi) else None
    return gx, glo, ghi


@backward("where", save=(0,))
def _where(ctx, g):
    cond = ctx.args[0]
    return None, _masked(cond, g), O.where(cond, _zero(g), g)


def _max_min_pair(a, b, g, a_loses):
    half = O.where(O.eq(a, b), O.div(g, 2), g)
    return O.where(a_loses(a, b), _zero(g), half), O.where(a_loses(b, a), _zero(g), half)


@backward("maximum", save=(0, 1))
def _maximum(ctx, g):
    a, b = ctx.args[:2]
    return _max_min_pair(a, b, g, O.lt)


@backward("minimum", save=(0, 1))
def _minimum(ctx, g):
    a, b = ctx.args[:2]
    return _max_min_pair(a, b, g, O.gt)


def _fmax_fmin(a, b, g, wins):
    """torch: no tie splitting; a wins ties and wherever b is NaN."""
    a_gets = O.logical_or(wins(a, b), O.isnan(b))
    return _masked(a_gets, g), O.where(a_gets, _zero(g), g)


@backward("fmax", save=(0, 1))
def _fmax(ctx, g):
    return _fmax_fmin(ctx.args[0], ctx.args[1], g, O.ge)


@backward("fmin", save=(0, 1))
def _fmin(ctx, g):
    return _fmax_fmin(ctx.args[0], ctx.args[1], g, O.le)


# ------------------------------------------------------------- reductions
def _dims(dim, ndim):
    """Reduced dims as a sorted tuple (None or () -> all)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted(wrap_dim(d, ndim) for d in dim))


def _keep_shape(shape, dims):
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _restore(t, shape, dims):
    """A reduced result (keepdim or not) viewed with its reduced dims as 1s."""
    return O.reshape(t, _keep_shape(shape, dims))


def _expand_back(g, shape, dims):
    return O.expand(_restore(g, shape, dims), tuple(shape))


def _count(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


@backward("sum", save=())
def _sum(ctx, g):
    x = ctx.args[0]
    dims = _dims(_arg(ctx, 1, "dim"), x.ndim)
    return (_expand_back(g, x.shape, dims),)


@backward("mean", save=())
def _mean(ctx, g):
    x = ctx.args[0]
    dims = _dims(_arg(ctx, 1, "dim"), x.ndim)
    return (O.div(_expand_back(g, x.shape, dims), _count(x.shape, dims)),)


def _spread_evenly(x, out, g, dims):
    """torch's amax/amin backward: ties share the gradient evenly."""
    mask = O.to_dtype(O.eq(x, _restore(out, x.shape, dims)), g.dtype)
    count = O.sum(mask, dims, keepdim=True)
    return O.mul(O.div(_restore(g, x.shape, dims), count), mask)


@backward("amax", "amin", save=(0,), save_out=True)
def _amax(ctx, g):
    x = ctx.args[0]
    dims = _dims(_arg(ctx, 1, "dim", ()), x.ndim)
    return (_spread_evenly(x, ctx.out[0], g, dims),)


def _select_reduce_back(x, indices, g, dim, keepdim):
    """Gradient of max/min along dim: g to the position of each index."""
    d = wrap_dim(dim, x.ndim)
    shape = tuple(x.shape)
    kshape = _keep_shape(shape, (d,))
    pos = O.reshape(arange(shape[d], dtype=D.int64),
                    tuple(shape[d] if i == d else 1 for i in range(len(shape))))
    onehot = O.eq(pos, O.reshape(indices, kshape))
    return _masked(onehot, O.expand(O.reshape(g, kshape), shape))


@backward("max_dim", "min_dim", save=(), save_out=True)
def _max_dim(ctx, *grads):
    """(values, indices) along dim: the gradient goes to each index."""
    x = ctx.args[0]
    keepdim = _arg(ctx, 2, "keepdim", False)
    return (_select_reduce_back(x, ctx.out[1], grads[0], _arg(ctx, 1, "dim"), keepdim),)


def _correction(ctx):
    """(dims, correction) of var/std: ampy/_math_reduce.py normalises torch's
    call forms and dispatches the op as (input, dim, correction, keepdim)."""
    x = ctx.args[0]
    dim = ctx.args[1] if len(ctx.args) > 1 else None
    corr = ctx.args[2] if len(ctx.args) > 2 else 1
    return _dims(dim, x.ndim), corr


def _var_grad(x, gk, dims, corr):
    n = _count(x.shape, dims)
    mean = O.mean(x, dims, keepdim=True)
    return O.mul(O.mul(gk, 2.0 / max(n - corr, 0) if n - corr > 0 else float("inf")),
                 O.sub(x, mean))


@backward("var", save=(0,))
def _var(ctx, g):
    x = ctx.args[0]
    dims, corr = _correction(ctx)
    return (_var_grad(x, _restore(g, x.shape, dims), dims, corr),)


@backward("std", save=(0,), save_out=True)
def _std(ctx, g):
    x = ctx.args[0]
    dims, corr = _correction(ctx)
    out = ctx.out[0]
    gvar = _masked(O.ne(out, 0), O.div(g, O.mul(out, 2)))
    return (_var_grad(x, _restore(gvar, x.shape, dims), dims, corr),)


@backward("prod", save=(0,), save_out=True)
def _prod(ctx, g):
    """Exact with zeros: where a slice has one zero, that element's gradient
    is the product of the others; with two or more, all are zero."""
    x = ctx.args[0]
    dim = _arg(ctx, 1, "dim")
    dims = _dims(dim, x.ndim)
    gk = _restore(g, x.shape, dims)
    if _state.create_graph and x.ndim and bool(O.any(O.eq(x, 0)).item()):
        return (_prod_pairwise(x, gk, dims),)
    outk = _restore(ctx.out[0], x.shape, dims)
    is_zero = O.eq(x, 0)
    nzeros = O.sum(O.to_dtype(is_zero, D.int64), dims, keepdim=True)
    no_zero = O.mul(gk, O.div(outk, x))
    safe = O.where(is_zero, O.add(_zero(x), 1), x)
    others = O.prod(safe, dims[0], keepdim=True) if len(dims) == 1 and dim is not None else \
        O.reshape(O.prod(safe), _keep_shape(x.shape, dims))
    one_zero = _masked(is_zero, O.mul(gk, others))
    return (O.where(O.eq(nzeros, 0), no_zero,
                    O.where(O.eq(nzeros, 1), one_zero, _zero(no_zero))),)


_PAIRWISE_MAX = 1 << 26


def _prod_pairwise(x, gk, dims):
    """create_graph=True with zeros: each element's gradient is the product
    of the other elements of its slice, taken directly (an n x n matrix per
    slice, ones on the diagonal), so that its own derivative is exact too
    (the formula above has constant zeros and 0/0 there)."""
    keep = [d for d in range(x.ndim) if d not in dims]
    perm = tuple(keep + list(dims))
    kshape = [x.shape[d] for d in keep]
    n = _count(x.shape, dims)
    if _count(x.shape, range(x.ndim)) * n > _PAIRWISE_MAX:
        raise NotImplementedError(f"prod: create_graph=True backward through a product over "
                                  f"{n} elements that contain zeros is not supported by ampy "
                                  f"at this size")
    xs = O.unsqueeze(O.reshape(O.permute(x, perm), tuple(kshape + [n])), -2)
    pos = arange(n, dtype=D.int64)
    if x._device_index >= 0:
        pos = O.to_device(pos, x.device)
    diag = O.eq(O.reshape(pos, (n, 1)), O.reshape(pos, (1, n)))
    others = O.prod(O.where(diag, O.add(_zero(x), 1), xs), -1)
    res = O.mul(O.reshape(O.permute(gk, perm), tuple(kshape + [1])), others)
    inv = [0] * x.ndim
    for i, d in enumerate(perm):
        inv[d] = i
    return O.permute(O.reshape(res, tuple(x.shape[d] for d in perm)), tuple(inv))


@backward("softmax", save=(), save_out=True)
def _softmax(ctx, g):
    d = _arg(ctx, 1, "dim")
    y = ctx.out[0]
    if _fusable(y, g) and d is not None and y.ndim and wrap_dim(d, y.ndim) == y.ndim - 1:
        return _C.fused_softmax_bwd(y, g), None  # rows: one pass each for sum and dx
    y = upcast(y)
    gu = upcast(g)
    return O.mul(y, O.sub(gu, O.sum(O.mul(gu, y), d, keepdim=True))), None


@backward("log_softmax", save=(), save_out=True)
def _log_softmax(ctx, g):
    y = upcast(ctx.out[0])
    gu = upcast(g)
    d = _arg(ctx, 1, "dim")
    return O.sub(gu, O.mul(O.exp(y), O.sum(gu, d, keepdim=True))), None


@backward("logsumexp", save=(0,), save_out=True)
def _logsumexp(ctx, g):
    x = ctx.args[0]
    dims = _dims(_arg(ctx, 1, "dim"), x.ndim)
    outk = _restore(ctx.out[0], x.shape, dims)
    return (O.mul(_restore(g, x.shape, dims), O.exp(O.sub(x, outk))),)


@backward("cumsum", save=())
def _cumsum(ctx, g):
    """Reverse cumulative sum: flip, cumsum, flip (flips by index arrays)."""
    x = ctx.args[0]
    d = wrap_dim(_arg(ctx, 1, "dim"), x.ndim)
    if x.ndim == 0:
        return (g,)
    n = x.shape[d]
    rev = O.sub(n - 1, arange(n, dtype=D.int64)) if n else arange(0, dtype=D.int64)
    key = (slice(None),) * d + (rev,)
    return (O.getitem(O.cumsum(O.getitem(g, key), d), key),)


@backward("cat", save=())
def _cat(ctx, g):
    tensors = ctx.args[0]
    d = _arg(ctx, 1, "dim", 0)
    nd = g.ndim
    d = wrap_dim(d, nd)
    out, start = [], 0
    for t in tensors:
        if t.ndim == 1 and t.shape[0] == 0 and nd != 1:  # legacy empty input
            out.append(zeros((0,), g.dtype, g))
            continue
        size = t.shape[d]
        out.append(O.narrow(g, d, start, size))
        start += size
    return (out,)


@backward("stack", save=())
def _stack(ctx, g):
    tensors = ctx.args[0]
    d = wrap_dim(_arg(ctx, 1, "dim", 0), g.ndim)
    return ([O.select(g, d, i) for i in range(len(tensors))],)


# -------------------------------------------- a few more torch-named ops
@backward("square", save=(0,))
def _square(ctx, g):
    return (O.mul(g, O.mul(ctx.args[0], 2)),)


@backward("reciprocal", save=(), save_out=True)
def _reciprocal(ctx, g):
    y = ctx.out[0]
    return (O.mul(O.neg(g), O.mul(y, y)),)


@backward("erf", save=(0,))
def _erf(ctx, g):
    x = ctx.args[0]
    return (O.mul(g, O.mul(O.exp(O.neg(O.mul(x, x))), 2.0 / math.sqrt(math.pi))),)


@backward("silu", save=(0,))
def _silu(ctx, g):
    x = upcast(ctx.args[0])
    s = O.sigmoid(x)
    return (O.mul(upcast(g), O.mul(s, O.add(O.mul(x, O.sub(1, s)), 1))),)

