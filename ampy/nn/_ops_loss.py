"""The element-wise losses of the op table: binary_cross_entropy,
binary_cross_entropy_with_logits, l1_loss, smooth_l1_loss, huber_loss and
kl_div, each a forward and a backward rule.

Each forward is torch's formula written with the op forwards of ampy's
element-wise kernels (`O.*`, one C loop per step, halves computed in float32
and rounded once per step as torch's scalar kernels do), then the reduction.
Declaring the loss as one op (rather than letting its pieces dispatch one by
one) gives it torch's autocast policy at the loss: all six run in float32 on
the CPU, and on CUDA too except binary_cross_entropy, which CUDA autocast
refuses (ampy/_policy_lists.py). The rules are torch's backward kernels
(aten/src/ATen/native/Loss.cpp, PointwiseOps) or, for the composite losses
(l1_loss, kl_div), what torch's autograd derives for them, written in `O.*`
ops so that `create_graph=True` differentiates them again.

Arguments: `reduction` is the NN_REDUCTION_* code; inputs arrive broadcast to
one shape and promoted to one dtype (ampy/nn/_functional_loss.py does that).
"""
from .. import _C
from .. import _dtype as D
from .._dispatch import CPU_CUDA, backward, defop
from .._creation import tensor
from ..autograd._ops import O, upcast

__all__ = []

_NONE, _MEAN, _SUM = _C.NN_REDUCTION_NONE, _C.NN_REDUCTION_MEAN, _C.NN_REDUCTION_SUM
_F32, _F64 = D.float32, D.float64
# torch's floor of (1 - x) x in binary_cross_entropy's gradient: a C float
# constant 1e-12, so float64 sees 1e-12 rounded to float32
_EPS = 9.999999960041972e-13


def _names(name):
    return (f"ampy.nn.functional.{name}",)


def _reduce(loss, red):
    if red == _SUM:
        return O.sum(loss)
    if red == _MEAN:
        return O.mean(loss)
    return loss


def _mean_div(g, x, red):
    """The incoming gradient spread over the elements: torch's mean backward
    divides it by the element count, sum and none pass it on."""
    return O.div(g, x.numel()) if red == _MEAN else g


def _norm(x, red, dtype):
    """torch's `norm` factor of its pointwise loss backward kernels, rounded
    to the dtype the kernel computes in."""
    n = (1.0 / x.numel() if x.numel() else float("inf")) if red == _MEAN else 1.0
    return n if dtype is _F32 or dtype is _F64 else tensor(n, dtype=dtype).item()


def _need(ctx, k):
    n = tuple(ctx.needs_input_grad)
    return len(n) > k and bool(n[k])


# ------------------------------------------------------ binary_cross_entropy
@defop("binary_cross_entropy", devices=CPU_CUDA, names=_names("binary_cross_entropy"))
def binary_cross_entropy_fwd(input, target, weight=None, reduction=_MEAN):
    """(t - 1) max(log(1 - x), -100) - t max(log x, -100), times weight."""
    for name, v in (("input", input), ("target", target)):
        if v.numel() and not bool(O.all(O.logical_and(O.ge(v, 0), O.le(v, 1)))):
            raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    a = O.mul(O.sub(target, 1), O.clamp(O.log1p(O.neg(input)), -100.0, None))
    loss = O.sub(a, O.mul(target, O.clamp(O.log(input), -100.0, None)))
    if weight is not None:
        loss = O.mul(loss, weight)
    return _reduce(loss, reduction)


@backward("binary_cross_entropy", save=(0, 1, 2))
def binary_cross_entropy_bwd(ctx, g):
    x, t, w, red = ctx.args
    gx = gt = None
    if _need(ctx, 0):
        den = O.clamp(O.mul(O.sub(1, x), x), _EPS, None)
        gx = O.div(O.mul(g, O.sub(x, t)), den)
        gx = _finish(gx, w, x, red)
    if _need(ctx, 1):
        gt = O.mul(O.neg(O.log(O.div(x, O.sub(1, x)))), g)
        gt = _finish(gt, w, x, red)
    return gx, gt, None, None


def _finish(grad, w, x, red):
    """torch's last two steps: times weight, then / numel for 'mean'."""
    if w is not None:
        grad = O.mul(grad, w)
    return O.div(grad, x.numel()) if red == _MEAN else grad


# ------------------------------------------ binary_cross_entropy_with_logits
@defop("binary_cross_entropy_with_logits", devices=CPU_CUDA,
       names=_names("binary_cross_entropy_with_logits"))
def bce_with_logits_fwd(input, target, weight=None, pos_weight=None, reduction=_MEAN):
    """(1 - t) x - log_weight * logsigmoid(x), log_weight = 1 + (pw - 1) t:
    no exp of a large x, so no overflow for any logit."""
    ls = O.logsigmoid(input)
    if pos_weight is not None:
        ls = O.mul(ls, O.add(O.mul(O.sub(pos_weight, 1), target), 1))
    loss = O.sub(O.mul(O.sub(1, target), input), ls)
    if weight is not None:
        loss = O.mul(loss, weight)
    return _reduce(loss, reduction)


@backward("binary_cross_entropy_with_logits", save=(0, 1, 2, 3))
def bce_with_logits_bwd(ctx, g):
    x, t, w, pw, red = ctx.args
    gx = gt = None
    if _need(ctx, 0):
        if pw is not None:
            pt = O.mul(pw, t)
            gx = O.sub(O.mul(O.sub(O.add(pt, 1), t), O.sigmoid(x)), pt)
        else:
            gx = O.sub(O.sigmoid(x), t)
        gx = _finish(O.mul(gx, g), w, x, red)
    if _need(ctx, 1):
        if pw is not None:
            gt = O.sub(O.logsigmoid(O.neg(x)), O.mul(O.logsigmoid(x), pw))
            gt = O.mul(gt, g)
        else:
            gt = O.mul(O.neg(x), g)
        gt = _finish(gt, w, x, red)
    return gx, gt, None, None, None


# ------------------------------------------------------------------- l1_loss
@defop("l1_loss", devices=CPU_CUDA, names=_names("l1_loss"))
def l1_loss_fwd(input, target, reduction=_MEAN, saved=None):
    """|x - y|, reduced (torch's composite: sub, abs, then the reduction).
    The rule reads sign(x - y) from `saved`, not x and y: torch's abs keeps
    the difference, so changing x or y in place afterwards is allowed."""
    d = O.sub(input, target)
    if saved is not None:
        saved.a = O.sign(d)
    return _reduce(O.abs(d), reduction)


@backward("l1_loss", save=())
def l1_loss_bwd(ctx, g):
    x, y, red, saved = ctx.args
    gd = O.mul(_mean_div(g, x, red), saved.a)
    return (gd if _need(ctx, 0) else None), (O.neg(gd) if _need(ctx, 1) else None), None, None


# ---------------------------------------------------------- smooth_l1 / huber
@defop("smooth_l1_loss", devices=CPU_CUDA, names=_names("smooth_l1_loss"))
def smooth_l1_loss_fwd(input, target, reduction=_MEAN, beta=1.0):
    """z = |x - y|: 0.5 z z / beta where z < beta, else z - 0.5 beta."""
    z = O.abs(O.sub(upcast(input), upcast(target)))
    quad = O.div(O.mul(O.mul(z, 0.5), z), beta)
    loss = O.where(O.lt(z, beta), quad, O.sub(z, 0.5 * beta))
    return _reduce(O.to_dtype(loss, input.dtype), reduction)


@backward("smooth_l1_loss", save=(0, 1))
def smooth_l1_loss_bwd(ctx, g):
    x, y, red, beta = ctx.args
    d = O.sub(upcast(x), upcast(y))
    g = upcast(g)
    n = _norm(x, red, _F32)
    mid = O.div(O.mul(O.mul(d, n), g), beta)
    ng = O.mul(g, n)
    gd = O.where(O.le(d, -beta), O.neg(ng), O.where(O.ge(d, beta), ng, mid))
    gd = O.to_dtype(gd, x.dtype)
    return (gd if _need(ctx, 0) else None), (O.neg(gd) if _need(ctx, 1) else None), None, None


@defop("huber_loss", devices=CPU_CUDA, names=_names("huber_loss"))
def huber_loss_fwd(input, target, reduction=_MEAN, delta=1.0):
    """z = |x - y|: 0.5 z z where z < delta, else delta (z - 0.5 delta)."""
    z = O.abs(O.sub(input, target))
    lin = O.mul(O.sub(z, 0.5 * delta), delta)
    return _reduce(O.where(O.lt(z, delta), O.mul(O.mul(z, 0.5), z), lin), reduction)


@backward("huber_loss", save=(0, 1))
def huber_loss_bwd(ctx, g):
    x, y, red, delta = ctx.args
    d = O.sub(x, y)
    n = _norm(x, red, x.dtype)
    mid = O.mul(O.mul(d, n), g)
    hi = O.mul(O.mul(g, n), delta)
    lo = O.mul(O.mul(g, -n), delta)
    gd = O.where(O.le(d, -delta), lo, O.where(O.ge(d, delta), hi, mid))
    return (gd if _need(ctx, 0) else None), (O.neg(gd) if _need(ctx, 1) else None), None, None


# -------------------------------------------------------------------- kl_div
def _xlogx(t):
    """torch's xlogy(t, t): 0 where t == 0, NaN for a NaN t, else t log t."""
    return O.where(O.eq(t, 0), 0.0, O.mul(t, O.log(t)))


@defop("kl_div", devices=CPU_CUDA, names=_names("kl_div"))
def kl_div_fwd(input, target, reduction=_MEAN, log_target=False):
    """Pointwise t (log t - x), or exp(t) (t - x) for a log-space target."""
    if log_target:
        out = O.mul(O.exp(target), O.sub(target, input))
    else:
        out = O.sub(_xlogx(target), O.mul(target, input))
    return _reduce(out, reduction)


@backward("kl_div", save=(0, 1))
def kl_div_bwd(ctx, g):
    x, t, red, log_target = ctx.args
    gm = _mean_div(g, x, red)
    gx = gt = None
    if log_target:
        et = O.exp(t)
        if _need(ctx, 0):
            gx = O.neg(O.mul(gm, et))
        if _need(ctx, 1):
            gt = O.add(O.mul(O.mul(gm, O.sub(t, x)), et), O.mul(gm, et))
    else:
        if _need(ctx, 0):
            gx = O.mul(O.neg(gm), t)
        if _need(ctx, 1):
            dlog = O.where(O.ne(t, 0), O.log(t), 0.0)
            gt = O.sub(O.add(O.mul(gm, dlog), O.div(O.mul(gm, t), t)), O.mul(gm, x))
    return gx, gt, None, None
