"""The bfloat16 GEMM on AVX512-BF16 (vdpbf16ps, csrc/gemm_avx512bf16.c).

Each output is bit-compared with a NumPy model of the instruction sequence the
kernel runs (documented in the kernel file, measured on the hardware): from +0,
over k pairs in order, acc = ftz(fma(a[2p+1], b[2p+1], acc)) then
acc = ftz(fma(a[2p], b[2p], acc)), bfloat16 subnormal inputs read as zero, K
padded with zero pairs to a multiple of 32; then the float32 epilogue
alpha * acc (+ beta * C) (+ bias) and one rounding. The model's fma is exact
(float64 sum rounded to odd, then to float32). Results are also checked against
float64 within the fp32-accumulation bound, and inf/NaN against float64 NumPy.
Skipped where the CPU has no AVX512-BF16.
"""
import numpy as np
import pytest

import ampy
from ampy import _C

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not _C.cpu_info()["avx512_bf16"],
                                reason="the CPU has no AVX512-BF16")
BF16 = ampy.bfloat16
TINY = np.float32(2.0**-126)


@pytest.fixture(autouse=True)
def pinned():
    _C.gemm_set_impl("avx512bf16")
    yield
    _C.gemm_set_impl("auto")
    _C._set_cpu_level(None)


# ---- the model --------------------------------------------------------------

def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def rand_bf16(shape, seed, lo=-1.0, hi=1.0):
    """float32 array of bfloat16 values (truncated random float32)."""
    g = np.random.default_rng(seed)
    x = g.uniform(lo, hi, size=shape).astype(np.float32)
    return ((x.view(np.uint32) >> 16) << 16).view(np.float32)


def flush(x):
    return np.where(np.abs(x) < TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def fma32(a, b, c):
    """float32 fma(a, b, c), exactly rounded (a * b is exact in float64 for bf16 a, b)."""
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)
        c64 = c.astype(np.float64)
        s = p + c64
        bb = s - p
        err = (p - (s - bb)) + (c64 - bb)
        odd = (s.view(np.int64) & 1) == 1
        fix = np.isfinite(s) & np.isfinite(err) & (err != 0) & ~odd
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def model_acc(a, b):
    """(M, K) @ (K, N) float32 arrays of bf16 values -> the kernel's float32 sums."""
    m, k = a.shape
    n = b.shape[1]
    kp = (k + 31) // 32 * 32
    a = np.pad(flush(a), ((0, 0), (0, kp - k)))
    b = np.pad(flush(b), ((0, kp - k), (0, 0)))
    acc = np.zeros((m, n), np.float32)
    for p in range(kp // 2):
        for kk in (2 * p + 1, 2 * p):
            acc = flush(fma32(a[:, kk:kk + 1], b[kk:kk + 1, :], acc))
    return acc


def to_dtype_bits(x, dtype):
    """float32 model result rounded like the epilogue; (bits, nan mask)."""
    if dtype == ampy.float32:
        return x.view(np.uint32), np.isnan(x)
    t = torch.from_numpy(np.ascontiguousarray(x)).to(torch.bfloat16)
    return t.view(torch.int16).numpy().view(np.uint16), np.isnan(x)


def got_bits(t):
    if t.dtype == ampy.float32:
        x = np.ascontiguousarray(t.numpy())
        return x.view(np.uint32), np.isnan(x)
    f = np.ascontiguousarray(t.float().numpy())  # bf16 -> f32 is exact
    return (f.view(np.uint32) >> 16).astype(np.uint16), np.isnan(f)


def assert_bits(got, model32, dtype):
    gb, gn = got_bits(got)
    mb, mn = to_dtype_bits(model32, dtype)
    assert gb.shape == mb.shape
    assert np.array_equal(gn, mn), "NaN positions differ"
    ok = gn | (gb == mb)
    assert ok.all(), f"{(~ok).sum()} outputs differ, first at {np.argwhere(~ok)[:3].tolist()}"


def t_bf16(x):
    return ampy.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(BF16)


def view(x, layout):
    """ampy bf16 tensor with the values of x (2-d) in a layout: row-major, a
    transposed view (row stride 1) or a general-stride view (no unit stride)."""
    if layout == "row":
        return t_bf16(x)
    if layout == "col":
        return t_bf16(x.T).T
    wide = np.zeros((x.shape[0], x.shape[1], 2), np.float32)
    wide[..., 1] = x
    return t_bf16(wide)[:, :, 1]


def check_f64(got, a, b, alpha=1.0, extra=None):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = alpha * (a64 @ b64) + (0 if extra is None else extra)
    bound = 2 * a.shape[-1] * 2.0**-24 * (np.abs(a64) @ np.abs(b64)) * abs(alpha) + 2.0**-24
    u = 2.0**-8 if got.dtype == BF16 else 2.0**-24
    bound = bound + u * np.abs(exact) + (0 if extra is None else 2.0**-23 * np.abs(extra))
    err = np.abs(np.asarray(got.float().numpy(), np.float64) - exact)
    assert np.all(err <= bound), f"max err {err.max()}"


# ---- dispatch -----------------------------------------------------------------

def test_dispatch_picks_vdpbf16ps_below_amx():
    _C.gemm_set_impl("auto")
    info = _C.cpu_info()
    if not info["amx_bf16"]:
        assert info["level"] == "avx512bf16"
        assert _C.gemm_impl_name(BF16) == "avx512bf16"
    _C._set_cpu_level("avx512bf16")  # an AMX CPU forced below AMX
    assert _C.cpu_info()["level"] == "avx512bf16"
    assert _C.gemm_impl_name(BF16) == "avx512bf16"
    assert _C.gemm_impl_name(ampy.float32) == "avx512"
    assert _C.gemm_impl_name(ampy.float16) == "avx512"
    _C._set_cpu_level("avx512")
    assert _C.gemm_impl_name(BF16) == "avx512"
    _C._set_cpu_level("portable")
    assert _C.gemm_impl_name(BF16) == "portable"
    with pytest.raises(ValueError, match="avx512bf16"):
        _C._set_cpu_level("avx512-bf16")


# ---- bits against the model -----------------------------------------------------

EDGE = [(1, 1, 1), (2, 2, 2), (1, 33, 17), (15, 16, 17), (16, 17, 15), (17, 31, 33),
        (31, 33, 2), (33, 15, 31), (65, 64, 65), (64, 65, 64), (8, 100, 3), (40, 1, 96)]


@pytest.mark.parametrize("mnk", EDGE, ids=str)
@pytest.mark.parametrize("out_dtype", [BF16, ampy.float32], ids=str)
def test_bits_edge_shapes(mnk, out_dtype):
    m, n, k = mnk
    a, b = rand_bf16((m, k), 1 + m), rand_bf16((k, n), 2 + n)
    got = _C.gemm(t_bf16(a), t_bf16(b), out_dtype=out_dtype)
    assert_bits(got, model_acc(a, b), out_dtype)
    check_f64(got, a, b)


@pytest.mark.parametrize("la", ["row", "col", "gen"])
@pytest.mark.parametrize("lb", ["row", "col", "gen"])
def test_bits_strides_and_transposes(la, lb):
    m, n, k = 37, 45, 70
    a, b = rand_bf16((m, k), 3), rand_bf16((k, n), 4)
    got = _C.gemm(view(a, la), view(b, lb))
    assert_bits(got, model_acc(a, b), BF16)


@pytest.mark.parametrize("k", [300, 2048, 2049, 4200])
def test_bits_several_k_blocks(k):
    """K over the kernel's L1 chunk (256) and over its K block (2048): partial
    sums are parked in the tile / the float32 W block and resumed; the order
    stays the model's."""
    m, n = 20, 40
    a, b = rand_bf16((m, k), 5 + k), rand_bf16((k, n), 6 + k)
    for out_dtype in (BF16, ampy.float32):
        got = _C.gemm(t_bf16(a), t_bf16(b), out_dtype=out_dtype)
        assert_bits(got, model_acc(a, b), out_dtype)
        check_f64(got, a, b)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mnk", [(70, 45, 300), (45, 70, 33), (70, 40, 4200)], ids=str)
def test_bits_k_major_a(mnk, threads):
    """A stored k-major (a transposed view, row stride 1: dY.T of a weight
    gradient) packs into the kernel's "pairs" layout; one K block (the
    macro-kernel) and several (W), partial row panels and K tails: the
    model's bits, at 1 and 2 threads."""
    m, n, k = mnk
    a, b = rand_bf16((m, k), 41 + k), rand_bf16((k, n), 42 + k)
    old = ampy.get_num_threads()
    try:
        ampy.set_num_threads(threads)
        got = _C.gemm(view(a, "col"), t_bf16(b), out_dtype=ampy.float32)
    finally:
        ampy.set_num_threads(old)
    assert_bits(got, model_acc(a, b), ampy.float32)
    check_f64(got, a, b)


@pytest.mark.parametrize("out_dtype", [BF16, ampy.float32], ids=str)
@pytest.mark.parametrize("k", [48, 2100])  # one K block (macro) and two (W)
def test_bits_epilogue_alpha_beta_bias(out_dtype, k):
    m, n = 35, 50
    a, b = rand_bf16((m, k), 7), rand_bf16((k, n), 8)
    c0 = rand_bf16((m, n), 9)
    bias = rand_bf16((n,), 10)
    out = t_bf16(c0).to(out_dtype)
    alpha, beta = np.float32(0.75), np.float32(-1.5)
    _C.gemm(t_bf16(a), t_bf16(b), out=out, alpha=float(alpha), beta=float(beta),
            bias=t_bf16(bias))
    r = (alpha * model_acc(a, b) + beta * c0) + bias  # float32 ops, in the epilogue's order
    assert_bits(out, r.astype(np.float32), out_dtype)
    check_f64(out, a, b, alpha=0.75, extra=-1.5 * c0.astype(np.float64) + bias)


def test_bits_batched_3d_and_broadcast():
    bsz, m, n, k = 3, 19, 34, 77
    a = rand_bf16((bsz, m, k), 11)
    b = rand_bf16((k, n), 12)
    tb = t_bf16(b).unsqueeze(0).expand(bsz, k, n)  # batch stride 0
    got = _C.gemm(t_bf16(a), tb)
    for i in range(bsz):
        assert_bits(got[i], model_acc(a[i], b), BF16)


def test_bits_gemm_batched_permuted_views():
    """ampy_gemm_batched with two batch dims that do not merge (heads of a
    permuted projection), A transposed."""
    b0, b1, m, n, k = 2, 3, 17, 24, 40
    qa = rand_bf16((b0, k, b1, m), 13)   # A[i, j] = qa[i, :, j, :].T
    qb = rand_bf16((b0, k, b1, n), 14)
    ta = t_bf16(qa).permute(0, 2, 3, 1)
    tb = t_bf16(qb).permute(0, 2, 1, 3)
    got = _C.gemm_batched(ta, tb)
    for i in range(b0):
        for j in range(b1):
            assert_bits(got[i, j], model_acc(qa[i, :, j, :].T, qb[i, :, j, :]), BF16)


@pytest.mark.parametrize("threads", [1, 2])
def test_bits_batched_items_prefetched(threads):
    """Many small items, each on one thread: while one item computes, the next
    item's operands (a contiguous A, a permuted B, a contiguous C) are
    prefetched (gemm_driver.c); 32 items give runs of 2 per claim at 2
    threads. Every item keeps the model's bits."""
    bsz, h, m, n, k = 8, 4, 40, 36, 64
    a = rand_bf16((bsz, h, m, k), 31)
    qb = rand_bf16((bsz, k, h, n), 32)
    tb = t_bf16(qb).permute(0, 2, 1, 3)
    old = ampy.get_num_threads()
    try:
        ampy.set_num_threads(threads)
        got = _C.gemm_batched(t_bf16(a), tb)
    finally:
        ampy.set_num_threads(old)
    for i in range(bsz):
        for j in range(h):
            assert_bits(got[i, j], model_acc(a[i, j], qb[i, :, j, :]), BF16)


def test_two_threads_same_bits():
    m, n, k = 300, 260, 700
    a, b = rand_bf16((m, k), 15), rand_bf16((k, n), 16)
    old = ampy.get_num_threads()
    try:
        ampy.set_num_threads(1)
        one = _C.gemm(t_bf16(a), t_bf16(b), out_dtype=ampy.float32).numpy()
        ampy.set_num_threads(2)
        two = _C.gemm(t_bf16(a), t_bf16(b), out_dtype=ampy.float32).numpy()
    finally:
        ampy.set_num_threads(old)
    assert np.array_equal(one.view(np.uint32), two.view(np.uint32))
    check_f64(ampy.from_numpy(two), a, b)
    rows = slice(0, 40)
    assert_bits(ampy.from_numpy(two[rows]), model_acc(a[rows], b), ampy.float32)


# ---- empty sizes -----------------------------------------------------------------

@pytest.mark.parametrize("mnk", [(0, 5, 7), (5, 0, 7), (5, 7, 0), (0, 0, 0)], ids=str)
def test_empty_sizes(mnk):
    m, n, k = mnk
    got = _C.gemm(t_bf16(np.ones((m, k))), t_bf16(np.ones((k, n))))
    assert tuple(got.shape) == (m, n)
    assert np.all(got.float().numpy() == 0)


# ---- flushing and special values ---------------------------------------------------

def test_subnormal_inputs_and_partial_sums_flush():
    """bf16 subnormal inputs count as zero, and a partial sum that falls below
    2^-126 is flushed (the hardware's DAZ/FTZ, as torch/oneDNN on this CPU)."""
    m, n, k = 16, 32, 40
    a = rand_bf16((m, k), 17, 2.0**-66, 2.0**-62)
    b = rand_bf16((k, n), 18, -2.0**-62, 2.0**-62)
    a[:, 3] = bf16_bits_to_f32(np.full(m, 0x0041, np.uint16))  # subnormal bf16
    b[3, :] = 1.0
    got = _C.gemm(t_bf16(a), t_bf16(b), out_dtype=ampy.float32)
    model = model_acc(a, b)
    assert_bits(got, model, ampy.float32)
    nofl = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert not np.array_equal(model, nofl)  # the flushing is visible here


def test_inf_nan_propagate_like_float64():
    m, n, k = 20, 36, 66
    a, b = rand_bf16((m, k), 19), rand_bf16((k, n), 20)
    a[2, 5] = np.inf
    a[4, 7] = -np.inf
    a[6, 9] = np.nan
    b[5, 3] = 0.0     # inf * 0 -> NaN in row 2, column 3
    b[11, 30] = np.inf
    a[8, 11] = 0.0    # 0 * inf -> NaN in row 8, column 30
    a[9, 11] = -2.0   # -inf in row 9, column 30
    b[13, :] = np.where(np.arange(n) == 20, -np.inf, b[13, :])
    a[4, 13] = 1.0    # row 4: -inf at k=7 ... and -inf * 1 at k=13 in column 20
    got = _C.gemm(t_bf16(a), t_bf16(b), out_dtype=ampy.float32).numpy()
    with np.errstate(all="ignore"):
        ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(np.isposinf(got), np.isposinf(ref))
    assert np.array_equal(np.isneginf(got), np.isneginf(ref))
    assert_bits(ampy.from_numpy(got), model_acc(a, b), ampy.float32)
    bgot = _C.gemm(t_bf16(a), t_bf16(b))
    bf = bgot.float().numpy()
    assert np.array_equal(np.isnan(bf), np.isnan(ref))
    assert np.array_equal(np.isinf(bf), np.isinf(ref) & ~np.isnan(ref))


def test_fused_multiply_add_not_rounded_product():
    """A product beyond float32's range with an accumulator that brings it back
    (the instruction fuses: only the sum is rounded)."""
    a = np.zeros((1, 2), np.float32)
    b = np.zeros((2, 16), np.float32)
    a[0, 1], b[1, :] = -bf16_bits_to_f32(np.array([0x7F7F], np.uint16))[0], 1.0  # first
    a[0, 0], b[0, :] = np.float32(2.0**127), 2.0                               # then 2^128
    got = _C.gemm(t_bf16(a), t_bf16(b), out_dtype=ampy.float32).numpy()
    assert np.all(np.isfinite(got))
    assert_bits(ampy.from_numpy(got), model_acc(a, b), ampy.float32)


@pytest.mark.parametrize("k", [8, 15, 16, 40])
def test_auto_takes_fma_path_below_k16(k):
    """Under "auto" at the avx512bf16 level, K < 16 runs on the FMA path (K is
    padded to 32 for vdpbf16ps, which was slower there); K >= 16 on vdpbf16ps."""
    a = rand_bf16((40, 33), 21)[:, :k].copy()
    b = rand_bf16((33, 50), 22)[:k].copy()
    a[0, :] = 0.0
    a[0, 0], b[0, 0] = 2.0**-70, 2.0**-70  # C[0, 0] = 2^-140: flushed on vdpbf16ps only
    outs = {}
    for impl in ("avx512bf16", "avx512", "auto"):
        _C.gemm_set_impl(impl)
        _C._set_cpu_level("avx512bf16")
        outs[impl] = _C.gemm(t_bf16(a), t_bf16(b), out_dtype=ampy.float32).numpy()
    assert not np.array_equal(outs["avx512bf16"], outs["avx512"])
    want = outs["avx512"] if k < 16 else outs["avx512bf16"]
    assert np.array_equal(outs["auto"].view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("mn", [(64, 96), (45, 41)], ids=str)  # full tiles, partial ones
def test_tile_bf16_rounding_subnormal_and_nan_outputs(mn):
    """Full 32 x 32 tiles into a bfloat16 C round with vcvtne2ps2bf16, which
    flushes float32 subnormals and keeps NaN payloads, the partial edge tiles
    with the shared epilogue: rows holding either must still get the exact
    rounding (subnormals kept) and the NaN bits of the portable
    implementation's epilogue, in both kinds of tile."""
    (m, n), k = mn, 40
    a, b = rand_bf16((m, k), 23), rand_bf16((k, n), 24)
    a[5, :] = 0.0                  # row 5 = bias alone: float32 subnormals
    a[40, 3] = np.inf              # row 40: inf * 0 -> NaN, inf elsewhere
    b[3, 7] = 0.0
    bias = rand_bf16((n,), 25)
    bias[::3] = bf16_bits_to_f32(np.arange(1, n + 1, 3, dtype=np.uint16))  # bf16 subnormals
    r = model_acc(a, b) + bias
    assert (np.abs(r[5]) < TINY).any() and np.isnan(r).any()
    got = _C.gemm(t_bf16(a), t_bf16(b), bias=t_bf16(bias))
    assert_bits(got, r.astype(np.float32), BF16)
    _C.gemm_set_impl("portable")
    port = _C.gemm(t_bf16(a), t_bf16(b), bias=t_bf16(bias))
    gb, _ = got_bits(got)
    pb, pn = got_bits(port)
    assert np.array_equal(gb[pn], pb[pn])
    assert np.array_equal(gb[5], pb[5])
