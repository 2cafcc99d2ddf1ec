"""float16 GEMM on AMX-BF16 (csrc/gemm_amx_f16.c, impl "amx-f16"): each float16 input is
split exactly into two bfloat16 (hi + lo), and the four bfloat16 products are summed in
float32 by TDPBF16PS. Checked against a float64 oracle (error within the fp32-accumulation
bound, and bit-exact where every fp32 partial sum is exact), against the AVX-512 FMA path
("avx512", pinned by gemm_set_impl) and against torch; special values (inf, NaN, +-0,
subnormals, 65504) must behave like IEEE fp32 accumulation of the fp16 products.
test_gemm.py also runs its whole float16 matrix through this kernel (its "amx" fixture).
"""
import numpy as np
import pytest

pytestmark_warn = pytest.mark.filterwarnings("ignore::RuntimeWarning")

import ampy
from ampy import _C
from ampy import _gemm as G

pytestmark = [pytest.mark.skipif(not _C.gemm_impl_available("amx"),
                                 reason="AMX-BF16 not usable on this CPU/OS"),
              pytestmark_warn]  # numpy's inf * 0 / overflow warnings in the oracles

F16 = ampy.float16


@pytest.fixture
def impl():
    """Run with the AMX path; yields a helper that runs f under another impl."""
    def under(name, f):
        _C.gemm_set_impl(name)
        try:
            return f()
        finally:
            _C.gemm_set_impl("amx")
    _C.gemm_set_impl("amx")
    assert _C.gemm_impl_name(F16) == "amx-f16"
    yield under
    _C.gemm_set_impl("auto")


def t16(x):
    return ampy.from_numpy(np.asarray(x, dtype=np.float16))


def view(x, trans):
    """x (rows, cols) as an ampy float16 tensor; trans=True: a column-major view."""
    return t16(np.ascontiguousarray(x.T)).T if trans else t16(x)


def f64(t):
    return np.asarray(t.float().numpy() if t.dtype != ampy.float32 else t.numpy(), np.float64)


def ieee_mm(a, b):
    """Float64 a @ b by broadcasting (IEEE inf/NaN semantics, no BLAS)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return (a[..., :, :, None] * b[..., None, :, :]).sum(-2)


def within_bound(got, a, b, out_dtype, alpha=1.0, extra=None):
    """fp32 accumulation bound (as test_gemm.py) plus one rounding to out_dtype."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    exact = alpha * (a @ b) + (0 if extra is None else extra)
    bound = 2 * a.shape[-1] * 2.0**-24 * (np.abs(a) @ np.abs(b)) * abs(alpha) + 2.0**-24
    bound = bound + (2.0**-11 if out_dtype == F16 else 2.0**-24) * np.abs(exact)
    if extra is not None:
        bound = bound + 2.0**-23 * np.abs(extra)
    err = np.abs(f64(got) - exact)
    assert got.dtype == out_dtype
    assert np.all(err <= bound), f"max err {err.max()}"


def randn16(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float16)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (32, 32, 32), (31, 33, 17), (33, 65, 63),
                                 (70, 129, 300), (64, 40, 513), (40, 96, 1100)])
def test_vs_float64(impl, ta, tb, mnk):
    m, n, k = mnk
    a, b = randn16((m, k), 1), randn16((k, n), 2)
    for out in (F16, ampy.float32):
        got = G.mm(view(a, ta), view(b, tb), out_dtype=None if out == F16 else out)
        within_bound(got, a, b, out)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (True, False)])
@pytest.mark.parametrize("k", [1, 31, 64])
def test_exact_when_fp32_sums_are_exact(impl, ta, tb, k):
    """Integers m * 2^-10 with |m| < 512 (9 significant bits, so hi AND lo matter) and
    subnormal ones m * 2^-24: every product and partial sum is exact in fp32, so the
    float32 result must equal the float64 one bit for bit. Dropping any of the four
    partial products (e.g. lo*lo) or a lost subnormal would show."""
    g = np.random.default_rng(k)
    ma, mb = g.integers(-511, 512, (45, k)), g.integers(-511, 512, (k, 37))
    ma[0, :] = 511  # 0b111111111: hi = 510, lo = 1 (times the scale)
    mb[:, 0] = 511
    for sa in (2.0**-10, 2.0**-24):
        a, b = (ma * sa).astype(np.float16), (mb * 2.0**-10).astype(np.float16)
        assert np.array_equal(a.astype(np.float64), ma * sa)  # representable
        got = G.mm(view(a, ta), view(b, tb), out_dtype=ampy.float32).numpy()
        assert np.array_equal(got.astype(np.float64), ma @ mb * (sa * 2.0**-10))


def test_extremes_exact(impl):
    """+-65504 (hi = 65280 by truncation, lo = 224), the smallest subnormal 2^-24 and
    +-0, with K small enough for exact sums."""
    a = np.array([[65504, -65504, 2.0**-24, 1, 0, 0, 0, 0],
                  [2.0**-24, 2.0**-24, 2.0**-24, -2.0**-24, 0, 0, 0, 0],
                  [65504, 65504, 65504, 65504, 65504, 65504, 65504, 65504]], np.float16)
    b = np.array([[1, 3, -1], [2, -1, 1], [2.0**-24, 1, 65504], [-1, 2.0**-14, 7],
                  [1, 1, 1], [5, 0, 0], [0, 0, 0], [-3, 0, 0]], np.float16)
    ref = ieee_mm(a, b)
    got = f64(G.mm(t16(a), t16(b), out_dtype=ampy.float32))
    assert np.array_equal(got, ref.astype(np.float32))
    # the float16 result: the float32 sum rounded once (65504 * 8 overflows to inf)
    got16 = G.mm(t16(a), t16(b)).numpy()
    assert np.array_equal(got16.view(np.uint16),
                          ref.astype(np.float32).astype(np.float16).view(np.uint16))


SPECIALS = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -2.0, 65504, -65504, 2.0**-24,
            -2.0**-20, 0.1, 3.0, 1e-3]


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (True, False), (False, True)])
def test_special_values_like_ieee(impl, ta, tb):
    """Every pair of special values meets in some dot product: inf * (values exact in
    bfloat16, like 1.0, whose lo part is 0) = inf, inf * 0 = NaN, +inf + -inf = NaN, NaN
    propagates (inf/NaN split as hi = x, lo = hc = 0: gemm_amx_f16.c).
    Results match IEEE float64 of the fp16 products, and the AVX-512 path, in NaN / inf /
    sign, and finite ones within the bound."""
    g = np.random.default_rng(5)
    s = np.array(SPECIALS, np.float16)
    n = len(s)
    a = np.ones((n * n, 40), np.float16) * 0.5
    b = np.ones((40, n + 3), np.float16) * 0.25
    for i in range(n):
        for j in range(n):
            a[i * n + j, 3] = s[i]
            a[i * n + j, 17] = s[j]
    b[3, :n], b[17, :n] = s, s[::-1]
    b[5, n], b[6, n + 1] = np.inf, -np.inf
    a[g.integers(0, n * n, 20), 5] = 0.0  # inf * 0 in column n for some rows
    ref = ieee_mm(a, b)
    for out in (ampy.float32, F16):
        got = G.mm(view(a, ta), view(b, tb), out_dtype=None if out == F16 else out)
        other = impl("avx512", lambda: G.mm(view(a, ta), view(b, tb),
                                            out_dtype=None if out == F16 else out))
        got, other = f64(got), f64(other)
        r = ref.astype(np.float32).astype(np.float16) if out == F16 else ref
        assert np.array_equal(np.isnan(got), np.isnan(r))
        assert np.array_equal(np.isinf(got), np.isinf(r))
        assert np.array_equal(np.sign(got[np.isinf(got)]), np.sign(r[np.isinf(r)]))
        assert np.array_equal(np.isnan(got), np.isnan(other))
        assert np.array_equal(got[np.isinf(got)], other[np.isinf(other)])
        fin = np.isfinite(r)
        bound = 80 * 2.0**-24 * ieee_mm(np.abs(a), np.abs(b)) + 2.0**-24
        bound = bound + (2.0**-11 if out == F16 else 0) * np.abs(ref)
        assert np.all(np.abs(got[fin] - ref[fin]) <= bound[fin])
    assert np.isnan(ref).any() and np.isposinf(ref).any() and np.isneginf(ref).any()


@pytest.mark.parametrize("where", ["a_rows", "a_kmajor", "b_rows", "b_cols", "strided",
                                   "batch_last", "tail"])
def test_inf_nan_in_every_layout(impl, where):
    """Each packing path (row-major, k-major A, column-major B, strided, the masked tail
    past the last full 32-element run, a later batch item) must give inf/NaN its special
    split (hi = x, lo = hc = 0): else inf * 1.0 (lo = 0) would become NaN."""
    g = np.random.default_rng(3)
    a = np.ones((2, 40, 67), np.float16)
    b = np.ones((2, 67, 35), np.float16)
    a[:, :, 1::2] = 0.5
    at = lambda x: t16(x)  # noqa: E731
    bt = lambda x: t16(x)  # noqa: E731
    if where == "a_rows":
        a[0, 7, 33] = np.inf
    elif where == "a_kmajor":
        a[0, 39, 66] = -np.inf
        at = lambda x: t16(np.ascontiguousarray(x.transpose(0, 2, 1))).transpose(1, 2)  # noqa
    elif where == "b_rows":
        b[0, 66, 34] = np.inf
    elif where == "b_cols":
        b[0, 5, 0] = np.inf
        bt = lambda x: t16(np.ascontiguousarray(x.transpose(0, 2, 1))).transpose(1, 2)  # noqa
    elif where == "strided":
        a[0, 3, 10] = np.inf
        big = np.zeros((2, 80, 67 * 3), np.float16)
        big[:, ::2, ::3] = a
        at = lambda x: t16(big)[:, ::2, ::3]  # noqa: E731
    elif where == "batch_last":
        b[1, 30, 2] = np.nan
    elif where == "tail":
        a[1, 0, 64 + g.integers(0, 3)] = np.inf
    ref = ieee_mm(a, b)
    got = f64(G.bmm(at(a), bt(b), out_dtype=ampy.float32))
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(np.isinf(got), np.isinf(ref)) and np.isinf(ref).sum() + \
        np.isnan(ref).sum() > 0
    assert np.array_equal(got[np.isinf(got)], ref[np.isinf(ref)])


def test_negative_zero_and_nan_payloads(impl):
    """Signalling-pattern NaN (0x7C01: payload only in the low bits, which truncation to
    bfloat16 would drop) must stay NaN; -0 inputs give +-0 like the fp32 path."""
    a = np.zeros((3, 4), np.float16)
    a.view(np.uint16)[0, 1] = 0x7C01
    a.view(np.uint16)[1, 2] = 0xFC02
    a[2] = -0.0
    b = np.ones((4, 5), np.float16)
    got = G.mm(t16(a), t16(b), out_dtype=ampy.float32).numpy()
    assert np.isnan(got[:2]).all() and (got[2] == 0).all()
    # the same through the element-by-element packing (no unit stride)
    big = np.zeros((6, 8), np.float16)
    big[::2, ::2] = a
    got = G.mm(t16(big)[::2, ::2], t16(np.ones((8, 10), np.float16))[::2, ::2],
               out_dtype=ampy.float32).numpy()
    assert np.isnan(got[:2]).all() and (got[2] == 0).all()


def test_batched_alpha_beta_out_dtypes(impl):
    a, b = randn16((3, 37, 70), 7), randn16((3, 21, 70), 8).transpose(0, 2, 1)
    inp = randn16((3, 37, 21), 9)
    at, bt = t16(a), t16(np.ascontiguousarray(b.transpose(0, 2, 1))).transpose(1, 2)
    within_bound(G.bmm(at, bt), a, b, F16)
    within_bound(G.bmm(at, bt, out_dtype=ampy.float32), a, b, ampy.float32)
    got = G.baddbmm(t16(inp), at, bt, beta=0.5, alpha=-2.0)
    within_bound(got, a, b, F16, alpha=-2.0, extra=0.5 * inp.astype(np.float64))
    ref_avx = impl("avx512", lambda: G.baddbmm(t16(inp), at, bt, beta=0.5, alpha=-2.0))
    # both round the same fp32 sum (to within a few fp32 ulps) to float16
    assert np.max(np.abs(f64(got) - f64(ref_avx)) /
                  np.maximum(np.abs(f64(ref_avx)), 1e-3)) <= 2.0**-10


def test_accuracy_not_worse_than_avx512(impl):
    """Error statistics against float64, float32 output, K = 1100 (two K blocks):
    the split kernel's main sum rounds once per k like an fp32 GEMM; its RMS error must
    not exceed 1.5x the AVX-512 path's (it measures about 0.5-1x)."""
    a, b = randn16((96, 1100), 10), randn16((1100, 80), 11)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) * 2.0**-24
    errs = {}
    for name in ("amx", "avx512"):
        got = impl(name, lambda: f64(G.mm(t16(a), t16(b), out_dtype=ampy.float32)))
        errs[name] = np.sqrt(np.mean(((got - exact) / scale) ** 2))
    assert errs["amx"] <= 1.5 * errs["avx512"], errs


def test_threads_bit_identical_and_vs_torch(impl):
    torch = pytest.importorskip("torch")
    a, b = randn16((300, 600), 12), randn16((600, 530), 13)
    outs = []
    old = ampy.get_num_threads()
    try:
        for t in (1, 2, 3):
            ampy.set_num_threads(t)
            outs.append(G.mm(t16(a), t16(b), out_dtype=ampy.float32).numpy().view(np.uint32))
    finally:
        ampy.set_num_threads(old)
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    ours = f64(G.mm(t16(a), t16(b)))
    theirs = (torch.from_numpy(a) @ torch.from_numpy(b)).double().numpy()
    # both are an fp32 sum rounded once to float16: almost all equal, the rest within a
    # float16 ulp plus a few fp32 roundings of sum|a*b| (torch's blocked sums cancel less
    # accurately on small results, so no tighter bound holds for both)
    big = np.maximum(np.abs(ours), np.abs(theirs)).astype(np.float16)
    ulp = np.spacing(big).astype(np.float64)
    absab = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(ours - theirs) <= ulp + 16 * 2.0**-24 * absab)
    assert np.mean(ours == theirs) >= 0.97
