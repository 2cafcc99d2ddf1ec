"""Accuracy of the vectorized float32 transcendental kernels (csrc/vmath*.c):
exp, log, tanh, sigmoid, erf, gelu (erf and tanh forms), silu, and the
softmax / log_softmax rows built on them, on both CPU paths (AVX-512 and
portable C, see the cpu_path fixture).

Oracle: torch float64 (libm-accurate), with numerically stable formulas where
the textbook one cancels in float64 itself (gelu for x < 0 through erfc,
gelu_tanh and silu as x * sigmoid(.)), rounded once to the result dtype by
the integer-exact rounding below (not through float32, which would round
twice). Errors are counted in units in the last place of the result dtype.
"""
import math

import numpy as np
import pytest
import torch

import ampy
from _helpers import stable_seed, NP_DTYPE as NP, SHORT, ulp_distance

# Worst case measured over 3.4M float32 inputs (random bit patterns, dense
# [-20, 20] and [-3.15, 3.15], tiny values, specials) is the bound: exp, log,
# tanh, erf 1 ulp; sigmoid 2; silu, gelu, gelu_tanh 3 (two or three roundings
# after a 1-ulp exp). gelu measures 2 on both paths (AVX-512: table-driven for
# |x| < 3.9375); torch's own float32 gelu, 0.5 x (1 + erf(x / sqrt2)), is
# 2125 ulp off at x = -2.99 and loses all bits below x = -5 (cancellation).
F32_ULPS = {"exp": 1, "log": 1, "tanh": 1, "erf": 1, "sigmoid": 2, "silu": 3, "gelu": 3,
            "gelu_tanh": 3}
OPS = sorted(F32_ULPS)

AMPY_FN = {
    "exp": ampy.exp, "log": ampy.log, "tanh": ampy.tanh, "sigmoid": ampy.sigmoid,
    "erf": ampy.erf, "silu": ampy.silu, "gelu": ampy.gelu,
    "gelu_tanh": lambda t: ampy.gelu(t, approximate="tanh"),
}


def oracle(name, x):
    """float64 values of op(x) for a float64 array x (torch float64 kernels)."""
    t = torch.from_numpy(np.asarray(x, np.float64))
    neg_inf = torch.isinf(t) & (t < 0)
    if name == "exp":
        r = torch.exp(t)
    elif name == "log":
        r = torch.log(t)
    elif name == "tanh":
        r = torch.tanh(t)
    elif name == "sigmoid":
        r = torch.sigmoid(t)
    elif name == "erf":
        r = torch.erf(t)
    elif name == "silu":  # x / (1 + e^-x); -inf / inf is NaN as in torch
        r = torch.where(neg_inf, torch.nan, t * torch.sigmoid(t))
    elif name == "gelu":  # x/2 (1 + erf(x/sqrt2)) == x/2 erfc(-x/sqrt2)
        r = torch.where(t < 0, 0.5 * t * torch.special.erfc(-t / math.sqrt(2)),
                        0.5 * t * (1 + torch.erf(t / math.sqrt(2))))
        r = torch.where(neg_inf, torch.nan, r)
    elif name == "gelu_tanh":  # x/2 (1 + tanh(u)) == x sigmoid(2u)
        v = 2 * math.sqrt(2 / math.pi) * (t + 0.044715 * t ** 3)
        r = torch.where(neg_inf, torch.nan, t * torch.sigmoid(v))
    else:
        raise KeyError(name)
    return r.numpy()


# ---- rounding float64 -> a binary format, once, round-half-even --------------------
FORMATS = {  # mantissa bits (explicit), minimum normal exponent, overflow threshold
    "float32": (23, -126, 2.0 ** 128), "float16": (10, -14, 2.0 ** 16),
    "bfloat16": (7, -126, 2.0 ** 128),
}


def round_to(v, dtype):
    """float64 array -> dtype, correctly rounded (half to even), as a NumPy array."""
    mant, emin, big = FORMATS[dtype]
    v = np.asarray(v, np.float64)
    with np.errstate(all="ignore"):
        _, e = np.frexp(np.where(np.isfinite(v) & (v != 0), v, 1.0))
        q = np.ldexp(1.0, np.maximum(e - 1, emin) - mant)  # spacing at |v|
        r = np.round(v / q) * q  # exact scaling by powers of two; np.round is half-even
        r = np.where(np.isfinite(v) & (v != 0), r, v)
        r = np.where(np.abs(r) >= big, np.copysign(np.inf, v), r)
    return r.astype(np.float32).astype(NP[dtype])  # exact from here on


def test_round_to_is_correct_rounding():
    # independent check of the oracle's rounding against NumPy's float64 -> float16
    # (a direct, correctly rounded conversion) and float64 -> float32
    rng = np.random.default_rng(1)
    v = np.concatenate([rng.normal(size=100000) * 10.0 ** rng.integers(-9, 6, 100000),
                        [65519.99, 65520.0, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 3 * 2.0 ** -26]])
    with np.errstate(over="ignore"):
        want16 = v.astype(np.float16)
    assert np.array_equal(round_to(v, "float16").view(np.int16), want16.view(np.int16))
    w = rng.normal(size=100000) * 10.0 ** rng.integers(-45, 38, 100000)
    assert np.array_equal(round_to(w, "float32").view(np.int32), w.astype(np.float32).view(
        np.int32))
    # bfloat16: the tie 1 + 2^-8 rounds to even (1.0), just above rounds up
    b = round_to(np.array([1 + 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -30, 3.3895e38, 3.40e38]),
                 "bfloat16")
    assert b.astype(np.float64).tolist() == [1.0, 1.0078125, 3.3895313892515355e38,
                                             float("inf")]


# ---- float32: dense random samples in ulps -----------------------------------------
def f32_samples():
    rng = np.random.default_rng(7)
    n = 400_000 if SHORT else 1_200_000
    bits = rng.integers(0, 2 ** 32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    dense = rng.uniform(-20, 20, n // 2).astype(np.float32)
    small = (rng.uniform(-1, 1, n // 4) * 10.0 ** rng.uniform(-40, 0, n // 4)).astype(np.float32)
    # runs of 16 with every |x| <= 14.5 (gelu) or <= 2.2 (erf) take the float-only
    # fast forms; these ranges exercise both forms and the switch between them
    mid = np.concatenate([rng.uniform(-14.6, 14.6, n // 2), rng.uniform(-2.25, 2.25, n // 2),
                          np.linspace(-14.5, 14.5, 1 << 16)]).astype(np.float32)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17549435e-38,
                      88.72283935546875, 88.7228394, -87.33654, -103.97207, -103.97208,
                      -104.0, 0.5625, 0.921875, -0.495, 0.495, -14.57, -23.0, -110.0,
                      3.4028235e38, -3.4028235e38], np.float32)
    return np.concatenate([bits, dense, small, mid, edges])


@pytest.mark.parametrize("name", OPS)
def test_float32_ulps(name, cpu_path):
    x = f32_samples()
    got = AMPY_FN[name](ampy.tensor(x)).numpy()
    with np.errstate(all="ignore"):
        ref = round_to(oracle(name, x.astype(np.float64)), "float32")
    d = ulp_distance(got, ref)
    bad = d > F32_ULPS[name]
    assert not bad.any(), (f"{bad.sum()} over {F32_ULPS[name]} ulp; x={x[bad][:5]} "
                           f"got={got[bad][:5]} want={ref[bad][:5]} max={d.max()}")


SPECIALS = {  # (x, value) pairs (torch float64 semantics); a dict would merge 0.0 and -0.0
    "exp": [(0.0, 1.0), (-0.0, 1.0), (math.inf, math.inf), (-math.inf, 0.0), (89.0, math.inf), (-104.0, 0.0)],
    "log": [(0.0, -math.inf), (-0.0, -math.inf), (math.inf, math.inf), (-1.0, math.nan), (-math.inf, math.nan), (1.0, 0.0)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (math.inf, 1.0), (-math.inf, -1.0)],
    "sigmoid": [(0.0, 0.5), (-0.0, 0.5), (math.inf, 1.0), (-math.inf, 0.0)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (math.inf, 1.0), (-math.inf, -1.0)],
    "silu": [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.inf), (-math.inf, math.nan), (-1e30, -0.0)],
    "gelu": [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.inf), (-math.inf, math.nan), (-1e30, -0.0)],
    "gelu_tanh": [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.inf), (-math.inf, math.nan), (-1e30, -0.0)],
}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", OPS)
def test_specials_bits(name, dtype, cpu_path):
    cases = [c for c in SPECIALS[name]
             if dtype == "float32" or abs(c[0]) not in (1e30, 89.0, 104.0)]
    xs = np.array([c[0] for c in cases] + [math.nan], np.float64)
    want = np.array([c[1] for c in cases] + [math.nan], np.float64)
    got = AMPY_FN[name](ampy.tensor(xs.astype(NP[dtype]))).numpy().astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (xs, got, want)
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok]), (xs, got, want)
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok])), (xs, got, want)


# ---- float16 / bfloat16: all 65,536 inputs ----------------------------------------
# Computed in float32 and rounded once to the half type, so the result can
# differ from the correctly rounded one only when the float64 value lies
# within a few float32 ulps of a rounding boundary of the half type: at most
# 1 half ulp apart, and rarely.
HALF_MISMATCH_MAX = 2e-4  # measured: at most 6 of 65,536 (float16 sigmoid)


def all_halves(dtype):
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(NP[dtype])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", OPS)
def test_half_exhaustive(name, dtype, cpu_path):
    x = all_halves(dtype)
    got = AMPY_FN[name](ampy.tensor(x)).numpy()
    assert got.dtype == NP[dtype]
    with np.errstate(all="ignore"):
        ref = round_to(oracle(name, x.astype(np.float64)), dtype)
    d = ulp_distance(got, ref)
    assert d.max() <= 1, (x[d > 1][:5], got[d > 1][:5], ref[d > 1][:5])
    rate = (d > 0).mean()
    assert rate <= HALF_MISMATCH_MAX, (rate, x[d > 0][:8], got[d > 0][:8], ref[d > 0][:8])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", OPS)
def test_half_exhaustive_vs_torch(name, dtype):
    # torch rounds a float32 result once too. Where the two differ, ampy must be
    # the one closer to the exact value, but for a handful of double-rounding
    # cases (float32 result next to a half-way point of the half type).
    x = all_halves(dtype)
    tx = torch.from_numpy(x.view(np.int16)).view(getattr(torch, dtype))
    F = torch.nn.functional
    tf = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
          }.get(name) or getattr(torch, name)
    want = tf(tx).view(torch.int16).numpy().view(NP[dtype])
    got = AMPY_FN[name](ampy.tensor(x)).numpy()
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        exact = oracle(name, x64)
        err_a = np.abs(got.astype(np.float64) - exact)
        err_t = np.abs(want.astype(np.float64) - exact)
    worse = (err_a > err_t) & np.isfinite(x64) & ~np.isnan(exact)
    assert worse.sum() <= 8, (worse.sum(), x[worse][:8], got[worse][:8], want[worse][:8])


# ---- gelu, erf: per-element results on every path -------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["gelu", "erf"])
def test_gelu_erf_per_element_and_half_rounding(name, dtype, cpu_path):
    # AVX-512 evaluates |x| < 3.9375 by table (gelu sends vectors with another
    # lane through the scalar kernels for that lane only; erf is +-1 there): a
    # value's result must not depend on its neighbours. Contiguous half
    # tensors convert in registers; they must give the float32 kernel's result
    # rounded once, as the strided (buffered) path does.
    rng = np.random.default_rng(21)
    x = rng.uniform(-3.95, 3.95, 5003).astype(np.float32)
    x[::7] = np.float32(3.9375) * np.sign(x[::7])
    dt = getattr(ampy, dtype)
    alone = AMPY_FN[name](ampy.tensor(x).to(dt)).to(ampy.float32).numpy()
    mixed = x.copy()
    far = np.array([np.nan, np.inf, -np.inf, 5.0, -5.0, 1e30, -20.0, -14.6], np.float32)
    mixed[2::5] = far[np.arange(len(mixed[2::5])) % len(far)]
    keep = np.ones(len(x), bool)
    keep[2::5] = False
    got = AMPY_FN[name](ampy.tensor(mixed).to(dt)).to(ampy.float32).numpy()
    assert np.array_equal(got[keep].view(np.int32), alone[keep].view(np.int32))
    if dtype != "float32":
        h = ampy.tensor(mixed).to(dt)
        want = AMPY_FN[name](h.to(ampy.float32)).to(dt).to(ampy.float32).numpy()
        strided = AMPY_FN[name](ampy.tensor(np.stack([mixed, mixed])).to(dt).t()[:, 0])
        for w in (want, strided.to(ampy.float32).numpy()):
            assert np.array_equal(np.isnan(got), np.isnan(w))
            ok = ~np.isnan(w)
            assert np.array_equal(got[ok].view(np.int32), w[ok].view(np.int32))


# ---- non-contiguous and in-place use of the kernels ----------------------------------
@pytest.mark.parametrize("name", OPS)
def test_strided_and_inplace_match_contiguous(name):
    rng = np.random.default_rng(3)
    x = rng.uniform(-6, 6, (37, 53)).astype(np.float32)
    if name == "log":
        x = np.abs(x) + 1e-3
    want = AMPY_FN[name](ampy.tensor(np.ascontiguousarray(x.T))).numpy()
    got = AMPY_FN[name](ampy.tensor(x).t()).numpy()
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    if name in ("exp", "log", "tanh", "sigmoid"):
        t = ampy.tensor(x)
        getattr(t, name + "_")()
        assert np.array_equal(t.numpy().view(np.int32),
                              AMPY_FN[name](ampy.tensor(x)).numpy().view(np.int32))


# ---- softmax / log_softmax rows ----------------------------------------------------------
def softmax64(x, dim, log):
    x = np.asarray(x, np.float64)
    m = np.max(x, axis=dim, keepdims=True)
    with np.errstate(all="ignore"):
        s = np.sum(np.exp(x - m), axis=dim, keepdims=True)
        return (x - m) - np.log(s) if log else np.exp(x - m) / s


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape,dim", [((7, 1000), 1), ((3, 37), -1), ((300, 5), 0),
                                       ((2, 5000), 1), ((4, 1), 1)])
def test_softmax_rows_vs_float64(shape, dim, dtype, log, cpu_path):
    rng = np.random.default_rng(stable_seed(shape, dim, dtype, log))
    x = (rng.normal(size=shape) * 8).astype(NP[dtype])
    fn = ampy.log_softmax if log else ampy.softmax
    got = fn(ampy.tensor(x), dim).numpy()
    ref = round_to(softmax64(x.astype(np.float64), dim, log), dtype)
    d = ulp_distance(got, ref)
    # float32: e^(x - m) with the exact difference (1 ulp) over the rounded sum:
    # measured <= 2 ulp; log_softmax <= 1. Half types: rounded once from that.
    assert d.max() <= (3 if dtype == "float32" else 1), d.max()
    # torch computes x - m rounded, which costs |x - m| / 2 ulp in e^(x - m):
    # ampy is never further from the float64 result than torch
    tfn = torch.log_softmax if log else torch.softmax
    tw = tfn(torch.from_numpy(x.astype(np.float32)).to(getattr(torch, dtype)), dim)
    tw = tw.float().numpy().astype(NP[dtype])
    assert d.max() <= ulp_distance(tw, ref).max() + 1


@pytest.mark.parametrize("log", [False, True])
def test_softmax_specials(log, cpu_path):
    fn = ampy.log_softmax if log else ampy.softmax
    x = np.array([[0.0, -np.inf, 1.0, 2.0], [np.nan, 0.0, 1.0, 2.0],
                  [-np.inf, -np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0, 2.0],
                  [-1e30, 0.0, 1e-45, -0.0], [200.0, 100.0, 0.0, -100.0]], np.float32)
    for dtype in ("float32", "bfloat16"):
        got = fn(ampy.tensor(x.astype(NP[dtype])), 1).numpy().astype(np.float64)
        tfn = torch.log_softmax if log else torch.softmax
        want = tfn(torch.from_numpy(x).to(getattr(torch, dtype)), 1).double().numpy()
        assert np.array_equal(np.isnan(got), np.isnan(want)), (dtype, got, want)
        ok = ~np.isnan(want)
        rtol = 1e-6 if dtype == "float32" else 2.0 ** -7  # torch's bf16 log_softmax is 1 ulp off
        assert np.allclose(got[ok], want[ok], rtol=rtol, atol=0), (dtype, got, want)


@pytest.mark.parametrize("L", [1, 5, 16, 128, 300, 2048, 2049, 4096, 4097, 9000])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_softmax_line_bits_do_not_depend_on_batching(L, dtype, cpu_path):
    """Each line's result is its own: the AVX-512 path takes short lines two at a
    time and long ones in chunks, converts contiguous half lines in registers
    and strided ones through a buffer; none of it may change a bit. Also
    half -> float32 output (dtype=) against the float32 result of the
    widened input."""
    rng = np.random.default_rng(L)
    rows = 5 if L <= 4096 else 2
    x = (rng.normal(size=(rows, L)) * 6).astype(np.float32)
    x[0, L // 2] = 90.0  # exponentials underflowing to subnormals and zero
    t = ampy.tensor(x).to(getattr(ampy, dtype))
    for fn in (ampy.softmax, ampy.log_softmax):
        full = fn(t, -1)
        bits = full.to(ampy.float32).numpy().view(np.uint32)
        for r in range(rows):  # alone, and at an odd offset in a batch
            one = fn(t[r:r + 1], -1).to(ampy.float32).numpy().view(np.uint32)
            assert np.array_equal(one[0], bits[r]), (fn.__name__, r)
        tail = fn(t[1:], -1).to(ampy.float32).numpy().view(np.uint32)
        assert np.array_equal(tail, bits[1:])
        strided = fn(t.t().contiguous().t(), -1).to(ampy.float32).numpy().view(np.uint32)
        assert np.array_equal(strided, bits)
        if dtype != "float32":
            w = fn(t.to(ampy.float32), -1).numpy().view(np.uint32)
            g = fn(t, -1, dtype=ampy.float32).numpy().view(np.uint32)
            assert np.array_equal(g, w)
            assert np.array_equal(bits, fn(t.to(ampy.float32), -1).to(getattr(ampy, dtype))
                                  .to(ampy.float32).numpy().view(np.uint32))


def test_softmax_strided_input_and_output(cpu_path):
    rng = np.random.default_rng(11)
    x = rng.normal(size=(40, 300)).astype(np.float32) * 5
    t = ampy.tensor(x).t()  # softmax over dim 0 of the view: strided lines
    got = ampy.softmax(t, 0).numpy()
    want = ampy.softmax(ampy.tensor(np.ascontiguousarray(x.T)), 0).numpy()
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_gelu_far_arm_vector_equals_scalar_form():
    """Vectors whose lanes all lie in 3.9375 <= |x| <= 14.5 take the AVX-512
    far arm (vmath_gelu_avx512.inc gelu_far_vec); the same values in a vector
    with one lane above 14.5 take the scalar form. Both must give the same bits
    (and stay within the float32 bound against float64)."""
    rng = np.random.default_rng(7)
    v = np.concatenate([rng.uniform(3.9375, 14.5, 20000), -rng.uniform(3.9375, 14.5, 20000),
                        [3.9375, -3.9375, 14.5, -14.5, 5.0, -5.0]]).astype(np.float32)
    a = np.repeat(v[:, None], 16, axis=1)
    b = a.copy()
    b[:, 15] = 20.0
    ya = ampy.gelu(ampy.tensor(a.ravel())).numpy().reshape(-1, 16)[:, 0]
    yb = ampy.gelu(ampy.tensor(b.ravel())).numpy().reshape(-1, 16)[:, 0]
    assert np.array_equal(ya.view(np.uint32), yb.view(np.uint32))
    x = v.astype(np.float64)
    ref = x / 2 * np.array([math.erfc(-t / math.sqrt(2)) for t in x])
    assert ulp_distance(ya, ref.astype(np.float32)).max() <= F32_ULPS["gelu"]
