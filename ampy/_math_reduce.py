"""Reductions, softmax, scans, cat and stack (torch signatures).

Forwards call _C.reduce / _C.softmax / _C.scan (csrc/reduce.c,
csrc/reduce_softmax.c): floating inputs accumulate in double and round once
into the result dtype; integer inputs accumulate exactly in int64. A `dtype=`
argument casts the input first, as torch does. cat/stack allocate the result
(dtype promoted over the inputs) and copy each input into its slice in C.
"""
import builtins as _b
import collections as _collections
import math as _pymath

from . import _C
from . import _dtype as D
from . import _views
from ._math import abs as _abs, isnan, maximum, minimum, ne, pow as _pow, where
from ._dispatch import CPU_CUDA, defop, dispatch, get_op
from ._shape import wrap_dim
from ._tensor import Tensor

__all__ = ["sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var",
           "std", "var_mean", "std_mean", "norm", "logsumexp", "all", "any", "softmax",
           "log_softmax", "cumsum", "cumprod", "cat", "concat", "concatenate", "stack",
           "count_nonzero", "nansum"]

_reduce = _C.reduce

# torch.return_types.max / min: a named pair (values, indices)
_MaxRet = _collections.namedtuple("max", ["values", "indices"])
_MinRet = _collections.namedtuple("min", ["values", "indices"])


def _tensor_arg(x, fn):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be a Tensor, not {type(x).__name__}")
    return x


def _cast_for(x, dtype):
    return x if dtype is None else x.to(D.to_dtype(dtype))


# ---- sum / mean / prod / all / any / norm ---------------------------------------
def _simple(name, default_dim=None):
    def fwd(input, dim=default_dim, keepdim=False, dtype=None):
        _tensor_arg(input, name)
        return _reduce(name, _cast_for(input, dtype), dim, keepdim, None, 0.0, False)

    defop(name, devices=CPU_CUDA)(fwd)
    return get_op(name)


_SUM, _MEAN, _PROD = _simple("sum"), _simple("mean"), _simple("prod")
_ALL, _ANY = _simple("all"), _simple("any")


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001 (torch's name)
    """Sum over all elements or over dim (an int or a tuple); integers give int64."""
    if dim is None and not keepdim and dtype is None:
        return dispatch(_SUM, input)
    return dispatch(_SUM, input, dim, keepdim, dtype)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum treating NaN as zero."""
    x = where(isnan(input), 0, input) if input.dtype.is_floating_point else input
    return sum(x, dim, keepdim, dtype=dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of a floating tensor (integer inputs need dtype=, as in torch)."""
    if dim is None and not keepdim and dtype is None:
        return dispatch(_MEAN, input)
    return dispatch(_MEAN, input, dim, keepdim, dtype)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    return dispatch(_PROD, input, dim, keepdim, dtype)


def all(input, dim=None, keepdim=False):  # noqa: A001
    return dispatch(_ALL, input, dim, keepdim)


def any(input, dim=None, keepdim=False):  # noqa: A001
    return dispatch(_ANY, input, dim, keepdim)


def count_nonzero(input, dim=None):
    return sum(ne(input, 0), dim)


@defop("norm", devices=CPU_CUDA)
def _norm_fwd(input, p="fro", dim=None, keepdim=False, dtype=None):
    x = _cast_for(_tensor_arg(input, "norm"), dtype)
    if not x.dtype.is_floating_point:
        raise TypeError(f"norm: expected a floating point input, got {x.dtype}")
    if p in ("fro", 2, 2.0, None):
        return _reduce("norm", x, dim, keepdim, None, 0.0, False)
    if p in (1, 1.0):
        return _reduce("sum", _abs(x), dim, keepdim, None, 0.0, False)
    if p == _pymath.inf:
        return _reduce("max", _abs(x), dim, keepdim, None, 0.0, False)
    if p == -_pymath.inf:
        return _reduce("min", _abs(x), dim, keepdim, None, 0.0, False)
    if p == 0:
        return _reduce("sum", ne(x, 0), dim, keepdim, x.dtype, 0.0, False)
    if isinstance(p, str):
        raise ValueError(f"norm: unsupported norm type {p!r}")
    s = _reduce("sum", _pow(_abs(x), float(p)), dim, keepdim, None, 0.0, False)
    return _pow(s, 1.0 / float(p))


_NORM = get_op("norm")


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector norm over all elements or dim: p = 'fro'/2, 1, inf, -inf, 0 or any number."""
    return dispatch(_NORM, input, p, dim, keepdim, dtype)


# ---- max / min / amax / amin / argmax / argmin ------------------------------------
@defop("amax", devices=CPU_CUDA, names=("ampy.amax", "Tensor.amax", "ampy.max", "Tensor.max"))
def _amax_fwd(input, dim=(), keepdim=False):
    return _reduce("max", _tensor_arg(input, "amax"), dim, keepdim, None, 0.0, False)


@defop("amin", devices=CPU_CUDA, names=("ampy.amin", "Tensor.amin", "ampy.min", "Tensor.min"))
def _amin_fwd(input, dim=(), keepdim=False):
    return _reduce("min", _tensor_arg(input, "amin"), dim, keepdim, None, 0.0, False)


@defop("max_dim", devices=CPU_CUDA, names=("ampy.max", "Tensor.max"))
def _max_dim_fwd(input, dim, keepdim=False):
    return _MaxRet(*_reduce("max", _tensor_arg(input, "max"), dim, keepdim, None, 0.0, True))


@defop("min_dim", devices=CPU_CUDA, names=("ampy.min", "Tensor.min"))
def _min_dim_fwd(input, dim, keepdim=False):
    return _MinRet(*_reduce("min", _tensor_arg(input, "min"), dim, keepdim, None, 0.0, True))


_AMAX, _AMIN, _MAX_DIM, _MIN_DIM = (get_op(n) for n in ("amax", "amin", "max_dim", "min_dim"))


def _check_int_dim(dim, fn):
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{fn}(): argument 'dim' must be int, not {type(dim).__name__}")


def max(input, dim=None, keepdim=False):  # noqa: A001
    """max(input) -> 0-d max; max(input, dim) -> (values, indices); max(input, other)
    -> maximum(input, other)."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        if keepdim:
            raise TypeError("max(): keepdim=True needs a dim")
        return dispatch(_AMAX, input)
    _check_int_dim(dim, "max")
    return dispatch(_MAX_DIM, input, dim, keepdim)


def min(input, dim=None, keepdim=False):  # noqa: A001
    """min(input), min(input, dim) -> (values, indices), or minimum(input, other)."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        if keepdim:
            raise TypeError("min(): keepdim=True needs a dim")
        return dispatch(_AMIN, input)
    _check_int_dim(dim, "min")
    return dispatch(_MIN_DIM, input, dim, keepdim)


def amax(input, dim=(), keepdim=False):
    return dispatch(_AMAX, input, dim, keepdim)


def amin(input, dim=(), keepdim=False):
    return dispatch(_AMIN, input, dim, keepdim)


@defop("argmax", devices=CPU_CUDA)
def _argmax_fwd(input, dim=None, keepdim=False):
    return _reduce("argmax", _tensor_arg(input, "argmax"), dim, keepdim, None, 0.0, False)


@defop("argmin", devices=CPU_CUDA)
def _argmin_fwd(input, dim=None, keepdim=False):
    return _reduce("argmin", _tensor_arg(input, "argmin"), dim, keepdim, None, 0.0, False)


_ARGMAX, _ARGMIN = get_op("argmax"), get_op("argmin")


def argmax(input, dim=None, keepdim=False):
    """Index of the first maximum (of the flattened input when dim is None)."""
    if dim is not None:
        _check_int_dim(dim, "argmax")
    return dispatch(_ARGMAX, input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    if dim is not None:
        _check_int_dim(dim, "argmin")
    return dispatch(_ARGMIN, input, dim, keepdim)


# ---- var / std ---------------------------------------------------------------------
def _correction(name, dim, unbiased, correction):
    if isinstance(dim, bool):  # var(x, False): the legacy `unbiased` positional
        dim, unbiased = None, dim
    if correction is not None and unbiased is not None:
        raise TypeError(f"{name}(): pass either unbiased or correction, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, float(correction)


def _varstd(name):
    @defop(name, devices=CPU_CUDA)
    def fwd(input, dim=None, correction=1.0, keepdim=False):
        return _reduce(name, _tensor_arg(input, name), dim, keepdim, None, float(correction),
                       False)

    return get_op(name)


_VAR, _STD = _varstd("var"), _varstd("std")


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance: sum((x - mean)^2) / max(0, N - correction); correction 1 by default."""
    dim, corr = _correction("var", dim, unbiased, correction)
    return dispatch(_VAR, input, dim, corr, keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, corr = _correction("std", dim, unbiased, correction)
    return dispatch(_STD, input, dim, corr, keepdim)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return (var(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim if not isinstance(dim, bool) else None, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return (std(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim if not isinstance(dim, bool) else None, keepdim))


# ---- logsumexp / softmax / scans ----------------------------------------------------
@defop("logsumexp", devices=CPU_CUDA)
def _lse_fwd(input, dim, keepdim=False):
    x = _tensor_arg(input, "logsumexp")
    if not x.dtype.is_floating_point:
        x = x.to(D.get_default_dtype())
    return _reduce("logsumexp", x, dim, keepdim, None, 0.0, False)


_LSE = get_op("logsumexp")


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(x))) over dim, computed with the maximum subtracted."""
    return dispatch(_LSE, input, dim, keepdim)


def _softmax_op(name, log):
    @defop(name, devices=CPU_CUDA)
    def fwd(input, dim, dtype=None):
        x = _cast_for(_tensor_arg(input, name), dtype)
        if not x.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a floating point input, got {x.dtype} (pass "
                            f"dtype=)")
        return _C.softmax(x, dim, log)

    return get_op(name)


_SOFTMAX, _LOG_SOFTMAX = _softmax_op("softmax", False), _softmax_op("log_softmax", True)


def _check_softmax_dim(dim, name):
    if dim is None:
        raise TypeError(f"{name}(): argument 'dim' is required")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")


def softmax(input, dim, dtype=None):
    """exp(x - max) / sum(exp(x - max)) along dim; dtype= casts the input first."""
    _check_softmax_dim(dim, "softmax")
    return dispatch(_SOFTMAX, input, dim) if dtype is None else dispatch(_SOFTMAX, input, dim,
                                                                         dtype)


def log_softmax(input, dim, dtype=None):
    """(x - max) - log(sum(exp(x - max))) along dim."""
    _check_softmax_dim(dim, "log_softmax")
    return dispatch(_LOG_SOFTMAX, input, dim) if dtype is None else dispatch(
        _LOG_SOFTMAX, input, dim, dtype)


def _scan_op(name, code):
    @defop(name, devices=CPU_CUDA)
    def fwd(input, dim, dtype=None):
        x = _tensor_arg(input, name)
        _check_int_dim(dim, name)
        return _C.scan(code, _cast_for(x, dtype), dim, None)

    return get_op(name)


_CUMSUM, _CUMPROD = _scan_op("cumsum", _C.SCAN_CUMSUM), _scan_op("cumprod", _C.SCAN_CUMPROD)


def cumsum(input, dim, *, dtype=None):
    return dispatch(_CUMSUM, input, dim, dtype)


def cumprod(input, dim, *, dtype=None):
    return dispatch(_CUMPROD, input, dim, dtype)


# ---- cat / stack ----------------------------------------------------------------------
def _tensor_list(tensors, fn):
    if isinstance(tensors, Tensor) or not hasattr(tensors, "__iter__"):
        raise TypeError(f"{fn}(): argument 'tensors' must be a tuple or list of Tensors, not "
                        f"{type(tensors).__name__}")
    ts = list(tensors)
    for i, t in enumerate(ts):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    if not ts:
        raise RuntimeError(f"{fn}(): expected a non-empty list of Tensors")
    return ts


@defop("cat", devices=CPU_CUDA, names=("ampy.cat", "ampy.concat", "ampy.concatenate"))
def _cat_fwd(tensors, dim=0):
    ts = _tensor_list(tensors, "cat")
    for i, t in enumerate(ts):
        if t.ndim == 0:
            raise RuntimeError(f"cat: zero-dimensional tensor (at position {i}) cannot be "
                               f"concatenated")
    # torch's legacy rule: 1-d empty tensors are skipped
    parts = [t for t in ts if not (t.ndim == 1 and t.shape[0] == 0)] or ts[:1]
    ref = parts[0]
    d = wrap_dim(dim, ref.ndim)
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = D.promote_types(dtype, t.dtype)
    for i, t in enumerate(parts):
        if t.ndim != ref.ndim:
            raise RuntimeError(f"cat: Tensors must have same number of dimensions: got "
                               f"{ref.ndim} and {t.ndim}")
        for k in range(ref.ndim):
            if k != d and t.shape[k] != ref.shape[k]:
                raise RuntimeError(f"cat: Sizes of tensors must match except in dimension {d}. "
                                   f"Expected size {ref.shape[k]} but got size {t.shape[k]} "
                                   f"for tensor number {i} in the list.")
    dev = ts[0]._device_index
    for t in ts:  # one device (copy_ below runs CUDA parts on the device)
        if t._device_index != dev:
            raise RuntimeError("cat: Expected all tensors to be on the same device, but found at "
                               f"least two devices, {ts[0].device} and {t.device}!")
    shape = list(ref.shape)
    shape[d] = _b.sum(t.shape[d] for t in parts)
    out = _C._empty_device(tuple(shape), dtype, dev)
    off = 0
    for t in parts:
        n = t.shape[d]
        if n:
            _C.copy_(_views.narrow(out, d, off, n), t)
        off += n
    return out


_CAT = get_op("cat")


def cat(tensors, dim=0):
    """Concatenate along an existing dim; dtypes promote as in torch.cat."""
    return dispatch(_CAT, tensors, dim)


concat = concatenate = cat


@defop("stack", devices=CPU_CUDA, names=("ampy.stack",))
def _stack_fwd(tensors, dim=0):
    ts = _tensor_list(tensors, "stack")
    s0 = tuple(ts[0].shape)
    for i, t in enumerate(ts[1:], 1):
        if tuple(t.shape) != s0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(s0)} "
                               f"at entry 0 and {list(t.shape)} at entry {i}")
    d = wrap_dim(dim, len(s0) + 1)
    return _cat_fwd([_views.unsqueeze(t, d) for t in ts], d)


_STACK = get_op("stack")


def stack(tensors, dim=0):
    """Stack equal-shaped tensors along a new dim."""
    return dispatch(_STACK, tensors, dim)
