"""More of torch.nn.functional's activations, composed of ampy's element-wise
ops (the C kernels of leaky_relu, elu, softplus, mish and logsigmoid, where,
clamp, exp, ...), so backward and autocast come from those ops.

In-place variants write the result into the input and return it; when a
gradient is wanted the result is computed from a clone first, so the ops'
saved tensors are not the ones overwritten.
"""
import math as _pymath
import numbers
import warnings

from .. import _dtype as D
from .. import _math, _math_reduce
from .._creation import rand, zeros_like
from .._tensor import Tensor
from ..amp.autocast_mode import get_autocast_dtype, is_autocast_enabled
from ..autograd import is_grad_enabled

__all__ = ["leaky_relu", "leaky_relu_", "elu", "elu_", "softplus", "mish", "logsigmoid",
           "hardtanh", "hardtanh_", "relu6", "selu", "selu_", "celu", "celu_", "hardsigmoid",
           "softsign", "tanhshrink", "threshold", "threshold_", "glu", "softmin", "prelu",
           "softshrink", "hardshrink", "rrelu", "rrelu_", "gumbel_softmax", "alpha_dropout",
           "feature_alpha_dropout"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _check(x, fn, arg="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")


def _apply(fn, input, inplace, name):
    """fn(input), or fn's result written into input (returned) when inplace."""
    _check(input, name)
    if not inplace:
        return fn(input)
    src = input.clone() if is_grad_enabled() and input.requires_grad else input
    return input.copy_(fn(src))


def _hardtanh_of(x, lo, hi):
    """clamp(x, lo, hi) with torch's hardtanh gradient (zero at the bounds)."""
    out = _math.clamp(x, lo, hi)
    if is_grad_enabled() and x.requires_grad:
        out = _math.where((x > lo) & (x < hi), x, out.detach())
    return out


# ------------------------------------------------------------- C kernels
def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x if x > 0 else negative_slope * x."""
    return _apply(lambda x: _math.leaky_relu(x, negative_slope), input, inplace, "leaky_relu")


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, True)


def elu(input, alpha=1.0, inplace=False):
    """x if x > 0 else alpha * (exp(x) - 1)."""
    return _apply(lambda x: _math.elu(x, alpha), input, inplace, "elu")


def elu_(input, alpha=1.0):
    return elu(input, alpha, True)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, x itself where beta * x > threshold."""
    _check(input, "softplus")
    return _math.softplus(input, beta, threshold)


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return _apply(_math.mish, input, inplace, "mish")


def logsigmoid(input):
    """log(sigmoid(x)), computed without overflow."""
    _check(input, "logsigmoid")
    return _math.logsigmoid(input)


# ------------------------------------------------------ clamps and masks
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient is zero outside (min_val, max_val)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _apply(lambda x: _hardtanh_of(x, min_val, max_val), input, inplace, "hardtanh")


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, True)


def relu6(input, inplace=False):
    """min(max(0, x), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6."""
    return _apply(lambda x: _hardtanh_of(x + 3.0, 0.0, 6.0) / 6.0, input, inplace,
                  "hardsigmoid")


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    return _apply(lambda x: _math.where(x <= threshold, value, x), input, inplace, "threshold")


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, True)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _check(input, "softshrink")
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return input - _math.clamp(input, -lambd, lambd)


def hardshrink(input, lambd=0.5):
    """x outside [-lambd, lambd], 0 inside."""
    _check(input, "hardshrink")
    return _math.where((input >= -lambd) & (input <= lambd), 0.0, input)  # NaN stays NaN


# ---------------------------------------------------- exponential family
def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _apply(lambda x: _math.elu(x, _SELU_ALPHA) * _SELU_SCALE, input, inplace, "selu")


def selu_(input):
    return selu(input, True)


def _celu_of(x, alpha):
    if alpha > 0:  # elu's kernel: its gradient keeps exp(x / alpha) where expm1 + 1 would not
        neg = _math.elu(x / alpha, 1.0) * alpha
    else:
        neg = _math.expm1(_math.clamp(x, max=0.0) / alpha) * alpha
    return _math.where(x > 0, x, neg)


def celu(input, alpha=1.0, inplace=False):
    """x if x > 0 else alpha * (exp(x / alpha) - 1)."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _apply(lambda x: _celu_of(x, alpha), input, inplace, "celu")


def celu_(input, alpha=1.0):
    return celu(input, alpha, True)


def softsign(input):
    """x / (1 + |x|)."""
    _check(input, "softsign")
    return input / (_math.abs(input) + 1)


def tanhshrink(input):
    """x - tanh(x)."""
    _check(input, "tanhshrink")
    return input - _math.tanh(input)


# ------------------------------------------------------ dims and weights
def glu(input, dim=-1):
    """a * sigmoid(b), a and b the two halves of input along dim."""
    _check(input, "glu")
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-input.ndim}, {input.ndim - 1}], but got {dim})")
    d = dim % input.ndim
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    a, b = input.chunk(2, d)
    return a * _math.sigmoid(b)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input) along dim."""
    _check(input, "softmin")
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call "
                      "to include dim=X as an argument.", stacklevel=_stacklevel)
    return _math_reduce.softmax(-input, dim, dtype=dtype)


def prelu(input, weight):
    """x if x > 0 else weight * x, weight one number or one per channel (dim 1)."""
    _check(input, "prelu")
    _check(weight, "prelu", "weight")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.ndim}")
    c = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() not in (1, c):
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {weight.numel()} and channel size = {c}.")
    dev = input.device.type
    if is_autocast_enabled(dev):  # prelu is on autocast's lower-precision list
        low = get_autocast_dtype(dev)
        input, weight = (t.to(low) if t.dtype in (D.float32, D.float16, D.bfloat16) else t
                         for t in (input, weight))
    if weight.numel() == 1 or input.ndim < 2:
        w = weight.reshape(())
    else:
        w = weight.reshape(*([1, c] + [1] * (input.ndim - 2)))
    return _math.where(input > 0, input, input * w)


# ----------------------------------------------------------- randomised
def _uniform(x):
    """U[0, 1) shaped like x, in x's dtype, on x's device."""
    return rand(*x.shape, dtype=x.dtype, device=x.device)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """leaky_relu with slope (lower + upper) / 2; in training a slope drawn
    uniformly from [lower, upper] for each element."""
    _check(input, "rrelu")
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return leaky_relu(input, (lower + upper) / 2.0, inplace)

    def f(x):
        slope = _uniform(x) * (upper - lower) + lower
        return _math.where(x > 0, x, x * slope)
    return _apply(f, input, inplace, "rrelu")


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) with g ~ Gumbel(0, 1); hard=True returns
    the one-hot of its argmax with the soft sample's gradient."""
    _check(logits, "gumbel_softmax", "logits")
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    u = _uniform(logits)
    gumbels = -_math.log(-_math.log1p(-u))  # -log(Exp(1))
    y = _math_reduce.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y.detach() + y


_ALPHA = 1.7580993408473766  # -SELU's lower bound: selu(-inf) = -scale * alpha


def _alpha_dropout(input, p, training, inplace, feature, name):
    _check(input, name)
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return _apply(lambda x: x * 0.0, input, inplace, name)
    if feature:
        if input.ndim < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    else:
        shape = tuple(input.shape)
    u = rand(*shape, dtype=D.float32, device=input.device)
    keep = (u < 1.0 - p).to(input.dtype)
    a = 1.0 / _pymath.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
    b = (keep - 1.0) * (_ALPHA * a) + _ALPHA * a * p
    return _apply(lambda x: x * (keep * a) + b, input, inplace, name)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout keeping SELU's mean and variance: dropped elements become
    selu's lower bound, then an affine map restores the moments."""
    return _alpha_dropout(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels (dims 0 and 1 draw, the rest share)."""
    return _alpha_dropout(input, p, training, inplace, True, "feature_alpha_dropout")
