"""scatter_reduce / Tensor.scatter_reduce(_): torch's reductions of src into
input along one dim ("sum", "prod", "mean", "amax", "amin"; "max" / "min"
are torch's aliases), with include_self both ways.

The forward is libampy's line loop (csrc/scatter.c): every element of input
combined with its src values in index order, torch's serial CPU order, so
float32/float64 results are torch's bit for bit (float16/bfloat16: combined
in float, rounded once, as torch's kernel does). As torch: include_self=False
first writes the reduction's identity at every indexed position (0, 1,
-inf / the lowest integer, +inf / the largest integer); "mean" is the sum
divided by the count of values in input's dtype (include_self counts input's
own element; integers floor-divide). Every index is checked before anything
is written, so a failing call leaves its inputs unchanged.

The op runs CPU tensors; CUDA tensors take the CPU fallback (listed in
tests/test_cuda_routing.py CPU_ONLY). The gradient is torch's
scatter_reduce_backward (ampy/autograd/_rules_scatter_reduce.py).
"""
from . import _C
from . import _dtype as D
from ._creation import full
from ._dispatch import CPU, defop, dispatch, get_op
from ._scatter import _check_scatter, _index64, _tensor_arg, _value_src
from ._shape import wrap_dim

__all__ = ["scatter_reduce"]

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_ALIASES = {"max": "amax", "min": "amin"}
_KERNEL_OPS = {"prod": 1, "amax": 2, "amin": 3}  # ampy_scatter_reduce_op
_INT_LIMITS = {"int64": (-2 ** 63, 2 ** 63 - 1), "int32": (-2 ** 31, 2 ** 31 - 1),
               "uint8": (0, 255), "bool": (False, True)}
_EQ, _WHERE = _C.EWISE_OPS["eq"], _C.EWISE_OPS["where"]
_DIV, _FLOOR_DIV = _C.EWISE_OPS["div"], _C.EWISE_OPS["floor_divide"]


def _identity(dtype, reduce):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    lo, hi = ((float("-inf"), float("inf")) if dtype.is_floating_point
              else _INT_LIMITS[dtype.name])
    return lo if reduce == "amax" else hi


def _mean_divide(out, d, ix, include_self):
    """out (the sums) divided in place by the count of values per element."""
    count = full(tuple(out.shape), 1 if include_self else 0, dtype=out.dtype)
    _C.scatter_(count, d, ix, _value_src(out, ix, 1), True)
    _C.ewise(_WHERE, count, None, None, _C.ewise(_EQ, None, None, None, count, 0), 1, count)
    _C.ewise(_DIV if out.dtype.is_floating_point else _FLOOR_DIV, out, None, None, out, count)


def _reduce_into(out, dim, index, src, reduce, include_self):
    if out.numel() == 0:  # torch writes nothing and checks no index then
        return out
    d = wrap_dim(dim, out.ndim)
    ix = _index64(index)
    if not include_self:
        _C.scatter_(out, d, ix, _value_src(out, ix, _identity(out.dtype, reduce)), False)
    if reduce in ("sum", "mean"):
        _C.scatter_(out, d, ix, src, True)
    else:
        _C.scatter_reduce_(out, d, ix, src, _KERNEL_OPS[reduce])
    if reduce == "mean":
        _mean_divide(out, d, ix, include_self)
    return out


@defop("scatter_reduce", devices=CPU, names=("ampy.scatter_reduce", "Tensor.scatter_reduce"))
def _scatter_reduce_fwd(input, dim, index, src, reduce, include_self=True):
    return _reduce_into(_C.cast(input, input.dtype), dim, index, src, reduce, include_self)


@defop("scatter_reduce_", devices=CPU, names=("Tensor.scatter_reduce_",))
def _scatter_reduce_inplace_fwd(self, dim, index, src, reduce, include_self=True):
    return _reduce_into(self, dim, index, src, reduce, include_self)


_SCATTER_REDUCE, _SCATTER_REDUCE_ = get_op("scatter_reduce"), get_op("scatter_reduce_")


def _reduce_args(fn, input, dim, index, src, reduce, include_self):
    x = _tensor_arg(input, fn, "input", 1)
    ix = _tensor_arg(index, fn, "index", 3)
    s = _tensor_arg(src, fn, "src", 4)
    if not isinstance(reduce, str):
        raise TypeError(f"{fn}(): argument 'reduce' (position 5) must be str, not "
                        f"{type(reduce).__name__}")
    if not isinstance(include_self, bool):
        raise TypeError(f"{fn}(): argument 'include_self' must be bool, not "
                        f"{type(include_self).__name__}")
    red = _ALIASES.get(reduce, reduce)
    if red not in REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d = wrap_dim(dim, x.ndim)
    _check_scatter(x, d, ix, s)
    if red == "mean" and x.dtype is D.bool:
        raise NotImplementedError('"scatter_gather_tensor_cpu_reduce_mean" not implemented for '
                                  "'Bool'")
    return x, ix, s, red


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """input with each src[c] combined by `reduce` into input[c with c[dim] =
    index[c]], in index order (include_self=False: input's own values at the
    indexed positions left out): torch.scatter_reduce."""
    x, ix, s, red = _reduce_args("scatter_reduce", input, dim, index, src, reduce, include_self)
    return dispatch(_SCATTER_REDUCE, x, dim, ix, s, red, include_self)


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    x, ix, s, red = _reduce_args("scatter_reduce_", self, dim, index, src, reduce, include_self)
    return dispatch(_SCATTER_REDUCE_, x, dim, ix, s, red, include_self)
