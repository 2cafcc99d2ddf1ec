"""Multi-dimensional batched GEMM (ampy_gemm_batched / _C.gemm_batched, and matmul of
>= 3-d operands, which now runs as ONE C call): permuted, strided, transposed and
broadcast views of every layout, against a float64 NumPy oracle; gradients against
torch; bad shapes give clear errors naming the argument.

Error bound per output (fp32 accumulation in any order, then one rounding):
    |got - exact| <= 2 * K * 2^-24 * (|A| @ |B|) + u_out * |exact| + tiny
with u_out = 2^-11 (float16), 2^-8 (bfloat16), 2^-24 (float32).
"""
import numpy as np
import pytest

import ampy
from ampy import _C

from _helpers import (IMPLS, TORCH_DTYPE as TORCH_DT, UNIT_ROUNDOFF as U_OUT, no_cpu_fallback,
                      requires_cuda, requires_torch_cuda)

torch = pytest.importorskip("torch")

DTYPES = [ampy.float32, ampy.float16, ampy.bfloat16]


def f64(t):
    return np.asarray(t.detach().float().numpy(), dtype=np.float64)


def base(shape, dtype, seed):
    g = np.random.default_rng(seed)
    return ampy.from_numpy(g.uniform(-1, 1, size=shape).astype(np.float32)).to(dtype)


def operand(batch, rows, cols, dtype, layout, seed):
    """A (*batch, rows, cols) view whose batch dims do NOT flatten into one stride.
    layout: 'row' (col stride 1), 'col' (row stride 1, i.e. a transposed view),
    'gen' (neither stride 1)."""
    b0, b1 = batch
    if layout == "row":    # like q of a permuted qkv: (b0, rows, b1, cols) -> permute
        return base((b0, rows, b1, cols), dtype, seed).permute(0, 2, 1, 3)
    if layout == "col":    # like k.transpose(-2, -1)
        return base((b0, cols, b1, rows), dtype, seed).permute(0, 2, 3, 1)
    return base((b0, rows, b1, cols, 2), dtype, seed)[..., 1].permute(0, 2, 1, 3)


def check_close(got, a64, b64, out_dtype, alpha=1.0, extra=None):
    exact = alpha * (a64 @ b64) + (0 if extra is None else extra)
    bound = 2 * a64.shape[-1] * 2.0**-24 * (np.abs(a64) @ np.abs(b64)) * abs(alpha)
    bound = bound + U_OUT[out_dtype] * np.abs(exact) + 2.0**-24
    if extra is not None:
        bound = bound + 2.0**-23 * np.abs(extra)
    assert got.dtype == out_dtype
    assert tuple(got.shape) == exact.shape
    err = np.abs(f64(got) - exact)
    assert np.all(err <= bound), f"max err {err.max()} vs bound {bound[err > bound][:3]}"


LAYOUTS = ["row", "col", "gen"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("la", LAYOUTS)
@pytest.mark.parametrize("lb", LAYOUTS)
def test_permuted_views_every_layout(impl, dtype, la, lb):
    a = operand((2, 3), 13, 37, dtype, la, 1)
    b = operand((2, 3), 37, 19, dtype, lb, 2)
    before = (f64(a).copy(), f64(b).copy())
    got = ampy.matmul(a, b)
    check_close(got, f64(a), f64(b), dtype)
    check_close(ampy.matmul(a, b, out_dtype=ampy.float32), f64(a), f64(b), ampy.float32)
    assert np.array_equal(f64(a), before[0]) and np.array_equal(f64(b), before[1])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention_shapes(dtype):
    """The block's six attention GEMMs (scaled down) with q, k, v the permuted views of
    one qkv projection output, and dO a permuted view too."""
    B, T, H, DH = 3, 40, 2, 16
    qkv = base((B, T, 3, H, DH), dtype, 3).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    att = base((B, H, T, T), dtype, 4)
    do = base((B, T, H, DH), dtype, 5).permute(0, 2, 1, 3)
    tr = lambda t: t.transpose(-2, -1)  # noqa: E731
    for x, y in ((q, tr(k)), (att, v), (do, tr(v)), (tr(att), do), (att, k), (tr(att), q)):
        check_close(ampy.matmul(x, y), f64(x), f64(y), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_batch(dtype):
    a = base((3, 1, 6, 9), dtype, 6)
    b = base((4, 9, 5), dtype, 7).transpose(-2, -1).transpose(-2, -1)
    got = ampy.matmul(a, b)
    assert tuple(got.shape) == (3, 4, 6, 5)
    check_close(got, f64(a), f64(b), dtype)
    # expanded (stride 0) operand and a 2-d one against a 4-d one
    e = base((1, 2, 9, 5), dtype, 8).expand(3, 2, 9, 5)
    check_close(ampy.matmul(a, e), f64(a), f64(e), dtype)
    m = base((6, 9), dtype, 9)
    check_close(ampy.matmul(m, e), f64(m), f64(e), dtype)
    # a 1-d right operand of a batched left one, and a 1-d left one
    vec = base((9,), dtype, 10)
    check_close(ampy.matmul(a, vec), f64(a), f64(vec), dtype)
    vec5 = base((6,), dtype, 11)
    check_close(ampy.matmul(vec5, a), f64(vec5), f64(a), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemm_batched_out_alpha_beta(dtype):
    a = operand((2, 3), 7, 11, dtype, "row", 12)
    b = operand((2, 3), 11, 8, dtype, "col", 13)
    c0 = base((2, 3, 7, 8), dtype, 14)
    c = c0.clone()
    r = _C.gemm_batched(a, b, out=c, alpha=0.5, beta=-2.0)
    assert r is c
    check_close(c, f64(a), f64(b), dtype, alpha=0.5, extra=-2.0 * f64(c0))
    # out a permuted (non-contiguous) view, float32
    cp = ampy.zeros((2, 7, 3, 8), dtype=ampy.float32).permute(0, 2, 1, 3)
    _C.gemm_batched(a, b, out=cp)
    check_close(cp, f64(a), f64(b), ampy.float32)


def test_empty_and_k0():
    a = base((2, 0, 3, 4), ampy.float32, 15)
    b = base((2, 0, 4, 5), ampy.float32, 16)
    assert tuple(ampy.matmul(a, b).shape) == (2, 0, 3, 5)
    a = base((2, 3, 0), ampy.float32, 17)
    b = base((2, 0, 5), ampy.float32, 18)
    got = ampy.matmul(a, b)
    assert np.array_equal(f64(got), np.zeros((2, 3, 5)))
    c = ampy.ones((2, 3, 5))
    _C.gemm_batched(a.permute(0, 1, 2), b, out=c, beta=3.0)
    assert np.array_equal(f64(c), np.full((2, 3, 5), 3.0))


def test_many_batch_dims():
    a = base((2, 1, 2, 1, 2, 3, 4), ampy.float32, 19)
    b = base((2, 2, 1, 2, 1, 2, 4, 3), ampy.float32, 20)
    check_close(ampy.matmul(a, b), f64(a), f64(b), ampy.float32)
    a9 = base((2,) * 9 + (2, 2), ampy.float32, 21)
    with pytest.raises(ValueError, match="batch dims"):
        _C.gemm_batched(a9, a9)


@pytest.mark.parametrize("dtype", [ampy.float32, ampy.float16, ampy.bfloat16], ids=str)
def test_threads_bit_identical(dtype):
    """Splitting the batch items over threads does not change any sum's order."""
    a = operand((8, 4), 64, 64, dtype, "row", 22)
    b = operand((8, 4), 64, 48, dtype, "row", 23)
    n0 = ampy.get_num_threads()
    try:
        ampy.set_num_threads(1)
        r1 = f64(ampy.matmul(a, b))
        ampy.set_num_threads(2)
        r2 = f64(ampy.matmul(a, b))
    finally:
        ampy.set_num_threads(n0)
    assert np.array_equal(r1, r2)
    check_close(ampy.matmul(a, b), f64(a), f64(b), dtype)


def test_bad_arguments():
    a = base((2, 3, 4), ampy.float32, 24)
    with pytest.raises(ValueError, match="gemm_batched: a must be at least 2-d"):
        _C.gemm_batched(base((4,), ampy.float32, 0), a)
    with pytest.raises(ValueError, match="gemm_batched: b must be at least 2-d"):
        _C.gemm_batched(a, base((4,), ampy.float32, 0))
    with pytest.raises(ValueError, match="last dim"):
        _C.gemm_batched(a, base((2, 3, 4), ampy.float32, 25))
    with pytest.raises(ValueError, match="do not broadcast"):
        _C.gemm_batched(a, base((3, 4, 2), ampy.float32, 26))
    with pytest.raises(TypeError, match="same dtype"):
        _C.gemm_batched(a, base((2, 4, 2), ampy.float16, 27))
    with pytest.raises(TypeError, match="out_dtype"):
        _C.gemm_batched(a, base((2, 4, 2), ampy.float32, 27), out_dtype=ampy.float16)
    with pytest.raises(TypeError, match="'a'"):
        _C.gemm_batched(np.zeros((2, 2)), a)
    out = ampy.zeros((2, 3, 3))
    with pytest.raises(ValueError, match="out must be"):
        _C.gemm_batched(a, base((2, 4, 2), ampy.float32, 28), out=out)
    assert np.array_equal(f64(out), np.zeros((2, 3, 3)))  # unchanged
    with pytest.raises(TypeError, match="out"):
        _C.gemm_batched(base((2, 3, 4), ampy.float16, 29), base((2, 4, 2), ampy.float16, 30),
                        out=ampy.zeros((2, 3, 2), dtype=ampy.bfloat16))
    # matmul's own messages for mismatched batch / inner sizes
    with pytest.raises(RuntimeError, match="must match the size"):
        ampy.matmul(base((2, 3, 4, 5), ampy.float32, 31), base((3, 3, 5, 2), ampy.float32, 32))
    with pytest.raises(RuntimeError, match="batch2"):
        ampy.matmul(base((2, 3, 4, 5), ampy.float32, 31), base((2, 3, 4, 2), ampy.float32, 32))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention_grads_vs_torch(dtype):
    """Gradients through q @ k^T and att @ v with q, k, v permuted views of one
    projection output, against torch in float64 on the same (rounded) values."""
    B, T, H, DH = 2, 24, 2, 8
    g = np.random.default_rng(33)
    x = g.uniform(-1, 1, (B, T, 3 * H * DH)).astype(np.float32)
    w = g.uniform(-1, 1, (B, H, T, DH)).astype(np.float32)

    def run(lib, xt, wt):
        qkv = xt.reshape(B, T, 3, H, DH).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = lib.matmul(q, k.transpose(-2, -1))
        o = lib.matmul(s, v)
        (o * wt).sum().backward()
        return xt.grad

    xa = ampy.tensor(x, dtype=dtype, requires_grad=True)
    wa = ampy.tensor(w, dtype=dtype)
    ga = f64(run(ampy, xa, wa))
    x64 = torch.tensor(f64(xa), dtype=torch.float64, requires_grad=True)
    w64 = torch.tensor(f64(wa), dtype=torch.float64)
    gt = run(torch, x64, w64).numpy()
    # the intermediates s and o (and the grads) are each rounded once to dtype:
    # a few units of u_out relative to the largest gradient
    scale = np.abs(gt).max()
    tol = 8 * U_OUT[dtype] if dtype != ampy.float32 else 1e-6
    assert ga.shape == gt.shape
    assert np.max(np.abs(ga - gt)) <= tol * scale, np.max(np.abs(ga - gt)) / scale
    # and the same step in torch's own dtype agrees as closely
    xt = torch.tensor(f64(xa), dtype=TORCH_DT[dtype], requires_grad=True)
    gtt = run(torch, xt, torch.tensor(f64(wa), dtype=TORCH_DT[dtype])).double().numpy()
    assert np.max(np.abs(ga - gtt)) <= 2 * tol * scale


def test_broadcast_grads_vs_torch():
    g = np.random.default_rng(34)
    a = g.uniform(-1, 1, (3, 1, 5, 6))
    b = g.uniform(-1, 1, (4, 6, 2))
    aa = ampy.tensor(a.astype(np.float32), requires_grad=True)
    ba = ampy.tensor(b.astype(np.float32), requires_grad=True)
    ampy.matmul(aa, ba).sum().backward()
    at = torch.tensor(a.astype(np.float32).astype(np.float64), requires_grad=True)
    bt = torch.tensor(b.astype(np.float32).astype(np.float64), requires_grad=True)
    torch.matmul(at, bt).sum().backward()
    assert tuple(aa.grad.shape) == a.shape and tuple(ba.grad.shape) == b.shape
    np.testing.assert_allclose(f64(aa.grad), at.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(f64(ba.grad), bt.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif("avx512" not in IMPLS, reason="needs the AVX-512 implementation")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m", [1, 2, 5, 13, 14, 15, 29, 128])
@pytest.mark.parametrize("k", [1, 17, 256])
def test_direct_a_kernel_same_bits_as_packed(dtype, m, k):
    """A read in place (float32 row-major or k-major) or widened row by row (half
    row-major; gemm_direct.c) gives the bits of the packed-A path (an A with no
    unit stride is always packed)."""
    _C.gemm_set_impl("avx512")
    try:
        b = operand((2, 2), k, 40, dtype, "row", 40)
        for la in ("row", "col"):
            a = operand((2, 2), m, k, dtype, la, 41)
            g = base((2, m, 2, k, 2), dtype, 42)
            g[..., 1] = a.permute(0, 2, 1, 3)       # same values, no unit stride
            ag = g[..., 1].permute(0, 2, 1, 3)
            got, ref = f64(ampy.matmul(a, b)), f64(ampy.matmul(ag, b))
            assert np.array_equal(got, ref), (la, np.abs(got - ref).max())
            check_close(ampy.matmul(a, b), f64(a), f64(b), dtype)
    finally:
        _C.gemm_set_impl("auto")


# ================================================================ CUDA
# baddbmm on a GPU against the CPU, float64 and torch; skipped without a GPU.

@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 1)])
@pytest.mark.parametrize("ishape", [(3, 17, 9), (17, 9), (9,), (1, 1, 1)])
def test_cuda_baddbmm_vs_float64(dt, beta, alpha, ishape):
    rng = np.random.default_rng(41)
    a64, b64 = rng.standard_normal((3, 17, 33)), rng.standard_normal((3, 33, 9))
    i64 = rng.standard_normal(ishape)
    if beta == 0:
        i64[...] = np.nan  # beta == 0 ignores input entirely (torch's rule)
    a, b, inp = (ampy.from_numpy(v).to(dt) for v in (a64, b64, i64))
    with no_cpu_fallback():
        out = ampy.baddbmm(inp.cuda(), a.cuda(), b.cuda(), beta=beta, alpha=alpha)
    assert out.is_cuda and out.dtype is dt and tuple(out.shape) == (3, 17, 9)
    r = lambda t: t.double().numpy()  # noqa: E731
    ref = alpha * (r(a) @ r(b)) + (beta * r(inp) if beta != 0 else 0)
    got = out.float().cpu().numpy().astype(np.float64)
    tol = {ampy.float32: 1e-5, ampy.float16: 2e-3, ampy.bfloat16: 1e-2}[dt]
    assert np.abs(got - ref).max() / np.abs(ref).max() < tol
    cpu = ampy.baddbmm(inp, a, b, beta=beta, alpha=alpha)
    assert np.abs(got - cpu.double().numpy()).max() / np.abs(ref).max() < tol


@requires_cuda
@requires_torch_cuda
def test_baddbmm_vs_torch_cuda_and_backward():
    rng = np.random.default_rng(42)
    a, b, i = (rng.standard_normal(s).astype(np.float32) for s in ((4, 8, 16), (4, 16, 5), (8, 5)))
    ta, tb, ti = (torch.from_numpy(v).cuda().half().requires_grad_(True) for v in (a, b, i))
    ga, gb, gi = (ampy.from_numpy(v).cuda().half().requires_grad_(True) for v in (a, b, i))
    to = torch.baddbmm(ti, ta, tb, beta=0.5, alpha=2.0)
    go = ampy.baddbmm(gi, ga, gb, beta=0.5, alpha=2.0)
    np.testing.assert_allclose(go.float().cpu().numpy(), to.float().cpu().numpy(), rtol=2e-3,
                               atol=2e-3)
    to.float().sum().backward()
    go.float().sum().backward()
    for g, t in ((ga, ta), (gb, tb), (gi, ti)):
        np.testing.assert_allclose(g.grad.float().cpu().numpy(), t.grad.float().cpu().numpy(),
                                   rtol=2e-3, atol=2e-3)
