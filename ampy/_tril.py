"""tril / triu (and their in-place forms): the lower or upper triangle of
the last two dims, the rest set to zero. One pass of libampy's kernel
(csrc/tril.c through `_C.tril`), which copies the kept elements' bits, so
the result is exact in every dtype. CUDA tensors take the element-wise
`where` kernel with the triangle's mask (the same elements kept)."""
from . import _C
from . import _dtype as D
from ._creation import arange, zeros
from ._dispatch import CPU_CUDA, defop, dispatch, get_op
from ._tensor import Tensor

_WHERE = _C.EWISE_OPS["where"]


def _on(t, like):
    return t.to(like.device) if like._device_index >= 0 else t


def _tril_by_mask(x, diagonal, upper, inplace):
    """tril/triu as where(mask, x, 0), on x's device."""
    m, n = x.shape[-2], x.shape[-1]
    diagonal = max(min(diagonal, n), -m - 1)
    diff = arange(n, dtype=D.int64) - arange(m, dtype=D.int64).reshape(m, 1)
    keep = _on(diff >= diagonal if upper else diff <= diagonal, x)
    zero = _on(zeros((), dtype=x.dtype), x)
    return _C.ewise(_WHERE, x if inplace else None, None, None, keep, x, zero)


def _run(x, diagonal, upper, inplace):
    if x._device_index >= 0:
        return _tril_by_mask(x, diagonal, upper, inplace)
    return _C.tril(x, diagonal, upper, inplace)

__all__ = ["tril", "triu"]


@defop("tril", devices=CPU_CUDA, names=("ampy.tril", "Tensor.tril"))
def _tril_fwd(input, diagonal=0):
    return _run(input, diagonal, False, False)


@defop("triu", devices=CPU_CUDA, names=("ampy.triu", "Tensor.triu"))
def _triu_fwd(input, diagonal=0):
    return _run(input, diagonal, True, False)


@defop("tril_", devices=CPU_CUDA, names=("Tensor.tril_",))
def _tril_inplace_fwd(self, diagonal=0):
    return _run(self, diagonal, False, True)


@defop("triu_", devices=CPU_CUDA, names=("Tensor.triu_",))
def _triu_inplace_fwd(self, diagonal=0):
    return _run(self, diagonal, True, True)


_OPS = {n: get_op(n) for n in ("tril", "triu", "tril_", "triu_")}


def _check(name, x, diagonal):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
        raise TypeError(f"{name}(): argument 'diagonal' must be int, not "
                        f"{type(diagonal).__name__}")
    if x.ndim < 2:
        raise RuntimeError(f"{name.rstrip('_')}: input tensor must have at least 2 dimensions")
    return dispatch(_OPS[name], x, diagonal)


def tril(input, diagonal=0):
    """The elements (i, j) of the last two dims with j - i <= diagonal; zeros elsewhere."""
    return _check("tril", input, diagonal)


def triu(input, diagonal=0):
    """The elements (i, j) of the last two dims with j - i >= diagonal; zeros elsewhere."""
    return _check("triu", input, diagonal)


def tril_(self, diagonal=0):
    return _check("tril_", self, diagonal)


def triu_(self, diagonal=0):
    return _check("triu_", self, diagonal)
