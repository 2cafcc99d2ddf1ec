"""tril / triu (and their in-place forms): the lower or upper triangle of
the last two dims, the rest set to zero. One pass of libampy's kernel
(csrc/tril.c through `_C.tril`), which copies the kept elements' bits, so
the result is exact in every dtype."""
from . import _C
from ._dispatch import CPU, defop, dispatch, get_op
from ._tensor import Tensor

__all__ = ["tril", "triu"]


@defop("tril", devices=CPU, names=("ampy.tril", "Tensor.tril"))
def _tril_fwd(input, diagonal=0):
    return _C.tril(input, diagonal, False, False)


@defop("triu", devices=CPU, names=("ampy.triu", "Tensor.triu"))
def _triu_fwd(input, diagonal=0):
    return _C.tril(input, diagonal, True, False)


@defop("tril_", devices=CPU, names=("Tensor.tril_",))
def _tril_inplace_fwd(self, diagonal=0):
    return _C.tril(self, diagonal, False, True)


@defop("triu_", devices=CPU, names=("Tensor.triu_",))
def _triu_inplace_fwd(self, diagonal=0):
    return _C.tril(self, diagonal, True, True)


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
