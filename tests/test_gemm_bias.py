"""GEMM with a per-column bias fused into the epilogue (_C.gemm(bias=...), used by
linear and by addmm with a row-broadcast input): every implementation this CPU
can run, checked BIT for bit against a float64 oracle rounded once.

Exactness: A and B hold small integers and the bias multiples of 1/64, so every
fp32 partial sum, alpha * acc and acc + bias are exact in float32 whatever the
summation order; the only rounding is the final one to the output dtype. A path
that rounded the product first and added the bias after (two roundings, e.g. a
bf16 C pre-filled with the bias) gives different bits for many elements.
"""
import ml_dtypes
import numpy as np
import pytest

import ampy
from ampy import _C
from ampy import _gemm as G

from _helpers import AMPY_DTYPE as DT, NP_DTYPE as NP, TORCH_DTYPE as TORCH, bits

torch = pytest.importorskip("torch")



def ints(shape, seed, lo=-8, hi=9):
    return np.random.default_rng(seed).integers(lo, hi, size=shape).astype(np.float64)


def frac_bias(n, seed):
    # multiples of 1/64 in (-100, 100): not representable in bf16/f16 mostly
    return np.random.default_rng(seed).integers(-6400, 6400, size=n).astype(np.float64) / 64


def to_ampy(x64, dt):
    return ampy.from_numpy(np.ascontiguousarray(x64).astype(np.float32)).to(DT[dt])


def oracle_bits(exact64, dt):
    """float64 values (exact in float32 by construction) rounded once to dt."""
    assert np.array_equal(exact64.astype(np.float32).astype(np.float64), exact64)
    return bits(exact64.astype(NP[dt]))


SHAPES = [(64, 64, 64),     # AMX: full tiles, A read in place, row-panel order
          (96, 96, 768),    # AMX: long K, A packed, column-panel order
          (70, 45, 40),     # ragged tiles: the generic epilogue
          (33, 40, 1100)]   # K over one K block: the float32 W path


@pytest.mark.parametrize("in_dt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("bias_dt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("mnk", SHAPES, ids=str)
def test_bias_bits_vs_float64(impl, in_dt, bias_dt, mnk):
    m, n, k = mnk
    lo, hi = (-4, 5) if k > 500 else (-8, 9)
    a64, b64 = ints((m, k), 1, lo, hi), ints((k, n), 2, lo, hi)
    bias64 = frac_bias(n, 3)
    if bias_dt != "float32":  # a bias exactly representable in its own dtype
        bias64 = bias64.astype(NP[bias_dt]).astype(np.float64)
    a, b, bias = to_ampy(a64, in_dt), to_ampy(b64, in_dt), to_ampy(bias64, bias_dt)
    exact = a64 @ b64 + bias64
    for out_dt in {in_dt, "float32"}:
        got = _C.gemm(a, b, out_dtype=DT[out_dt], bias=bias)
        assert got.dtype is DT[out_dt]
        np.testing.assert_array_equal(bits(got), oracle_bits(exact, out_dt))


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_bias_transposed_strided_alpha_beta(impl, dt, ta, tb):
    m, n, k = 64, 96, 96
    a64, b64 = ints((m, k), 4), ints((k, n), 5)
    bias_full = frac_bias(2 * n, 6)
    a = to_ampy(a64.T, dt).T if ta else to_ampy(a64, dt)
    b = to_ampy(b64.T, dt).T if tb else to_ampy(b64, dt)
    bias = to_ampy(bias_full, "float32")[::2]  # stride 2
    assert bias.stride() == (2,)
    # alpha = 0.5 and beta = 2 keep everything exact; C pre-filled (beta path)
    c64 = ints((m, n), 7)
    out = to_ampy(c64, dt)
    got = _C.gemm(a, b, out=out, alpha=0.5, beta=2.0, bias=bias)
    assert got is out
    exact = 0.5 * (a64 @ b64) + 2.0 * c64 + bias_full[::2]
    np.testing.assert_array_equal(bits(out), oracle_bits(exact, dt))


def test_bias_scalar_broadcast_and_batched(impl):
    a64, b64 = ints((3, 32, 64), 8), ints((3, 64, 32), 9)
    a, b = to_ampy(a64, "bfloat16"), to_ampy(b64, "bfloat16")
    one = to_ampy(np.array([0.3125 + 1 / 64]), "float32")
    bias = one.expand(32)
    assert bias.stride() == (0,)
    got = _C.gemm(a, b, bias=bias)
    exact = a64 @ b64 + (0.3125 + 1 / 64)
    np.testing.assert_array_equal(bits(got), oracle_bits(exact, "bfloat16"))


def test_bias_special_values(impl):
    """NaN/inf in the bias propagate; a float32-subnormal result rounds to the
    bf16 subnormal elem.h gives (the fast AMX rounding flushes those, so it
    must fall back); a value past bf16's largest rounds to inf."""
    m, n, k = 32, 64, 32
    a64 = np.zeros((m, k))
    a64[1] = 1.0
    b64 = np.ones((k, n))
    bias32 = np.full(n, 1.5e-39, dtype=np.float32)  # float32 subnormal
    bias32[3], bias32[4], bias32[5] = np.nan, np.inf, -np.inf
    bias32[6] = 3.4e38  # past halfway above bf16's largest: rounds to inf
    a, b = to_ampy(a64, "bfloat16"), to_ampy(b64, "bfloat16")
    got = _C.gemm(a, b, bias=ampy.from_numpy(bias32))
    exact = (a64 @ b64).astype(np.float32) + bias32
    want = exact.astype(ml_dtypes.bfloat16)
    g = got.float().numpy()
    assert np.isnan(g[:, 3]).all() and (bits(got)[:, 3] == 0x7FC0).all()
    finite = ~np.isnan(exact)
    np.testing.assert_array_equal(bits(got)[finite],
                                  want.view(np.uint16)[finite])
    assert bits(got)[0, 0] != 0  # a subnormal, not flushed to zero


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16"])
def test_linear_bias_bits_vs_oracle_and_torch(dt):
    x64, w64, b64 = ints((4, 16, 64), 10), ints((96, 64), 11), frac_bias(96, 12)
    x, w, b = to_ampy(x64, dt), to_ampy(w64, dt), to_ampy(b64.astype(NP[dt]).astype(np.float64), dt)
    bexact = b64.astype(NP[dt]).astype(np.float64)
    got = ampy.nn.functional.linear(x, w, b)
    assert tuple(got.shape) == (4, 16, 96)
    exact = x64 @ w64.T + bexact
    np.testing.assert_array_equal(bits(got), oracle_bits(exact, dt))
    tx, tw, tb = (torch.from_numpy(v.astype(np.float32)).to(TORCH[dt]) for v in (x64, w64, bexact))
    theirs = torch.nn.functional.linear(tx, tw, tb)
    np.testing.assert_array_equal(bits(got), theirs.float().numpy().astype(NP[dt]).view(
        np.uint32 if dt == "float32" else np.uint16))


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
@pytest.mark.parametrize("form", ["1d", "row", "expanded", "full", "scalar"])
def test_addmm_row_input_one_rounding(dt, form):
    m, n, k = 64, 32, 64
    m1, m2, r64 = ints((m, k), 13), ints((k, n), 14), frac_bias(n, 15)
    r64 = r64.astype(NP[dt]).astype(np.float64)
    row = to_ampy(r64, dt)
    inp = {"1d": row, "row": row.reshape(1, n), "expanded": row.reshape(1, n).expand(m, n),
           "full": to_ampy(np.broadcast_to(r64, (m, n)), dt),
           "scalar": to_ampy(np.array(r64[0]), dt)}[form]
    rb = r64 if form != "scalar" else r64[0]
    got = G.addmm(inp, to_ampy(m1, dt), to_ampy(m2, dt), beta=2, alpha=0.5)
    exact = 0.5 * (m1 @ m2) + 2 * np.broadcast_to(rb, (m, n))
    np.testing.assert_array_equal(bits(got), oracle_bits(exact, dt))
    # torch agrees bit for bit on these exact inputs
    t = lambda v: torch.from_numpy(np.asarray(v, dtype=np.float32)).to(TORCH[dt])
    tin = {"1d": t(r64), "row": t(r64).reshape(1, n), "expanded": t(r64).reshape(1, n).expand(m, n),
           "full": t(np.broadcast_to(r64, (m, n))), "scalar": t(r64[0])}[form]
    theirs = torch.addmm(tin, t(m1), t(m2), beta=2, alpha=0.5)
    np.testing.assert_array_equal(bits(got), theirs.float().numpy().astype(NP[dt]).view(
        np.uint32 if dt == "float32" else np.uint16))


def test_bias_errors_name_the_argument_and_leave_out_unchanged():
    a, b = ampy.ones(4, 5, dtype=ampy.bfloat16), ampy.ones(5, 6, dtype=ampy.bfloat16)
    out = ampy.full((4, 6), 7.0, dtype=ampy.bfloat16)
    cases = [(ampy.ones(5), ValueError), (ampy.ones(2, 6), ValueError),
             (ampy.ones(6, dtype=ampy.float64), TypeError),
             (ampy.ones(6, dtype=ampy.int32), TypeError), ("nope", TypeError)]
    for bias, exc in cases:
        with pytest.raises(exc, match="bias"):
            _C.gemm(a, b, out=out, beta=1.0, bias=bias)
        assert (out.float().numpy() == 7.0).all()
    with pytest.raises(TypeError, match="bias"):
        ampy.nn.functional.linear(ampy.ones(4, 5), ampy.ones(6, 5),
                                  ampy.ones(6, dtype=ampy.bfloat16))


def test_linear_bias_broadcast_shapes():
    x, w = ampy.ones(3, 4), ampy.ones(5, 4)
    for bias in (ampy.full((1,), 2.0), ampy.full((), 2.0)):
        np.testing.assert_array_equal(ampy.nn.functional.linear(x, w, bias).numpy(),
                                      np.full((3, 5), 6.0, np.float32))
    with pytest.raises(Exception):
        ampy.nn.functional.linear(x, w, ampy.ones(4))
