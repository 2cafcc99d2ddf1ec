"""CUDA forwards of the ops that have device kernels (registered into the op
table's ``cuda`` slots by ampy.cuda._ops.install, only with a GPU).

GEMM: ``matmul``, ``mm``, ``bmm``, ``linear``, ``addmm``, ``baddbmm`` through cuBLAS with
fp32 accumulation (cuda/blas.cu); operands are read in place when one of
their two innermost strides is 1 (``weight.T`` included), otherwise copied
once to contiguous memory. Signatures are torch's.
"""
import os
import sys

from .. import _C
from . import _K
from ._ops import cuda_op


def _add_blas_paths():
    """Directories where the nvidia-cublas wheel (a torch dependency) keeps
    libcublas, searched after the default loader path."""
    seen = set()
    for base in sys.path:
        for sub in (("nvidia", "cu13", "lib"), ("nvidia", "cublas", "lib")):
            d = os.path.join(base, *sub)
            if d not in seen and os.path.isdir(d):
                seen.add(d)
                try:
                    _K._blas_add_path(d)
                except ValueError:
                    return


_add_blas_paths()


def _mat_strides(t):
    """(stride of rows, stride of cols) of the last two dims, copying when
    neither is unit."""
    s = t.stride()
    if s[-1] != 1 and s[-2] != 1:
        t = t.contiguous()
        s = t.stride()
    return t, s[-2], s[-1]


def _gemm3(a, b, out_dtype=None, c=None, alpha=1.0, beta=0.0):
    """a: (B|1, m, k), b: (B|1, k, n) -> (B, m, n); batch of 1 broadcasts."""
    if a.dtype is not b.dtype:
        raise TypeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != "
                        f"{b.dtype}")
    batch = max(a.shape[0], b.shape[0])
    m, k = a.shape[1], a.shape[2]
    n = b.shape[2]
    if b.shape[1] != k:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({m}x{k} and "
                           f"{b.shape[1]}x{n})")
    a, sa_m, sa_k = _mat_strides(a)
    b, sb_k, sb_n = _mat_strides(b)
    sa_b = a.stride(0) if a.shape[0] > 1 else 0
    sb_b = b.stride(0) if b.shape[0] > 1 else 0
    if c is None:
        c = _C._empty_device((batch, m, n), out_dtype or a.dtype, a._device_index)
        beta = 0.0
    _K._gemm(a, b, c, batch, m, n, k, sa_b, sa_m, sa_k, sb_b, sb_k, sb_n, m * n, n,
             float(alpha), float(beta))
    return c


def _as3(t):
    return t.unsqueeze(0) if t.dim() == 2 else t


@cuda_op("mm")
def mm(a, b, *, out_dtype=None):
    return _gemm3(_as3(a), _as3(b), out_dtype)[0]


@cuda_op("bmm")
def bmm(a, b, *, out_dtype=None):
    return _gemm3(a, b, out_dtype)


@cuda_op("matmul")
def matmul(a, b, *, out_dtype=None):
    if a.dim() == 1 and b.dim() == 1:
        return _gemm3(a.reshape(1, 1, -1), b.reshape(1, -1, 1), out_dtype).reshape(())
    if a.dim() == 1:
        return matmul(a.unsqueeze(0), b, out_dtype=out_dtype).squeeze(-2)
    if b.dim() == 1:
        return matmul(a, b.unsqueeze(-1), out_dtype=out_dtype).squeeze(-1)
    if b.dim() == 2:  # (..., m, k) @ (k, n): fold the batch into m
        lead = tuple(a.shape[:-1])
        a2 = a.reshape(1, -1, a.shape[-1])
        return _gemm3(a2, b.unsqueeze(0), out_dtype).reshape(*lead, b.shape[-1])
    batch = tuple(a.shape[:-2]) if a.dim() >= b.dim() else tuple(b.shape[:-2])
    a3 = a.expand(*batch, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b3 = b.expand(*batch, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
    out = _gemm3(a3, b3, out_dtype)
    return out.reshape(*batch, a.shape[-2], b.shape[-1])


@cuda_op("linear")
def linear(x, weight, bias=None):
    lead = tuple(x.shape[:-1])
    x2 = x.reshape(1, -1, x.shape[-1])
    w_t = weight.t().unsqueeze(0)  # read in place (op T), no copy
    if bias is None:
        out = _gemm3(x2, w_t)
    else:
        out = _C._empty_device((1, x2.shape[1], weight.shape[0]), x.dtype, x._device_index)
        _C.copy_(out, bias.to(x.dtype))  # broadcast the bias into the output rows
        out = _gemm3(x2, w_t, c=out, beta=1.0)
    return out.reshape(*lead, weight.shape[0])


@cuda_op("addmm")
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    out = _C._empty_device((1, mat1.shape[0], mat2.shape[1]), mat1.dtype, mat1._device_index)
    if beta != 0:
        _C.copy_(out, input)
    return _gemm3(mat1.unsqueeze(0), mat2.unsqueeze(0), c=out, alpha=alpha,
                  beta=float(beta) if beta != 0 else 0.0)[0]


@cuda_op("cat")
def cat(tensors, dim=0):
    """torch.cat of CUDA tensors: one device allocation, one device copy per
    part (dtype promotion as torch.cat; checks as the CPU forward)."""
    from .. import _dtype as D
    from .. import _views
    ts = list(tensors)
    if not ts:
        raise RuntimeError("cat: expected a non-empty list of Tensors")
    dev = ts[0]._device_index
    for i, t in enumerate(ts):
        if t.ndim == 0:
            raise RuntimeError(f"cat: zero-dimensional tensor (at position {i}) cannot be "
                               f"concatenated")
        if t._device_index != dev:
            raise RuntimeError("cat: Expected all tensors to be on the same device")
    parts = [t for t in ts if not (t.ndim == 1 and t.shape[0] == 0)] or ts[:1]
    ref = parts[0]
    d = _views.wrap_dim(dim, ref.ndim)
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = D.promote_types(dtype, t.dtype)
    for i, t in enumerate(parts):
        if t.ndim != ref.ndim or any(k != d and t.shape[k] != ref.shape[k]
                                     for k in range(ref.ndim)):
            raise RuntimeError(f"cat: Sizes of tensors must match except in dimension {d} "
                               f"(tensor number {i} has shape {list(t.shape)})")
    shape = list(ref.shape)
    shape[d] = sum(t.shape[d] for t in parts)
    out = _C._empty_device(tuple(shape), dtype, dev)
    off = 0
    for t in parts:
        n = t.shape[d]
        if n:
            _C.copy_(_views.narrow(out, d, off, n), t)
        off += n
    return out


@cuda_op("stack")
def stack(tensors, dim=0):
    from .. import _views
    ts = list(tensors)
    s0 = tuple(ts[0].shape)
    for i, t in enumerate(ts[1:], 1):
        if tuple(t.shape) != s0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(s0)} "
                               f"at entry 0 and {list(t.shape)} at entry {i}")
    d = _views.wrap_dim(dim, len(s0) + 1)
    return cat([_views.unsqueeze(t, d) for t in ts], d)


@cuda_op("baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * batch1 @ batch2 (torch.baddbmm), as the CPU's
    _baddbmm_fwd: input broadcast into a fresh (B, m, n) output (skipped when
    beta == 0, so NaN/inf in input do not propagate), then one strided-batched
    cuBLAS GEMM with that beta (fp32 accumulation)."""
    from .. import _gemm
    _gemm._check(batch1, batch2, "baddbmm")
    if batch1.ndim != 3 or batch2.ndim != 3 or batch1.shape[0] != batch2.shape[0] or \
            batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError("baddbmm: batch1 and batch2 must be 3-D with matching batch and inner"
                           f" sizes, got {list(batch1.shape)} and {list(batch2.shape)}")
    out = _C._empty_device((batch1.shape[0], batch1.shape[1], batch2.shape[2]), batch1.dtype,
                           batch1._device_index)
    if beta != 0:
        _C.copy_(out, input)
    if batch1.shape[0] == 0:
        return out
    return _gemm3(batch1, batch2, c=out, alpha=alpha, beta=float(beta) if beta != 0 else 0.0)
