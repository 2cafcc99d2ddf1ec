"""Sorting and sampling: sort, argsort, topk, multinomial, randperm.

`sort` and `topk` are ops (declared here, rules in
ampy/autograd/_rules_tensorops.py) whose forwards move the sorted dim last,
make the rows contiguous and call the row kernels through `_C.sort` /
`_C.topk` (csrc/sort.c; cuda/sort.cu for CUDA tensors). The order is
torch's: NaN is larger than every number, so it comes last ascending and
first descending (and first in topk(largest=True)); equal elements keep
their input order, so the indices are torch's stable=True indices (ampy's
sort is always stable). Values are the input elements themselves, bit for
bit. `multinomial` draws from the generator's uniform stream and samples in
C (csrc/multinomial.c; cuda/multinomial.cu for CUDA weights, from the same
uniforms, so the same samples); it is statistically torch's distribution,
not torch's random stream.
"""
import collections as _collections

from . import _C
from . import _dtype as D
from ._creation import rand
from ._dispatch import CPU_CUDA, defop, dispatch, get_op
from ._shape import wrap_dim
from ._tensor import Tensor

__all__ = ["sort", "argsort", "topk", "multinomial", "randperm"]

# torch.return_types.sort / topk: named pairs (values, indices)
_SortRet = _collections.namedtuple("sort", ["values", "indices"])
_TopkRet = _collections.namedtuple("topk", ["values", "indices"])


def _tensor_arg(x, fn, arg="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _int_arg(v, fn, arg):
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, Tensor) and v.ndim == 0 and not v.dtype.is_floating_point:
            return int(v.item())
        raise TypeError(f"{fn}(): argument '{arg}' must be int, not {type(v).__name__}")
    return v


def _rows(x, d):
    """x with dim d moved last, contiguous; and the permutation that undoes it."""
    nd = x.ndim
    if d == nd - 1:
        return x.contiguous(), None
    perm = [i for i in range(nd) if i != d] + [d]
    back = [0] * nd
    for i, p in enumerate(perm):
        back[p] = i
    return x.permute(*perm).contiguous(), back


def _restore(t, back):
    return t if back is None else t.permute(*back).contiguous()


@defop("sort", devices=CPU_CUDA, names=("ampy.sort", "Tensor.sort"))
def _sort_fwd(input, dim=-1, descending=False):
    x = input
    if x.ndim == 0:
        v, i = _C.sort(x.reshape(1), bool(descending))
        return _SortRet(v.reshape(()), i.reshape(()))
    d = wrap_dim(dim, x.ndim)
    rows, back = _rows(x, d)
    v, i = _C.sort(rows, bool(descending))
    return _SortRet(_restore(v, back), _restore(i, back))


@defop("topk", devices=CPU_CUDA, names=("ampy.topk", "Tensor.topk"))
def _topk_fwd(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002 (torch's name)
    x = input
    if x.ndim == 0:
        v, i = _C.topk(x.reshape(1), k, bool(largest))
        return _TopkRet(v.reshape(()) if k else v, i.reshape(()) if k else i)
    d = wrap_dim(dim, x.ndim)
    rows, back = _rows(x, d)
    v, i = _C.topk(rows, k, bool(largest))
    return _TopkRet(_restore(v, back), _restore(i, back))


_SORT, _TOPK = get_op("sort"), get_op("topk")


def sort(input, dim=-1, descending=False, stable=False):
    """sort(input, dim=-1, descending=False, stable=False) -> (values, indices).

    Always stable (stable=False gives the stable order too, one of the orders
    torch allows); NaN sorts as the largest value."""
    x = _tensor_arg(input, "sort")
    dim = _int_arg(dim, "sort", "dim")
    wrap_dim(dim, x.ndim)
    if stable is not None and not isinstance(stable, bool):
        raise TypeError(f"sort(): argument 'stable' must be bool, not {type(stable).__name__}")
    return dispatch(_SORT, x, dim, bool(descending))


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices of sort(input, dim, descending, stable)."""
    return sort(_tensor_arg(input, "argsort"), dim, descending, stable).indices


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002 (torch's name)
    """topk(input, k, dim=-1, largest=True, sorted=True) -> (values, indices).

    The result is sorted either way (sorted=False allows any order); equal
    values come in input order; NaN counts as the largest value."""
    x = _tensor_arg(input, "topk")
    k = _int_arg(k, "topk", "k")
    dim = _int_arg(dim, "topk", "dim")
    d = wrap_dim(dim, x.ndim)
    n = x.shape[d] if x.ndim else 1
    if k < 0 or k > n:
        raise RuntimeError("selected index k out of range")
    if x.dtype is D.bool:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    return dispatch(_TOPK, x, k, dim, bool(largest), bool(sorted))


_TYPE_NAMES = {"int64": "Long", "int32": "Int", "uint8": "Byte", "bool": "Bool"}


_BAD_WEIGHTS = "probability tensor contains either `inf`, `nan` or element < 0"
_ZERO_ROW = "invalid multinomial distribution (sum of probabilities <= 0)"


def _check_device_weights(w):
    """The CPU kernel's checks of float64 weight rows w on a CUDA device,
    decided there: per row 2 for an element that is negative, infinite or
    NaN, 1 for a sum that is not positive; one host read of those flags,
    the first bad row's error raised (the CPU's order)."""
    bad = ((w < 0) | (w != w) | (w == float("inf"))).any(1)
    zero = (w.sum(1) > 0).logical_not()
    for code in (bad.long() * 2 + zero.long()).tolist():
        if code:
            raise RuntimeError(_BAD_WEIGHTS if code >= 2 else _ZERO_ROW)


@defop("multinomial", devices=CPU_CUDA, names=("ampy.multinomial", "Tensor.multinomial"))
def _multinomial_fwd(input, num_samples, replacement=False, generator=None):
    p = input
    rows = p if p.ndim == 2 else p.reshape(1, -1)
    if rows.shape[1] == 0:
        raise RuntimeError(_ZERO_ROW)
    w = _C.cast(rows, D.float64) if rows.dtype is not D.float64 else rows.contiguous()
    nu = rows.shape[0] * (num_samples if replacement else rows.shape[1])
    device = None
    if w._device_index >= 0:  # the CUDA sampler leaves the weight checks to its caller
        _check_device_weights(w)
        device = w.device
    # the generator's host stream either way: the same samples on both devices
    u = rand(nu, dtype=D.float64, generator=generator, device=device)
    out = _C.multinomial(w, num_samples, bool(replacement), u)
    return out if p.ndim == 2 else out.reshape(num_samples)


_MULTINOMIAL = get_op("multinomial")


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """multinomial(input, num_samples, replacement=False, *, generator=None) -> int64.

    Rows of non-negative weights (1-D or 2-D, any float dtype); samples drawn
    from the generator's uniform stream: torch's distribution, not its
    stream. Without replacement, categories of weight zero come only after
    every positive one (as torch)."""
    p = _tensor_arg(input, "multinomial")
    num_samples = _int_arg(num_samples, "multinomial", "num_samples")
    if not p.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{_TYPE_NAMES.get(p.dtype.name, p.dtype.name)}")
    if p.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > p.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if p.shape[-1] > (1 << 24):
        raise RuntimeError("number of categories cannot exceed 2^24")
    return dispatch(_MULTINOMIAL, p, num_samples, bool(replacement), generator)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 (the order of n float64 uniform keys
    from the generator: every permutation equally likely)."""
    n = _int_arg(n, "randperm", "n")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    dt = D.int64 if dtype is None else D.to_dtype(dtype)
    out = _C.sort(rand(n, dtype=D.float64, generator=generator), False)[1]
    if dt is not D.int64:
        out = _C.cast(out, dt)
    if device is not None:
        out = out.to(device)
    if requires_grad:
        out.requires_grad_(True)
    return out
