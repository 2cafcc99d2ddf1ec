"""torch.nn.functional.rms_norm, composed as torch's CPU composite: the input
upcast to its op-math dtype (float32 for halves), x * rsqrt(mean(x^2) + eps)
over the trailing dims, cast back to the input's dtype, then times weight.
eps=None is the op-math dtype's machine epsilon, as torch uses."""
import numbers

from .. import _dtype as D
from .. import _math, _math_reduce
from .._tensor import Tensor

__all__ = ["rms_norm"]

_EPS = {D.float32: 2.0 ** -23, D.float64: 2.0 ** -52}


def rms_norm(input, normalized_shape, weight=None, eps=None):
    if not isinstance(input, Tensor):
        raise TypeError(f"rms_norm(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size"
                           f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = "
                           f"{list(shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"rms_norm: expected a floating-point input, got {input.dtype}")
    opmath = D.float64 if input.dtype is D.float64 else D.float32
    x = input if input.dtype is opmath else input.to(opmath)
    e = _EPS[opmath] if eps is None else float(eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    r = _math.rsqrt(_math_reduce.mean(x * x, dims, keepdim=True) + e)
    y = x * r
    if y.dtype is not input.dtype:
        y = y.to(input.dtype)
    return y if weight is None else y * weight
