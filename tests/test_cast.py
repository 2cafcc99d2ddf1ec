"""Casting between dtypes, compared as bits against independent oracles.

Oracles: NumPy for float16 (its float32/float64 -> float16 conversions round
once to nearest-even and keep NaN payloads), torch for bfloat16 non-NaN
values, and a float64 reference (exact scaling by the quantum + np.rint) for
float64 -> bfloat16, where torch and ml_dtypes round twice through float32.

bfloat16 NaN: torch's vectorised CPU path writes 0xFFFF for every NaN while
its scalar c10::BFloat16 writes 0x7FC0; the issue fixes ampy on 0x7FC0, so NaN
lanes are compared with 0x7FC0 and the other lanes with torch.

float -> integer: a NaN, an infinity or a value out of int64's range becomes
INT64_MIN (the x86 "integer indefinite", what torch gives), then narrower
integer types wrap it (int32 -> 0, uint8 -> 0); in-range values truncate
toward zero and wrap to the target width. NumPy leaves those cases
platform-defined, so they are checked against the rule, not NumPy.
"""
import ml_dtypes
import numpy as np
import pytest
import torch

import ampy
from ampy import _C
from _helpers import (ALL_DTYPES, HALF_DTYPES, HAS_TORCH_CUDA, NP_DTYPE as NP, SHORT, bits,
                      requires_cuda)

# NumPy warns when it casts NaN/inf/overflowing values; those casts are the point here.
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in cast:RuntimeWarning")

U16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
BF16_NAN = 0x7FC0


def acast(arr, dtype):
    """ampy: arr (NumPy, any layout) -> dtype, back as NumPy."""
    return ampy.from_numpy(arr).to(dtype).numpy()


def assert_bits(got, want, what=""):
    got, want = bits(got), bits(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{what}: {bad.size} mismatches, first at {bad[:5]}: got "
                           f"{[hex(v) for v in got.reshape(-1)[bad[:5]]]} want "
                           f"{[hex(v) for v in want.reshape(-1)[bad[:5]]]}")


def torch_bf16_bits(f32):
    """torch's float32 -> bfloat16, with NaN lanes set to 0x7FC0 (see top)."""
    t = torch.from_numpy(np.ascontiguousarray(f32)).to(torch.bfloat16)
    out = t.view(torch.int16).numpy().view(np.uint16).copy()
    out[np.isnan(f32)] = BF16_NAN
    return out


def ref_bf16_bits_from_f64(x):
    """float64 -> bfloat16 rounded once: divide by the quantum (a power of two,
    exact), np.rint (ties to even), scale back; the rounded value is exact in
    bfloat16, so converting it with ml_dtypes rounds nothing."""
    x = np.asarray(x, np.float64)
    a = np.abs(x)
    with np.errstate(all="ignore"):
        _, e = np.frexp(a)  # a = m * 2^e, m in [0.5, 1)
        e = np.maximum(e - 1, -126)
        q = np.ldexp(1.0, e - 7)
        r = np.rint(a / q) * q
        r = np.where(np.isfinite(a), r, a)
        v = np.copysign(r, x)
        out = v.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).copy()
    out[np.isnan(x)] = BF16_NAN
    return out


def f16_boundaries():
    """f32 inputs on every fp16 rounding boundary: each finite fp16 value and
    the midpoint to the next one up, with their f32 neighbours +-2 ulps, on
    both signs."""
    h = np.arange(0x7C00, dtype=np.uint16)
    lo = h.view(np.float16).astype(np.float64)
    hi = np.append(lo[1:], 65536.0)
    mid = ((lo + hi) / 2).astype(np.float32)
    assert np.array_equal(mid.astype(np.float64), (lo + hi) / 2)  # midpoints are exact
    base = np.concatenate([bits(lo.astype(np.float32)), bits(mid)]).astype(np.int64)
    pats = (base[None, :] + np.arange(-2, 3)[:, None]).reshape(-1)
    pats = pats[(pats >= 0) & (pats < 0x7F800000)].astype(np.uint32)
    return np.concatenate([pats, pats | np.uint32(0x80000000)]).view(np.float32)


def bf16_boundaries():
    """f32 inputs on every bf16 rounding boundary: every high half with low
    halves around 0 and around the tie 0x8000 (includes inf/NaN patterns)."""
    lows = np.array([0, 1, 2, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0x8002, 0xFFFE, 0xFFFF],
                    np.uint32)
    return ((U16.astype(np.uint32)[:, None] << 16) | lows[None, :]).reshape(-1).view(np.float32)


SPECIAL_F32 = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                        0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F802000,
                        0x7F801FFF, 0x00000001, 0x007FFFFF, 0x00800000, 0x477FEFFF, 0x477FF000,
                        0x477FF001, 0x33000000, 0x33000001, 0x32FFFFFF, 0x7F7FFFFF, 0x7F7F8000],
                       np.uint32).view(np.float32)


def random_f32(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


N_RANDOM = 200_000 if SHORT else 1_100_000


# ---------------------------------------------------------------- exhaustive
def test_f16_all_patterns_round_trip(cpu_path):
    h = U16.view(np.float16)
    f = acast(h, ampy.float32)
    assert_bits(f, h.astype(np.float32), "f16->f32 vs NumPy")
    assert_bits(acast(f, ampy.float16), U16, "f16->f32->f16 round trip (NaN payloads kept)")
    # f16 -> f64 goes through float32 and the hardware widening sets the quiet
    # bit of signalling NaNs (as torch does); NumPy keeps them signalling.
    d = bits(acast(h, ampy.float64))
    want = bits(h.astype(np.float64))
    nan = np.isnan(h)
    assert_bits(d[~nan], want[~nan], "f16->f64 vs NumPy")
    assert_bits(d[nan], want[nan] | np.uint64(1 << 51), "f16->f64 NaN: quieted, payload kept")
    assert_bits(acast(h.astype(np.float64), ampy.float16), U16, "f64->f16 round trip")


def test_bf16_all_patterns_round_trip(cpu_path):
    b = U16.view(ml_dtypes.bfloat16)
    f = acast(b, ampy.float32)
    want = torch.from_numpy(U16.view(np.int16)).view(torch.bfloat16).float().numpy()
    assert_bits(f, want, "bf16->f32 vs torch")
    assert_bits(f, U16.astype(np.uint32) << 16, "bf16->f32 is the top half")
    nan = np.isnan(f)
    assert nan.sum() == 2 * 127
    back = bits(acast(f, ampy.bfloat16))
    assert_bits(back[~nan], U16[~nan], "bf16->f32->bf16 round trip")
    assert np.all(back[nan] == BF16_NAN)


# ----------------------------------------------------------- float32 -> half
@pytest.mark.parametrize("kind", ["boundaries", "random", "special"])
def test_f32_to_f16_vs_numpy(cpu_path, kind):
    x = {"boundaries": f16_boundaries, "special": lambda: SPECIAL_F32,
         "random": lambda: random_f32(N_RANDOM, 1)}[kind]()
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    assert_bits(acast(x, ampy.float16), want, f"f32->f16 {kind}")


@pytest.mark.parametrize("kind", ["boundaries", "random", "special"])
def test_f32_to_bf16_vs_torch(cpu_path, kind):
    x = {"boundaries": bf16_boundaries, "special": lambda: SPECIAL_F32,
         "random": lambda: random_f32(N_RANDOM, 2)}[kind]()
    got = acast(x, ampy.bfloat16)
    assert_bits(got, torch_bf16_bits(x), f"f32->bf16 {kind}")
    # second, independent oracle: the float64 quantum/rint reference
    assert_bits(got, ref_bf16_bits_from_f64(x.astype(np.float64)), f"f32->bf16 {kind} (rint)")


def test_bf16_reference_itself_matches_torch():
    """The rint reference used for float64 agrees with torch wherever the
    input is a float32 (no double rounding possible)."""
    x = np.concatenate([bf16_boundaries(), random_f32(100_000, 3)])
    assert_bits(ref_bf16_bits_from_f64(x.astype(np.float64)), torch_bf16_bits(x))


# ----------------------------------------------------------- float64 -> half
def _f64_double_round_cases(lo, hi):
    """Midpoints between neighbouring half values nudged by far less than a
    float32 ulp: through float32 they land on the midpoint and tie to even."""
    mid = (lo + hi) / 2
    eps = (hi - lo) * 2.0 ** -30
    x = np.concatenate([mid, mid + eps, mid - eps, lo])
    return np.concatenate([x, -x])


def test_f64_to_f16_single_rounding(cpu_path):
    lo = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    hi = np.append(lo[1:], 65536.0)
    rng = np.random.default_rng(4)
    rnd = rng.integers(0, 1 << 63, 200_000, dtype=np.int64).view(np.float64)
    scaled = np.ldexp(rng.random(200_000) + 1, rng.integers(-30, 18, 200_000))
    x = np.concatenate([_f64_double_round_cases(lo, hi), rnd, scaled, -scaled,
                        [np.inf, -np.inf, np.nan, 0.0, -0.0, 65520.0, 65519.999, 2.0 ** -25]])
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)  # NumPy rounds float64 -> float16 once
        twice = x.astype(np.float32).astype(np.float16)
    got = acast(x, ampy.float16)
    assert_bits(got, want, "f64->f16 vs NumPy")
    assert np.count_nonzero(bits(twice) != bits(want)) > 1000  # the test sees double rounding


def test_f64_to_bf16_single_rounding(cpu_path):
    lo = (U16[:0x7F80].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    hi = np.append(lo[1:], 2.0 ** 128)
    rng = np.random.default_rng(5)
    rnd = rng.integers(0, 1 << 63, 200_000, dtype=np.int64).view(np.float64)
    scaled = np.ldexp(rng.random(200_000) + 1, rng.integers(-140, 130, 200_000))
    x = np.concatenate([_f64_double_round_cases(lo, hi), rnd, scaled, -scaled,
                        [np.inf, -np.inf, np.nan, 1e300, -1e300, 1e-300, 0.0, -0.0]])
    got = acast(x, ampy.bfloat16)
    assert_bits(got, ref_bf16_bits_from_f64(x), "f64->bf16 vs rint reference")
    with np.errstate(all="ignore"):
        twice = torch_bf16_bits(x.astype(np.float32))
    assert np.count_nonzero(twice != bits(got)) > 1000


# ----------------------------------------------------- lengths, tails, strides
LENGTHS = [0, 1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1023, 4097]
PAIRS = [(np.float32, ampy.float16), (np.float32, ampy.bfloat16), (np.float16, ampy.float32),
         (ml_dtypes.bfloat16, ampy.float32)]


def _oracle(x, dt):
    if dt is ampy.bfloat16:
        return torch_bf16_bits(x.astype(np.float32))
    with np.errstate(all="ignore"):
        return x.astype(dt.to_numpy())


@pytest.mark.parametrize("src,dst", PAIRS, ids=["f32-f16", "f32-bf16", "f16-f32", "bf16-f32"])
def test_odd_lengths_and_offsets(cpu_path, src, dst):
    rng = np.random.default_rng(6)
    pool = rng.standard_normal(5000).astype(np.float32) * 1000
    pool[rng.integers(0, 5000, 40)] = np.nan  # NaNs at scattered lanes
    pool[rng.integers(0, 5000, 40)] = np.inf
    pool = pool.astype(src)
    for n in LENGTHS:
        for off in (0, 1, 3):  # unaligned starts
            x = pool[off:off + n]
            assert_bits(acast(x, dst), _oracle(x, dst), f"n={n} off={off}")
            # into an existing (unaligned) output with copy_
            out = ampy.empty(n + 1, dtype=dst)[1:]
            _C.copy_(out, ampy.from_numpy(x))
            assert_bits(out.numpy(), _oracle(x, dst), f"copy_ n={n} off={off}")


def test_nan_in_every_lane(cpu_path):
    """One NaN (with a payload) at each position of a 64-element block: the
    SIMD kernels redo such vectors in scalar code."""
    for pos in range(64):
        x = np.linspace(-3, 3, 64).astype(np.float32)
        x.view(np.uint32)[pos] = 0x7F800001 | (pos << 13)
        assert_bits(acast(x, ampy.float16), x.astype(np.float16))
        assert_bits(acast(x, ampy.bfloat16), torch_bf16_bits(x))
        h = x.astype(np.float16)
        assert_bits(acast(h, ampy.float32), h.astype(np.float32))


@pytest.mark.parametrize("src,dst", PAIRS, ids=["f32-f16", "f32-bf16", "f16-f32", "bf16-f32"])
def test_noncontiguous_and_broadcast_sources(cpu_path, src, dst):
    rng = np.random.default_rng(7)
    base = (rng.standard_normal((37, 53)) * 100).astype(np.float32).astype(src)
    t = ampy.from_numpy(base)
    views = {
        "step": (t[::3, 1::2], base[::3, 1::2]),
        "transpose": (t.t(), base.T),
        "broadcast_row": (t[5].expand(37, 53), np.broadcast_to(base[5], (37, 53))),
        "broadcast_col": (t[:, 2:3].expand(37, 53), np.broadcast_to(base[:, 2:3], (37, 53))),
    }
    for name, (tv, nv) in views.items():
        assert_bits(tv.to(dst).numpy(), _oracle(nv, dst), name)
        out = ampy.empty(*nv.shape, dtype=dst)
        _C.copy_(out, tv)
        assert_bits(out.numpy(), _oracle(nv, dst), "copy_ " + name)
        # broadcasting inside copy_ itself, into a strided destination
        big = ampy.zeros(4, *nv.shape, dtype=dst)
        _C.copy_(big[::2], tv)
        assert_bits(big[::2].numpy(), np.broadcast_to(_oracle(nv, dst), (2,) + nv.shape), name)
        assert not big[1::2].numpy().view(np.uint8).any()


def test_copy_overlapping_source():
    x = np.arange(100, dtype=np.float32)
    t = ampy.from_numpy(x.copy())
    _C.copy_(t[1:], t[:-1])  # overlapping: ampy copies through a temporary
    want = x.copy()
    want[1:] = x[:-1]
    assert_bits(t.numpy(), want)


@pytest.mark.parametrize("nthreads", [1, 2])
def test_threads(cpu_path, nthreads):
    """Sizes above the 256K-element threading grain, split across threads."""
    old = ampy.get_num_threads()
    ampy.set_num_threads(nthreads)
    try:
        assert ampy.get_num_threads() == nthreads
        n = (1 << 19) + 12345
        x = random_f32(n, 8)
        assert_bits(acast(x, ampy.float16), x.astype(np.float16))
        assert_bits(acast(x, ampy.bfloat16), torch_bf16_bits(x))
        h = x.astype(np.float16)
        assert_bits(acast(h, ampy.float32), h.astype(np.float32))
        b = torch_bf16_bits(x)
        assert_bits(acast(b.view(ml_dtypes.bfloat16), ampy.float32), b.astype(np.uint32) << 16)
        # large outputs that start off a 64-byte boundary (streaming-store head)
        for dt, want in ((ampy.float16, x.astype(np.float16)),
                         (ampy.bfloat16, torch_bf16_bits(x))):
            out = ampy.empty(n + 7, dtype=dt)[3:3 + n]
            _C.copy_(out, ampy.from_numpy(x))
            assert_bits(out.numpy(), want)
        out = ampy.empty(n + 7, dtype=ampy.float32)[5:5 + n]
        _C.copy_(out, ampy.from_numpy(h))
        assert_bits(out.numpy(), h.astype(np.float32))
        _C.copy_(out, ampy.from_numpy(x))  # same-dtype copy
        assert_bits(out.numpy(), x)
        # strided (not contiguous) large source
        x2 = x.reshape(-1, 5)[:, ::2] if n % 5 == 0 else x[:n - n % 5].reshape(-1, 5)[:, ::2]
        assert_bits(acast(x2, ampy.float16), x2.astype(np.float16))
    finally:
        ampy.set_num_threads(old)


# --------------------------------------------------------- all 64 dtype pairs
ALL = ALL_DTYPES


def _sample(dt):
    """Values of dt on which NumPy's astype is well defined for every target:
    finite, in [0, 255] after truncation for uint8, no wrap for int32."""
    if dt is ampy.bool:
        return np.array([True, False, True, True, False], np.bool_)
    if dt is ampy.uint8:
        return np.array([0, 1, 2, 127, 128, 200, 255], np.uint8)
    vals = np.array([0, 1, 2, 3, 100, 127, 200, 255], np.int64)
    if dt.is_floating_point:
        vals = np.concatenate([vals, [0.5, 1.5, 2.5, 7.75, 254.99, 0.1, 1e-3, 33.3]])
    return vals.astype(NP[dt])


@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("dst", ALL, ids=lambda d: d.name)
def test_all_pairs_vs_numpy(src, dst):
    x = _sample(src)
    want = x.astype(NP[dst])
    if src is ampy.bfloat16 and dst in (ampy.float16,):
        want = x.astype(np.float32).astype(np.float16)  # exact in f32: one rounding
    got = acast(x, dst)
    assert got.dtype == np.dtype(NP[dst])
    assert_bits(got, want, f"{src.name}->{dst.name}")
    # strided source too
    xs = np.repeat(x, 2)[::2]
    assert_bits(acast(xs, dst), want)


@pytest.mark.parametrize("src", [ampy.int64, ampy.int32])
@pytest.mark.parametrize("dst", [ampy.int32, ampy.uint8, ampy.bool, ampy.float32, ampy.float16,
                                 ampy.bfloat16, ampy.float64])
def test_integer_wrap_and_rounding(src, dst):
    """Integers wrap when narrowed (like NumPy's astype); to floats they round
    once to nearest-even (float16/bfloat16 through an exact float64)."""
    rng = np.random.default_rng(9)
    info = np.iinfo(NP[src])
    x = np.concatenate([rng.integers(info.min, info.max, 3000, dtype=NP[src]),
                        np.array([info.min, info.max, -1, 0, 65519, 65520, 2049, 2051],
                                 NP[src])])
    got = acast(x, dst)
    if dst is ampy.bfloat16:
        want = ref_bf16_bits_from_f64(x.astype(np.float64))
    else:
        want = x.astype(np.float64).astype(NP[dst]) if dst is ampy.float16 else x.astype(NP[dst])
    assert_bits(got, want, f"{src.name}->{dst.name}")


@pytest.mark.parametrize("src", [ampy.float32, ampy.float64, ampy.float16, ampy.bfloat16])
def test_float_to_int_special_rule(src):
    """NaN / inf / out of int64 range -> INT64_MIN, then wrapped; in-range
    values truncate toward zero, then wrap (so -1.5 -> uint8 255)."""
    specials = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30], np.float64)
    specials = specials.astype(NP[src])
    if src is not ampy.float16:
        specials = np.concatenate([specials, np.array([2.0 ** 63, -2.0 ** 64], NP[src])])
    imin = np.int64(np.iinfo(np.int64).min)
    for dst in (ampy.int64, ampy.int32, ampy.uint8):
        got = acast(specials, dst)
        assert np.all(got == np.full(len(specials), imin).astype(NP[dst])), (dst, got)
    inr = np.array([-1.5, -0.9, 0.9, 300.7, -300.7, 65504.0, -129.5], np.float64).astype(NP[src])
    trunc = np.trunc(inr.astype(np.float64)).astype(np.int64)
    for dst in (ampy.int64, ampy.int32, ampy.uint8):
        assert np.array_equal(acast(inr, dst), trunc.astype(NP[dst])), dst
    assert np.array_equal(acast(specials, ampy.bool), np.ones(len(specials), np.bool_))
    assert bool(ampy.tensor([-0.0], dtype=src).to(ampy.bool).item()) is False


def test_torch_agrees_on_float_to_int64_specials():
    """The INT64_MIN rule is what torch's CPU build produces here."""
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e30, -1e30], dtype=torch.float64)
    ours = acast(x.numpy(), ampy.int64)
    assert np.array_equal(ours, x.to(torch.int64).numpy())


# --------------------------------------------------------------------- errors
def test_bad_cast_arguments_leave_inputs_unchanged():
    x = ampy.tensor([1.0, 2.0, 3.0])
    before = x.numpy().copy()
    with pytest.raises(TypeError):
        x.to("float128")
    with pytest.raises(TypeError):
        _C.cast(x, 99)
    with pytest.raises(TypeError):
        _C.cast([1.0], ampy.float16)
    with pytest.raises(TypeError):
        _C.copy_(x, [1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="broadcast"):
        _C.copy_(x, ampy.zeros(4))
    with pytest.raises(RuntimeError, match="broadcast"):
        _C.copy_(x[:1], ampy.zeros(3))
    with pytest.raises(TypeError):
        _C.copy_(x)
    assert_bits(x.numpy(), before)


def test_empty_and_scalar_casts(cpu_path):
    for dt in (ampy.float16, ampy.bfloat16, ampy.float32):
        e = ampy.empty(0, 3).to(dt)
        assert tuple(e.shape) == (0, 3) and e.dtype is dt
        s = ampy.tensor(1.5).to(dt)
        assert s.ndim == 0 and s.item() == 1.5


# ================================================================ CUDA
# Casts on a GPU against the CPU and torch; skipped without a GPU.

@requires_cuda
@pytest.mark.parametrize("dt", HALF_DTYPES)
def test_cuda_all_half_patterns_to_float_and_back(dt):
    pats = np.arange(65536, dtype=np.uint16)
    cpu_half = ampy.empty(65536, dtype=dt)
    cpu_half.numpy().view(np.uint16)[:] = pats
    g = cpu_half.cuda()
    np.testing.assert_array_equal(bits(g.float()), bits(cpu_half.float()))
    np.testing.assert_array_equal(bits(g.double()), bits(cpu_half.double()))
    np.testing.assert_array_equal(bits(g.float().to(dt)), bits(cpu_half.float().to(dt)))


@requires_cuda
@pytest.mark.parametrize("dt", HALF_DTYPES)
def test_cuda_float_to_half_bits_match_cpu_and_torch(dt):
    rng = np.random.default_rng(1)
    u = rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x477FF000,
                         0x477FEFFF, 0x33000000, 0x33000001, 0x38800000, 0x387FFFFF],
                        dtype=np.uint32)
    f = np.concatenate([u, specials]).view(np.float32)
    x = ampy.from_numpy(f)
    gpu = x.cuda().to(dt).cpu()
    cpu = x.to(dt)
    np.testing.assert_array_equal(bits(gpu), bits(cpu))
    if HAS_TORCH_CUDA:
        tdt = torch.float16 if dt is ampy.float16 else torch.bfloat16
        t = torch.from_numpy(f).cuda().to(tdt).cpu().view(torch.int16).numpy()
        finite = np.isfinite(f)  # torch's NaN payloads differ by design (see cast.h)
        np.testing.assert_array_equal(bits(gpu).view(np.int16)[finite], t[finite])


@requires_cuda
@pytest.mark.parametrize("src", ALL_DTYPES)
@pytest.mark.parametrize("dst", ALL_DTYPES)
def test_cuda_cast_matrix_matches_cpu(src, dst):
    x = (ampy.randn(5, 37) * 300).to(src)
    np.testing.assert_array_equal(bits(x.cuda().to(dst)), bits(x.to(dst)))


@requires_cuda
def test_cuda_strided_and_broadcast_copies():
    x = ampy.randn(6, 8)
    g = x.cuda()
    np.testing.assert_array_equal(g.t().contiguous().cpu().numpy(), x.t().contiguous().numpy())
    np.testing.assert_array_equal(g[1::2, ::3].cpu().numpy(), x[1::2, ::3].numpy())
    out = ampy.zeros(4, 6, 8, device="cuda", dtype=ampy.float16)
    out.copy_(g)
    np.testing.assert_array_equal(out.cpu().numpy(), np.broadcast_to(x.half().numpy(), (4, 6, 8)))
    h = ampy.zeros(8, 6)
    h.copy_(g.t())  # device -> strided host
    np.testing.assert_array_equal(h.numpy(), x.t().numpy())


FILL_VALUES = [0, 1, 0.5, -3, 1e30, -0.0, float("nan"), float("inf"), 65504.0, 3.0e-8, True]
FILL_DTYPES = ["float32", "bfloat16", "float16", "float64", "int64", "int32", "uint8", "bool"]


def _torch_bits(t):
    return (t.view(torch.int16) if t.dtype in (torch.float16, torch.bfloat16) else t).numpy()


@pytest.mark.parametrize("name", FILL_DTYPES)
@pytest.mark.parametrize("shape", [(3, 5), (1, 7, 1), (4097,), ((1 << 20) + 3,)])
@pytest.mark.parametrize("threads", [1, 2])
def test_full_gives_torchs_bits(name, shape, threads):
    """full/zeros/ones write one converted value over a dense output (the fill
    path of ampy_cast); the bits are torch's for every dtype, value and size,
    at 1 and 2 threads (the large shape is split between the threads)."""
    old = ampy.get_num_threads()
    ampy.set_num_threads(threads)
    try:
        _check_full(name, shape)
    finally:
        ampy.set_num_threads(old)


def _check_full(name, shape):
    for v in FILL_VALUES:
        try:
            ref = torch.full(shape, v, dtype=getattr(torch, name))
        except (RuntimeError, OverflowError):
            continue
        got = ampy.full(shape, v, dtype=getattr(ampy, name))
        assert got.numpy().tobytes() == _torch_bits(ref).tobytes(), (name, v)
    assert ampy.zeros(shape, dtype=getattr(ampy, name)).numpy().tobytes() == \
        _torch_bits(torch.zeros(shape, dtype=getattr(torch, name))).tobytes()


@pytest.mark.parametrize("src", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("dst", ["float32", "bfloat16", "float16"])
def test_broadcast_copy_of_one_value_converts_once(src, dst):
    """copy_ of a one-element tensor into dense and strided outputs: the value
    is rounded once from the source dtype (torch's bits), and a strided
    destination keeps its other elements."""
    val = torch.tensor([1.0 + 2.0 ** -9 + 2.0 ** -20], dtype=torch.float64).to(getattr(torch, src))
    a_val = ampy.tensor(val.to(torch.float64).numpy()).to(getattr(ampy, src))
    for sl in ((slice(None), slice(None)), (slice(None), slice(None, None, 2))):
        ref = torch.full((6, 9), -2.0, dtype=getattr(torch, dst))
        got = ampy.full((6, 9), -2.0, dtype=getattr(ampy, dst))
        ref[sl].copy_(val.reshape(1, 1).expand(ref[sl].shape))
        got[sl].copy_(a_val.reshape(1, 1))
        assert got.numpy().tobytes() == _torch_bits(ref).tobytes()
