"""GEMM (ampy._gemm, _C.gemm): every implementation this CPU can run, against a float64
NumPy reference and against torch, for all dtypes, transposes, batches and odd shapes.

Error bound per output (fp32 accumulation in any order, then one rounding):
    |got - exact| <= 2 * K * 2^-24 * (|A| @ |B|) * |alpha| + u_out * |exact| + tiny
with u_out = 2^-11 (float16), 2^-8 (bfloat16), 2^-24 (float32).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import ampy
from ampy import _C
from ampy import _gemm as G

from _helpers import (TORCH_DTYPE as TORCH_DT, UNIT_ROUNDOFF as U_OUT, bits, requires_cuda,
                      requires_torch_cuda)

torch = pytest.importorskip("torch")

DTYPES = [ampy.float32, ampy.float16, ampy.bfloat16]


def f64(t):
    return np.asarray(t.numpy(), dtype=np.float64) if t.dtype != ampy.bfloat16 else \
        np.asarray(t.float().numpy(), dtype=np.float64)


def rand(shape, dtype, seed):
    g = np.random.default_rng(seed)
    return ampy.from_numpy(g.uniform(-1, 1, size=shape).astype(np.float32)).to(dtype)


def make(rows, cols, dtype, trans, seed):
    """(rows, cols) tensor; trans=True gives a column-major view (x.T of a (cols, rows))."""
    return rand((cols, rows), dtype, seed).T if trans else rand((rows, cols), dtype, seed)


def check_close(got, a64, b64, out_dtype, alpha=1.0, extra=None):
    exact = alpha * (a64 @ b64) + (0 if extra is None else extra)
    bound = 2 * a64.shape[-1] * 2.0**-24 * (np.abs(a64) @ np.abs(b64)) * abs(alpha)
    bound = bound + U_OUT[out_dtype] * np.abs(exact) + 2.0**-24
    if extra is not None:
        bound = bound + 2.0**-23 * np.abs(extra)
    err = np.abs(f64(got) - exact)
    assert got.dtype == out_dtype
    assert np.all(err <= bound), f"max err {err.max()} vs bound {bound[err > bound][:3]}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (7, 33, 255), (33, 7, 1), (255, 1, 33),
                                 (70, 129, 300)])
def test_mm_vs_float64(impl, dtype, ta, tb, mnk):
    m, n, k = mnk
    a, b = make(m, k, dtype, ta, 1), make(k, n, dtype, tb, 2)
    check_close(G.mm(a, b), f64(a), f64(b), dtype)
    check_close(G.mm(a, b, out_dtype=ampy.float32), f64(a), f64(b), ampy.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_long_k(impl, dtype):
    a, b = make(9, 8192, dtype, False, 3), make(8192, 40, dtype, True, 4)
    check_close(G.mm(a, b, out_dtype=ampy.float32), f64(a), f64(b), ampy.float32)
    check_close(G.mm(a, b), f64(a), f64(b), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_large_blocks_and_threads(impl, dtype):
    a, b = make(300, 1100, dtype, False, 5), make(1100, 530, dtype, False, 6)
    check_close(G.mm(a, b), f64(a), f64(b), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_vs_torch(dtype):
    a, b = make(64, 96, dtype, False, 7), make(96, 48, dtype, True, 8)
    ta, tb = (torch.from_numpy(f64(x)).to(TORCH_DT[dtype]) for x in (a, b))
    ours, theirs = f64(G.mm(a, b)), (ta @ tb).double().numpy()
    tol = 2 * U_OUT[dtype] * np.abs(theirs) + 96 * 2.0**-22 * np.abs(f64(a)) @ np.abs(f64(b))
    assert np.all(np.abs(ours - theirs) <= tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bmm_baddbmm(impl, dtype):
    a, b = rand((3, 17, 40), dtype, 9), rand((3, 40, 23), dtype, 10).transpose(1, 2)
    b = b.contiguous().transpose(1, 2)  # column-major batches
    inp = rand((1, 23), dtype, 11)
    check_close(G.bmm(a, b), f64(a), f64(b), dtype)
    got = G.baddbmm(inp, a, b, beta=0.5, alpha=2.0)
    check_close(got, f64(a), f64(b), dtype, alpha=2.0, extra=0.5 * f64(inp))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_addmm_and_linear_match_torch(dtype):
    x, w, bias = rand((5, 7, 24), dtype, 12), rand((10, 24), dtype, 13), rand((10,), dtype, 14)
    tx, tw, tbias = (torch.from_numpy(f64(t)).to(TORCH_DT[dtype]) for t in (x, w, bias))
    ours = f64(G.linear(x, w, bias))
    theirs = torch.nn.functional.linear(tx, tw, tbias).double().numpy()
    assert ours.shape == theirs.shape == (5, 7, 10)
    assert np.allclose(ours, theirs, rtol=2 * U_OUT[dtype], atol=1e-5)
    inp, m1, m2 = rand((1, 6), dtype, 15), rand((4, 9), dtype, 16), rand((9, 6), dtype, 17)
    got = G.addmm(inp, m1, m2, beta=-1.5, alpha=0.25)
    check_close(got, f64(m1), f64(m2), dtype, alpha=0.25, extra=-1.5 * f64(inp))


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((4,), (4, 6)), ((3, 4), (4,)),
                                   ((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)),
                                   ((2, 1, 3, 4), (5, 4, 6)), ((3, 4), (2, 4, 6))])
def test_matmul_broadcasting(sa, sb):
    a, b = rand(sa, ampy.float32, 18), rand(sb, ampy.float32, 19)
    ours = G.matmul(a, b)
    theirs = torch.matmul(torch.from_numpy(a.numpy()), torch.from_numpy(b.numpy()))
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert np.allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_inf_propagate(impl, dtype):
    a, b = rand((37, 53), dtype, 20).numpy(), rand((53, 41), dtype, 21).numpy()
    a[3, 5], a[10, 0], b[7, 2] = np.inf, -np.inf, np.nan
    at, bt = ampy.from_numpy(a), ampy.from_numpy(b)
    ref = f64(at) @ f64(bt)
    got = f64(G.mm(at, bt, out_dtype=ampy.float32))
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(np.isinf(got), np.isinf(ref))
    assert np.array_equal(np.sign(got[np.isinf(got)]), np.sign(ref[np.isinf(ref)]))


def test_beta_zero_ignores_nan_and_k_zero(impl):
    m1, m2 = rand((5, 3), ampy.float16, 22), rand((3, 4), ampy.float16, 23)
    out = G.addmm(ampy.full((5, 4), float("nan"), dtype=ampy.float16), m1, m2, beta=0)
    assert np.isfinite(f64(out)).all()
    empty = G.mm(ampy.empty((5, 0)), ampy.empty((0, 4)))
    assert tuple(empty.shape) == (5, 4) and not f64(empty).any()
    k0 = G.addmm(ampy.full((5, 4), 2.0), ampy.empty((5, 0)), ampy.empty((0, 4)), beta=3)
    assert (f64(k0) == 6.0).all()
    assert tuple(G.mm(ampy.empty((0, 3)), ampy.empty((3, 4))).shape) == (0, 4)


def test_errors():
    a32, a16 = ampy.ones(2, 3), ampy.ones(3, 2, dtype=ampy.float16)
    # torch's exception type: RuntimeError (expected m1 and m2 to have the same dtype)
    with pytest.raises(RuntimeError, match="same dtype.*float32.*float16"):
        G.mm(a32, a16)
    with pytest.raises(RuntimeError, match="same dtype"):
        G.matmul(a16, ampy.ones(2, 2))
    for f in (ampy.mm, ampy.matmul, ampy.nn.functional.linear):
        with pytest.raises(RuntimeError, match="same dtype"):
            f(a32, ampy.ones(2, 3, dtype=ampy.float64))
    with pytest.raises(TypeError, match="float32, float16"):
        G.mm(ampy.ones(2, 2, dtype=ampy.int64), ampy.ones(2, 2, dtype=ampy.int64))
    with pytest.raises(RuntimeError, match=r"cannot be multiplied \(2x3 and 2x3\)"):
        G.mm(a32, a32)
    with pytest.raises(RuntimeError):
        G.bmm(a32, a32)
    with pytest.raises(RuntimeError):
        G.matmul(ampy.ones(3), ampy.ones(4))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        G.linear(ampy.ones(4, 5), ampy.ones(6, 4))
    with pytest.raises(TypeError, match="out_dtype"):
        G.mm(a32, ampy.ones(3, 2), out_dtype=ampy.float16)
    with pytest.raises(TypeError):
        G.mm(a32, np.ones((3, 2)))
    with pytest.raises(ValueError):
        _C.gemm_set_impl("nonsense")


def test_force_portable_env():
    code = ("import ampy; from ampy import _C; "
            "print(_C.gemm_impl_name(ampy.bfloat16), _C.gemm_impl_name(ampy.float32))")
    env = dict(os.environ, AMPY_FORCE_PORTABLE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["portable", "portable"]


@pytest.fixture
def threads():
    old = ampy.get_num_threads()
    yield ampy.set_num_threads
    ampy.set_num_threads(old)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mnk", [(300, 530, 1100), (1000, 70, 64), (20, 1100, 4100)])
def test_thread_counts_bit_identical(impl, dtype, mnk, threads):
    """Work is claimed dynamically by the threads (B panels, then row/column tasks), but
    every output is one fp32 sum in a fixed order: 1, 2 and 3 threads give the same bits.
    (20, 1100, 4100): packed B exceeds the per-block budget, so N is split into blocks."""
    m, n, k = mnk
    a, b = make(m, k, dtype, False, 30), make(k, n, dtype, True, 31)
    outs = []
    for t in (1, 2, 3):
        threads(t)
        outs.append(G.mm(a, b, out_dtype=ampy.float32).numpy())
    check_close(ampy.from_numpy(outs[0]), f64(a), f64(b), ampy.float32)
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    assert np.array_equal(outs[0].view(np.uint32), outs[2].view(np.uint32))


# Sizes one off the micro-tile (AVX-512 14 x 32, AVX2 6 x 16, AMX 32 x 32) and the K
# blocks (256; AMX 1024 in units of 32), and K = 1.
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mnk", [(13, 31, 257), (15, 33, 1025), (29, 65, 1), (33, 17, 31),
                                 (6, 16, 1023), (253, 97, 513)])
def test_tile_and_block_edges(impl, dtype, mnk):
    m, n, k = mnk
    for ta, tb in ((False, False), (True, True)):
        a, b = make(m, k, dtype, ta, 32), make(k, n, dtype, tb, 33)
        check_close(G.mm(a, b), f64(a), f64(b), dtype)
        check_close(G.mm(a, b, out_dtype=ampy.float32), f64(a), f64(b), ampy.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_operands_read_in_place(impl, dtype):
    """Neither stride is 1 (slices with steps): the generic packing path."""
    big_a, big_b = rand((90, 200), dtype, 34), rand((150, 120), dtype, 35)
    a = big_a[::2, 1::3]          # (45, 67), strides (400, 3)
    b = big_b[3:137:2, ::4]       # (67, 30), strides (240, 4)
    assert tuple(a.shape) == (45, 67) and tuple(b.shape) == (67, 30)
    check_close(G.mm(a, b), f64(a), f64(b), dtype)
    check_close(G.mm(b.T, a.T, out_dtype=ampy.float32), f64(b).T, f64(a).T, ampy.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mnk", [(45, 50, 1100), (14, 33, 257), (70, 17, 31)])
def test_kmajor_a_and_colmajor_b_same_bits(impl, dtype, mnk):
    """A read k-major (dY.T of a weight gradient) and B read column-major (W.T of
    a linear) pack through their own transposing copies; the packed values, and
    so the results, must equal those of the row-major copies bit for bit."""
    M, N, K = mnk
    a_t, b_t = make(M, K, dtype, True, 31), make(K, N, dtype, True, 32)
    a_c, b_c = a_t.contiguous(), b_t.contiguous()
    ref = G.mm(a_c, b_c)
    for a, b in ((a_t, b_c), (a_c, b_t), (a_t, b_t)):
        got = G.mm(a, b)
        assert np.array_equal(bits(got), bits(ref))
    check_close(ref, f64(a_c), f64(b_c), dtype)


@pytest.mark.parametrize("mnk", [(40, 70, 300), (33, 96, 1100)])
def test_bf16_store_rounds_like_cast(impl, mnk):
    """The bf16 epilogue (32 lanes at a time, then a masked tail) must round
    the fp32 sum exactly like the cast kernel: same bits as the fp32 output
    cast to bfloat16, including values that overflow to inf."""
    M, N, K = mnk
    a, b = rand((M, K), ampy.bfloat16, 41), rand((K, N), ampy.bfloat16, 42)
    a = ampy.from_numpy(np.where(np.arange(M)[:, None] == 3, 3e37, 1.0).astype(np.float32)
                        * a.float().numpy()).to(ampy.bfloat16)
    got = G.mm(a, b)
    ref = G.mm(a, b, out_dtype=ampy.float32).to(ampy.bfloat16)
    assert np.array_equal(bits(got), bits(ref))
    assert np.isinf(got.float().numpy()[3]).any()


# ================================================================ CUDA
# cuBLAS GEMM (mm, bmm, linear) on a GPU against the CPU, float64 and torch;
# skipped without a GPU.

def _rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float16, ampy.bfloat16, ampy.float32])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 33, 5), (128, 255, 64), (512, 4096, 256)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_cuda_gemm_vs_float64(dt, m, k, n, ta, tb):
    rng = np.random.default_rng(m * k + n)
    a64 = rng.standard_normal((m, k))
    b64 = rng.standard_normal((k, n))
    a = ampy.from_numpy(np.ascontiguousarray(a64.T) if ta else a64).to(dt)
    b = ampy.from_numpy(np.ascontiguousarray(b64.T) if tb else b64).to(dt)
    ga, gb = a.cuda(), b.cuda()
    ga = ga.t() if ta else ga
    gb = gb.t() if tb else gb
    out = ampy.mm(ga, gb).float().cpu().numpy().astype(np.float64)
    ref = (ampy.from_numpy(a64).to(dt).double().numpy() @
           ampy.from_numpy(b64).to(dt).double().numpy())
    tol = {ampy.float32: 1e-5, ampy.float16: 2e-3, ampy.bfloat16: 1e-2}[dt]
    assert _rel(out, ref) < tol


@requires_cuda
@requires_torch_cuda
@pytest.mark.parametrize("dt,tdt", [(ampy.float16, torch.float16), (ampy.bfloat16, torch.bfloat16)])
def test_cuda_gemm_vs_torch_batched(dt, tdt):
    ta = torch.randn(4, 96, 200, device="cuda", dtype=tdt)
    tb = torch.randn(4, 200, 72, device="cuda", dtype=tdt)
    a, b = ampy.from_dlpack(ta), ampy.from_dlpack(tb)
    out = torch.from_dlpack(ampy.bmm(a, b))
    ref = torch.bmm(ta.double(), tb.double())
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-2
    w = torch.randn(48, 200, device="cuda", dtype=tdt)
    bias = torch.randn(48, device="cuda", dtype=tdt)
    lin = torch.from_dlpack(ampy.nn.functional.linear(ampy.from_dlpack(ta), ampy.from_dlpack(w),
                                            ampy.from_dlpack(bias)))
    ref = torch.nn.functional.linear(ta.double(), w.double(), bias.double())
    assert ((lin.double() - ref).norm() / ref.norm()).item() < 1e-2
