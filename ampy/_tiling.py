"""Tiling and splitting along dims: repeat, tile, and the function forms of
chunk, split and narrow; type_as.

These are compositions of views (reshape, expand) and one contiguous copy,
so autograd differentiates them through the view ops' rules (repeat's
gradient is the sum over the copies) and the copy runs in C.
"""
from . import _dtype as D
from ._shape import wrap_dim
from ._tensor import Tensor

__all__ = ["tile", "chunk", "split", "narrow"]


def _sizes(sizes, fn):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    out = []
    for s in sizes:
        if isinstance(s, Tensor) and s.ndim == 0 and not s.dtype.is_floating_point:
            s = int(s.item())
        if isinstance(s, bool) or not isinstance(s, int):
            raise TypeError(f"{fn}(): argument 'repeats' must be tuple of ints, but found "
                            f"element of type {type(s).__name__}")
        out.append(s)
    return tuple(out)


def repeat(self, *sizes):
    """Tensor.repeat(*sizes): self tiled sizes[i] times along dim i (leading
    sizes add dims)."""
    reps = _sizes(sizes, "repeat")
    x = self
    if len(reps) < x.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    shape = (1,) * (len(reps) - x.ndim) + tuple(x.shape)
    final = tuple(r * s for r, s in zip(reps, shape))
    for n in final:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: "
                               f"{list(final)}")
    if not reps:
        return x.clone()
    inter = []
    for s in shape:
        inter += [1, s]
    big = []
    for r, s in zip(reps, shape):
        big += [r, s]
    return x.reshape(*inter).expand(*big).reshape(*final)


def tile(input, dims):
    """input repeated dims[i] times along dim i; fewer dims than input.ndim
    are padded with leading ones (torch.tile)."""
    reps = _sizes((dims,) if not isinstance(dims, int) else ((dims,),), "tile")
    if len(reps) < input.ndim:
        reps = (1,) * (input.ndim - len(reps)) + reps
    return repeat(input, reps)


def chunk(input, chunks, dim=0):
    """input split into `chunks` pieces along dim (views), the last smaller."""
    if isinstance(chunks, bool) or not isinstance(chunks, int):
        raise TypeError(f"chunk(): argument 'chunks' must be int, not {type(chunks).__name__}")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    return input.chunk(chunks, dim)


def split(tensor, split_size_or_sections, dim=0):
    """tensor split along dim into pieces of split_size (the last smaller) or
    of the listed sizes (views)."""
    if tensor.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    return tensor.split(split_size_or_sections, dim)


def narrow(input, dim, start, length):
    """The view input[..., start:start + length, ...] along dim."""
    if isinstance(start, Tensor):
        start = int(start.item())
    wrap_dim(dim, input.ndim)
    return input.narrow(dim, start, length)


def type_as(self, other):
    """self cast to other's dtype (self itself when they match)."""
    dt = other.dtype if isinstance(other, Tensor) else D.to_dtype(other)
    return self if self.dtype is dt else self.to(dt)
