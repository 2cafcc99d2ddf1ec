"""ampy.nn.init — torch.nn.init's in-place initialisers, drawing from ampy's
Philox generator (ampy._C.fill_random). All run without recording autograd
history and return the tensor, as torch's do."""
import math
import numbers
import warnings

from .. import _C
from .._creation import default_generator, eye
from .._tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_",
           "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_"]

_UNIFORM, _NORMAL = _C.RANDOM_UNIFORM, _C.RANDOM_NORMAL


def _check(tensor, fn):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{fn}(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"{fn}(): expected a floating-point tensor, got {tensor.dtype}")


def _fill(tensor, kind, a, b, generator):
    """Philox fill of `tensor` in place (through a contiguous buffer when the
    tensor is strided or on the GPU)."""
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return tensor
    g = generator or default_generator
    direct = tensor.is_contiguous() and not tensor.is_cuda
    buf = tensor if direct else _C.empty(tuple(tensor.shape), tensor.dtype)
    seed, off = g._take(buf.numel())
    _C.fill_random(buf, kind, seed, off, float(a), float(b))
    if not direct:
        _C.copy_(tensor, buf if not tensor.is_cuda else buf.to(tensor.device))
    return tensor


def calculate_gain(nonlinearity, param=None):
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, numbers.Real):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    _check(tensor, "uniform_")
    return _fill(tensor, _UNIFORM, a, b, generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    _check(tensor, "normal_")
    return _fill(tensor, _NORMAL, mean, std, generator)


def constant_(tensor, val):
    _check(tensor, "constant_")
    tensor.detach().fill_(val)  # outside autograd, as torch's init runs under no_grad
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    _C.copy_(tensor, eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))
    return tensor


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    _check(tensor, "kaiming_uniform_")
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return _fill(tensor, _UNIFORM, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    _check(tensor, "kaiming_normal_")
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return _fill(tensor, _NORMAL, 0.0, std, generator)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _fill(tensor, _UNIFORM, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _fill(tensor, _NORMAL, 0.0, std, generator)
