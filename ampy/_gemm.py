"""Matrix products with float32 accumulation: matmul, mm, bmm, addmm, baddbmm, linear.

Names, shapes, broadcasting and errors follow torch. Inputs are float32, float16 or
bfloat16 (both operands the same dtype); every product is summed in float32 and the
result is rounded once to the input dtype, or kept float32 with ``out_dtype=ampy.float32``.
Transposed or strided operands (``weight.T``) are read in place by the C kernel
(csrc/gemm*.c, see csrc/include/ampy/gemm.h); this module only checks arguments,
arranges batch dimensions and calls ``_C.gemm``.
"""
from . import _C
from ._dtype import bfloat16, float16, float32

__all__ = ["matmul", "mm", "bmm", "addmm", "baddbmm", "linear"]

_GEMM_DTYPES = (float32, float16, bfloat16)


def _check_pair(fn, a, b, out_dtype):
    """dtype checks shared by every entry point; returns the output dtype."""
    for name, t in (("mat1", a), ("mat2", b)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if a.dtype != b.dtype:
        raise TypeError(f"{fn}(): expected mat1 and mat2 to have the same dtype, "
                        f"but got: {a.dtype} != {b.dtype}")
    if a.dtype not in _GEMM_DTYPES:
        raise TypeError(f"{fn}(): only float32, float16 and bfloat16 are supported, "
                        f"got {a.dtype}")
    if out_dtype is None:
        return a.dtype
    if out_dtype not in (a.dtype, float32):
        raise TypeError(f"{fn}(): out_dtype must be None, {a.dtype} or ampy.float32, "
                        f"got {out_dtype}")
    return out_dtype


def _shape_str(t):
    return "x".join(str(s) for s in t.shape)


def _check_mm_shapes(a, b):
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")


def _require_dim(fn, t, ndim, name):
    if t.dim() != ndim:
        what = "a matrix" if ndim == 2 else "a 3D tensor"
        raise RuntimeError(f"{fn}(): {name} must be {what}, got {t.dim()}-D")


def mm(input, mat2, *, out_dtype=None):
    """input (n, m) @ mat2 (m, p) -> (n, p)."""
    odt = _check_pair("mm", input, mat2, out_dtype)
    _require_dim("mm", input, 2, "self")
    _require_dim("mm", mat2, 2, "mat2")
    _check_mm_shapes(input, mat2)
    return _C.gemm(input, mat2, out_dtype=odt)


def bmm(input, mat2, *, out_dtype=None):
    """input (b, n, m) @ mat2 (b, m, p) -> (b, n, p)."""
    odt = _check_pair("bmm", input, mat2, out_dtype)
    _require_dim("bmm", input, 3, "batch1")
    _require_dim("bmm", mat2, 3, "batch2")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input.shape[0]}, {input.shape[2]}] but got: "
                           f"[{mat2.shape[0]}, {mat2.shape[1]}].")
    return _C.gemm(input, mat2, out_dtype=odt)


def _fill_input(fn, inp, shape, odt):
    """A fresh tensor of `shape`/`odt` holding `inp` broadcast (the beta * C term)."""
    if not isinstance(inp, _C.TensorBase):
        raise TypeError(f"{fn}(): argument 'input' must be Tensor, not {type(inp).__name__}")
    from ._creation import empty
    out = empty(shape, dtype=odt)
    out.copy_(inp.expand(*shape))
    return out


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out_dtype=None):
    """beta * input + alpha * (mat1 @ mat2); input broadcasts to (n, p).
    With beta == 0 input is ignored (NaN in it does not propagate), as in torch."""
    odt = _check_pair("addmm", mat1, mat2, out_dtype)
    _require_dim("addmm", mat1, 2, "mat1")
    _require_dim("addmm", mat2, 2, "mat2")
    _check_mm_shapes(mat1, mat2)
    if input.dtype != mat1.dtype and input.dtype != odt:
        raise TypeError(f"addmm(): expected input to have dtype {odt} like mat1, "
                        f"but got: {input.dtype}")
    if beta == 0:
        return _C.gemm(mat1, mat2, out_dtype=odt, alpha=float(alpha))
    out = _fill_input("addmm", input, (mat1.shape[0], mat2.shape[1]), odt)
    return _C.gemm(mat1, mat2, out, alpha=float(alpha), beta=float(beta))


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out_dtype=None):
    """beta * input + alpha * (batch1 @ batch2); input broadcasts to (b, n, p)."""
    odt = _check_pair("baddbmm", batch1, batch2, out_dtype)
    _require_dim("baddbmm", batch1, 3, "batch1")
    _require_dim("baddbmm", batch2, 3, "batch2")
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{batch1.shape[0]}, {batch1.shape[2]}] but got: "
                           f"[{batch2.shape[0]}, {batch2.shape[1]}].")
    if input.dtype != batch1.dtype and input.dtype != odt:
        raise TypeError(f"baddbmm(): expected input to have dtype {odt} like batch1, "
                        f"but got: {input.dtype}")
    if beta == 0:
        return _C.gemm(batch1, batch2, out_dtype=odt, alpha=float(alpha))
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    out = _fill_input("baddbmm", input, shape, odt)
    return _C.gemm(batch1, batch2, out, alpha=float(alpha), beta=float(beta))


def _broadcast_batch(sa, sb):
    """torch's broadcasting of the batch dimensions sa and sb (tuples)."""
    n = max(len(sa), len(sb))
    sa = (1,) * (n - len(sa)) + tuple(sa)
    sb = (1,) * (n - len(sb)) + tuple(sb)
    out = []
    for x, y in zip(sa, sb):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                               f"({y}) at non-singleton dimension")
        out.append(y if x == 1 else x)
    return tuple(out)


def matmul(input, other, *, out_dtype=None):
    """torch.matmul: 1-D x 1-D dot, 2-D mm, 1-D operands promoted to matrices and
    the added dimension removed, batch dimensions broadcast."""
    odt = _check_pair("matmul", input, other, out_dtype)
    if input.dim() == 0 or other.dim() == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{input.dim()}D and {other.dim()}D")
    a = input.unsqueeze(0) if input.dim() == 1 else input
    b = other.unsqueeze(1) if other.dim() == 1 else other
    if a.shape[-1] != b.shape[-2]:
        if input.dim() == 1 or other.dim() == 1:
            raise RuntimeError(f"size mismatch, got input ({_shape_str(input)}), "
                               f"other ({_shape_str(other)})")
        _check_mm_shapes(a, b)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if a.dim() == 2 and b.dim() == 2:
        r = _C.gemm(a, b, out_dtype=odt)
    elif b.dim() == 2:  # fold a's batch into rows: one large GEMM
        r = _C.gemm(a.reshape(-1, k), b, out_dtype=odt).reshape(*a.shape[:-1], n)
    else:
        batch = _broadcast_batch(a.shape[:-2], b.shape[:-2])
        a3 = a.expand(*batch, m, k).reshape(-1, m, k)
        b3 = b.expand(*batch, k, n).reshape(-1, k, n)
        r = _C.gemm(a3, b3, out_dtype=odt).reshape(*batch, m, n)
    if input.dim() == 1:
        r = r.squeeze(-2)
    if other.dim() == 1:
        r = r.squeeze(-1)
    return r


def linear(input, weight, bias=None, *, out_dtype=None):
    """input (*, in) @ weight.T (in, out) + bias (out) -> (*, out); weight.T is read in
    place. The bias is added in float32 before the single rounding (as torch's addmm)."""
    odt = _check_pair("linear", input, weight, out_dtype)
    if weight.dim() != 2:
        raise RuntimeError(f"linear(): weight must be 2-D, got {weight.dim()}-D")
    if input.dim() == 0:
        raise RuntimeError("linear(): input must be at least 1-D")
    if input.shape[-1] != weight.shape[1]:
        x2 = input.reshape(-1, input.shape[-1]) if input.dim() != 1 else input.unsqueeze(0)
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({x2.shape[0]}x{x2.shape[1]} and {weight.shape[1]}x"
                           f"{weight.shape[0]})")
    lead = input.shape[:-1]
    x2 = input.reshape(-1, input.shape[-1])
    if bias is None:
        out = _C.gemm(x2, weight.T, out_dtype=odt)
    else:
        if not isinstance(bias, _C.TensorBase):
            raise TypeError(f"linear(): argument 'bias' must be Tensor, not "
                            f"{type(bias).__name__}")
        if bias.dtype != input.dtype and bias.dtype != odt:
            raise TypeError(f"linear(): expected bias to have dtype {input.dtype}, "
                            f"but got: {bias.dtype}")
        out = _fill_input("linear", bias, (x2.shape[0], weight.shape[0]), odt)
        out = _C.gemm(x2, weight.T, out, alpha=1.0, beta=1.0)
    return out.reshape(*lead, weight.shape[0])
