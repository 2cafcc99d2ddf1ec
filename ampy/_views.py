"""Shape and stride arithmetic of views (no element is touched here).

Each function returns a new tensor that shares memory with its input through
TensorBase._view(shape, strides, offset); autograd wraps them in ampy/_tensor.
"""
import math

from . import _C
from ._dispatch import CPU_CUDA, defop, dispatch, get_op
from ._shape import contiguous_strides, wrap_dim

__all__ = ["view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "expand",
           "flatten", "narrow", "select", "as_strided", "infer_size"]


def check_int64_sizes(sizes, fn, arg="size"):
    """Each entry of a user's size list must be an int64, as torch's argument
    parser demands (TypeError "Overflow when unpacking long long")."""
    for i, s in enumerate(sizes):
        if not -(1 << 63) <= s < (1 << 63):
            raise TypeError(f"{fn}(): argument '{arg}' failed to unpack the object at pos "
                            f"{i + 1} with error \"Overflow when unpacking long long\"")
    return sizes


def _shape_args(shape, fn="view"):
    if len(shape) == 1 and not isinstance(shape[0], int) and shape[0] is not None:
        shape = tuple(shape[0])
    return check_int64_sizes(tuple(s.__index__() if not isinstance(s, int) else s
                                   for s in shape), fn)


def infer_size(shape, numel):
    """torch's infer_size_impl, case by case: its product of the given sizes
    is an int64 that wraps, and the view that follows checks the true numel
    (ampy_shape_numel in _view), so overflowing shapes raise as in torch."""
    shape = list(shape)
    infer, newsize = None, 1
    for i, s in enumerate(shape):  # torch reports the first bad entry
        if s == -1:
            if infer is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer = i
        elif s >= 0:
            newsize = (newsize * s + (1 << 63)) % (1 << 64) - (1 << 63)
        else:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
    if numel == newsize or (infer is not None and newsize > 0 and numel % newsize == 0):
        if infer is not None:
            if newsize == 0:
                raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} "
                                   f"because the unspecified dimension size -1 can be any value "
                                   f"and is ambiguous")
            shape[infer] = numel // newsize
        return tuple(shape)
    raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")


def _view_strides(old_shape, old_strides, new_shape):
    """torch's computeStride: strides for viewing (old_shape, old_strides) as
    new_shape without copying, or None when impossible."""
    numel = math.prod(old_shape)
    if numel == 0:
        if tuple(old_shape) == tuple(new_shape):
            return tuple(old_strides)
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1] if old_strides else 1
    tensor_numel, view_numel = 1, 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (old_shape[tensor_d - 1] != 1 and
                             old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def view(t, *shape):
    shape = infer_size(_shape_args(shape), t.numel())
    _C.shape_numel(shape)  # overflow is reported before the strides (torch's order)
    strides = _view_strides(tuple(t.shape), t.stride(), shape)
    if strides is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.")
    return t._view(shape, strides, 0)


def reshape(t, *shape):
    shape = infer_size(_shape_args(shape, "reshape"), t.numel())
    _C.shape_numel(shape)
    strides = _view_strides(tuple(t.shape), t.stride(), shape)
    if strides is None:
        c = _C.cast(t, t.dtype)  # contiguous copy
        return c._view(shape, contiguous_strides(shape), 0)
    return t._view(shape, strides, 0)


def transpose(t, d0, d1):
    n = t.ndim
    if n == 0:
        wrap_dim(d0, 0), wrap_dim(d1, 0)
        return t._view((), (), 0)
    d0, d1 = wrap_dim(d0, n), wrap_dim(d1, n)
    shape, strides = list(t.shape), list(t.stride())
    shape[d0], shape[d1] = shape[d1], shape[d0]
    strides[d0], strides[d1] = strides[d1], strides[d0]
    return t._view(shape, strides, 0)


def permute(t, *dims):
    dims = _shape_args(dims)
    n = t.ndim
    if len(dims) != n:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {n} is not equal to len(dims) = {len(dims)}"
                           .replace("(sparse_coo)", ""))
    dims = [wrap_dim(d, n) for d in dims]
    if len(set(dims)) != n:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    shape, strides = t.shape, t.stride()
    return t._view([shape[d] for d in dims], [strides[d] for d in dims], 0)


def unsqueeze(t, dim):
    dim = wrap_dim(dim, t.ndim + 1)
    shape, strides = list(t.shape), list(t.stride())
    st = shape[dim] * strides[dim] if dim < t.ndim else 1
    shape.insert(dim, 1)
    strides.insert(dim, st)
    return t._view(shape, strides, 0)


def squeeze(t, dim=None):
    shape, strides = list(t.shape), list(t.stride())
    if dim is None:
        keep = [i for i, s in enumerate(shape) if s != 1]
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        drop = {wrap_dim(d, t.ndim) for d in dims} if t.ndim else set()
        keep = [i for i in range(len(shape)) if not (i in drop and shape[i] == 1)]
    return t._view([shape[i] for i in keep], [strides[i] for i in keep], 0)


def expand(t, *sizes):
    sizes = _shape_args(sizes, "expand")
    n = len(sizes)
    if n < t.ndim:
        raise RuntimeError(f"expand(ampy.{t.dtype.name}{{{list(t.shape)}}}, size={list(sizes)}): "
                           f"the number of sizes provided ({n}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({t.ndim})")
    shape, strides = [], []
    off = n - t.ndim
    for i, s in enumerate(sizes):
        if i < off:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            shape.append(s)
            strides.append(0)
            continue
        cur, st = t.shape[i - off], t.stride()[i - off]
        if s == -1:
            s = cur
        if s < 0:
            raise RuntimeError(f"expand: the expanded size of the tensor ({s}) must be "
                               f"non-negative (or -1 to keep the size)")
        if cur == s:
            shape.append(s)
            strides.append(st)
        elif cur == 1:
            shape.append(s)
            strides.append(0)
        else:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({cur}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(sizes)}.  Tensor sizes: {list(t.shape)}")
    return t._view(shape, strides, 0)


def flatten(t, start_dim=0, end_dim=-1):
    if t.ndim == 0:
        return reshape(t, 1)
    s, e = wrap_dim(start_dim, t.ndim), wrap_dim(end_dim, t.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = list(t.shape)
    new = shape[:s] + [math.prod(shape[s:e + 1])] + shape[e + 1:]
    return reshape(t, new)


def narrow(t, dim, start, length):
    dim = wrap_dim(dim, t.ndim)
    size = t.shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    shape = list(t.shape)
    shape[dim] = length
    return t._view(shape, t.stride(), start * t.stride()[dim])


def select(t, dim, index):
    if t.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = wrap_dim(dim, t.ndim)
    size = t.shape[dim]
    if index < -size or index >= size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(t.shape)} at dimension {dim}")
    if index < 0:
        index += size
    shape, strides = list(t.shape), list(t.stride())
    off = index * strides[dim]
    del shape[dim], strides[dim]
    return t._view(shape, strides, off)


def _as_strided_view(input, size, stride, storage_offset=None, input_geometry=None):
    """The view behind as_strided (input_geometry: the input's (strides,
    storage offset), which only the backward reads)."""
    size, stride = _shape_args((size,)), _shape_args((stride,))
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {list(stride)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: "
                           f"{list(size)}")
    base = input.storage_offset()
    off = base if storage_offset is None else storage_offset.__index__()
    if off < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {off}")
    return input._view(size, stride, off - base)


defop("as_strided", devices=CPU_CUDA, names=("Tensor.as_strided",))(_as_strided_view)
_AS_STRIDED = get_op("as_strided")


def as_strided(t, size, stride, storage_offset=None):
    """A view of t's storage with the given sizes, strides and storage
    offset (default: t's own), differentiable as torch's: the gradient is
    summed into the storage positions the view reads."""
    return dispatch(_AS_STRIDED, t, size, stride, storage_offset,
                    (t.stride(), t.storage_offset()))
