"""torch.nn.functional's cnn functions: batch_norm, group_norm, max_pool2d,
avg_pool2d, adaptive_avg_pool2d, pad, interpolate, dropout1d/2d/3d, and
ampy.flatten.

Each checks its arguments as torch does (torch's exception types and
messages, in torch's order), computes the output sizes (torch's
pooling_output_shape and interpolate rules) and dispatches the op of
ampy/nn/_ops_cnn.py, whose C kernels do the numerics.
"""
import math
import numbers
import warnings

from .. import _C
from .. import _dtype as D
from .._creation import default_generator
from .._dispatch import dispatch, get_op
from .._tensor import Tensor
from ..autograd import is_grad_enabled
from ._ops import Saved
from ._ops_cnn import PAD_MODES, PAD_OPS

__all__ = ["batch_norm", "group_norm", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "pad",
           "interpolate", "dropout1d", "dropout2d", "dropout3d", "flatten"]

_BN, _GN, _MAXP, _AVGP, _AAP = (get_op(n) for n in (
    "batch_norm", "group_norm", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"))
_TORCH_NAMES = {D.int64: "Long", D.int32: "Int", D.uint8: "Byte", D.bool: "Bool",
                getattr(D, "int16", None): "Short", getattr(D, "int8", None): "Char"}


def _check_tensor(x, fn, arg):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _check_float(x, fn):
    if not x.dtype.is_floating_point:
        name = _TORCH_NAMES.get(x.dtype, str(x.dtype))
        raise NotImplementedError(f'"{fn}" not implemented for \'{name}\'')


def _grad_wanted(*ts):
    return is_grad_enabled() and any(t is not None and t.requires_grad for t in ts)


# -------------------------------------------------------------------- norms
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalisation over dim 1 (torch.nn.functional.batch_norm).
    Training normalises with the batch mean and biased variance and, when
    running stats are given, updates them in place with the unbiased variance:
    r = momentum * batch + (1 - momentum) * r. Evaluation uses the running
    stats. Statistics accumulate in double; half inputs take float32
    parameters and give a half output, as torch's CPU kernel."""
    _check_tensor(input, "batch_norm", "input")
    if training:
        size = tuple(input.shape)
        n = size[0] if size else 1
        for s in size[2:]:
            n *= s
        if n == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {input.shape}")
    _check_float(input, "batch_norm")
    if input.ndim < 2:
        raise RuntimeError(f"batch_norm: expected an input of at least 2 dims, got "
                           f"{input.ndim}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None:
            _check_tensor(t, "batch_norm", name)
            if t.numel() != c:
                raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
        elif not training:
            raise RuntimeError(f"{name} must be defined in evaluation mode")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _check_tensor(t, "batch_norm", name)
            if t.numel() != c:
                raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    stats = [t for t in (running_mean, running_var) if t is not None]
    if training and len(stats) == 1:
        raise RuntimeError("batch_norm: running_mean and running_var must both be given or "
                           "both be None")
    saved = Saved() if _grad_wanted(input, weight, bias) else None
    if training and stats and not all(t.is_contiguous() for t in stats):
        rm, rv = running_mean.contiguous(), running_var.contiguous()
        out = dispatch(_BN, input, weight, bias, rm, rv, True, momentum, eps, saved)
        running_mean.copy_(rm)
        running_var.copy_(rv)
        return out
    return dispatch(_BN, input, weight, bias, running_mean, running_var, bool(training),
                    float(momentum), float(eps), saved)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalisation (torch.nn.functional.group_norm): the channels of
    each sample are split into num_groups groups, each normalised with its
    own mean and biased variance, then scaled and shifted per channel."""
    _check_tensor(input, "group_norm", "input")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input.shape[0], input.shape[1]
    size = [n * c // num_groups, num_groups] + list(input.shape[2:])
    if math.prod(size[:1] + size[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {size}")
    _check_float(input, "group_norm")
    if num_groups <= 0 or c % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _check_tensor(t, "group_norm", name)
            if t.ndim != 1 or t.numel() != c:
                raise RuntimeError(f"Expected {name} to be a vector of size equal to the number "
                                   f"of channels in input, but got {name} of shape "
                                   f"{list(t.shape)} and input of shape {list(input.shape)}")
    saved = Saved() if _grad_wanted(input, weight, bias) else None
    return dispatch(_GN, input, int(num_groups), weight, bias, float(eps), saved)


# -------------------------------------------------------------------- pools
def _pair(v, fn, what, allow_none=False):
    """An int or a sequence of one or two ints -> (a, b) (torch's messages)."""
    if allow_none and (v is None or (isinstance(v, (tuple, list)) and len(v) == 0)):
        return None
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v), int(v)
    if isinstance(v, (tuple, list)) and len(v) in (1, 2) and all(
            isinstance(e, numbers.Integral) for e in v):
        return (int(v[0]), int(v[0])) if len(v) == 1 else (int(v[0]), int(v[1]))
    form = {"kernel_size": "must either be a single int, or a tuple of two ints",
            "stride": "must either be omitted, a single int, or a tuple of two ints",
            "padding": "must either be a single int, or a tuple of two ints",
            "dilation": "must be either a single int, or a tuple of two ints"}[what]
    raise RuntimeError(f"{fn}: {what} {form}")


def _pool_sizes(input, fn, k, s, p, d, ceil_mode):
    """Output (OH, OW) after torch's checks (pooling_output_shape, pool2d_shape_check)."""
    _check_tensor(input, fn, "input")
    if s[0] == 0 or s[1] == 0:
        raise RuntimeError("stride should not be zero")
    for pad, kk, dd in ((p[0], k[0], d[0]), (p[1], k[1], d[1])):
        if pad < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
        if pad > ((kk - 1) * dd + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pad}, kernel_size={kk} and dilation={dd}")
    if k[0] <= 0 or k[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} "
                           f"kW: {k[1]}")
    if s[0] < 0 or s[1] < 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {s[0]} dW: {s[1]}")
    if d[0] <= 0 or d[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {d[0]} "
                           f"dilationW: {d[1]}")
    if input.ndim not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    if any(input.shape[i] == 0 for i in range(input.ndim - 3, input.ndim)):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch "
                           f"size for input, but got:{list(input.shape)}")
    _check_float(input, fn)
    h, w = input.shape[-2], input.shape[-1]
    oh = _out_len(h, k[0], s[0], p[0], d[0], ceil_mode)
    ow = _out_len(w, k[1], s[1], p[1], d[1], ceil_mode)
    if oh < 1 or ow < 1:
        c = input.shape[-3]
        raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{oh}x{ow}). Output size is too small")
    return oh, ow


def _out_len(n, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape (ampy/cnn_math.h states the same rule for C)."""
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling (torch.nn.functional.max_pool2d); with return_indices,
    also the flat index (row * W + col) of each maximum in its plane."""
    fn = "max_pool2d"
    k = _pair(kernel_size, fn, "kernel_size")
    s = _pair(stride, fn, "stride", allow_none=True) or k
    p = _pair(padding, fn, "padding")
    d = _pair(dilation, fn, "dilation")
    oh, ow = _pool_sizes(input, fn, k, s, p, d, ceil_mode)
    saved = Saved()
    out = dispatch(_MAXP, input, (k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1]), (oh, ow),
                   saved)
    return (out, saved.a) if return_indices else out


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pooling (torch.nn.functional.avg_pool2d)."""
    fn = "avg_pool2d"
    k = _pair(kernel_size, fn, "kernel_size")
    s = _pair(stride, fn, "stride", allow_none=True) or k
    p = _pair(padding, fn, "padding")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    oh, ow = _pool_sizes(input, fn, k, s, p, (1, 1), ceil_mode)
    return dispatch(_AVGP, input, (k[0], k[1], s[0], s[1], p[0], p[1], 1, 1), (oh, ow),
                    bool(count_include_pad), int(divisor_override or 0))


def adaptive_avg_pool2d(input, output_size):
    """Adaptive 2-d average pooling to output_size (an int, or a pair whose
    None entries keep the input's size). A 1x1 output is the mean over the
    last two dims, as torch computes it."""
    _check_tensor(input, "adaptive_avg_pool2d", "input")
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
        size = tuple(input.shape[input.ndim - 2 + i] if v is None else int(v)
                     for i, v in enumerate(output_size))
    else:
        size = (int(output_size), int(output_size))
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{list(input.shape)}")
    for i in range(input.ndim - 3 if input.ndim == 4 else 0, input.ndim):
        if i > 0 and input.shape[i] == 0 or (input.ndim == 3 and input.shape[i] == 0):
            raise RuntimeError(f"adaptive_avg_pool2d(): Expected input to have non-zero size for "
                               f"non-batch dimensions, but input has sizes {list(input.shape)} "
                               f"with dimension {i} being empty")
    _check_float(input, "adaptive_avg_pool2d")
    if size[0] < 0 or size[1] < 0:
        raise RuntimeError(f"adaptive_avg_pool2d: elements of output_size must be greater than "
                           f"or equal to 0 but received {{{size[0]}, {size[1]}}}")
    if size == (1, 1):
        return input.mean((-1, -2), keepdim=True)
    return dispatch(_AAP, input, size)


# ------------------------------------------------------------------ padding
_NONCONST_HELP = ("Supported combinations for non-constant padding:\n"
                  "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                  "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                  "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def pad(input, pad, mode="constant", value=None):
    """Pads the last len(pad) // 2 dims (torch.nn.functional.pad): pad lists
    (left, right) for the last dim, then for the dim before, ... Modes:
    constant (value, default 0; negative pads crop), reflect, replicate,
    circular."""
    _check_tensor(input, "pad", "input")
    if mode not in PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pads = tuple(int(v) for v in pad)
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    k = len(pads) // 2
    if k > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pads)} and input of "
                           f"dimension {input.ndim}")
    if mode != "constant" and value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if k == 0:
        return input.clone()
    if mode == "constant":
        return _pad_constant(input, pads, 0.0 if value is None else value)
    if k > 3 or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(f"Padding size {len(pads)} is not supported for "
                                  f"{input.ndim}D input tensor.\n{_NONCONST_HELP}")
    _check_pad_fits(input, pads, mode, k)
    _check_float(input, PAD_OPS[(mode, k)])
    return dispatch(get_op(PAD_OPS[(mode, k)]), input, pads, mode)


def _pad_constant(input, pads, value):
    k = len(pads) // 2
    for j in range(k):
        dim = input.ndim - 1 - j
        if input.shape[dim] + pads[2 * j] + pads[2 * j + 1] < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
    if k > 3:
        raise NotImplementedError("pad: ampy pads at most the last 3 dims")
    _check_float(input, "constant_pad_nd")
    return dispatch(get_op("constant_pad_nd"), input, pads, "constant", float(value))


def _check_pad_fits(input, pads, mode, k):
    shape = list(input.shape)
    first = input.ndim - k
    if any(shape[i] == 0 for i in range(1 if input.ndim == k + 2 else 0, input.ndim)):
        raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 "
                           f"batch size and other non-zero dimensions for input, but got: "
                           f"{shape}")
    for j in range(k):
        dim = input.ndim - 1 - j
        lo, hi = pads[2 * j], pads[2 * j + 1]
        n = shape[dim]
        if mode == "reflect" and (lo >= n or hi >= n or -lo >= n or -hi >= n):
            raise RuntimeError(f"Argument #{4 + 2 * j}: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({lo}, {hi}) "
                               f"at dimension {dim} of input {shape}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n + lo + hi < 0 or (mode == "replicate" and n + lo + hi < 1 and dim >= first):
            raise RuntimeError(f"input (H: {n}) is too small. Calculated output W: "
                               f"{n + lo + hi}")


# -------------------------------------------------------------- interpolate
def _spatial(v, input, what):
    if isinstance(v, (tuple, list)):
        if len(v) != input.ndim - 2:
            other = "output size of" if what == "size" else "scale_factor of shape"
            fmt = "output size in (o1, o2, ...,oK)" if what == "size" else \
                "scale_factor in (s1, s2, ...,sK)"
            raise ValueError(f"Input and {what if what == 'scale_factor' else 'output'} must "
                             f"have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(input.shape[2:])} and {other} {v}. "
                             f"Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             f"{fmt} format.")
        return list(v)
    return [v] * (input.ndim - 2)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizes a 4-d (N, C, H, W) input to `size` or by `scale_factor`
    (torch.nn.functional.interpolate) with mode 'nearest' or 'bilinear'
    (align_corners, half-pixel centres otherwise)."""
    _check_tensor(input, "interpolate", "input")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out, scales = [int(v) for v in _spatial(size, input, "size")], None
    elif scale_factor is not None:
        out, scales = None, [float(v) for v in _spatial(scale_factor, input, "scale_factor")]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor:
        out = [math.floor(float(input.shape[i + 2]) * scales[i]) for i in range(input.ndim - 2)]
        scales = None
    if antialias:
        raise NotImplementedError("interpolate: ampy has no antialias")
    if input.ndim != 4 or mode not in ("nearest", "bilinear"):
        if input.ndim == 3 and mode == "bilinear":
            raise NotImplementedError("Got 3D input, but bilinear mode needs 4D input")
        raise NotImplementedError(f"interpolate: ampy supports 4D input with the modes nearest "
                                  f"| bilinear (got {input.ndim}D, mode {mode})")
    h, w = input.shape[2], input.shape[3]
    if out is None:
        out = [int(float(h) * scales[0]), int(float(w) * scales[1])]
    if h <= 0 or w <= 0 or out[0] <= 0 or out[1] <= 0:
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"(H: {h}, W: {w}) output (H: {out[0]}, W: {out[1]})")
    _check_float(input, f"upsample_{mode}2d")
    op = get_op(f"upsample_{mode}2d")
    return dispatch(op, input, (out[0], out[1]), mode, bool(align_corners),
                    (0.0, 0.0) if scales is None else (scales[0], scales[1]))


# ---------------------------------------------------------------- dropout2d
def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels (dim 1) with probability p and scales the rest by
    1 / (1 - p) (torch.nn.functional.dropout2d); the channel mask is drawn by
    ampy's Philox generator."""
    _check_tensor(input, "dropout2d", "input")
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-"
                      "wise 1D dropout behavior is desired - input is interpreted as shape (N, C, "
                      "L), where C is the channel dim. This behavior will change in a future "
                      "release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def _feature_dropout(input, p, training, inplace):
    """torch's feature_dropout: whole channels (dim 1) zeroed with
    probability p, the rest scaled by 1 / (1 - p); the mask is drawn by
    ampy's Philox generator."""
    if p == 0 or not training or input.numel() == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    if p == 1:
        noise = _C.cast(_C.empty(shape, D.uint8).fill_(0), input.dtype)
    else:
        mask = _C.empty(shape, D.uint8)
        seed, off = default_generator._take(mask.numel())
        _C.fill_random(mask, _C.RANDOM_BERNOULLI, seed, off, 1.0 - float(p), 0.0)
        noise = _C.cast(mask, input.dtype) / (1.0 - float(p))
    if inplace:
        return input.mul_(noise)
    return input * noise


def _check_p(p):
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _unbatched_dropout(input, p, training, inplace, batched):
    """torch's dropout1d/3d tail: an unbatched input is dropped as a batch of one."""
    if batched:
        return _feature_dropout(input, p, training, inplace)
    if inplace:
        out = _feature_dropout(input.unsqueeze_(0), p, training, True)
        return out.squeeze_(0)
    return _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of an (N, C, L) or (C, L) input with probability
    p and scales the rest by 1 / (1 - p) (torch.nn.functional.dropout1d)."""
    _check_tensor(input, "dropout1d", "input")
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout "
                           "on inputs with 1 spatial dimension, a channel dimension, and an "
                           "optional batch dimension (i.e. 2D or 3D inputs).")
    return _unbatched_dropout(input, p, training, inplace, input.ndim == 3)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of an (N, C, D, H, W) or (C, D, H, W) input with
    probability p and scales the rest by 1 / (1 - p)
    (torch.nn.functional.dropout3d)."""
    _check_tensor(input, "dropout3d", "input")
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 4D or 5D inputs).", stacklevel=2)
    return _unbatched_dropout(input, p, training, inplace, input.ndim == 5)


def flatten(input, start_dim=0, end_dim=-1):
    """input with dims start_dim..end_dim merged into one (torch.flatten)."""
    _check_tensor(input, "flatten", "input")
    return input.flatten(start_dim, end_dim)
