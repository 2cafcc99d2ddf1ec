"""nn.functional.conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d and
conv_transpose3d: torch's argument rules and messages, then one dispatch of the
canonical op (ampy/nn/_ops_conv.py, ampy/nn/_ops_conv3d.py).

Checks follow ATen's Convolution.cpp (check_shape_forward and the
padding="same" branch of _convolution_mode), in its order: the input's
dims, the argument lists' lengths, non-positive stride/dilation/groups,
negative padding, the weight's dims and groups, the channels, the bias, and
the padded input against the dilated kernel; then the dtypes.
"""
from .. import _dtype as D
from .._dispatch import _hooks, dispatch, get_op
from .._tensor import Tensor
from . import _ops_conv, _ops_conv3d  # noqa: F401  (declare the ops looked up below)

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "int_tuple"]

_CONV1D, _CONV2D, _CONV3D, _CONV_T1D, _CONV_T2D, _CONV_T3D = (
    get_op(n) for n in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                        "conv_transpose3d"))
_FLOATS = (D.float32, D.float64, D.float16, D.bfloat16)
_TORCH_TYPE = {D.float32: "float", D.float64: "double", D.float16: "c10::Half",
               D.bfloat16: "c10::BFloat16"}


def int_tuple(v, n, name):
    """An int or a list of 1 or n ints as an n-tuple (torch's expand_param_if_needed)."""
    if isinstance(v, bool) or not isinstance(v, (int, tuple, list)):
        if hasattr(v, "__index__") and not isinstance(v, bool):
            return (int(v.__index__()),) * n
        raise TypeError(f"conv: argument '{name}' must be an int or a tuple of ints, not "
                        f"{type(v).__name__}")
    if isinstance(v, int):
        return (v,) * n
    vals = tuple(v)
    for i in vals:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"conv: argument '{name}' must be a tuple of ints, but found "
                            f"element of type {type(i).__name__}")
    if len(vals) == 1:
        return vals * n
    if len(vals) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the convolution dimensions, but got "
                           f"{name}={list(vals)}")
    return vals


def _sizes(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _check_tensors(input, weight, bias, fn):
    for t, arg in ((input, "input"), (weight, "weight")):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument '{arg}' (position {1 if arg == 'input' else 2}) "
                            f"must be Tensor, not {type(t).__name__}")
    if bias is not None and not isinstance(bias, Tensor):
        raise TypeError(f"{fn}(): argument 'bias' must be Tensor, not {type(bias).__name__}")


def _check_dtypes(input, weight, bias):
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"Input type ({_TORCH_TYPE.get(input.dtype, input.dtype)}) and weight "
                           f"type ({_TORCH_TYPE.get(weight.dtype, weight.dtype)}) should be the "
                           f"same")
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError(f"Input type ({_TORCH_TYPE.get(input.dtype, input.dtype)}) and bias "
                           f"type ({_TORCH_TYPE.get(bias.dtype, bias.dtype)}) should be the same")
    if input.dtype not in _FLOATS:
        raise RuntimeError(f"convolution: ampy computes float32, float64, float16 and bfloat16, "
                           f"not {input.dtype}")
    if input.device != weight.device or (bias is not None and bias.device != input.device):
        raise RuntimeError("Expected all tensors to be on the same device, but found input on "
                           f"{input.device}, weight on {weight.device}")


def _check_common(stride, dilation, groups, pad):
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if isinstance(groups, bool) or not isinstance(groups, int):
        raise TypeError(f"conv: argument 'groups' must be int, not {type(groups).__name__}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if pad is not None and any(p < 0 for p in pad):
        raise RuntimeError("negative padding is not supported")


def _check_weight(x, w, groups, n, transposed):
    if w.ndim != n + 2:
        raise RuntimeError(f"Expected {n + 2}-dimensional weight for {x.ndim}-dimensional input "
                           f"{_sizes(x.shape)}, but got {w.ndim}-dimensional weight of size "
                           f"{_sizes(w.shape)} instead")
    if not transposed and w.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{_sizes(w.shape)}] instead")
    want = w.shape[0] if transposed else w.shape[1] * groups
    if x.shape[1] != want:
        head = f"Given transposed=1, weight of size" if transposed else \
            f"Given groups={groups}, weight of size"
        raise RuntimeError(f"{head} {_sizes(w.shape)}, expected input{_sizes(x.shape)} to have "
                           f"{want} channels, but got {x.shape[1]} channels instead")


def _check_bias(w, bias, out_ch):
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_ch):
        raise RuntimeError(f"Given weight of size {_sizes(w.shape)}, expected bias to be "
                           f"1-dimensional with {out_ch} elements, but got bias of size "
                           f"{_sizes(bias.shape)} instead")


def _same_padding(k, dilation):
    """padding="same": (before, after) per dim; after is one larger for an odd
    total, as ATen's _convolution_mode pads it."""
    before, after = [], []
    for kk, d in zip(k, dilation):
        total = d * (kk - 1)
        before.append(total // 2)
        after.append(total - total // 2)
    return tuple(before), tuple(after)


def _out_size(x, k, stride, before, after, dilation):
    padded = tuple(s + b + a for s, b, a in zip(x.shape[2:], before, after))
    eff = tuple(d * (kk - 1) + 1 for kk, d in zip(k, dilation))
    if any(p < e for p, e in zip(padded, eff)):
        fmt = lambda t: " x ".join(str(i) for i in t)
        raise RuntimeError(f"Calculated padded input size per channel: ({fmt(padded)}). Kernel "
                           f"size: ({fmt(eff)}). Kernel size can't be greater than actual input "
                           f"size")
    return tuple((p - e) // s + 1 for p, e, s in zip(padded, eff, stride))


def _batchify(input, n, fn):
    if input.ndim == n + 2:
        return input, False
    if input.ndim == n + 1:
        return input.unsqueeze(0), True
    raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {fn}, but "
                       f"got input of size: {_sizes(input.shape)}")


def _conv(op, n, fn, input, weight, bias, stride, padding, dilation, groups):
    _check_tensors(input, weight, bias, fn)
    x, unbatched = _batchify(input, n, fn)
    stride = int_tuple(stride, n, "stride")
    dilation = int_tuple(dilation, n, "dilation")
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        pad = None
    else:
        pad = int_tuple(padding, n, "padding")
    _check_common(stride, dilation, groups, pad)
    _check_weight(x, weight, groups, n, False)
    _check_bias(weight, bias, weight.shape[0])
    k = tuple(weight.shape[2:])
    if padding == "same":
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        before, after = _same_padding(k, dilation)
    else:
        before = after = (0,) * n if pad is None else pad
    out = _out_size(x, k, stride, before, after, dilation)
    if _hooks.autocast is not None:  # torch checks the dtypes autocast hands the op
        (x, weight, bias), _ = _hooks.autocast(op, (x, weight, bias), {})
    _check_dtypes(x, weight, bias)
    y = dispatch(op, x, weight, bias, stride, before, dilation, groups, out)
    return y.squeeze(0) if unbatched else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv1d: (N, C, L) or (C, L) input."""
    return _conv(_CONV1D, 1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d: (N, C, H, W) or (C, H, W) input; padding an
    int, a pair, "valid" or "same" (stride 1 only)."""
    return _conv(_CONV2D, 2, "conv2d", input, weight, bias, stride, padding, dilation, groups)


def _opad_message(n, opad, stride, dilation):
    """ATen's words for two or three dims; a 1-d call is its height-1 case."""
    names = ("depth", "height", "width") if n == 3 else ("height", "width")
    m = len(names)
    op2, s2, d2 = ((0,) * (m - n) + opad, (1,) * (m - n) + stride, (1,) * (m - n) + dilation)
    parts = [f"output_padding_{a}: {v}" for a, v in zip(names, op2)]
    parts += [f"stride_{a}: {v}" for a, v in zip(names, s2)]
    parts += [f"dilation_{a}: {v}" for a, v in zip(names, d2)]
    return ("output padding must be smaller than either stride or dilation, but got " +
            " ".join(parts))


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d: (N, C, D, H, W) or (C, D, H, W) input;
    padding an int, a triple, "valid" or "same" (stride 1 only)."""
    return _conv(_CONV3D, 3, "conv3d", input, weight, bias, stride, padding, dilation, groups)


def _conv_t(op, n, fn, input, weight, bias, stride, padding, output_padding, groups,
            dilation):
    """torch's transposed convolution checks for n spatial dims (1, 2 or 3), then
    one dispatch of `op` in its canonical form."""
    _check_tensors(input, weight, bias, fn)
    if isinstance(padding, str):
        raise TypeError(f"{fn}(): argument 'padding' must be tuple of ints, not str")
    x, unbatched = _batchify(input, n, fn)
    stride = int_tuple(stride, n, "stride")
    dilation = int_tuple(dilation, n, "dilation")
    pad = int_tuple(padding, n, "padding")
    opad = int_tuple(output_padding, n, "output_padding")
    _check_common(stride, dilation, groups, pad)
    if any(p < 0 for p in opad):
        raise RuntimeError("negative output_padding is not supported")
    if any(p >= s and p >= d for p, s, d in zip(opad, stride, dilation)):
        raise RuntimeError(_opad_message(n, opad, stride, dilation))
    _check_weight(x, weight, groups, n, True)
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{_sizes(weight.shape)}] "
                           f"instead")
    _check_bias(weight, bias, weight.shape[1] * groups)
    out = tuple((h - 1) * s - 2 * p + d * (k - 1) + op + 1 for h, s, p, d, k, op in
                zip(x.shape[2:], stride, pad, dilation, weight.shape[2:], opad))
    if any(o <= 0 for o in out):
        fmt = lambda t: " x ".join(str(i) for i in t)
        raise RuntimeError(f"Given input size per channel: ({fmt(x.shape[2:])}). "
                           f"Calculated output size per channel: ({fmt(out)}). "
                           f"Output size is too small")
    if _hooks.autocast is not None:  # torch checks the dtypes autocast hands the op
        (x, weight, bias), _ = _hooks.autocast(op, (x, weight, bias), {})
    _check_dtypes(x, weight, bias)
    y = dispatch(op, x, weight, bias, stride, pad, out, groups, dilation)
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose1d: (N, C, L) or (C, L) input; weight
    (in_channels, out_channels / groups, k). Runs conv_transpose2d's kernels
    with a height of 1."""
    return _conv_t(_CONV_T1D, 1, "conv_transpose1d", input, weight, bias, stride, padding,
                   output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose2d: the gradient of conv2d with
    respect to its input; weight (in_channels, out_channels / groups, kH, kW)."""
    return _conv_t(_CONV_T2D, 2, "conv_transpose2d", input, weight, bias, stride, padding,
                   output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose3d: the gradient of conv3d with
    respect to its input; weight (in_channels, out_channels / groups, kD, kH,
    kW)."""
    return _conv_t(_CONV_T3D, 3, "conv_transpose3d", input, weight, bias, stride, padding,
                   output_padding, groups, dilation)
