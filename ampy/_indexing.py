"""Tensor indexing: basic (views) and advanced (integer / boolean arrays, copies).

Semantics follow torch (and NumPy): ints, slices with steps, None, Ellipsis
give views; integer tensors / lists and boolean masks select copies. Adjacent
advanced indices place their broadcast shape where they stand; separated ones
put it first.

Every advanced key is reduced to libampy's form (index.h: the indexed dims
first, k broadcast int64 index arrays of length P) and handed to
``_C.index_gather`` / ``_C.index_scatter`` / ``_C.nonzero``, which run CUDA
tensors on their device themselves (index arrays and values given on the CPU
are copied there first, as torch does).
"""
import numpy as np

from . import _C
from . import _dtype as D
from ._convert import as_tensor_like, tensor as _tensor
from ._shape import broadcast_shapes

__all__ = ["getitem", "setitem", "index_plan"]


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


def _normalize_key(t, key):
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if _is_tensor(k) or k is None or k is Ellipsis or isinstance(k, slice):
            out.append(k)
        elif isinstance(k, bool):
            out.append(_tensor(k))
        elif isinstance(k, int) or hasattr(k, "__index__") and not isinstance(k, np.ndarray):
            k = k.__index__()
            if not -(1 << 63) <= k < (1 << 63):  # as torch's argument parser
                raise ValueError("Overflow when unpacking long long")
            out.append(k)
        elif isinstance(k, (list, np.ndarray)):
            out.append(_tensor(k))
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"byte Variables are valid indices (got {type(k).__name__})")
    n_ell = sum(1 for k in out if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 if not _is_tensor(k) else (k.ndim if k.dtype in (D.bool, D.uint8) else 1)
                   for k in out if k is not None and k is not Ellipsis)
    if consumed > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    if n_ell:
        i = out.index(Ellipsis)
        out[i:i + 1] = [slice(None)] * (t.ndim - consumed)
    else:
        out += [slice(None)] * (t.ndim - consumed)
    return out


def _basic(t, key):
    """Apply the basic part of `key`; advanced entries become (dim, tensor)."""
    shape, strides = list(t.shape), list(t.stride())
    new_shape, new_strides, adv = [], [], []
    offset, d = 0, 0
    for k in key:
        if k is None:
            new_shape.append(1)
            new_strides.append(0)
        elif isinstance(k, int):
            size = shape[d]
            if k < -size or k >= size:
                raise IndexError(f"index {k} is out of bounds for dimension {d} with size {size}")
            offset += (k + size if k < 0 else k) * strides[d]
            d += 1
        elif isinstance(k, slice):
            start, stop, step = k.start, k.stop, k.step
            if step is not None and step <= 0:
                raise ValueError("step must be greater than zero")
            start, stop, step = slice(start, stop, step).indices(shape[d])
            n = max(0, (stop - start + step - 1) // step)
            offset += start * strides[d] if n else 0
            new_shape.append(n)
            new_strides.append(strides[d] * step)
            d += 1
        elif k.ndim == 0 and k.dtype is D.bool:
            # as torch and NumPy: a scalar bool adds a dim of size 1 and indexes
            # it with [0] (True) or [] (False), an advanced index of its own
            adv.append((len(new_shape), _scalar_bool_index(t, bool(k.item()))))
            new_shape.append(1)
            new_strides.append(0)
        else:  # a tensor: boolean masks cover k.ndim dims
            if k.dtype in (D.bool, D.uint8):
                if tuple(k.shape) != tuple(shape[d:d + k.ndim]):
                    j = next(j for j in range(k.ndim) if k.shape[j] != shape[d + j])
                    raise IndexError(f"The shape of the mask {list(k.shape)} at index {j} does "
                                     f"not match the shape of the indexed tensor {shape} at "
                                     f"index {d + j}")
                nz = _C.nonzero(k)
                for j in range(k.ndim):
                    adv.append((len(new_shape), nz[:, j]))
                    new_shape.append(shape[d + j])
                    new_strides.append(strides[d + j])
                d += k.ndim
            else:
                if k.dtype.is_floating_point:
                    raise IndexError("tensors used as indices must be long, int, byte or bool "
                                     "tensors")
                adv.append((len(new_shape), k))
                new_shape.append(shape[d])
                new_strides.append(strides[d])
                d += 1
    return t._view(new_shape, new_strides, offset), adv


def _scalar_bool_index(t, value):
    ix = _tensor([0] if value else [], dtype=D.int64)
    return ix.to(t.device) if t._device_index >= 0 else ix


def _prepare_advanced(view, adv):
    """Move indexed dims first and broadcast the index arrays. Returns the
    permuted view, the int64 index list, the broadcast shape and where the
    result's indexed block goes."""
    dims = [d for d, _ in adv]
    shapes = [tuple(ix.shape) for _, ix in adv]
    bshape = broadcast_shapes(*shapes)
    if bshape is None:
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {', '.join(str(list(x)) for x in shapes)}")
    idx = []
    for _, ix in adv:
        ix = ix.expand(*bshape) if tuple(ix.shape) != bshape else ix
        idx.append(_C.cast(ix, D.int64).reshape(-1))
    rest = [d for d in range(view.ndim) if d not in dims]
    perm = view.permute(*(dims + rest))
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    place = dims[0] if adjacent else 0
    return perm, idx, bshape, place


def index_plan(t, key):
    """An advanced key reduced to index.h's form: (perm, idx, bshape, place)
    with perm the view of t whose indexed dims come first, idx the int64
    index tensors (broadcast, flattened), bshape their broadcast shape and
    place where the result's indexed block goes. None for a basic key."""
    view, adv = _basic(t, _normalize_key(t, key))
    return _prepare_advanced(view, adv) if adv else None


def getitem(t, key):
    key = _normalize_key(t, key)
    view, adv = _basic(t, key)
    if not adv:
        return view, None
    perm, idx, bshape, place = _prepare_advanced(view, adv)
    flat = _C.index_gather(perm, len(idx), idx)  # [P, rest...]
    rest_shape = list(flat.shape[1:])
    out = flat.reshape(*(list(bshape) + rest_shape))
    if place:
        nb = len(bshape)
        order = list(range(nb, nb + place)) + list(range(nb)) + list(range(nb + place, out.ndim))
        out = out.permute(*order)
    return out, (perm, idx, bshape, place)


def setitem(t, key, value):
    key = _normalize_key(t, key)
    view, adv = _basic(t, key)
    if not adv:
        src = as_tensor_like(value, view)
        _C.copy_(view, src)
        return
    perm, idx, bshape, place = _prepare_advanced(view, adv)
    nb = len(bshape)
    rest_shape = list(perm.shape[len(idx):])
    # value is laid out like the getitem result; bring it to [bshape..., rest...]
    res_shape = (rest_shape[:place] + list(bshape) + rest_shape[place:])
    v = as_tensor_like(value, perm).expand(*res_shape)
    if place:
        order = list(range(place, place + nb)) + list(range(place)) + \
            list(range(place + nb, len(res_shape)))
        v = v.permute(*order)
    v = _C.cast(v.reshape(*([len(idx[0])] + rest_shape)) if v.is_contiguous() else
                _C.cast(v, v.dtype).reshape(*([len(idx[0])] + rest_shape)), t.dtype)
    _C.index_scatter(perm, len(idx), idx, v)
    t._bump_version()
