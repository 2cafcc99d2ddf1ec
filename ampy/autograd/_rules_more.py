"""Backward rules of the rest of ampy/_math.py: trigonometric and hyperbolic
functions, exp2/expm1/log2/log10, the parametrised activations, lerp,
addcmul/addcdiv, fmod/remainder, cumprod, norm, and the piecewise-constant
ops (floor, ceil, round, trunc, sign), whose gradient is zero as in torch
(floor_divide has none in torch either: backward through it raises). Formulas
follow torch's derivatives.yaml.
"""
import math

from .. import _dtype as D
from .._creation import arange
from .._dispatch import backward
from ._ops import O, upcast, wrap_dim, zeros
from ._rules_math import _PAIRWISE_MAX, _arg, _dims, _expand_back, _masked, _restore


def _is_t(x):
    return hasattr(x, "shape") and hasattr(x, "dtype")


@backward("floor", "ceil", "round", "trunc", "sign", save=())
def _zero_grad(ctx, g):
    return (zeros(ctx.args[0].shape, g.dtype, g),)


@backward("frac", save=())
def _frac(ctx, g):
    return (g,)


@backward("tan", save=(), save_out=True)
def _tan(ctx, g):
    y = ctx.out[0]
    return (O.mul(g, O.add(O.mul(y, y), 1)),)


@backward("sinh", save=(0,))
def _sinh(ctx, g):
    return (O.mul(g, O.cosh(ctx.args[0])),)


@backward("cosh", save=(0,))
def _cosh(ctx, g):
    return (O.mul(g, O.sinh(ctx.args[0])),)


@backward("asin", save=(0,))
def _asin(ctx, g):
    x = ctx.args[0]
    return (O.div(g, O.sqrt(O.sub(1, O.mul(x, x)))),)


@backward("acos", save=(0,))
def _acos(ctx, g):
    x = ctx.args[0]
    return (O.neg(O.div(g, O.sqrt(O.sub(1, O.mul(x, x))))),)


@backward("atan", save=(0,))
def _atan(ctx, g):
    x = ctx.args[0]
    return (O.div(g, O.add(O.mul(x, x), 1)),)


@backward("atan2", save=(0, 1))
def _atan2(ctx, g):
    a, b = ctx.args[:2]
    r = O.add(O.mul(a, a), O.mul(b, b))
    return O.mul(g, O.div(b, r)), O.mul(g, O.div(O.neg(a), r))


@backward("exp2", save=(), save_out=True)
def _exp2(ctx, g):
    return (O.mul(g, O.mul(ctx.out[0], math.log(2.0))),)


@backward("expm1", save=(), save_out=True)
def _expm1(ctx, g):
    return (O.mul(g, O.add(ctx.out[0], 1)),)


@backward("log2", save=(0,))
def _log2(ctx, g):
    return (O.div(g, O.mul(ctx.args[0], math.log(2.0))),)


@backward("log10", save=(0,))
def _log10(ctx, g):
    return (O.div(g, O.mul(ctx.args[0], math.log(10.0))),)


@backward("fmod", save=(0, 1))
def _fmod(ctx, g):
    a, b = ctx.args[:2]
    gb = O.mul(O.neg(g), O.div(a, b, rounding_mode="trunc")) if _is_t(b) else None  # (one rounding)
    return g, gb


@backward("remainder", save=(0, 1))
def _remainder(ctx, g):
    a, b = ctx.args[:2]
    gb = O.mul(O.neg(g), O.div(a, b, rounding_mode="floor")) if _is_t(b) else None  # (one rounding)
    return g, gb


@backward("leaky_relu", save=(0,))
def _leaky_relu(ctx, g):
    x = ctx.args[0]
    slope = _arg(ctx, 1, "negative_slope", 0.01)
    return O.where(O.gt(x, 0), g, O.mul(g, slope)), None


@backward("elu", save=(0,))
def _elu(ctx, g):
    x = ctx.args[0]
    alpha = _arg(ctx, 1, "alpha", 1.0)
    # x <= 0: d/dx alpha * (exp(x) - 1) = alpha * exp(x) (from x, not the output: torch saves
    # only x, so changing the output in place leaves the backward valid)
    return O.where(O.gt(x, 0), g, O.mul(g, O.mul(O.exp(x), alpha))), None


@backward("softplus", save=(0,))
def _softplus(ctx, g):
    x = upcast(ctx.args[0])
    beta = _arg(ctx, 1, "beta", 1.0)
    threshold = _arg(ctx, 2, "threshold", 20.0)
    gu = upcast(g)
    s = O.sigmoid(O.mul(x, beta))
    return O.where(O.gt(O.mul(x, beta), threshold), gu, O.mul(gu, s)), None, None


@backward("logsigmoid", save=(0,))
def _logsigmoid(ctx, g):
    x = upcast(ctx.args[0])
    return (O.mul(upcast(g), O.sigmoid(O.neg(x))),)


@backward("mish", save=(0,))
def _mish(ctx, g):
    """d/dx x*tanh(softplus(x)) = tanh(sp) + x*sigmoid(x)*(1 - tanh(sp)^2)."""
    x = upcast(ctx.args[0])
    t = O.tanh(O.softplus(x))
    d = O.add(t, O.mul(O.mul(x, O.sigmoid(x)), O.sub(1, O.mul(t, t))))
    return (O.mul(upcast(g), d),)


@backward("lerp", save=(0, 1, 2))
def _lerp(ctx, g):
    a, b, w = ctx.args[:3]
    if _is_t(w):
        return O.mul(g, O.sub(1, w)), O.mul(g, w), O.mul(g, O.sub(b, a))
    return O.mul(g, 1 - w), O.mul(g, w), None


@backward("addcmul", save=(1, 2))
def _addcmul(ctx, g):
    _, t1, t2 = ctx.args[:3]
    value = _arg(ctx, 3, "value", 1)
    gv = O.mul(g, value) if value != 1 else g
    return g, O.mul(gv, t2), O.mul(gv, t1)


@backward("addcdiv", save=(1, 2))
def _addcdiv(ctx, g):
    _, t1, t2 = ctx.args[:3]
    value = _arg(ctx, 3, "value", 1)
    gv = O.mul(g, value) if value != 1 else g
    return g, O.div(gv, t2), O.mul(O.neg(gv), O.div(O.div(t1, t2), t2))


@backward("cumprod", save=(0,), save_out=True)
def _cumprod(ctx, g):
    """sum_{j>=i} g_j * out_j / x_i: a reverse cumulative sum (flip, cumsum,
    flip). Inputs containing zeros take the products directly instead
    (_cumprod_with_zeros), as torch's cumprod_backward does."""
    x = ctx.args[0]
    d = wrap_dim(_arg(ctx, 1, "dim"), x.ndim)
    if x.ndim == 0:
        return (g,)
    if bool(O.any(O.eq(x, 0)).item()):
        return (_cumprod_with_zeros(x, g, d),)
    n = x.shape[d]
    rev = O.sub(n - 1, arange(n, dtype=D.int64))
    key = (slice(None),) * d + (rev,)
    s = O.getitem(O.cumsum(O.getitem(O.mul(g, ctx.out[0]), key), d), key)
    return (O.div(s, x),)


def _cumprod_with_zeros(x, g, d):
    """grad_i = sum_{j>=i} g_j * prod_{k<=j, k!=i} x_k, from the cumulative
    products of x with x_i set to 1 (an n x n matrix per slice): exact with
    zeros, and differentiable again."""
    n = x.shape[d]
    numel = 1
    for s in x.shape:
        numel *= s
    if numel * n * n > _PAIRWISE_MAX:
        raise NotImplementedError(f"cumprod backward for inputs containing zeros over a "
                                  f"dimension of {n} elements is not supported by ampy at this "
                                  f"size")
    perm = tuple(i for i in range(x.ndim) if i != d) + (d,)
    inv = [0] * x.ndim
    for i, p in enumerate(perm):
        inv[p] = i
    xs = O.unsqueeze(O.permute(x, perm), -2)  # (..., 1, n)
    pos = arange(n, dtype=D.int64)
    if x._device_index >= 0:
        pos = O.to_device(pos, x.device)
    rows, cols = O.reshape(pos, (n, 1)), O.reshape(pos, (1, n))
    one = O.add(zeros((), x.dtype, x), 1)
    prods = O.cumprod(O.where(O.eq(rows, cols), one, xs), -1)  # [i, j]: x_i taken as 1
    gs = O.unsqueeze(O.permute(g, perm), -2)
    terms = O.where(O.ge(cols, rows), O.mul(prods, gs), zeros((), g.dtype, g))
    return O.permute(O.sum(terms, -1), tuple(inv))


@backward("norm", save=(0,), save_out=True)
def _norm(ctx, g):
    x = ctx.args[0]
    p = _arg(ctx, 1, "p", "fro")
    dims = _dims(_arg(ctx, 2, "dim"), x.ndim)
    out = _restore(ctx.out[0], x.shape, dims)
    gk = _restore(g, x.shape, dims)
    if p in ("fro", 2, 2.0, None):
        return (_masked(O.ne(out, 0), O.mul(gk, O.div(x, out))),) + (None,) * 4
    if p in (1, 1.0):
        sgn = O.sub(O.to_dtype(O.gt(x, 0), g.dtype), O.to_dtype(O.lt(x, 0), g.dtype))
        return (O.mul(_expand_back(g, x.shape, dims), sgn),) + (None,) * 4
    if p in (math.inf, -math.inf):
        ax = O.abs(x)
        mask = O.to_dtype(O.eq(ax, out), g.dtype)
        cnt = O.sum(mask, dims, keepdim=True)
        sgn = O.sub(O.to_dtype(O.gt(x, 0), g.dtype), O.to_dtype(O.lt(x, 0), g.dtype))
        return (O.mul(O.div(gk, cnt), O.mul(mask, sgn)),) + (None,) * 4
    if p == 0:
        return (zeros(x.shape, g.dtype, g),) + (None,) * 4
    p = float(p)
    ax = O.abs(x)
    sgn = O.sub(O.to_dtype(O.gt(x, 0), g.dtype), O.to_dtype(O.lt(x, 0), g.dtype))
    # d/dx ||x||_p = sign(x) |x|^(p-1) / ||x||_p^(p-1)
    val = O.mul(O.mul(sgn, O.pow(ax, p - 1)), O.div(gk, O.pow(out, p - 1)))
    return (_masked(O.ne(out, 0), val),) + (None,) * 4


@backward("eq_", "ne_", "lt_", "le_", "gt_", "ge_", save=(), inplace=True)
def _compare_inplace(ctx, g):
    """A floating tensor overwritten with 0/1 in place: torch's derivative
    is zero for self and for a tensor `other`."""
    other = ctx.args[1]
    return zeros(ctx.args[0].shape, g.dtype, g), (zeros(other.shape, g.dtype, g)
                                                   if _is_t(other) else None)


@backward("logical_and_", "logical_or_", "logical_xor_", "logical_not_", save=(), inplace=True)
def _logical_inplace(ctx, g):
    """torch does not record these on a floating tensor: it keeps the
    history it had, so the gradient reaches that history unchanged."""
    return (g,) + (None,) * (len(ctx.args) - 1)
