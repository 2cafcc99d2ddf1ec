"""Backward rules of the GEMM ops (ampy/_gemm.py).

C = A @ B gives dA = dC @ B^T and dB = A^T @ dC, computed by the same GEMM
kernels in the forward's dtype (fp16/bf16 operands, fp32 accumulation).
1-d operands are promoted to matrices as matmul does, and broadcast batch
dims are summed back to each operand's shape.
"""
from .. import _C
from .. import _dtype as D
from .._dispatch import backward
from ._grad_mode import _state
from ._ops import O, sum_to

_COLSUM_DTYPES = (D.float32, D.float16, D.bfloat16)


def _bias_grad(g2):
    """g2.sum(0): the same bits as O.sum (double accumulation, rows in order,
    one rounding) from one C pass with SIMD half conversion, when g2 is a
    contiguous CPU float matrix and the backward is not being recorded."""
    if (not _state.create_graph and g2._device_index < 0 and g2.dtype in _COLSUM_DTYPES and
            g2.ndim == 2 and g2.is_contiguous()):
        return _C.fused_colsum(g2)
    return O.sum(g2, 0)


def _mt(t):
    return O.transpose(t, -2, -1)


def _matmul_grads(a, b, g, need_a, need_b):
    a_shape, b_shape = tuple(a.shape), tuple(b.shape)
    if len(a_shape) == 1 and len(b_shape) == 1:  # dot product: g is 0-d
        return (O.mul(b, g) if need_a else None), (O.mul(a, g) if need_b else None)
    a2 = O.reshape(a, (1,) + a_shape) if len(a_shape) == 1 else a
    b2 = O.reshape(b, b_shape + (1,)) if len(b_shape) == 1 else b
    g2 = g
    if len(a_shape) == 1:
        g2 = O.unsqueeze(g2, -2)
    if len(b_shape) == 1:
        g2 = O.unsqueeze(g2, -1)
    ga = gb = None
    # The transposes are views: the batched GEMM reads them (and permuted
    # operands such as attention heads) in place, as torch's bmm backward does.
    if need_a:
        ga = _to_shape(O.matmul(g2, _mt(b2)), tuple(a2.shape), a_shape)
    if need_b:
        gb = _to_shape(O.matmul(_mt(a2), g2), tuple(b2.shape), b_shape)
    return ga, gb


def _to_shape(g, shape2, shape):
    """g summed over broadcast dims to shape2, then viewed as shape (no op
    recorded when it already has that shape)."""
    g = sum_to(g, shape2)
    return g if tuple(g.shape) == shape else O.reshape(g, shape)


@backward("matmul", save=(0, 1))
def _matmul(ctx, g):
    a, b = ctx.args[:2]
    n = ctx.needs_input_grad
    return _matmul_grads(a, b, g, n[0], n[1])


@backward("mm", save=(0, 1))
def _mm(ctx, g):
    a, b = ctx.args[:2]
    n = ctx.needs_input_grad
    return (O.mm(g, _mt(b)) if n[0] else None), (O.mm(_mt(a), g) if n[1] else None)


@backward("bmm", save=(0, 1))
def _bmm(ctx, g):
    a, b = ctx.args[:2]
    n = ctx.needs_input_grad
    return (O.bmm(g, _mt(b)) if n[0] else None), (O.bmm(_mt(a), g) if n[1] else None)


def _scaled(t, s):
    return t if s == 1 else O.mul(t, s)


def _beta_alpha(ctx):
    kw = ctx.kwargs or {}
    return kw.get("beta", 1), kw.get("alpha", 1)


@backward("addmm", save=(1, 2))
def _addmm(ctx, g):
    _, m1, m2 = ctx.args[:3]
    beta, alpha = _beta_alpha(ctx)
    n = ctx.needs_input_grad
    gi = _scaled(g, beta) if n[0] else None
    g1 = _scaled(O.mm(g, _mt(m2)), alpha) if n[1] else None
    g2 = _scaled(O.mm(_mt(m1), g), alpha) if n[2] else None
    return gi, g1, g2


@backward("baddbmm", save=(1, 2))
def _baddbmm(ctx, g):
    _, b1, b2 = ctx.args[:3]
    beta, alpha = _beta_alpha(ctx)
    n = ctx.needs_input_grad
    gi = _scaled(g, beta) if n[0] else None
    g1 = _scaled(O.bmm(g, _mt(b2)), alpha) if n[1] else None
    g2 = _scaled(O.bmm(_mt(b1), g), alpha) if n[2] else None
    return gi, g1, g2


def _nrows(t, cols):
    """Rows of t viewed as (rows, cols): numel / cols, or the leading dims'
    product when cols is 0."""
    if cols:
        return t.numel() // cols
    rows = 1
    for s in t.shape[:-1]:
        rows *= s
    return rows


@backward("linear", save=(0, 1))
def _linear(ctx, g):
    """y = x @ W^T + b: dx = g @ W, dW = g2^T @ x2 over all batch rows, db =
    sum of g over them."""
    x, w = ctx.args[:2]
    n = ctx.needs_input_grad
    gx = gw = gb = None
    if n[0]:
        gx = O.matmul(g, w)
    out_f = w.shape[0] if w.ndim == 2 else 1
    if n[1] or (len(n) > 2 and n[2]):
        if w.ndim == 2 and g.ndim == 2:  # already (rows, out_features): no reshape ops
            g2 = g
        else:
            # explicit row counts: (-1, 0) is ambiguous when a size is 0
            g2 = O.reshape(g, (_nrows(g, out_f), out_f))
        if n[1]:
            x2 = x if x.ndim == 2 else O.reshape(x, (_nrows(x, x.shape[-1]), x.shape[-1]))
            gw = O.mm(_mt(g2), x2)
            if gw.shape != w.shape:
                gw = O.reshape(gw, tuple(w.shape))
        if len(n) > 2 and n[2]:
            gb = _bias_grad(g2)
            if gb.shape != ctx.args[2].shape:
                gb = O.reshape(gb, tuple(ctx.args[2].shape))
    return gx, gw, gb
