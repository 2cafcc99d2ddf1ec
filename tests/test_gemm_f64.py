"""float64 GEMM (csrc/gemm_f64.c through _C.gemm / _C.gemm_batched): mm, matmul, bmm,
addmm, baddbmm and linear on each CPU path, against an extended-precision NumPy oracle
(np.longdouble) within the fp64 accumulation bound, against torch float64, and bit for
bit where the inputs make every sum exact (small integers).

Bound per output (fp64 sums in any order, alpha and beta applied in fp64):
    |got - exact| <= 2 * K * 2^-53 * |alpha| * (|A| @ |B|) + 2^-52 * |exact| + tiny
The 1024^3 product must allocate nothing but its output (it used to build an
M x K x N temporary: 8 GiB).
"""
import resource

import numpy as np
import pytest

import ampy
from ampy import _C

torch = pytest.importorskip("torch")

LD = np.longdouble


def expected_impl(path):
    """float64 has an AVX-512 FMA kernel and the portable loop (no AVX2 one)."""
    at_least_avx512 = path in ("simd", "avx512", "avx512bf16", "amx")
    return "avx512" if at_least_avx512 and _C.cpu_info().get("avx512") else "portable"


@pytest.fixture
def path(cpu_path):
    assert _C.gemm_impl_name(ampy.float64) == expected_impl(cpu_path)
    return cpu_path


def rnd(shape, seed, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape)


def ints(shape, seed):
    return np.random.default_rng(seed).integers(-64, 64, size=shape).astype(np.float64)


def check_bound(got, a, b, alpha=1.0, extra=None):
    """got (ampy float64) against alpha * a @ b + extra in long double."""
    a_ld, b_ld = np.asarray(a, LD), np.asarray(b, LD)
    exact = LD(alpha) * np.matmul(a_ld, b_ld)
    if extra is not None:
        exact = exact + np.asarray(extra, LD)
    k = a.shape[-1]
    bound = (2 * k * 2.0**-53 * abs(alpha) * np.matmul(np.abs(a_ld), np.abs(b_ld)) +
             2.0**-52 * np.abs(exact) + 2.0**-1000)
    if extra is not None:
        bound = bound + 2.0**-52 * np.abs(np.asarray(extra, LD))
    g = np.asarray(got.numpy(), LD)
    assert got.dtype is ampy.float64
    assert g.shape == exact.shape
    err = np.abs(g - exact)
    assert np.all(err <= bound), f"max err {float(err.max())} > bound"


SHAPES = [(1, 1, 1), (0, 3, 4), (3, 0, 4), (3, 4, 0), (7, 13, 5), (8, 16, 16),
          (65, 257, 129), (2, 600, 3), (130, 5, 520)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_mm_within_fp64_bound(path, m, k, n, ta, tb):
    a, b = rnd((m, k), 1), rnd((k, n), 2)
    A = ampy.tensor(np.ascontiguousarray(a.T)).T if ta else ampy.tensor(a)
    B = ampy.tensor(np.ascontiguousarray(b.T)).T if tb else ampy.tensor(b)
    got = ampy.mm(A, B)
    check_bound(got, a, b)
    if m * n:
        ref = torch.from_numpy(a) @ torch.from_numpy(b)
        tol = 4 * k * 2.0**-53 * (np.abs(a) @ np.abs(b)) + 2.0**-1000
        assert np.all(np.abs(got.numpy() - ref.numpy()) <= tol)


@pytest.mark.parametrize("m,k,n", [(7, 13, 5), (65, 300, 129), (9, 1, 33)])
def test_exact_sums_bit_identical(path, m, k, n):
    """Small integers: every product and partial sum is exact, so any order gives the
    same bits as NumPy and torch."""
    a, b = ints((m, k), 3), ints((k, n), 4)
    got = (ampy.tensor(a) @ ampy.tensor(b)).numpy()
    assert np.array_equal(got, a @ b)
    assert np.array_equal(got, (torch.from_numpy(a) @ torch.from_numpy(b)).numpy())


def test_strided_and_offset_views(path):
    base_a, base_b = rnd((40, 90), 5), rnd((70, 60), 6)
    a, b = base_a[3::2, 1:80:3], base_b[::3, 2::2]  # (19, 27) @ (24, 29): trim to match
    a, b = a[:, :24], b[:24]
    A = ampy.tensor(base_a)[3::2, 1:80:3][:, :24]
    B = ampy.tensor(base_b)[::3, 2::2][:24]
    assert not A.is_contiguous() and not B.is_contiguous()
    check_bound(A @ B, a, b)


def test_matmul_vectors(path):
    a, b, m = rnd((37,), 7), rnd((37,), 8), rnd((5, 37), 9)
    check_bound(ampy.matmul(ampy.tensor(a), ampy.tensor(b)), a, b)
    check_bound(ampy.matmul(ampy.tensor(m), ampy.tensor(a)), m, a)
    check_bound(ampy.matmul(ampy.tensor(a), ampy.tensor(m.T.copy())), a, m.T)


@pytest.mark.parametrize("sa,sb", [((4, 6, 9), (4, 9, 5)), ((2, 1, 6, 9), (3, 9, 5)),
                                   ((3, 6, 9), (9, 5)), ((9,), (2, 3, 9, 5)),
                                   ((2, 3, 6, 9), (2, 3, 9, 1)), ((0, 6, 9), (0, 9, 5))])
def test_matmul_batched_broadcast_vs_torch(path, sa, sb):
    a, b = rnd(sa, 10), rnd(sb, 11)
    got = ampy.matmul(ampy.tensor(a), ampy.tensor(b))
    check_bound(got, a, b)
    ref = torch.matmul(torch.from_numpy(a), torch.from_numpy(b))
    assert tuple(got.shape) == tuple(ref.shape)


def test_permuted_heads_in_place(path):
    """(batch, seq, heads, dim) -> (batch, heads, seq, dim) views, read through strides."""
    q, k = rnd((2, 7, 3, 8), 12), rnd((2, 5, 3, 8), 13)
    Q = ampy.tensor(q).permute(0, 2, 1, 3)
    K = ampy.tensor(k).permute(0, 2, 3, 1)
    check_bound(Q @ K, q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1))


def test_bmm_and_baddbmm_vs_torch(path):
    x, y, c = rnd((3, 6, 11), 14), rnd((3, 11, 4), 15), rnd((3, 6, 4), 16)
    check_bound(ampy.bmm(ampy.tensor(x), ampy.tensor(y)), x, y)
    got = ampy.baddbmm(ampy.tensor(c), ampy.tensor(x), ampy.tensor(y), beta=0.5, alpha=-1.25)
    check_bound(got, x, y, alpha=-1.25, extra=0.5 * c)
    ref = torch.baddbmm(torch.from_numpy(c), torch.from_numpy(x), torch.from_numpy(y),
                        beta=0.5, alpha=-1.25)
    assert np.allclose(got.numpy(), ref.numpy(), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("inp_shape", [(4,), (1, 4), (5, 4)])
def test_addmm_vs_torch(path, inp_shape):
    a, b, inp = rnd((5, 9), 17), rnd((9, 4), 18), rnd(inp_shape, 19)
    got = ampy.addmm(ampy.tensor(inp), ampy.tensor(a), ampy.tensor(b), beta=0.3, alpha=1.7)
    check_bound(got, a, b, alpha=1.7, extra=0.3 * np.broadcast_to(inp, (5, 4)))
    ref = torch.addmm(torch.from_numpy(inp), torch.from_numpy(a), torch.from_numpy(b),
                      beta=0.3, alpha=1.7)
    assert np.allclose(got.numpy(), ref.numpy(), rtol=1e-13, atol=1e-13)


def test_alpha_beta_applied_in_double(path):
    """With exact sums S, alpha * S + beta * c is one double rounding each: a float32
    alpha (0.1f) would be visibly off."""
    a, b, c = ints((6, 10), 20), ints((10, 7), 21), ints((6, 7), 22)
    got = ampy.addmm(ampy.tensor(c), ampy.tensor(a), ampy.tensor(b), beta=0.7, alpha=0.1)
    assert np.array_equal(got.numpy(), 0.1 * (a @ b) + 0.7 * c)


def test_beta_zero_does_not_read_out(path):
    a, b = rnd((3, 4), 23), rnd((4, 5), 24)
    inp = ampy.tensor(np.full((3, 5), np.nan))
    got = ampy.addmm(inp, ampy.tensor(a), ampy.tensor(b), beta=0)
    check_bound(got, a, b)


def test_linear_vs_torch(path):
    x, w, bias = rnd((2, 3, 10), 25), rnd((6, 10), 26), rnd((6,), 27)
    got = ampy.nn.functional.linear(ampy.tensor(x), ampy.tensor(w), ampy.tensor(bias))
    check_bound(got, x, w.T, extra=bias)
    ref = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w),
                                     torch.from_numpy(bias))
    assert np.allclose(got.numpy(), ref.numpy(), rtol=1e-13, atol=1e-13)
    got = ampy.nn.functional.linear(ampy.tensor(x), ampy.tensor(w))
    check_bound(got, x, w.T)


def test_out_dtype_float32_rounds_once(path):
    a, b = ints((7, 30), 28) / 3.0, ints((30, 9), 29) / 7.0
    got = ampy.matmul(ampy.tensor(a), ampy.tensor(b), out_dtype=ampy.float32)
    assert got.dtype is ampy.float32
    exact = np.matmul(np.asarray(a, LD), np.asarray(b, LD))
    err = np.abs(np.asarray(got.numpy(), LD) - exact)
    bound = 2.0**-24 * np.abs(exact) + 2 * 30 * 2.0**-53 * np.matmul(np.abs(np.asarray(
        a, LD)), np.abs(np.asarray(b, LD))) + 2.0**-149
    assert np.all(err <= bound)


def test_nan_inf_propagate_like_numpy(path):
    a, b = rnd((5, 6), 30), rnd((6, 4), 31)
    a[1, 2], a[3, 0], b[4, 3] = np.nan, np.inf, -np.inf
    got = (ampy.tensor(a) @ ampy.tensor(b)).numpy()
    with np.errstate(invalid="ignore"):
        ref = a @ b
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(np.isposinf(got), np.isposinf(ref))
    assert np.array_equal(np.isneginf(got), np.isneginf(ref))


def test_grads_vs_torch(path):
    a, b = rnd((2, 5, 7), 32), rnd((7, 3), 33)
    A, B = ampy.tensor(a, requires_grad=True), ampy.tensor(b, requires_grad=True)
    (A @ B).sum().backward()
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (ta @ tb).sum().backward()
    assert np.allclose(A.grad.numpy(), ta.grad.numpy(), rtol=1e-13, atol=1e-13)
    assert np.allclose(B.grad.numpy(), tb.grad.numpy(), rtol=1e-13, atol=1e-13)


def test_bad_dtypes_raise():
    a64, a32 = ampy.tensor(rnd((2, 3), 34)), ampy.tensor(rnd((3, 2), 35)).float()
    with pytest.raises(RuntimeError, match="same dtype"):  # torch's type
        ampy.mm(a64, a32)
    with pytest.raises(TypeError, match="int64"):
        ampy.mm(ampy.tensor([[1, 2]]), ampy.tensor([[1], [2]]))


def test_1024_cubed_allocates_only_the_output(path):
    n = 1024
    a, b = rnd((n, n), 36), rnd((n, n), 37)
    A, B = ampy.tensor(a), ampy.tensor(b)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ampy.reset_peak_memory_stats()
    base = ampy.memory_allocated()
    out = A @ B
    assert ampy.max_memory_allocated() - base == n * n * 8
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert rss1 - rss0 <= n * n * 8 + (64 << 20)
    rows = np.random.default_rng(38).integers(0, n, size=16)
    check_bound(out[ampy.tensor(rows)], a[rows], b)
