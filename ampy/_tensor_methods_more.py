"""More Tensor methods torch users call: repeat_interleave, unfold, ravel,
sum_to_size, the in-place view ops (squeeze_, t_, transpose_, ...),
fill_diagonal_, index_add/index_copy/index_fill, masked_scatter, cumsum_ /
cumprod_, apply_, new and the small bookkeeping queries (nelement, nbytes,
is_signed, ...).

Each is composed of existing ops (views, index_select, scatter/scatter_add,
masked_fill, where, copy_), so autograd and the in-place checks come from
them; no element loop is written here.
"""
import math
import numbers

import numpy as np

from . import _C
from . import _dtype as D
from ._creation import arange, empty, zeros
from ._math import where
from ._math_reduce import sum as _sum
from ._scatter import _CPP_NAMES, _mismatch, index_select, masked_fill, scatter, scatter_add
from ._shape import broadcast_shapes, wrap_dim
from ._tensor import Tensor
from . import autograd
from ._convert import from_numpy, tensor

__all__ = ["repeat_interleave", "ravel", "index_add", "index_copy", "index_fill",
           "masked_scatter"]

_TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "uint8": "Byte",
                "bool": "Bool"}


def _tname(dt):
    return _TORCH_NAMES[dt.name]


# ---- bookkeeping --------------------------------------------------------------------
def nelement(self):
    return self.numel()


def ndimension(self):
    return self.ndim


def _nbytes(self):
    return self.numel() * self.element_size()


def _itemsize(self):
    return self.element_size()


def is_signed(self):
    return self.dtype not in (D.uint8, D.bool)


def is_complex(self):
    return False


def is_nonzero(self):
    n = self.numel()
    if n != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous"
                           if n > 1 else "Boolean value of Tensor with no values is ambiguous")
    return bool(self.item() != 0)


def is_same_size(self, other):
    return tuple(self.shape) == tuple(other.shape)


def ravel(input):
    """input flattened to 1-D (a view when its layout allows)."""
    return input.reshape(-1)


# ---- repeat_interleave --------------------------------------------------------------
def _repeat_counts(repeats, n):
    if repeats.dtype not in (D.int64, D.int32):
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for "
                                  f"'{_tname(repeats.dtype)}'")
    if repeats.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    r = _C.cast(repeats.detach().cpu(), D.int64)._numpy().reshape(-1).copy()
    if r.size and r.min() < 0:
        raise RuntimeError("repeats can not be negative")
    return r


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along dim) of input repeated repeats times
    (an int or one count per slice), torch.repeat_interleave; with only a
    count tensor, the indices 0, 1, ... repeated by their counts."""
    if repeats is None:  # repeat_interleave(repeats)
        r = _repeat_counts(input, 0)
        if input.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        out = np.repeat(np.arange(r.size, dtype=np.int64), r)
        return _C.cast(_int_tensor(out), input.dtype)
    x = input
    if dim is None:
        x, d = x.reshape(-1), 0
    else:
        d = wrap_dim(dim, x.ndim)
        if x.ndim == 0:
            x = x.reshape(1)
    n = x.shape[d]
    if isinstance(repeats, Tensor) and repeats.numel() == 1 and repeats.ndim <= 1:
        _repeat_counts(repeats, n)
        repeats = int(repeats.item())
    if isinstance(repeats, Tensor):
        r = _repeat_counts(repeats, n)
        if r.size != n:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {r.size} and input.size({d}) = {n}")
        total = int(r.sum())
        if output_size is not None and output_size != total:
            raise RuntimeError("allocated size does not match required size")
        idx = _int_tensor(np.repeat(np.arange(n, dtype=np.int64), r))
        if x.is_cuda:
            idx = idx.to(x.device)
        return index_select(x, d, idx)
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral):
        raise TypeError(f"repeat_interleave(): argument 'repeats' must be Tensor or int, not "
                        f"{type(repeats).__name__}")
    r = int(repeats)
    if r < 0:
        raise RuntimeError("Repeats must be non-negative")
    if output_size is not None and output_size != n * r:
        raise RuntimeError("allocated size does not match required size")
    shape = list(x.shape)
    big = shape[:d + 1] + [r] + shape[d + 1:]
    final = shape[:d] + [n * r] + shape[d + 1:]
    return x.unsqueeze(d + 1).expand(*big).reshape(*final)


def _int_tensor(a):
    return from_numpy(np.ascontiguousarray(a, dtype=np.int64))


# ---- unfold / sum_to_size -----------------------------------------------------------
def unfold(self, dimension, size, step):
    """The windows of `size` elements every `step` along `dimension`, as a
    new last dim (a strided view, differentiable)."""
    if self.ndim == 0:
        wrap_dim(dimension, 1)
        if size > 1:
            raise RuntimeError(f"maximum size for tensor at dimension 0 is 1 but size is {size}")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        return self.as_strided((size,), (1,))
    d = wrap_dim(dimension, self.ndim)
    n = self.shape[d]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    shape, strides = list(self.shape), list(self.stride())
    shape[d] = (n - size) // step + 1
    st = strides[d]
    strides[d] = st * step
    return self.as_strided(shape + [size], strides + [st], self.storage_offset())


def sum_to_size(self, *size):
    """self summed over the dims where `size` is 1 (or missing in front), to
    the shape `size` that self broadcasts from."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    shape = tuple(self.shape)
    if broadcast_shapes(size, shape) != shape or len(size) > len(shape):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    lead = len(shape) - len(size)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size)
                                if s == 1 and shape[lead + i] != 1]
    if not dims:
        return self
    out = _sum(self, dims, keepdim=True)
    return out.reshape(*size) if lead else out


# ---- in-place views -----------------------------------------------------------------
def _set_view(self, view, fn):
    """self takes the view's shape and strides (its own memory), in place."""
    if self.grad_fn is not None:
        raise NotImplementedError(f"{fn}: in-place view ops on a tensor with autograd history "
                                  f"are not supported by ampy; use the out-of-place form")
    if self._requires_grad and autograd.is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    _C.nn_set_data_(self, view._alias() if view is self else view)
    return self


def squeeze_(self, dim=None):
    return _set_view(self, self.detach().squeeze(dim) if dim is not None else
                     self.detach().squeeze(), "squeeze_")


def unsqueeze_(self, dim):
    return _set_view(self, self.detach().unsqueeze(dim), "unsqueeze_")


def t_(self):
    if self.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is "
                           f"{self.ndim}D")
    return _set_view(self, self.detach().t(), "t_")


def transpose_(self, dim0, dim1):
    return _set_view(self, self.detach().transpose(dim0, dim1), "transpose_")


# ---- fill_diagonal_ -----------------------------------------------------------------
def fill_diagonal_(self, fill_value, wrap=False):
    """The main diagonal of self (2-D, or n-D with equal sizes) set to
    fill_value; wrap=True restarts it every cols + 1 rows of a tall matrix."""
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = tuple(self.shape)
    if self.ndim > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(math.prod(shape), dtype=bool)
    if self.ndim == 2:
        rows, cols = shape
        stop = rows * cols if wrap and rows > cols + 1 else min(rows, cols) * cols
        mask[np.arange(0, stop, cols + 1)] = True
    else:
        step = sum(math.prod(shape[k + 1:]) for k in range(len(shape)))
        mask[np.arange(shape[0]) * step] = True
    m = from_numpy(mask.reshape(shape))
    if self.is_cuda:
        m = m.to(self.device)
    return self.masked_fill_(m, fill_value)


# ---- index_add / index_copy / index_fill ----------------------------------------------
def _index_vector(index, fn, err=RuntimeError, int64_only=False):
    if not isinstance(index, Tensor):
        raise TypeError(f"{fn}(): argument 'index' must be Tensor, not {type(index).__name__}")
    if index.ndim > 1:
        raise IndexError(f"{fn}(): Index is supposed to be a vector, but got dim: {index.ndim} "
                         f"with type: {_tname(index.dtype)} and size: {list(index.shape)}")
    if int64_only and index.dtype is not D.int64:
        raise IndexError(f"{fn}(): Expected dtype int64 for index.")
    if index.dtype not in (D.int64, D.int32):
        raise err(f"{fn}(): Expected dtype int32/int64 for index but got: "
                  f"{_tname(index.dtype)}")
    return index.reshape(-1)


def _check_range(ix, n, d, prefix="", exc=IndexError):
    if ix.numel():
        lo, hi = int(ix.min().item()), int(ix.max().item())
        bad = lo if lo < -n or lo >= n else hi if hi >= n or hi < -n else None
        if bad is not None:
            raise exc(f"{prefix}index {bad} is out of bounds for dimension {d} with size "
                             f"{n}")
        if lo < 0:  # negative indices count from the end, as torch
            ix = where(ix < 0, ix + n, ix)
    return ix


def _expanded(ix, d, shape):
    """The 1-D index along d broadcast to `shape` (scatter's index form)."""
    v = [1] * len(shape)
    v[d] = ix.numel()
    return ix.reshape(*v).expand(*shape)


def _index_args(fn, self, dim, index, source):
    x = self.reshape(1) if self.ndim == 0 else self
    d = wrap_dim(dim, x.ndim)
    ix = _index_vector(index, fn.rstrip("_") + "_")  # (torch names the in-place form)
    if not isinstance(source, Tensor):
        raise TypeError(f"{fn}(): argument 'source' must be Tensor, not {type(source).__name__}")
    src = source.reshape(1) if source.ndim == 0 else source
    return x, d, ix, src


def _index_add_checks(x, d, ix, src):
    if src.dtype is not x.dtype:
        raise RuntimeError(f"index_add_(): self ({_tname(x.dtype)}) and source "
                           f"({_tname(src.dtype)}) must have the same scalar type")
    if src.ndim != x.ndim or (src.shape[d] if src.ndim else 1) != ix.numel():
        raise RuntimeError(f"index_add_(): Number of indices ({ix.numel()}) should be equal to "
                           f"source.size(dim): ({src.shape[d] if src.ndim > d else 1}), for "
                           f"dim: {d}")
    for k in range(x.ndim):
        if k != d and src.shape[k] != x.shape[k]:
            raise RuntimeError(f"index_add_(): source and self must have the same size at dim "
                               f"{k}, got {src.shape[k]} and {x.shape[k]}")
    return _check_range(ix, x.shape[d], d, exc=RuntimeError)


def _alpha_src(src, alpha):
    return src if alpha == 1 else src * alpha


def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source's slices added at the indices along dim
    (repeats summed, in index order)."""
    x, d, ix, src = _index_args("index_add", input, dim, index, source)
    ix = _index_add_checks(x, d, ix, src)
    out = scatter_add(x, d, _expanded(ix, d, tuple(src.shape)), _alpha_src(src, alpha))
    return out.reshape(()) if input.ndim == 0 else out


def index_add_(self, dim, index, source, *, alpha=1):
    x, d, ix, src = _index_args("index_add_", self, dim, index, source)
    ix = _index_add_checks(x, d, ix, src)
    x.scatter_add_(d, _expanded(ix, d, tuple(src.shape)), _alpha_src(src, alpha))
    return self


def _index_copy_checks(x, d, ix, src):
    if src.dtype is not x.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {_tname(x.dtype)} and (source) {_tname(src.dtype)}")
    if src.ndim != x.ndim or src.shape[d] != ix.numel():
        raise IndexError(f"index_copy_(): Number of indices ({ix.numel()}) should be equal to "
                         f"source.size(dim) ({src.shape[d] if src.ndim > d else 1})")
    for k in range(x.ndim):
        if k != d and src.shape[k] != x.shape[k]:
            raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice "
                               f"shapes. Destination slice shape: {x.shape[k]} at dimension "
                               f"{k} and source slice shape: {src.shape[k]} at dimension {k}.")
    return _check_range(ix, x.shape[d], d, "index_copy_(): ")


def index_copy(input, dim, index, source):
    """input with source's slices copied to the indices along dim."""
    x, d, ix, src = _index_args("index_copy", input, dim, index, source)
    ix = _index_copy_checks(x, d, ix, src)
    out = scatter(x, d, _expanded(ix, d, tuple(src.shape)), src)
    return out.reshape(()) if input.ndim == 0 else out


def index_copy_(self, dim, index, source):
    x, d, ix, src = _index_args("index_copy_", self, dim, index, source)
    ix = _index_copy_checks(x, d, ix, src)
    x.scatter_(d, _expanded(ix, d, tuple(src.shape)), src)
    return self


def _index_mask(x, dim, index, value, fn):
    d = wrap_dim(dim, max(x.ndim, 1))
    ix = _index_vector(index, fn, IndexError, int64_only=True)
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    n = x.shape[d] if x.ndim else 1
    ix = _check_range(ix, n, d)
    m = np.zeros(n, dtype=bool)
    m[_C.cast(ix.detach().cpu(), D.int64)._numpy().reshape(-1)] = True
    shape = [1] * x.ndim
    if x.ndim:
        shape[d] = n
    mask = from_numpy(m.reshape(shape) if x.ndim else m.reshape(()))
    return mask.to(x.device) if x.is_cuda else mask


def index_fill(input, dim, index, value):
    """input with the slices at the indices along dim set to value."""
    return masked_fill(input, _index_mask(input, dim, index, value, "index_fill_"), value)


def index_fill_(self, dim, index, value):
    return self.masked_fill_(_index_mask(self, dim, index, value, "index_fill_"), value)


# ---- masked_scatter -----------------------------------------------------------------
def _masked_scatter_values(x, mask, source, inplace):
    if not isinstance(mask, Tensor) or mask.dtype is not D.bool:
        name = _tname(mask.dtype) if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {name}")
    if source.dtype is not x.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got{_tname(x.dtype)} and {_tname(source.dtype)}")
    shape = broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    if shape is None:
        raise RuntimeError(_mismatch(tuple(mask.shape), tuple(x.shape)))
    if inplace and shape != tuple(x.shape):
        raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape "
                           f"{list(shape)}")
    m = mask.expand(*shape) if tuple(mask.shape) != shape else mask
    mf = _C.cast(m.cpu() if m.is_cuda else m, D.int64)._numpy().reshape(-1)
    k = int(mf.sum())
    if k > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    pos = np.maximum(np.cumsum(mf) - 1, 0)
    idx = _int_tensor(pos)
    if x.is_cuda:
        idx = idx.to(x.device)
    flat = source.reshape(-1)
    vals = (flat[idx] if flat.numel() else zeros(len(pos), dtype=x.dtype)).reshape(*shape)
    return m, vals


def masked_scatter(input, mask, source):
    """input with the elements where mask is True replaced, in order, by
    source's first elements (differentiable in input and source)."""
    m, vals = _masked_scatter_values(input, mask, source, False)
    return where(m, vals, input)


def masked_scatter_(self, mask, source):
    m, vals = _masked_scatter_values(self, mask, source, True)
    return self.copy_(where(m, vals, self))


# ---- scans in place, apply_, new ----------------------------------------------------
def cumsum_(self, dim, *, dtype=None):
    """self replaced by its cumulative sum along dim."""
    return self.copy_(self.clone().cumsum(dim, dtype=dtype) if dtype is not None else
                      self.clone().cumsum(dim))


def cumprod_(self, dim, *, dtype=None):
    """self replaced by its cumulative product along dim."""
    return self.copy_(self.clone().cumprod(dim, dtype=dtype) if dtype is not None else
                      self.clone().cumprod(dim))


def apply_(self, callable):  # noqa: A002 (torch's name)
    """Each element of self (a CPU tensor) replaced by callable(element)."""
    if self.is_cuda:
        raise TypeError("apply_ is only implemented on CPU tensors")
    if self._requires_grad:
        raise RuntimeError("Can't call apply_() on Variable that requires grad. Use "
                           "var.detach().apply_() instead.")
    vals = [callable(v) for v in self.reshape(-1).tolist()]
    if self.numel():
        src = tensor(vals, dtype=D.float64 if self.dtype.is_floating_point else
                     (D.bool if self.dtype is D.bool else D.int64))
        _C.copy_(self, _C.cast(src, self.dtype).reshape(*self.shape))
    return self


def new(self, *args, **kwargs):
    """The legacy constructor: new() (empty), new(*sizes) (uninitialised),
    new(data) (a copy of a sequence or tensor) — in self's dtype."""
    dt = kwargs.pop("dtype", None) or self.dtype
    if kwargs:
        raise TypeError(f"new() got unexpected keyword arguments {sorted(kwargs)}")
    if not args:
        return empty(0, dtype=dt)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0].detach()._alias() if args[0].dtype is dt else args[0].detach().to(dt)
    if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
        return empty(*args, dtype=dt)
    if len(args) == 1 and type(args[0]).__name__ == "Size":
        return empty(*args[0], dtype=dt)
    if len(args) == 1:
        return tensor(args[0], dtype=dt)
    raise TypeError("new(): expected sizes or a single sequence of data")


del arange
