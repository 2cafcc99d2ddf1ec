"""torch.nn.functional's element-wise losses, with torch's signatures, checks
and messages: binary_cross_entropy(_with_logits), l1_loss, smooth_l1_loss,
huber_loss, kl_div. The ops and their backward rules are in
ampy/nn/_ops_loss.py; this module checks the arguments, broadcasts and
promotes the inputs as torch's Python wrappers do, then dispatches.
"""
import numbers
import warnings

from .. import _dtype as D
from .._dispatch import dispatch, get_op
from .._math_reduce import sum as _sum
from .._shape import broadcast_shapes
from .._tensor import Tensor
from ..autograd import is_grad_enabled
from . import _ops_loss  # noqa: F401  (declares the ops)
from ._ops import REDUCTIONS, Saved

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "l1_loss",
           "smooth_l1_loss", "huber_loss", "kl_div"]

_BCE, _BCEL, _L1, _SL1, _HUBER, _KL = (get_op(n) for n in (
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "l1_loss", "smooth_l1_loss",
    "huber_loss", "kl_div"))


def _check_tensor(x, fn, arg):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _no_grad_arg(t, fn, arg):
    """torch's refusal of a gradient for an argument its rule does not differentiate."""
    if t is not None and t.requires_grad and is_grad_enabled():
        raise RuntimeError(f"The function '{fn}' is not differentiable with respect to argument "
                           f"'{arg}'. This input cannot have requires_grad True.")


def _legacy(size_average, reduce, reduction):
    """torch's _Reduction.legacy_get_string (with its deprecation warning)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    out = "none" if not reduce else ("mean" if size_average else "sum")
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  f"reduction='{out}' instead.", stacklevel=3)
    return out


def _enum(reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return REDUCTIONS[reduction]


def _same_dtype(*ts):
    """The tensors (None kept) in their promoted floating dtype."""
    dt = None
    for t in ts:
        if t is not None:
            dt = t.dtype if dt is None else D.promote_types(dt, t.dtype)
    return tuple(t if t is None or t.dtype is dt else t.to(dt) for t in ts)


def _broadcast_pair(input, target, fn):
    """torch.broadcast_tensors(input, target) after torch's size warning."""
    _check_tensor(input, fn, "input")
    _check_tensor(target, fn, "target")
    if tuple(target.shape) == tuple(input.shape):
        return _same_dtype(input, target)
    warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                  f"({input.shape}). This will likely lead to incorrect results due to "
                  f"broadcasting. Please ensure they have the same size.", stacklevel=3)
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    if shape is None:
        raise RuntimeError(f"The size of tensor a ({input.shape[-1]}) must match the size of "
                           f"tensor b ({target.shape[-1]}) at non-singleton dimension "
                           f"{max(input.ndim, target.ndim) - 1}")
    return _same_dtype(input.expand(*shape), target.expand(*shape))


def _l1(x, y, red):
    saved = Saved() if is_grad_enabled() and (x.requires_grad or y.requires_grad) else None
    return dispatch(_L1, x, y, red, saved)


def _float_arg(v, fn, arg):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{fn}(): argument '{arg}' must be float, not {type(v).__name__}")
    return float(v)


def _weighted(loss, weight, reduction, mean_by_weight):
    """torch's Python path for a `weight` on l1_loss / huber_loss."""
    if tuple(weight.shape) != tuple(loss.shape):
        raise ValueError("Weights and input must have the same size.")
    out = loss * weight
    if reduction == "none":
        return out
    if reduction == "sum":
        return _sum(out)
    if reduction == "mean":
        return _sum(out) / _sum(weight) if mean_by_weight else out.mean()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', "
                     f"'sum'.")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-w (t log x + (1 - t) log(1 - x)), each log clamped to >= -100 as torch."""
    red = _enum(_legacy(size_average, reduce, reduction))
    _check_tensor(input, "binary_cross_entropy", "input")
    _check_tensor(target, "binary_cross_entropy", "target")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same "
                         f"size.")
    if weight is not None:
        _check_tensor(weight, "binary_cross_entropy", "weight")
        shape = broadcast_shapes(tuple(target.shape), tuple(weight.shape))
        if shape is None:
            raise RuntimeError(f"binary_cross_entropy: weight of shape {list(weight.shape)} "
                               f"does not broadcast to the target's {list(target.shape)}")
        _no_grad_arg(weight, "binary_cross_entropy", "weight")
        weight = weight.expand(*shape)
    input, target, weight = _same_dtype(input, target, weight)
    return dispatch(_BCE, input, target, weight, red)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """BCE of sigmoid(input) computed from the logits without overflow;
    pos_weight weighs the positive term per class (broadcast over target)."""
    red = _enum(_legacy(size_average, reduce, reduction))
    fn = "binary_cross_entropy_with_logits"
    _check_tensor(input, fn, "input")
    _check_tensor(target, fn, "target")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is not None:
            _check_tensor(t, fn, name)
            if broadcast_shapes(tuple(input.shape), tuple(t.shape)) != tuple(input.shape):
                raise RuntimeError(f"{fn}: {name} of shape {list(t.shape)} does not broadcast "
                                   f"to the input's {list(input.shape)}")
            _no_grad_arg(t, fn, name)
    input, target, weight, pos_weight = _same_dtype(input, target, weight, pos_weight)
    return dispatch(_BCEL, input, target, weight, pos_weight, red)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or sum / none) of |input - target|."""
    x, y = _broadcast_pair(input, target, "l1_loss")
    reduction = _legacy(size_average, reduce, reduction)
    if weight is not None:
        return _weighted(_l1(x, y, _enum("none")), weight, reduction, True)
    return _l1(x, y, _enum(reduction))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta for |d| < beta, |d| - 0.5 beta beyond (d = input - target);
    beta = 0 is l1_loss."""
    x, y = _broadcast_pair(input, target, "smooth_l1_loss")
    red = _enum(_legacy(size_average, reduce, reduction))
    beta = _float_arg(beta, "smooth_l1_loss", "beta")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0.0:
        return _l1(x, y, red)
    return dispatch(_SL1, x, y, red, beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 for |d| < delta, delta (|d| - 0.5 delta) beyond (d = input - target)."""
    x, y = _broadcast_pair(input, target, "huber_loss")
    delta = _float_arg(delta, "huber_loss", "delta")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if weight is not None:
        return _weighted(dispatch(_HUBER, x, y, _enum("none"), delta), weight, reduction, False)
    return dispatch(_HUBER, x, y, _enum(reduction), delta)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence with `input` in log space: target (log target - input),
    summed and divided by the batch size for reduction='batchmean'."""
    _check_tensor(input, "kl_div", "input")
    _check_tensor(target, "kl_div", "target")
    if size_average is not None or reduce is not None:
        red = _enum(_legacy(size_average, reduce, "mean"))
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                          "the support size.'batchmean' divides only by the batch size, and "
                          "aligns with the KL div math definition.'mean' will be changed to "
                          "behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
        red = _enum("sum" if reduction == "batchmean" else reduction)
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    if shape is None:
        raise RuntimeError(f"The size of tensor a ({input.shape[-1]}) must match the size of "
                           f"tensor b ({target.shape[-1]}) at non-singleton dimension "
                           f"{max(input.ndim, target.ndim) - 1}")
    x, t = _same_dtype(input.expand(*shape), target.expand(*shape))
    out = dispatch(_KL, x, t, red, bool(log_target))
    if reduction == "batchmean" and input.ndim != 0:
        out = out / input.shape[0]
    return out
