"""Advanced indexing of CUDA tensors on the device (cuda/index.cu).

ampy/_indexing.py reduces every advanced key to index.h's form (the indexed
dims first, k broadcast int64 index arrays of length P, the rest copied whole)
and, for a CUDA tensor, calls ``gather`` / ``scatter`` / ``nonzero`` here
instead of the CPU's ``_C.index_gather`` / ``_C.index_scatter`` /
``_C.nonzero`` (``_indexing._cuda`` is set by ``install()``). Index arrays and
values given on the CPU (Python lists, CPU tensors) are copied to the device
first, as torch does.

Synchronisation: integer-tensor indexing never waits for the device; an
out-of-range index is a deferred device-side check (raised at the next
synchronisation, or at the op with ``ampy.cuda.set_sync_checks(True)``).
Boolean-mask indexing needs the number of selected elements on the host to
shape its result: one synchronisation per mask (torch.nonzero and
``x[mask]`` on torch.cuda wait the same way).

Repeated index tuples: ``x[idx] = v`` keeps the last one (as the CPU's serial
loop); the autograd backward of ``x[idx]`` (``index_put_accumulate``) adds
every repeat, one addition at a time rounded to the dtype, in the order ampy's
CPU rule uses (decreasing position: ``ACCUMULATE_ORDER``), so CPU and GPU
gradients agree bit for bit.
"""
from .. import _C
from .. import _dtype as D

# ampy/autograd/_rules_views.index_put_accumulate adds repeats in rounds, each
# round taking the LAST pending repeat of every destination: decreasing order.
ACCUMULATE_ORDER = -1


def _kernels():
    from . import _K
    if _K is None:
        raise RuntimeError("ampy: CUDA is not available")
    return _K


def _on(t, device):
    """t on cuda:device (copied when it is elsewhere), contiguous."""
    if t._device_index != device:
        d = _C._empty_device(tuple(t.shape), t.dtype, device)
        _C.copy_(d, t)
        return d
    return t if t.is_contiguous() else t.contiguous()


def gather(perm, idx):
    """perm[idx...] as a fresh contiguous [P, rest...] tensor on perm's device."""
    dev = perm._device_index
    idx = [_on(ix, dev) for ix in idx]
    P = idx[0].shape[0]
    out = _C._empty_device((P,) + tuple(perm.shape[len(idx):]), perm.dtype, dev)
    _kernels()._index_gather(perm, idx, out)
    return out


def scatter(perm, idx, values, accumulate=False):
    """perm[idx...] = values ([P, rest...] of perm's dtype), or += with
    accumulate (repeats added in ACCUMULATE_ORDER)."""
    dev = perm._device_index
    idx = [_on(ix, dev) for ix in idx]
    if values._device_index != dev:
        values = _on(values, dev)
    _kernels()._index_scatter(perm, idx, values, bool(accumulate), ACCUMULATE_ORDER)


def nonzero(mask):
    """[count, ndim] int64 indices of the non-zero elements, on the mask's
    device. Synchronises once (the count)."""
    dev = mask._device_index
    n = 1
    for s in mask.shape:
        n *= s
    K = _kernels()
    scratch = _C._empty_device((2 * n + 1,), D.int64, dev)
    count = K._nonzero_count(mask, scratch)
    out = _C._empty_device((count, mask.ndim), D.int64, dev)
    if count:
        K._nonzero_fill(mask, scratch, out)
    return out


def index_put_accumulate(z, key, g):
    """z[key] += g for a CUDA z, summing rows whose index tuples repeat, in one
    deterministic device pass (the CUDA twin of
    ampy/autograd/_rules_views.index_put_accumulate). Returns z."""
    from ..autograd import _rules_views as RV
    from ..autograd._ops import O
    if not RV._is_advanced(key):  # basic key: a view, as the CPU rule
        return O.setitem(z, key, O.add(O.getitem(z, key), g))
    plan = RV.accumulate_plan(z, key, g)
    if plan is None:
        return z
    perm, _, idx, v = plan
    if v.dtype is not z.dtype:
        v = _C.cast(v, z.dtype)
    scatter(perm, idx, v, accumulate=True)
    z._bump_version()
    return z


def install():
    """Route advanced indexing of CUDA tensors here: ampy/_indexing.py's hook
    and the autograd rule's index_put_accumulate (which the getitem backward
    looks up at call time)."""
    import sys
    from .. import _indexing
    from ..autograd import _rules_views as RV
    _indexing._cuda = sys.modules[__name__]
    if getattr(RV.index_put_accumulate, "_ampy_cuda", False):
        return
    cpu = RV.index_put_accumulate

    def routed(z, key, g):
        if z._device_index >= 0:
            return index_put_accumulate(z, key, g)
        return cpu(z, key, g)
    routed._ampy_cuda = True
    routed.__name__ = routed.__qualname__ = "index_put_accumulate"
    routed.__doc__ = cpu.__doc__
    RV.index_put_accumulate = routed
