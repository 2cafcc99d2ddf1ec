"""bfloat16 results of the element-wise, cast, softmax, layer_norm, GELU and
column-sum kernels on every CPU level this machine can force: the AVX512-BF16
level rounds with vcvtneps2bf16 / vcvtne2ps2bf16, the AVX-512 level with the
integer round-to-nearest-even, the portable level with elem.h. All three
must give the same bits, NaN included (every NaN rounds to 0x7FC0, the
instructions' own NaN and their flushing of subnormal inputs must not show),
and where torch rounds the same float32 values they must equal torch's.

Levels are compared with each other rather than through the cpu_path fixture
because the property is agreement between levels. The transcendental kernels
(softmax, GELU) are compared between the two AVX-512 levels only: their
portable build is another vmath build (vmath.h), allowed to differ in the
last bit of the float32 result before rounding."""
import ml_dtypes
import numpy as np
import pytest

import ampy
from ampy import _C

from _helpers import bits, cpu_level_missing, same_bits_or_both_nan

torch = pytest.importorskip("torch")

LEVELS = [lv for lv in ("portable", "avx512", "avx512bf16") if not cpu_level_missing(lv)]
SIMD_LEVELS = [lv for lv in LEVELS if lv != "portable"]

# float32 values whose bfloat16 rounding is delicate: signed zeros, infinities,
# NaNs with other signs and payloads (a signalling one too), float32 and
# bfloat16 subnormals, exact ties to even both ways, the overflow threshold
_F32_SPECIAL_BITS = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
    0x7FC00001, 0xFFFFFFFF, 0x00000001, 0x80000001, 0x007FFFFF, 0x00008000, 0x00018000,
    0x00800000, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,
    0xFF7F8000, 0x00400000, 0x80408000,
]


def f32_hostile(n, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * 4).astype(np.float32)
    sp = np.array(_F32_SPECIAL_BITS, np.uint32).view(np.float32)
    a[rng.choice(n, size=min(n, 3 * sp.size), replace=False)] = np.resize(sp, min(n, 3 * sp.size))
    return a


def bf16_hostile(n, seed=0):
    """bfloat16 inputs (as an ampy tensor) that lead to delicate float32 results:
    subnormals, NaNs of both signs, infinities, the largest finite values."""
    rng = np.random.default_rng(seed)
    h = (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    sp = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x0001, 0x8001,
                   0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0x3B80, 0x0100], np.uint16)
    h[rng.choice(n, size=min(n, 2 * sp.size), replace=False)] = np.resize(sp, min(n, 2 * sp.size))
    return as_bf16(h)


def as_bf16(h):
    """An ampy bfloat16 tensor holding the uint16 bit patterns h."""
    return ampy.from_numpy(np.ascontiguousarray(h).view(ml_dtypes.bfloat16))


def per_level(fn, levels=LEVELS):
    """{level: bits of fn()} with the CPU level forced to each."""
    out = {}
    try:
        for lv in levels:
            _C._set_cpu_level(lv)
            out[lv] = bits(fn())
    finally:
        _C._set_cpu_level(None)
    return out


def assert_levels_agree(res):
    first = next(iter(res))
    for lv, b in res.items():
        assert b.shape == res[first].shape
        bad = np.flatnonzero(b.ravel() != res[first].ravel())
        assert bad.size == 0, (lv, first, bad[:8], b.ravel()[bad[:8]], res[first].ravel()[bad[:8]])


def to_torch(t):
    return torch.from_numpy(bits(t).view(np.int16)).view(torch.bfloat16).reshape(tuple(t.shape))


@pytest.mark.parametrize("n", [1, 15, 16, 31, 32, 33, 1000, 70001])
def test_cast_f32_to_bf16(n):
    a = f32_hostile(n)
    x = ampy.from_numpy(a)
    res = per_level(lambda: x.to(ampy.bfloat16))
    assert_levels_agree(res)
    got = as_bf16(res["portable"])
    want = torch.from_numpy(a).to(torch.bfloat16)
    assert same_bits_or_both_nan(got, want)
    nan = np.isnan(a)
    assert (res["portable"][nan] == 0x7FC0).all()  # elem.h: every NaN -> 0x7FC0


@pytest.mark.parametrize("op", ["add", "sub_alpha", "mul", "mul_scalar", "f32_plus_bf16"])
@pytest.mark.parametrize("n", [7, 48, 4099])
def test_ewise_bf16_out(op, n):
    x, y = bf16_hostile(n, 1), bf16_hostile(n, 2)
    xf = ampy.from_numpy(f32_hostile(n, 3))
    fns = {
        "add": (lambda: x + y, lambda tx, ty, tf: tx + ty),
        "sub_alpha": (lambda: ampy.sub(x, y, alpha=0.5), lambda tx, ty, tf: torch.sub(tx, ty, alpha=0.5)),
        "mul": (lambda: x * y, lambda tx, ty, tf: tx * ty),
        "mul_scalar": (lambda: x * 0.125, lambda tx, ty, tf: tx * 0.125),
        "f32_plus_bf16": (lambda: (xf + x).to(ampy.bfloat16),
                          lambda tx, ty, tf: (tf + tx).to(torch.bfloat16)),
    }
    fa, ft = fns[op]
    res = per_level(fa)
    assert_levels_agree(res)
    got = as_bf16(res["portable"])
    want = ft(to_torch(x), to_torch(y), torch.from_numpy(xf.numpy()))
    assert same_bits_or_both_nan(got, want)


def test_ewise_bf16_strided():
    x = bf16_hostile(64 * 96, 4).reshape(64, 96)
    y = bf16_hostile(96 * 64, 5).reshape(96, 64)
    assert_levels_agree(per_level(lambda: x.t() + y))


@pytest.mark.parametrize("shape", [(3, 5), (8, 128), (2, 3, 300), (4, 1024)])
def test_softmax_bf16(shape):
    n = int(np.prod(shape))
    x = bf16_hostile(n, 6).reshape(shape)
    xs = ampy.from_numpy((np.random.default_rng(7).standard_normal(shape) * 30).astype(np.float32)).to(
        ampy.bfloat16)
    for inp in (x, xs):
        assert_levels_agree(per_level(lambda: ampy.softmax(inp, -1), SIMD_LEVELS))
        assert_levels_agree(per_level(lambda: ampy.log_softmax(inp, -1), SIMD_LEVELS))
    # the backward from the output y: y * (g - sum(g y)), no transcendental
    y = ampy.softmax(xs, -1)
    g = bf16_hostile(n, 8).reshape(shape)
    assert_levels_agree(per_level(lambda: _C.fused_softmax_bwd(y, g)))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("n", [5, 40, 2051])
def test_gelu_bf16(approximate, n):
    x = bf16_hostile(n, 9)
    xs = ampy.from_numpy((np.random.default_rng(10).standard_normal(n) * 3).astype(np.float32)).to(
        ampy.bfloat16)
    g = bf16_hostile(n, 11)
    F = ampy.nn.functional
    for inp in (x, xs):
        assert_levels_agree(per_level(lambda: F.gelu(inp, approximate=approximate), SIMD_LEVELS))
        if approximate == "none":
            assert_levels_agree(per_level(lambda: _C.fused_gelu_bwd(inp, g), SIMD_LEVELS))


@pytest.mark.parametrize("shape", [(5, 7), (33, 256), (4, 1000)])
def test_layer_norm_bf16(shape):
    rng = np.random.default_rng(12)
    x = ampy.from_numpy((rng.standard_normal(shape) * 3).astype(np.float32)).to(ampy.bfloat16)
    w = ampy.from_numpy(rng.standard_normal(shape[-1]).astype(np.float32)).to(ampy.bfloat16)
    b = ampy.from_numpy(rng.standard_normal(shape[-1]).astype(np.float32)).to(ampy.bfloat16)
    xh = bf16_hostile(int(np.prod(shape)), 13).reshape(shape)
    F = ampy.nn.functional
    for inp in (x, xh):
        assert_levels_agree(per_level(lambda: F.layer_norm(inp, shape[-1:], w, b)))


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("shape", [(64, 17), (4096, 256), (9, 1040), (1, 3000)])
@pytest.mark.parametrize("threads", [1, 2])
def test_colsum_hostile(dt, shape, threads):
    """The bias-gradient column sum on NaN, inf, subnormal and huge values: the
    SIMD widening must keep every value exactly; one rounding of the double sum."""
    x = bf16_hostile(int(np.prod(shape)), 14).reshape(shape)
    x = x if dt == "bfloat16" else x.to(getattr(ampy, dt))
    old = ampy.get_num_threads()
    ampy.set_num_threads(threads)
    try:
        res = per_level(lambda: _C.fused_colsum(x))
    finally:
        ampy.set_num_threads(old)
    assert_levels_agree(res)
    # float64 oracle: rows added in order in double (exact widening), one rounding
    ref = np.zeros(shape[1])
    xf = x.to(ampy.float64).numpy()
    with np.errstate(invalid="ignore", over="ignore"):
        for row in xf:
            ref += row
    got = res["portable"].view({"bfloat16": ml_dtypes.bfloat16, "float16": np.float16,
                                "float32": np.float32}[dt]).astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol={"bfloat16": 2.0**-8, "float16": 2.0**-11,
                                                         "float32": 2.0**-24}[dt], atol=0)
