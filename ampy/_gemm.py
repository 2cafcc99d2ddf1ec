"""GEMM ops: matmul, mm, bmm, addmm, baddbmm, linear and the @ operator.

Shapes and broadcasting follow torch; every product is one call to
_C.gemm, or _C.gemm_batched for operands with several batch dims
(csrc/gemm*.c: fp16/bf16/fp32 inputs, fp32 accumulation, rounded once to the
output dtype; `out_dtype=ampy.float32` keeps the fp32 result; float64 inputs
are summed in fp64, csrc/gemm_f64.c). Transposed,
permuted (attention heads) and broadcast operands are read in place through
their strides.
Forwards call _C and the view helpers directly (not dispatch), so autocast and
autograd see each public op exactly once.
"""
from . import _C
from . import _dtype as D
from . import _math
from . import _views as V
from ._dispatch import CPU_CUDA, defop, dispatch, get_op
from ._shape import broadcast_shapes
from ._tensor import Tensor

__all__ = ["matmul", "mm", "bmm", "addmm", "baddbmm", "linear", "dot", "mv"]

_FLOAT_OK = (D.float32, D.float16, D.bfloat16, D.float64)


def _gemm(a, b, out=None, out_dtype=None, alpha=1.0, beta=0.0, bias=None):
    """_C.gemm (bias: a 1-d row added before the one rounding, in fp32, or in
    fp64 for float64 inputs)."""
    if bias is None:
        return _C.gemm(a, b, out=out, out_dtype=out_dtype, alpha=alpha, beta=beta)
    return _C.gemm(a, b, out=out, out_dtype=out_dtype, alpha=alpha, beta=beta, bias=bias)


def _rows(t, K):
    """t (..., K) as a 2-d (rows, K) tensor; rows is explicit so that K = 0
    is not the ambiguous reshape(-1, 0)."""
    rows = 1
    for s in t.shape[:-1]:
        rows *= s
    return V.reshape(t, rows, K)


def _check(a, b, fn):
    for name, t in (("input", a), ("other", b)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if a.dtype is not b.dtype:  # torch raises RuntimeError here (a TypeError before)
        raise RuntimeError(f"{fn}: expected both operands to have the same dtype, but got "
                        f"{a.dtype} and {b.dtype}")
    if a.dtype not in _FLOAT_OK:
        raise TypeError(f"{fn}: dtype {a.dtype} is not supported: ampy GEMM takes float32, float16, bfloat16 and float64")


def _out_dtype(out_dtype, input_dtype=None):
    if out_dtype is None:
        return None
    od = D.to_dtype(out_dtype, "out_dtype")
    if input_dtype is not None and od not in (input_dtype, D.float32):
        raise TypeError(f"out_dtype must be the input dtype ({input_dtype}) or ampy.float32, "
                        f"got {od}")
    return od


def _mm(a, b, out_dtype=None):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x"
                           f"{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    return _gemm(a, b, out_dtype=out_dtype)


@defop("mm", devices=CPU_CUDA)
def _mm_fwd(input, mat2, *, out_dtype=None):
    _check(input, mat2, "mm")
    return _mm(input, mat2, _out_dtype(out_dtype, input.dtype))


@defop("bmm", devices=CPU_CUDA)
def _bmm_fwd(input, mat2, *, out_dtype=None):
    _check(input, mat2, "bmm")
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor (got {input.ndim}-D and {mat2.ndim}-D)")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input.shape[0]}, {input.shape[2]}] but got: "
                           f"[{mat2.shape[0]}, {mat2.shape[1]}].")
    return _gemm(input, mat2, out_dtype=_out_dtype(out_dtype, input.dtype))


def _broadcast_batch(sa, sb):
    out = broadcast_shapes(tuple(sa), tuple(sb))
    if out is None:
        n = max(len(sa), len(sb))
        sa, sb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
        x, y = next((x, y) for x, y in zip(sa, sb) if x != y and x != 1 and y != 1)
        raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y})"
                           f" at non-singleton dimension")
    return out


@defop("matmul", devices=CPU_CUDA)
def _matmul_fwd(input, other, *, out_dtype=None):
    _check(input, other, "matmul")
    a, b, od = input, other, _out_dtype(out_dtype, input.dtype)
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    if a.ndim == 1 and b.ndim == 1:
        if a.shape[0] != b.shape[0]:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src"
                               f" [{b.shape[0]}] to have the same number of elements, but got "
                               f"{a.shape[0]} and {b.shape[0]} elements respectively")
        return V.reshape(_mm(V.unsqueeze(a, 0), V.unsqueeze(b, 1), od), ())
    if a.ndim == 2 and b.ndim == 1:
        return V.squeeze(_mm(a, V.unsqueeze(b, 1), od), 1)
    if a.ndim == 1 and b.ndim == 2:
        return V.squeeze(_mm(V.unsqueeze(a, 0), b, od), 0)
    if a.ndim == 2 and b.ndim == 2:
        return _mm(a, b, od)
    if b.ndim <= 2:  # fold a's batch dims into the rows: one big GEMM
        bb = V.unsqueeze(b, 1) if b.ndim == 1 else b
        K = a.shape[-1]
        out = _mm(_rows(a, K), bb, od)
        shape = tuple(a.shape[:-1]) + ((bb.shape[1],) if b.ndim == 2 else ())
        return V.reshape(out, shape)
    a2 = V.unsqueeze(a, 0) if a.ndim == 1 else a
    M, K = a2.shape[-2], a2.shape[-1]
    K2, N = b.shape[-2], b.shape[-1]
    if K != K2:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{K}, {N}] but got: [{K2}, {N}].")
    _broadcast_batch(a2.shape[:-2], b.shape[:-2])
    # One C call over all batch dims: permuted views (the heads of a qkv
    # projection) and broadcast dims (stride 0) are read in place.
    out = _C.gemm_batched(a2, b, out_dtype=od)
    return V.squeeze(out, -2) if a.ndim == 1 else out


def _scaled_into(input, shape, dtype, beta, like):
    """A fresh (shape) tensor on like's device holding input broadcast, to be
    updated in place."""
    out = _C._empty_device(shape, dtype, like._device_index)
    if beta != 0:
        _C.copy_(out, input)
    return out


@defop("addmm", devices=CPU_CUDA)
def _addmm_fwd(input, mat1, mat2, *, beta=1, alpha=1):
    _check(mat1, mat2, "addmm")
    if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, mat1.shape))}"
                           f" and {'x'.join(map(str, mat2.shape))})")
    N = mat2.shape[1]
    if beta != 0 and isinstance(input, Tensor) and input.dtype is mat1.dtype and \
            mat1.dtype is not D.float64 and input.shape[-1:] == (N,) and \
            (input.ndim == 1 or (input.ndim == 2 and (input.shape[0] == 1 or
                                                      input.stride(0) == 0))):
        # a row broadcast over the rows: beta * input added in fp32 inside the
        # GEMM's epilogue (one rounding, as torch), not copied into out first
        row = V.reshape(input, N) if input.ndim == 1 or input.shape[0] == 1 else \
            V.select(input, 0, 0)
        if beta != 1:
            row = _C.cast(row, D.float32) if row.dtype is not D.float32 else row
            row = _math.mul(row, float(beta))
        return _gemm(mat1, mat2, alpha=float(alpha), bias=row)
    out = _scaled_into(input, (mat1.shape[0], N), mat1.dtype, beta, mat1)
    return _gemm(mat1, mat2, out=out, alpha=float(alpha), beta=float(beta))


@defop("baddbmm", devices=CPU_CUDA)
def _baddbmm_fwd(input, batch1, batch2, *, beta=1, alpha=1):
    _check(batch1, batch2, "baddbmm")
    if batch1.ndim != 3 or batch2.ndim != 3 or batch1.shape[0] != batch2.shape[0] or \
            batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError("baddbmm: batch1 and batch2 must be 3-D with matching batch and inner"
                           f" sizes, got {list(batch1.shape)} and {list(batch2.shape)}")
    out = _scaled_into(input, (batch1.shape[0], batch1.shape[1], batch2.shape[2]), batch1.dtype,
                       beta, batch1)
    return _gemm(batch1, batch2, out=out, alpha=float(alpha), beta=float(beta))


@defop("linear", devices=CPU_CUDA, names=("ampy.linear", "ampy.nn.functional.linear"))
def _linear_fwd(input, weight, bias=None):
    _check(input, weight, "linear")
    if weight.ndim != 2:
        raise RuntimeError(f"linear: weight must be 2-D, got {weight.ndim}-D")
    K = input.shape[-1] if input.ndim else 0
    if input.ndim == 0 or K != weight.shape[1]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({'x'.join(map(str, input.shape[:-1] or (1,)))}x{K} and "
                           f"{weight.shape[1]}x{weight.shape[0]})")
    flat = input.ndim == 2
    x2 = input if flat else _rows(input, K)
    wt = V.transpose(weight, 0, 1)  # read in place through its strides
    if bias is None:
        out = _gemm(x2, wt)
    else:
        if bias.dtype is not input.dtype:
            raise TypeError(f"linear: bias dtype {bias.dtype} differs from input dtype "
                            f"{input.dtype}")
        if bias.ndim <= 1 and (bias.ndim == 0 or bias.shape[0] in (1, weight.shape[0])):
            # x2 @ W^T + bias, the bias added in fp32 in the GEMM's epilogue
            out = _gemm(x2, wt, bias=V.expand(bias, weight.shape[0]))
        else:  # any other broadcastable bias: copied into the output first
            out = _scaled_into(bias, (x2.shape[0], weight.shape[0]), input.dtype, 1, input)
            out = _gemm(x2, wt, out=out, beta=1.0)
    return out if flat else V.reshape(out, tuple(input.shape[:-1]) + (weight.shape[0],))


_MATMUL, _MM, _BMM = get_op("matmul"), get_op("mm"), get_op("bmm")
_ADDMM, _BADDBMM, _LINEAR = get_op("addmm"), get_op("baddbmm"), get_op("linear")


def matmul(input, other, *, out_dtype=None):
    """Matrix product with torch.matmul's 1-d/2-d/N-d broadcasting rules."""
    if out_dtype is None:
        return dispatch(_MATMUL, input, other)
    return dispatch(_MATMUL, input, other, out_dtype=out_dtype)


def mm(input, mat2, *, out_dtype=None):
    if out_dtype is None:
        return dispatch(_MM, input, mat2)
    return dispatch(_MM, input, mat2, out_dtype=out_dtype)


def bmm(input, mat2, *, out_dtype=None):
    if out_dtype is None:
        return dispatch(_BMM, input, mat2)
    return dispatch(_BMM, input, mat2, out_dtype=out_dtype)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    return dispatch(_ADDMM, input, mat1, mat2, beta=beta, alpha=alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return dispatch(_BADDBMM, input, batch1, batch2, beta=beta, alpha=alpha)


def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    return dispatch(_LINEAR, input, weight, bias)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


def mv(input, vec):
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError("vector + matrix @ vector expected")
    return matmul(input, vec)
