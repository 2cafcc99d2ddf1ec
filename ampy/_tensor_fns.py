"""torch's top-level tensor functions that are thin compositions of ampy's ops: the view and
shape functions (squeeze, unsqueeze, unbind, movedim, swapaxes, broadcast_to, atleast_*d,
hstack/vstack/dstack/column_stack), flip/fliplr/flipud and roll (index_select / cat, so
differentiable), outer, meshgrid, allclose/isclose/equal, nonzero/argwhere, and compile.
Autograd comes from the ops they are made of."""
import numpy as np

from . import _dtype as D
from ._convert import tensor
from ._creation import arange
from ._math import abs as _abs, isnan, logical_and, logical_or, where
from ._math_reduce import cat, stack
from ._scatter import index_select
from ._shape import wrap_dim
from ._tensor import Tensor

__all__ = ["squeeze", "unsqueeze", "unbind", "movedim", "moveaxis", "swapaxes", "swapdims",
           "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack",
           "dstack", "column_stack", "row_stack", "flip", "fliplr", "flipud", "roll", "outer",
           "ger", "meshgrid", "isclose", "allclose", "equal", "nonzero", "argwhere", "compile"]


def _tensor_arg(x, fn):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")


def squeeze(input, dim=None):
    _tensor_arg(input, "squeeze")
    return input.squeeze() if dim is None else input.squeeze(dim)


def unsqueeze(input, dim):
    _tensor_arg(input, "unsqueeze")
    return input.unsqueeze(dim)


def unbind(input, dim=0):
    _tensor_arg(input, "unbind")
    return input.unbind(dim)


def movedim(input, source, destination):
    """input with the dims source moved to the positions destination (a permute view)."""
    _tensor_arg(input, "movedim")
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    n = input.ndim
    src = [wrap_dim(d, n) for d in src]
    dst = [wrap_dim(d, n) for d in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({src})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({dst})")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [o if o is not None else next(rest) for o in order]
    return input.permute(*order)


moveaxis = movedim


def swapaxes(input, axis0, axis1):
    _tensor_arg(input, "swapaxes")
    return input.transpose(axis0, axis1)


swapdims = swapaxes


def broadcast_to(input, size):
    _tensor_arg(input, "broadcast_to")
    return input.expand(*size)


def _atleast(nd, tensors):
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = []
    for t in ts:
        if t.ndim == 0:
            t = t.reshape((1,) * nd)
        elif nd >= 2 and t.ndim == 1:
            t = t.unsqueeze(0)
            if nd == 3:
                t = t.unsqueeze(-1)
        elif nd == 3 and t.ndim == 2:
            t = t.unsqueeze(-1)
        out.append(t)
    return out[0] if one else tuple(out)


def atleast_1d(*tensors):
    return _atleast(1, tensors)


def atleast_2d(*tensors):
    return _atleast(2, tensors)


def atleast_3d(*tensors):
    return _atleast(3, tensors)


def hstack(tensors):
    ts = atleast_1d(*tensors)
    ts = ts if isinstance(ts, tuple) else (ts,)
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    ts = atleast_2d(*tensors)
    return cat(ts if isinstance(ts, tuple) else (ts,), 0)


row_stack = vstack


def dstack(tensors):
    ts = atleast_3d(*tensors)
    return cat(ts if isinstance(ts, tuple) else (ts,), 2)


def column_stack(tensors):
    ts = [t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors]
    return cat(ts, 1)


def flip(input, dims):
    """input reversed along dims (a copy, as torch's flip)."""
    _tensor_arg(input, "flip")
    dims = [dims] if isinstance(dims, int) else list(dims)
    wrapped = [wrap_dim(d, max(input.ndim, 1)) for d in dims]
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"dim {wrapped[0]} appears multiple times in the list of dims")
    out = input
    for d in wrapped:
        n = input.shape[d] if input.ndim else 1
        if n > 1:
            out = index_select(out, d, arange(n - 1, -1, -1))
    return out if out is not input else input.clone()


def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, [1])


def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, [0])


def roll(input, shifts, dims=None):
    """Elements shifted along dims, wrapping around (torch.roll); dims=None rolls the
    flattened tensor and keeps the shape."""
    _tensor_arg(input, "roll")
    if dims is None:
        if not isinstance(shifts, int):
            if len(shifts) != 1:
                raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                                   f"dims:0")
            shifts = shifts[0]
        return roll(input.flatten(), shifts, 0).reshape(tuple(input.shape))
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    out = input
    for s, d in zip(shifts, dims):
        d = wrap_dim(d, input.ndim)
        n = input.shape[d]
        if n == 0:
            continue
        s %= n
        if s:
            out = cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out if out is not input else input.clone()


def outer(input, vec2):
    """input[:, None] * vec2[None, :] for two 1-d tensors."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got {input.ndim}-D and {vec2.ndim}-D")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-d tensors (indexing "ij": matrix, "xy": Cartesian)."""
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: '
                         f'{indexing}')
    for t in ts:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
    ts = [t.reshape(-1) for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = shape[i]
        out.append(t.reshape(view).expand(*shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| element-wise (infinities equal only to
    themselves; NaNs equal when equal_nan)."""
    if input.dtype != other.dtype:
        raise RuntimeError(f"{input.dtype} did not match {other.dtype}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    same = input == other
    if not input.dtype.is_floating_point:
        a, b = input.to(D.float64), other.to(D.float64)
    else:
        a, b = input, other
    diff = _abs(a - b)
    close = logical_and(diff <= atol + rtol * _abs(b), diff == diff)
    close = where(logical_or(_abs(a) == float("inf"), _abs(b) == float("inf")), same, close)
    out = logical_or(same, close)
    if equal_nan and input.dtype.is_floating_point:
        out = logical_or(out, logical_and(isnan(input), isnan(other)))
    return out


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other):
    """True if both have the same shape and elements."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool((input == other).all().item())


def nonzero(input, *, as_tuple=False):
    """The int64 indices of the non-zero elements: (n, ndim), or one 1-d tensor per dim."""
    _tensor_arg(input, "nonzero")
    arr = input.detach().cpu().numpy() if input.dtype is not D.bfloat16 else \
        input.detach().to(D.float32).numpy()
    idx = np.nonzero(arr.reshape(arr.shape) if arr.ndim else arr.reshape(1))
    if as_tuple:
        return tuple(tensor(np.ascontiguousarray(i, dtype=np.int64)) for i in idx)
    return tensor(np.stack(idx, axis=1).astype(np.int64).reshape(-1, max(input.ndim, 0)))


def argwhere(input):
    return nonzero(input)


def compile(model=None, **kwargs):  # noqa: A001 (torch's name)
    """torch.compile's signature; ampy runs eagerly (its kernels are compiled C already), so
    the model or function comes back unchanged. As a decorator factory (model=None) it
    returns the identity."""
    if model is None:
        return lambda m: m
    return model
