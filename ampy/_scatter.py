"""Indexing along one dim: gather, scatter, scatter_add, masked_fill (ops),
and index_select, masked_select, one_hot (compositions of them and of
advanced indexing).

gather / scatter / scatter_add run libampy's line loop (csrc/scatter.c
through `_C.gather` / `_C.scatter_`): every index is checked before anything
is written, so a failing call leaves its inputs unchanged, and scatter_add
adds each element's contributions in index order, torch's CPU result bit for
bit. CUDA tensors take advanced indexing's device kernels instead
(`_C.index_gather` / `_C.index_scatter` with the key that addresses each
index position's target), the same elements in the same order.
scatter(reduce="add") is scatter_add's loop, reduce="multiply" the product
of the scatter_reduce kernel (on host copies for CUDA tensors). masked_fill
is the element-wise `where` kernel with the value cast to
the input's dtype (in place: written into the input itself). The checks and
their messages are torch's.
"""
import warnings

from . import _C
from . import _dtype as D
from ._convert import as_tensor_like
from ._creation import arange
from ._indexing import index_plan
from ._dispatch import CPU, CPU_CUDA, defop, dispatch, get_op
from ._shape import broadcast_shapes, wrap_dim
from ._tensor import Tensor

__all__ = ["gather", "scatter", "scatter_add", "masked_fill", "index_select", "masked_select"]

_INDEX_DTYPES = (D.int64, D.int32)
_MULTIPLY = 1  # ampy_scatter_reduce_op AMPY_SCATTER_PROD
_warned_reduce = []  # torch warns once per process
# torch's C++ type names in its dtype messages
_CPP_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
              "uint8": "unsigned char", "bool": "bool"}


def _tensor_arg(x, fn, arg, pos):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _nd(t):
    return t.ndim if t.ndim else 1


def _size(t, d):
    return t.shape[d] if t.ndim else 1


def _shape_list(t):
    return list(t.shape)


def _index64(index):
    return index if index.dtype is D.int64 else _C.cast(index, D.int64)


# ---- the device path: one advanced-indexing key per call ------------------------
def _line_key(ix, d):
    """The advanced key that addresses, for every position c of index ix, the
    element at c with c[d] replaced by ix[c] (aranges broadcast on the other dims)."""
    key = []
    for k in range(ix.ndim):
        if k == d:
            key.append(_index64(ix))
            continue
        shape = [1] * ix.ndim
        shape[k] = ix.shape[k]
        a = arange(ix.shape[k], dtype=D.int64).reshape(*shape)
        key.append(a.to(ix.device) if ix._device_index >= 0 else a)
    return tuple(key)


def _as_1d(t):
    return t.reshape(1) if t.ndim == 0 else t


def _gather_by_index(x, d, ix):
    out = _as_1d(x)[_line_key(_as_1d(ix), d)]
    return out.reshape(()) if ix.ndim == 0 else out


def _scatter_by_index(out, d, ix, src, add):
    """out[key] = src (add: +=, repeats summed) for the key of _line_key."""
    ix1, s1 = _as_1d(ix), _as_1d(src)
    if ix1.numel() == 0:
        return out
    perm, idx, _, _ = index_plan(_as_1d(out), _line_key(ix1, d))
    block = s1[tuple(slice(0, n) for n in ix1.shape)] if tuple(s1.shape) != tuple(ix1.shape) \
        else s1
    _C.index_scatter(perm, len(idx), idx, block.contiguous().reshape(-1), add)
    out._bump_version()
    return out


# ---- gather -------------------------------------------------------------------
@defop("gather", devices=CPU_CUDA, names=("ampy.gather", "Tensor.gather"))
def _gather_fwd(input, dim, index):
    d = wrap_dim(dim, input.ndim)
    if input._device_index >= 0:
        return _gather_by_index(input, d, index)
    return _C.gather(input, d, _index64(index))


_GATHER = get_op("gather")


def gather(input, dim, index, *, sparse_grad=False):
    """out[c] = input[c with c[dim] = index[c]]: torch.gather (sparse_grad is
    accepted and ignored: the gradient is dense)."""
    x = _tensor_arg(input, "gather", "input", 1)
    ix = _tensor_arg(index, "gather", "index", 3)
    d = wrap_dim(dim, x.ndim)
    if ix.dtype not in _INDEX_DTYPES:
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if _nd(ix) != _nd(x):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for k in range(_nd(ix)):
        if k != d and _size(ix, k) > _size(x, k):
            raise RuntimeError(f"Size does not match at dimension {k} expected index "
                               f"{_shape_list(ix)} to be no larger than self {_shape_list(x)} "
                               f"apart from dimension {d}")
    return dispatch(_GATHER, x, dim, ix)


# ---- scatter / scatter_add ------------------------------------------------------
def _check_scatter(x, d, ix, src):
    if ix.dtype not in _INDEX_DTYPES:
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src is not None and src.dtype is not x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if _nd(ix) != _nd(x):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if src is not None and _nd(ix) != _nd(src):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    bad = any(k != d and _size(ix, k) > _size(x, k) for k in range(_nd(ix)))
    if src is None and bad:
        raise RuntimeError(f"Expected index {_shape_list(ix)} to be no larger than self "
                           f"{_shape_list(x)} apart from dimension {d}")
    if src is not None and (bad or any(_size(ix, k) > _size(src, k) for k in range(_nd(ix)))):
        raise RuntimeError(f"Expected index {_shape_list(ix)} to be no larger than self "
                           f"{_shape_list(x)} apart from dimension {d} and to be no larger size "
                           f"than src {_shape_list(src)}")


def _value_src(x, ix, value):
    """A Python number (or 0-d tensor) as a src of index's shape in x's dtype."""
    if isinstance(value, Tensor):
        v = value.detach()
    else:
        v = as_tensor_like(value, x, fill=True)
    v = _C.cast(v, x.dtype) if v.dtype is not x.dtype else v
    return v.expand(*ix.shape) if ix.ndim else v


def _multiply_on_host(out, d, index, src):
    """reduce="multiply" of a CUDA tensor: the CPU kernel on host copies (no
    device kernel multiplies), the result copied back into out."""
    host = []
    for t in (out, index, src):
        h = _C.empty(tuple(t.shape), t.dtype)
        _C.copy_(h, t)
        host.append(h)
    _C.scatter_reduce_(host[0], d, _index64(host[1]), host[2], _MULTIPLY)
    _C.copy_(out, host[0])
    out._bump_version()
    return out


def _scatter_into(out, dim, index, src, add, reduce=None):
    """add: scatter_add; reduce: scatter's "add" / "multiply" (None: overwrite)."""
    if out.numel() == 0:  # torch writes nothing and checks no index then
        return out
    d = wrap_dim(dim, out.ndim)
    add = add or reduce == "add"
    if out._device_index >= 0:
        if reduce == "multiply":
            return _multiply_on_host(out, d, index, src)
        return _scatter_by_index(out, d, index, src, add)
    if reduce == "multiply":
        _C.scatter_reduce_(out, d, _index64(index), src, _MULTIPLY)
    else:
        _C.scatter_(out, d, _index64(index), src, add)
    return out


@defop("scatter", devices=CPU_CUDA, names=("ampy.scatter", "Tensor.scatter"))
def _scatter_fwd(input, dim, index, src, reduce=None):
    return _scatter_into(_C.cast(input, input.dtype), dim, index, src, False, reduce)


@defop("scatter_", devices=CPU_CUDA, names=("Tensor.scatter_",))
def _scatter_inplace_fwd(self, dim, index, src, reduce=None):
    return _scatter_into(self, dim, index, src, False, reduce)


@defop("scatter_add", devices=CPU_CUDA, names=("ampy.scatter_add", "Tensor.scatter_add"))
def _scatter_add_fwd(input, dim, index, src):
    return _scatter_into(_C.cast(input, input.dtype), dim, index, src, True)


@defop("scatter_add_", devices=CPU_CUDA, names=("Tensor.scatter_add_",))
def _scatter_add_inplace_fwd(self, dim, index, src):
    return _scatter_into(self, dim, index, src, True)


_SCATTER, _SCATTER_, _SCATTER_ADD, _SCATTER_ADD_ = (
    get_op(n) for n in ("scatter", "scatter_", "scatter_add", "scatter_add_"))


def _check_reduce(reduce, tensor_src):
    if reduce is None:
        return
    if reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if tensor_src and not _warned_reduce:
        _warned_reduce.append(True)
        warnings.warn("The reduce argument of torch.scatter with Tensor src is deprecated and "
                      "will be removed in a future PyTorch release. Use torch.scatter_reduce "
                      "instead for more reduction options.", UserWarning, stacklevel=4)


def _scatter_args(fn, input, dim, index, src, value, reduce):
    x = _tensor_arg(input, fn, "input", 1)
    ix = _tensor_arg(index, fn, "index", 3)
    if src is not None and value is not None:
        raise TypeError(f"{fn}() got both 'src' and 'value'")
    if src is None and value is None:
        raise TypeError(f"{fn}() missing 1 required argument: 'src' or 'value'")
    d = wrap_dim(dim, x.ndim)
    if src is not None and not isinstance(src, Tensor):
        value, src = src, None
    _check_scatter(x, d, ix, src)
    _check_reduce(reduce, src is not None)
    return x, ix, src if src is not None else _value_src(x, ix, value)


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """input with input[c with c[dim] = index[c]] = src[c] (or the number
    `value`): torch.scatter; reduce="add" / "multiply" combine instead, in
    index order (no gradient, as torch's: backward raises)."""
    x, ix, s = _scatter_args("scatter", input, dim, index, src, value, reduce)
    if reduce is None:
        return dispatch(_SCATTER, x, dim, ix, s)
    return dispatch(_SCATTER, x, dim, ix, s, reduce)


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    x, ix, s = _scatter_args("scatter_", self, dim, index, src, value, reduce)
    if reduce is None:
        return dispatch(_SCATTER_, x, dim, ix, s)
    return dispatch(_SCATTER_, x, dim, ix, s, reduce)


def scatter_add(input, dim, index, src):
    """input with src[c] added at input[c with c[dim] = index[c]], in index
    order: torch.scatter_add."""
    x, ix, s = _scatter_args("scatter_add", input, dim, index,
                             _tensor_arg(src, "scatter_add", "src", 4), None, None)
    return dispatch(_SCATTER_ADD, x, dim, ix, s)


def scatter_add_(self, dim, index, src):
    x, ix, s = _scatter_args("scatter_add_", self, dim, index,
                             _tensor_arg(src, "scatter_add_", "src", 4), None, None)
    return dispatch(_SCATTER_ADD_, x, dim, ix, s)


# ---- masked_fill ------------------------------------------------------------------
_WHERE = _C.EWISE_OPS["where"]


def _fill_value(input, value):
    v = value if isinstance(value, Tensor) else as_tensor_like(value, input, fill=True)
    return _C.cast(v, input.dtype) if v.dtype is not input.dtype else v


@defop("masked_fill", devices=CPU_CUDA, names=("ampy.masked_fill", "Tensor.masked_fill"))
def _masked_fill_fwd(input, mask, value):
    return _C.ewise(_WHERE, None, None, None, mask, _fill_value(input, value), input)


@defop("masked_fill_", devices=CPU_CUDA, names=("Tensor.masked_fill_",))
def _masked_fill_inplace_fwd(self, mask, value):
    return _C.ewise(_WHERE, self, None, None, mask, _fill_value(self, value), self)


_MASKED_FILL, _MASKED_FILL_ = get_op("masked_fill"), get_op("masked_fill_")


def _check_masked_fill(x, mask, value, inplace):
    _tensor_arg(x, "masked_fill", "input", 1)
    _tensor_arg(mask, "masked_fill", "mask", 2)
    if mask.dtype is not D.bool:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_CPP_NAMES.get(mask.dtype.name, mask.dtype.name)}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    shape = broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    if shape is None:  # (torch names the mask "a")
        raise RuntimeError(_mismatch(tuple(mask.shape), tuple(x.shape)))
    if inplace and shape != tuple(x.shape):
        raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape "
                           f"{list(shape)}")


def _mismatch(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    for i in range(n - 1, -1, -1):
        if a[i] != b[i] and 1 not in (a[i], b[i]):
            return (f"The size of tensor a ({a[i]}) must match the size of tensor b ({b[i]}) at "
                    f"non-singleton dimension {i}")
    return "shapes do not broadcast"


def masked_fill(input, mask, value):
    """input with `value` where the bool `mask` (broadcast) is True; value:
    a number or a 0-d tensor, cast to input's dtype (differentiable)."""
    _check_masked_fill(input, mask, value, False)
    return dispatch(_MASKED_FILL, input, mask, value)


def masked_fill_(self, mask, value):
    _check_masked_fill(self, mask, value, True)
    return dispatch(_MASKED_FILL_, self, mask, value)


# ---- compositions ------------------------------------------------------------------
def index_select(input, dim, index):
    """The slices input.select(dim, i) for i in index, stacked along dim
    (advanced indexing: its gradient sums repeated indices)."""
    x = _tensor_arg(input, "index_select", "input", 1)
    ix = _tensor_arg(index, "index_select", "index", 3)
    d = wrap_dim(dim, x.ndim)
    if ix.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if ix.dtype not in _INDEX_DTYPES:
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    ix = ix.reshape(-1)
    n = _size(x, d)
    if ix.numel() and (int(ix.min().item()) < 0 or int(ix.max().item()) >= n):
        raise IndexError("index out of range in self")
    if x.ndim == 0:
        return x.reshape(1)[ix].reshape(()) if ix.numel() == 1 else x.reshape(1)[ix]
    return x[(slice(None),) * d + (ix,)]


def masked_select(input, mask):
    """The elements of input (broadcast with the bool mask) where mask is
    True, as a 1-D tensor."""
    x = _tensor_arg(input, "masked_select", "input", 1)
    m = _tensor_arg(mask, "masked_select", "mask", 2)
    if m.dtype is not D.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(tuple(x.shape), tuple(m.shape))
    if shape is None:
        raise RuntimeError(_mismatch(tuple(x.shape), tuple(m.shape)))
    if tuple(x.shape) != shape:
        x = x.expand(*shape)
    if tuple(m.shape) != shape:
        m = m.expand(*shape)
    return x[m] if shape else x.reshape(1)[m.reshape(1)]


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding along a new last dim (torch.nn.functional.one_hot)."""
    t = _tensor_arg(tensor, "one_hot", "tensor", 1)
    if t.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    n = t.numel()
    if num_classes == -1:
        if n == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
    elif num_classes < 0:
        raise RuntimeError("num_classes should be positive")
    lo = int(t.min().item()) if n else 0
    hi = int(t.max().item()) if n else -1
    if lo < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = hi + 1
    elif hi >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = _C.fused_zeros(tuple(t.shape) + (num_classes,), D.int64)
    if n:
        ix = t.reshape(tuple(t.shape) + (1,))
        _C.scatter_(out, out.ndim - 1, ix.contiguous(), _value_src(out, ix, 1), False)
    return out
