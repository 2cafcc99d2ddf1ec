"""torch.nn.functional's 1-d and 3-d pools and the adaptive max pools:
max_pool1d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d,
adaptive_max_pool2d, max_pool3d, avg_pool3d, adaptive_avg_pool3d.

The 1-d pools are torch's own reduction: the 2-d pool of the input with a
height-1 dim inserted before the last (`unsqueeze(-2)`), kernel (1, k),
then that dim removed, so their values, indices (flat per plane: the
column) and CUDA routes are the 2-d ops'. The 3-d pools and the adaptive
max pools run the volume kernels of csrc/cnn_pool3d.c (ops in
ampy/nn/_ops_pool3d.py). Each checks its arguments as torch 2.13 does
(its exception types and messages, in its order).
"""
import numbers

from .._dispatch import dispatch, get_op
from .._tensor import Tensor
from ..autograd import is_grad_enabled
from . import _functional_cnn as FC
from . import _ops_pool3d  # noqa: F401  (registers the volume pool ops)
from ._ops import Saved

__all__ = ["max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d"]

_MAXP3, _MAXP3I, _AVGP3, _AAP3, _AMP2 = (get_op(n) for n in (
    "max_pool3d", "max_pool3d_with_indices", "avg_pool3d", "adaptive_avg_pool3d",
    "adaptive_max_pool2d"))


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _ints(v, fn, arg):
    """torch's IntArrayRef argument: an int -> [v], a sequence of ints -> list."""
    if _is_int(v):
        return [int(v)]
    if isinstance(v, (tuple, list)) and all(_is_int(e) for e in v):
        return [int(e) for e in v]
    raise TypeError(f"{fn}(): argument '{arg}' must be tuple of ints, not {type(v).__name__}")


def _dim_range(input, fn):
    """torch's checkDimRange(2, 4) on argument #1 'self'."""
    FC._check_tensor(input, fn, "input")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor "
                           f"for argument #1 'self' (while checking arguments for {fn})")


def _one(v, fn, arg):
    """torch's check1d: exactly one int."""
    if len(v) != 1:
        raise RuntimeError(f"{fn}() argument '{arg}' should contain one int (got {len(v)})")
    return v[0]


# ------------------------------------------------------------------ 1-d pools
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling over the last dim of (N, C, L) or (C, L)
    (torch.nn.functional.max_pool1d); with return_indices, also the index of
    each maximum along L."""
    fn = "max_pool1d"
    FC._check_tensor(input, fn, "input")
    k, p, d = (_ints(v, fn, a) for v, a in ((kernel_size, "kernel_size"), (padding, "padding"),
                                            (dilation, "dilation")))
    s = [] if stride is None else _ints(stride, fn, "stride")
    if return_indices or (is_grad_enabled() and input.requires_grad):
        # torch's max_pool1d_with_indices: the 2-d pool's checks and messages
        _dim_range(input, fn)
        k1 = _one(k, fn, "kernel_size")
        s1 = _one(s, fn, "stride") if s else k1
        p1, d1 = _one(p, fn, "padding"), _one(d, fn, "dilation")
        out = FC.max_pool2d(input.unsqueeze(-2), (1, k1), (1, s1), (0, p1), (1, d1), ceil_mode,
                            return_indices=True)
        y, idx = out[0].squeeze(-2), out[1].squeeze(-2)
        return (y, idx) if return_indices else y
    k1, s1, p1, d1 = _check_max_pool1d(input, k, s, p, d, ceil_mode)
    return FC.max_pool2d(input.unsqueeze(-2), (1, k1), (1, s1), (0, p1), (1, d1),
                         ceil_mode).squeeze(-2)


def _check_max_pool1d(input, k, s, p, d, ceil_mode):
    """torch's check_max_pool1d (the path without indices)."""
    fn = "max_pool1d"
    shape = list(input.shape)
    if input.ndim not in (2, 3) or 0 in shape[input.ndim - 2:]:
        raise RuntimeError(f"{fn}: Expected 2D or 3D (batch mode) tensor with optional 0 dim "
                           f"batch size for input, but got:{shape}")
    for name, v in (("kernel_size", k), ("stride", s), ("padding", p), ("dilation", d)):
        if len(v) != 1 and not (name == "stride" and not v):
            raise RuntimeError(f"{fn}() {name} must be an int, list of ints or tuple of ints of "
                               f"size 1 but got size {len(v)}")
    k1, p1, d1 = k[0], p[0], d[0]
    s1 = s[0] if s else k1
    if k1 <= 0:
        raise RuntimeError(f"{fn}() kernel_size must be greater than zero, but got {k1}")
    if s1 <= 0:
        raise RuntimeError(f"{fn}() stride must be greater than zero, but got {s1}")
    if p1 < 0:
        raise RuntimeError(f"{fn}() padding must be non-negative, but got {p1}")
    if p1 > k1 // 2:
        raise RuntimeError(f"{fn}() padding should be at most half of kernel size, but got "
                           f"padding={p1} and kernel_size={k1}")
    if d1 <= 0:
        raise RuntimeError(f"{fn}() dilation must be greater than zero, but got {d1}")
    ow = FC._out_len(input.shape[-1], k1, s1, p1, d1, ceil_mode)
    if ow <= 0:
        raise RuntimeError(f"{fn}() Invalid computed output size: {ow}")
    FC._check_float(input, "max_pool1d_impl")
    return k1, s1, p1, d1


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling over the last dim (torch.nn.functional.avg_pool1d)."""
    fn = "avg_pool1d"
    FC._check_tensor(input, fn, "input")
    k = _ints(kernel_size, fn, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _ints(stride, fn, "stride")
    p = _ints(padding, fn, "padding")
    _dim_range(input, fn)
    k1, s1, p1 = _one(k, fn, "kernel_size"), _one(s, fn, "stride"), _one(p, fn, "padding")
    return FC.avg_pool2d(input.unsqueeze(-2), (1, k1), (1, s1), (0, p1), ceil_mode,
                         count_include_pad).squeeze(-2)


def _out1(output_size, fn):
    if output_size is None:
        raise TypeError(f"{fn}(): argument 'output_size' (position 2) must be tuple of ints, "
                        f"not NoneType")
    return _one(_ints(output_size, fn, "output_size"), fn, "output_size")


def adaptive_avg_pool1d(input, output_size):
    """Adaptive 1-d average pooling to output_size bins
    (torch.nn.functional.adaptive_avg_pool1d)."""
    fn = "adaptive_avg_pool1d"
    FC._check_tensor(input, fn, "input")
    o = _out1(output_size, fn)
    _dim_range(input, fn)
    return FC.adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Adaptive 1-d max pooling to output_size bins
    (torch.nn.functional.adaptive_max_pool1d); with return_indices, also
    the index of each maximum along the last dim."""
    fn = "adaptive_max_pool1d"
    FC._check_tensor(input, fn, "input")
    o = _out1(output_size, fn)
    _dim_range(input, fn)
    for i in range(1, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {i} being empty")
    y, idx = adaptive_max_pool2d(input.unsqueeze(-2), (1, o), return_indices=True)
    y, idx = y.squeeze(-2), idx.squeeze(-2)
    return (y, idx) if return_indices else y


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Adaptive 2-d max pooling (torch.nn.functional.adaptive_max_pool2d):
    output (oh, ow) is the maximum of rows [floor(oh H / OH), ceil((oh + 1)
    H / OH)) and the same for columns (NaN wins, the first maximum wins
    ties); output_size is an int or a pair whose None entries keep the
    input's size. With return_indices, also the flat index ih * W + iw."""
    fn = "adaptive_max_pool2d"
    FC._check_tensor(input, fn, "input")
    size = _with_default(output_size, input)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{fn}(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    for i in range(1, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {i} being empty")
    size = [size, size] if _is_int(size) else size
    if len(size) != 2:
        raise RuntimeError(f"{fn}(): internal error: output_size.size() must be 2")
    FC._check_float(input, fn)
    if any(v < 0 for v in size):
        shape = list(input.shape[:-2]) + list(size)
        bad = next(v for v in size if v < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {shape}")
    saved = Saved()
    y = dispatch(_AMP2, input, (int(size[0]), int(size[1])), saved)
    return (y, saved.a) if return_indices else y


def _with_default(output_size, input):
    """torch's _list_with_default: None entries take the input's sizes."""
    if output_size is None or _is_int(output_size):
        if output_size is None:
            raise TypeError("adaptive pool: output_size must be an int or a sequence, not None")
        return int(output_size)
    out = list(output_size)
    if input.ndim <= len(out):
        raise ValueError(f"Input dimension should be at least {len(out) + 1}")
    tail = list(input.shape[input.ndim - len(out):])
    return [int(d) if v is None else int(v) for v, d in zip(out, tail)]


# ------------------------------------------------------------------ 3-d pools
def _triple(v, fn, form):
    """An int or a sequence of one or three ints -> [a, b, c]; else torch's message."""
    vals = _ints(v, fn, "kernel_size")
    if len(vals) == 1:
        return vals * 3
    if len(vals) == 3:
        return vals
    raise RuntimeError(f"{fn}: {form}")


def _pool3d_sizes(input, fn, k, s, p, d, ceil_mode, check_input_size):
    """Output (OD, OH, OW) after torch's pooling_output_shape and pool3d_shape_check."""
    if input.ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    ins = list(input.shape[-3:])
    outs = []
    for n, kk, ss, pp, dd in zip(ins, k, s, p, d):
        if ss == 0:
            raise RuntimeError("stride should not be zero")
        if pp < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pp}")
        if pp > ((kk - 1) * dd + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pp}, kernel_size={kk} and dilation={dd}")
        outs.append(FC._out_len(n, kk, ss, pp, dd, ceil_mode))
    where = {"max_pool3d": "max_pool3d_with_indices_out_cpu_template()",
             "avg_pool3d": "avg_pool3d()"}[fn]
    for i in range(input.ndim):
        if not (input.ndim == 5 and i == 0) and input.shape[i] <= 0:
            raise RuntimeError(f"{where}: Expected input's non-batch dimensions to have positive "
                               f"length, but input has a shape of {list(input.shape)} and "
                               f"non-batch dimension {input.shape[i]} has length zero!")
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} "
                           f"kH: {k[1]} kW: {k[2]}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dT: {s[0]} dH: {s[1]} "
                           f"dW: {s[2]}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} "
                           f"dilationH: {d[1]} dilationW: {d[2]}")
    if check_input_size and any(n < kk for n, kk in zip(ins, k)):
        raise RuntimeError(f"input image (T: {ins[0]} H: {ins[1]} W: {ins[2]}) smaller than "
                           f"kernel size (kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    if any(kk // 2 < pp for kk, pp in zip(k, p)):
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"kT: {k[0]} kW: {k[2]} kH: {k[1]} padT: {p[0]} padW: {p[2]} "
                           f"padH: {p[1]}")
    if min(outs) < 1:
        c = input.shape[-4]
        raise RuntimeError(f"Given input size: ({c}x{ins[0]}x{ins[1]}x{ins[2]}). Calculated "
                           f"output size: ({c}x{outs[0]}x{outs[1]}x{outs[2]}). Output size is "
                           f"too small")
    FC._check_float(input, {"max_pool3d": "max_pool3d", "avg_pool3d": "avg_pool3d_out_frame"}[fn])
    return tuple(outs)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-d max pooling (torch.nn.functional.max_pool3d) over the last three
    dims of (N, C, D, H, W) or (C, D, H, W); with return_indices, also the
    flat index (id * H + ih) * W + iw of each maximum in its volume."""
    fn = "max_pool3d"
    FC._check_tensor(input, fn, "input")
    k = _triple(kernel_size, fn, "kernel_size must either be a single int, or a tuple of three "
                                 "ints")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _triple(
        stride, fn, "stride must either be omitted, a single int, or a tuple of three ints")
    p = _triple(padding, fn, "padding must either be a single int, or a tuple of three ints")
    d = _triple(dilation, fn, "dilation must be either a single int, or a tuple of three ints")
    out = _pool3d_sizes(input, fn, k, s, p, d, ceil_mode, False)
    saved = Saved()
    # torch autocasts max_pool3d to float32 on the CPU, max_pool3d_with_indices not
    op = _MAXP3I if return_indices else _MAXP3
    y = dispatch(op, input, tuple(k + s + p + d), out, saved)
    return (y, saved.a) if return_indices else y


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-d average pooling (torch.nn.functional.avg_pool3d)."""
    fn = "avg_pool3d"
    FC._check_tensor(input, fn, "input")
    k = _triple(kernel_size, fn, "kernel_size must be a single int, or a tuple of three ints")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _triple(
        stride, fn, "stride must be omitted, a single int, or a tuple of three ints")
    p = _triple(padding, fn, "padding must be a single int, or a tuple of three ints")
    if input.ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out = _pool3d_sizes(input, fn, k, s, p, [1, 1, 1], ceil_mode, True)
    return dispatch(_AVGP3, input, tuple(k + s + p + [1, 1, 1]), out, bool(count_include_pad),
                    int(divisor_override or 0))


def adaptive_avg_pool3d(input, output_size):
    """Adaptive 3-d average pooling (torch.nn.functional.adaptive_avg_pool3d);
    output_size is an int or a triple whose None entries keep the input's
    size. A 1x1x1 output is the mean over the last three dims, as torch
    computes it."""
    fn = "adaptive_avg_pool3d"
    FC._check_tensor(input, fn, "input")
    size = _with_default(output_size, input)
    size = [size] * 3 if _is_int(size) else size
    if len(size) != 3:
        raise RuntimeError(f"{fn}: output_size must be 3")
    if any(v < 0 for v in size):
        raise RuntimeError(f"{fn}: elements of output_size must be greater than or equal to 0 "
                           f"but received {{{size[0]}, {size[1]},{size[2]}}}")  # (torch's spacing)
    if list(size) == [1, 1, 1]:
        FC._check_float(input, "mean")
        return input.mean((-1, -2, -3), keepdim=True)
    for i in range(1, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {i} being empty")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{fn}(): Expected 4D or 5D tensor, but got {list(input.shape)}")
    FC._check_float(input, fn + "_cpu")
    return dispatch(_AAP3, input, tuple(int(v) for v in size))
