"""Element-wise math vs independent oracles: NumPy float64 (rounded once to the
result dtype), torch for promotion and half-precision arithmetic semantics,
exact NumPy int64 for integer ops."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import ampy
from ampy import _C
from _helpers import (FLOAT_DTYPES, NP_DTYPE as NP, SHORT, TORCH_DTYPE as TORCH, assert_close_ulps,
                      assert_same_bits, bits, requires_cuda, sample, stable_seed, sync_checks,
                      ulp_distance)

FLOATS = ["float32", "float16", "bfloat16", "float64"]
ALL = FLOATS + ["int64", "int32", "uint8", "bool"]


def A(x, dtype):
    return ampy.tensor(np.asarray(x).astype(NP[dtype]))


def check_close(got_t, ref64, dtype, ulps, atol=0.0):
    got = got_t.numpy()
    assert got.dtype == NP[dtype], (got.dtype, dtype)
    ref = np.asarray(ref64, dtype=np.float64).astype(NP[dtype])
    d = ulp_distance(got, ref)
    near = np.abs(got.astype(np.float64) - ref.astype(np.float64)) <= atol
    bad = (d > ulps) & ~near
    assert not bad.any(), (f"{bad.sum()} mismatches, e.g. got {got[bad][:4]} want "
                           f"{ref[bad][:4]} (inputs rounded); max ulp {d.max()}")


# ---- unary ops vs float64 --------------------------------------------------------
def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


# name -> (ampy fn, float64 reference, input range, extra ulps for f32 composites, atol)
UNARY = {
    "abs": (ampy.abs, np.abs, (-5, 5), 0), "neg": (ampy.neg, np.negative, (-5, 5), 0),
    "reciprocal": (ampy.reciprocal, lambda x: 1 / x, (0.1, 5), 0),
    "square": (ampy.square, np.square, (-5, 5), 0),
    "sign": (ampy.sign, np.sign, (-3, 3), 0),
    "exp": (ampy.exp, np.exp, (-8, 8), 1), "expm1": (ampy.expm1, np.expm1, (-3, 3), 1),
    "exp2": (ampy.exp2, np.exp2, (-8, 8), 1),
    "log": (ampy.log, np.log, (0.01, 50), 1), "log1p": (ampy.log1p, np.log1p, (-0.9, 50), 1),
    "log2": (ampy.log2, np.log2, (0.01, 50), 1), "log10": (ampy.log10, np.log10, (0.01, 50), 1),
    "sqrt": (ampy.sqrt, np.sqrt, (0, 50), 0), "rsqrt": (ampy.rsqrt, lambda x: 1 / np.sqrt(x),
                                                        (0.01, 50), 1),
    "sin": (ampy.sin, np.sin, (-6, 6), 1), "cos": (ampy.cos, np.cos, (-6, 6), 1),
    "tanh": (ampy.tanh, np.tanh, (-5, 5), 1), "atan": (ampy.atan, np.arctan, (-5, 5), 1),
    "sigmoid": (ampy.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-10, 10), 2),
    "relu": (ampy.relu, lambda x: np.maximum(x, 0), (-5, 5), 0),
    "gelu": (ampy.gelu, _gelu, (-5, 5), 4, 1e-6),
    "gelu_tanh": (lambda t: ampy.gelu(t, approximate="tanh"), _gelu_tanh, (-5, 5), 4, 1e-6),
    "erf": (ampy.erf, np.vectorize(math.erf), (-3, 3), 1),
    "silu": (ampy.silu, lambda x: x / (1 + np.exp(-x)), (-8, 8), 2),
    "softplus": (ampy.softplus, _softplus, (-10, 25), 2),
    "leaky_relu": (ampy.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x), (-5, 5), 1),
    "floor": (ampy.floor, np.floor, (-5, 5), 0), "ceil": (ampy.ceil, np.ceil, (-5, 5), 0),
    "round": (ampy.round, np.round, (-5, 5), 0), "trunc": (ampy.trunc, np.trunc, (-5, 5), 0),
}


# float64 ops computed by glibc's libm, whose documented error exceeds the table's budget
# against a NumPy oracle that has its own error: tanh is glibc's (up to 2 ulp from the
# exact value, checked with mpmath over 2M points in [-10, 10]) while NumPy's SIMD tanh
# is within 1 ulp on the other side, so the two may be 3 ulp apart.
F64_ORACLE_ULPS = {"tanh": 1}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_vs_float64(name, dtype, cpu_path):
    fn, ref, (lo, hi), extra, *atol = UNARY[name]
    rng = np.random.default_rng(stable_seed(name, dtype))
    n = 200 if SHORT else 2000
    x = rng.uniform(lo, hi, size=(n // 40, 40)).astype(NP[dtype])
    if name in ("floor", "ceil", "round", "trunc"):
        x[:, :4] = np.array([0.5, 1.5, -2.5, -0.5]).astype(NP[dtype])  # ties
    t = ampy.tensor(x).t()  # a non-contiguous view
    got = fn(t)
    r = ref(x.astype(np.float64).T)
    ulps = (1 if dtype in ("float16", "bfloat16") else 1 + extra)
    if dtype == "float64":  # libm's float64 functions and the NumPy oracle each carry error
        ulps += F64_ORACLE_ULPS.get(name, 0)
    check_close(got, r, dtype, 0 if extra == 0 and name != "rsqrt" else ulps,
                (atol[0] * (1e-7 if dtype == "float64" else 1.0)) if atol else 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid", "gelu", "sqrt", "silu"])
def test_unary_half_vs_torch(name, dtype):
    rng = np.random.default_rng(5)
    x = torch.tensor(rng.uniform(0.05, 4, 777)).to(TORCH[dtype])
    want = getattr(torch.nn.functional, name, None) or getattr(torch, name)
    got = getattr(ampy, name)(ampy.tensor(x.float().numpy()).to(dtype))
    w = want(x).float().numpy()
    g = got.float().numpy()
    d = ulp_distance(got.numpy(), torch.tensor(w).to(TORCH[dtype]).view(torch.int16 if dtype !=
                 "float32" else torch.int32).numpy().view(got.numpy().dtype))
    # float32: torch uses Sleef vector approximations (gelu up to 4 ulp apart)
    tol = 4 if dtype == "float32" else 1
    assert d.max() <= tol, (g[d > tol][:5], w[d > tol][:5])


# ---- binary ops vs float64 with broadcasting ------------------------------------------
BINARY = {
    "add": (ampy.add, np.add), "sub": (ampy.sub, np.subtract), "mul": (ampy.mul, np.multiply),
    "div": (ampy.div, np.divide), "maximum": (ampy.maximum, np.maximum),
    "minimum": (ampy.minimum, np.minimum), "atan2": (ampy.atan2, np.arctan2),
    "pow": (ampy.pow, np.power),
}


@given(data=st.data())
def test_binary_broadcast_float(data, cpu_path):
    name = data.draw(st.sampled_from(sorted(BINARY)))
    da, db = data.draw(st.sampled_from(FLOATS)), data.draw(st.sampled_from(FLOATS))
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                         max_side=5))
    sa, sb = shapes.input_shapes
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    lo = 0.1 if name == "pow" else -4
    a = rng.uniform(lo, 4, sa).astype(NP[da])
    b = rng.uniform(0.5 if name in ("div", "pow") else -4, 4, sb).astype(NP[db])
    fn, ref = BINARY[name]
    ta, tb = ampy.tensor(a), ampy.tensor(b)
    if data.draw(st.booleans()) and len(sa) >= 2:  # same values through a transposed view
        ta = ampy.tensor(np.ascontiguousarray(a.swapaxes(0, 1))).transpose(0, 1)
    got = fn(ta, tb)
    rt = str(torch.result_type(torch.tensor(a.astype(np.float64)).to(TORCH[da]),
                               torch.tensor(b.astype(np.float64)).to(TORCH[db]))).split(".")[1]
    assert got.dtype is getattr(ampy, rt)
    assert tuple(got.shape) == shapes.result_shape
    # torch's CPU kernels read n-d operands in the result dtype and a 0-d operand as a
    # scalar in the op's compute dtype (float32 for half/float32 results), so a 0-d
    # float64 operand of a float32 op is rounded to float32 first; the oracle does the same
    opmath = "float64" if rt == "float64" else "float32"

    def as_read(x):
        return x.astype(NP[opmath if x.ndim == 0 else rt]).astype(np.float64)

    r = ref(as_read(a), as_read(b))
    check_close(got, r, rt, 0 if name in ("add", "sub", "mul", "div", "maximum", "minimum")
                and rt != "float64" else 2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("scalar", [0.1, 3, -2.5, True])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "lt", "ge", "eq", "remainder"])
def test_half_scalar_arith_matches_torch_bits(op, scalar, dtype, cpu_path):
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.normal(0, 30, 1000)).to(TORCH[dtype])
    if op == "sub" and scalar is True:
        scalar = 1
    w = getattr(torch, op)(x, scalar)
    g = getattr(ampy, op)(ampy.tensor(x.float().numpy()).to(dtype), scalar)
    assert g.dtype.name == str(w.dtype).split(".")[1]
    if op == "eq":
        x[:50] = torch.tensor(0.1).to(x.dtype)  # values equal to the rounded scalar
        w, g = x == 0.1, ampy.tensor(x.float().numpy()).to(dtype) == 0.1
    assert np.array_equal(g.float().numpy(), w.float().numpy(), equal_nan=True)


@pytest.mark.parametrize("alpha", [2, 0.5, -1.25])
def test_add_alpha_matches_torch(alpha):
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=300).astype(np.float32), rng.normal(size=300).astype(np.float32)
    w = torch.add(torch.tensor(a), torch.tensor(b), alpha=alpha).numpy()
    g = ampy.add(ampy.tensor(a), ampy.tensor(b), alpha=alpha).numpy()
    assert np.abs(g - w).max() <= 1e-6 * np.abs(w).max()
    g2 = ampy.sub(ampy.tensor(a), ampy.tensor(b), alpha=alpha).numpy()
    assert np.allclose(g2, a.astype(np.float64) - alpha * b.astype(np.float64), rtol=1e-6,
                       atol=1e-6)


# ---- type promotion vs torch.result_type -------------------------------------------
def _tt(dtype, zero_dim):
    v = np.ones(() if zero_dim else (2,), dtype=np.float64)
    return torch.tensor(v).to(TORCH[dtype]), ampy.tensor(v).to(dtype)


@pytest.mark.parametrize("kind", ["dim-dim", "dim-zero", "zero-dim", "zero-zero"])
def test_result_type_all_pairs(kind):
    for da in ALL:
        for db in ALL:
            ta, aa = _tt(da, kind.startswith("zero"))
            tb, ab = _tt(db, kind.endswith("zero"))
            want = str(torch.result_type(ta, tb)).split(".")[1]
            assert ampy.result_type(aa, ab).name == want, (da, db, kind)
            if not (da == db == "bool"):
                assert (aa + ab).dtype.name == str((ta + tb).dtype).split(".")[1]


@pytest.mark.parametrize("scalar", [True, 2, -3, 2.5, float("inf")])
@pytest.mark.parametrize("zero_dim", [False, True])
def test_result_type_with_scalars(scalar, zero_dim):
    for d in ALL:
        tt, at = _tt(d, zero_dim)
        want = str(torch.result_type(tt, scalar)).split(".")[1]
        assert ampy.result_type(at, scalar).name == want, (d, scalar)
        assert ampy.result_type(scalar, at).name == want
        for op in ("mul", "div", "lt", "add"):
            w = getattr(torch, op)(tt, scalar).dtype
            assert getattr(ampy, op)(at, scalar).dtype.name == str(w).split(".")[1], (op, d)


def test_unary_int_to_float_and_same_dtype_ops():
    i = ampy.tensor([1, 2, 3])
    assert ampy.exp(i).dtype is ampy.float32 and ampy.sqrt(i).dtype is ampy.float32
    assert ampy.abs(i).dtype is ampy.int64 and ampy.floor(i).dtype is ampy.int64
    assert ampy.isnan(i).dtype is ampy.bool and not ampy.isnan(i).any()
    ampy.set_default_dtype(ampy.float64)
    try:
        assert ampy.exp(i).dtype is ampy.float64 and (i * 0.5).dtype is ampy.float64
    finally:
        ampy.set_default_dtype(ampy.float32)


# ---- integer ops: exact vs NumPy int64 -----------------------------------------------
INT_OPS = {
    "add": (ampy.add, np.add), "sub": (ampy.sub, np.subtract), "mul": (ampy.mul, np.multiply),
    "floor_divide": (ampy.floor_divide, np.floor_divide),
    "remainder": (ampy.remainder, np.remainder), "fmod": (ampy.fmod, np.fmod),
    "maximum": (ampy.maximum, np.maximum), "minimum": (ampy.minimum, np.minimum),
    "bitwise_and": (ampy.bitwise_and, np.bitwise_and), "bitwise_xor": (ampy.bitwise_xor,
                                                                       np.bitwise_xor),
    "lt": (ampy.lt, np.less), "eq": (ampy.eq, np.equal), "ge": (ampy.ge, np.greater_equal),
}


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("name", sorted(INT_OPS))
def test_integer_ops_exact(name, dtype, cpu_path):
    rng = np.random.default_rng(3)
    info = np.iinfo(NP[dtype])
    lo, hi = (max(info.min, -10**6), min(info.max, 10**6)) if dtype != "uint8" else (0, 255)
    a = rng.integers(lo, hi, (7, 9), dtype=NP[dtype])
    b = rng.integers(lo, hi, (9,), dtype=NP[dtype])
    b[b == 0] = 3
    fn, ref = INT_OPS[name]
    got = fn(ampy.tensor(a), ampy.tensor(b)).numpy()
    with np.errstate(over="ignore"):
        want = ref(a, b)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_integer_pow_and_wraparound():
    a = np.array([2, -3, 7, 0, 1, -1], dtype=np.int64)
    assert np.array_equal(ampy.pow(ampy.tensor(a), 5).numpy(), a ** 5)
    big = np.array([2**62, -2**63], dtype=np.int64)
    with np.errstate(over="ignore"):
        assert np.array_equal((ampy.tensor(big) * 4).numpy(), big * 4)
    with pytest.raises(RuntimeError, match="negative integer powers"):
        ampy.pow(ampy.tensor(a), -1)
    with pytest.raises(RuntimeError, match="ZeroDivision"):
        ampy.floor_divide(ampy.tensor(a), 0)


def test_float_floor_divide_remainder_match_torch():
    rng = np.random.default_rng(4)
    a = rng.uniform(-10, 10, 500).astype(np.float32)
    b = rng.choice([-3.0, -0.7, 0.0, 0.7, 2.0, 3.0], 500).astype(np.float32)
    for op in ("floor_divide", "remainder", "fmod"):
        w = getattr(torch, op)(torch.tensor(a), torch.tensor(b)).numpy()
        g = getattr(ampy, op)(ampy.tensor(a), ampy.tensor(b)).numpy()
        assert np.array_equal(g, w, equal_nan=True), op


def test_bool_ops():
    a, b = ampy.tensor([True, False, True]), ampy.tensor([True, True, False])
    assert (a & b).tolist() == [True, False, False] and (~a).tolist() == [False, True, False]
    assert (a + b).dtype is ampy.bool and (a + b).tolist() == [True, True, True]
    assert ampy.logical_xor(a, b).tolist() == [False, True, True]
    with pytest.raises(TypeError, match="bool"):
        a - b
    with pytest.raises(TypeError, match="bool"):
        -a


# ---- ternary ops, activations, clamp --------------------------------------------------
def test_where_lerp_addcmul_addcdiv(cpu_path):
    rng = np.random.default_rng(6)
    a, b, c = (rng.normal(size=(4, 5)).astype(np.float32) for _ in range(3))
    ta, tb, tc = ampy.tensor(a), ampy.tensor(b), ampy.tensor(c)
    T = torch.tensor
    assert np.array_equal(ampy.where(ta > 0, ta, tb).numpy(), np.where(a > 0, a, b))
    assert np.array_equal(ampy.where(ta > 0, ta, 0.0).numpy(), np.where(a > 0, a, 0))
    w = rng.uniform(0, 1, (5,)).astype(np.float32)
    assert np.allclose(ampy.lerp(ta, tb, ampy.tensor(w)).numpy(),
                       torch.lerp(T(a), T(b), T(w)).numpy(), rtol=1e-6, atol=1e-6)
    assert np.allclose(ampy.lerp(ta, tb, 0.3).numpy(), torch.lerp(T(a), T(b), 0.3).numpy(),
                       rtol=1e-6, atol=1e-6)
    for op in ("addcmul", "addcdiv"):
        g = getattr(ampy, op)(ta, tb, tc, value=0.5).numpy()
        w2 = getattr(torch, op)(T(a), T(b), T(c), value=0.5).numpy()
        assert np.allclose(g, w2, rtol=1e-6, atol=1e-6), op


def test_clamp_forms_and_nan(cpu_path):
    x = ampy.tensor([-2.0, -0.5, float("nan"), 0.5, 3.0])
    tx = torch.tensor([-2.0, -0.5, float("nan"), 0.5, 3.0])
    for lo, hi in ((-1, 1), (None, 0.0), (0, None), (1.0, -1.0)):
        assert np.array_equal(ampy.clamp(x, lo, hi).numpy(), torch.clamp(tx, lo, hi).numpy(),
                              equal_nan=True)
    lo_t = ampy.tensor([0.0, 0, 0, 0, float("nan")])
    assert np.array_equal(ampy.clamp(x, lo_t).numpy(),
                          torch.clamp(tx, torch.tensor([0.0, 0, 0, 0, float("nan")])).numpy(),
                          equal_nan=True)
    i = ampy.tensor([1, 5, 9])
    assert ampy.clamp(i, max=4).dtype is ampy.int64 and ampy.clamp(i, max=4).tolist() == [1, 4, 4]
    assert ampy.clamp(i, min=2.5).dtype is ampy.float32
    with pytest.raises(RuntimeError, match="At least one"):
        ampy.clamp(x)


def test_nan_inf_propagation(cpu_path):
    nan, inf = float("nan"), float("inf")
    a = ampy.tensor([nan, 1.0, -inf, inf, 0.0])
    b = ampy.tensor([0.0, nan, 0.0, 1.0, -0.0])
    ta, tb = torch.tensor(a.numpy()), torch.tensor(b.numpy())
    for op in ("maximum", "minimum", "fmax", "fmin", "add", "mul"):
        assert np.array_equal(getattr(ampy, op)(a, b).numpy(), getattr(torch, op)(ta, tb).numpy(),
                              equal_nan=True), op
    assert np.isnan(ampy.relu(a).numpy()[0])
    assert ampy.isnan(a).tolist() == [True, False, False, False, False]
    assert ampy.isinf(a).tolist() == [False, False, True, True, False]
    assert ampy.isfinite(a).tolist() == [False, True, False, False, True]
    assert np.array_equal(ampy.sign(a).numpy(), torch.sign(ta).numpy(), equal_nan=True)


# ---- in-place semantics ------------------------------------------------------------------
def test_inplace_semantics():
    i = ampy.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        i.add_(1.5)
    assert i.tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the "
                                           r"broadcast shape \[2, 3\]"):
        ampy.tensor([1.0, 2, 3]).add_(ampy.ones(2, 3))
    h = ampy.tensor([1.0, 2.0, 3.0]).half()
    f = ampy.tensor([1e-4, 1e-3, 0.3])
    h2 = h.clone()
    h2.add_(f)  # computed in float32, rounded once into float16
    want = (torch.tensor([1.0, 2, 3]).half().add_(torch.tensor([1e-4, 1e-3, 0.3]))).float()
    assert np.array_equal(h2.float().numpy(), want.numpy())
    x = ampy.tensor(np.arange(12.0).reshape(3, 4).astype(np.float32))
    v0 = x._version
    col = x[:, 1]
    col.mul_(10)
    assert x.numpy()[:, 1].tolist() == [10.0, 50.0, 90.0] and x._version > v0
    y = x.clone()
    y += 1
    y -= 2
    y *= 3
    y /= 3
    assert np.allclose(y.numpy(), x.numpy() - 1)
    z = ampy.tensor(np.arange(6.0))
    z[1:].add_(z[:-1])  # overlapping source: reads the old values
    assert z.tolist() == [0.0, 1.0, 3.0, 5.0, 7.0, 9.0]
    with pytest.raises(RuntimeError, match="single memory location"):
        ampy.zeros(3).expand(2, 3).add_(1)
    out = ampy.empty(3)
    r = ampy.add(ampy.ones(3), 2, out=out)
    assert r is out and out.tolist() == [3.0, 3.0, 3.0]


# ---- empty and 0-d ------------------------------------------------------------------------
def test_empty_and_zero_dim():
    e = ampy.zeros(0, 3)
    assert tuple((e + 1).shape) == (0, 3) and tuple((e * ampy.ones(3)).shape) == (0, 3)
    assert tuple(ampy.exp(e).shape) == (0, 3)
    s = ampy.tensor(2.0)
    assert (s * 3).ndim == 0 and (s * 3).item() == 6.0
    assert (ampy.tensor([1, 2]).half() * ampy.tensor(3.0)).dtype is ampy.float16
    assert (ampy.tensor([1, 2]) * ampy.tensor(2.5)).dtype is ampy.float32


# ---- SIMD vs portable -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_paths_agree(dtype, cpu_path):
    rng = np.random.default_rng(7)
    x = rng.normal(0, 100, 5000)
    x[:4] = [np.nan, np.inf, -np.inf, 6e4]
    a = ampy.tensor(x).to(dtype)
    got = (a * 1.5 + a).numpy()
    xr = x.astype(NP[dtype]).astype(np.float32)
    with np.errstate(over="ignore"):
        r1 = (xr * np.float32(1.5)).astype(NP[dtype]).astype(np.float32)  # rounded once per op
        ref = (r1 + xr).astype(NP[dtype])
    assert np.array_equal(got.astype(np.float64), ref.astype(np.float64), equal_nan=True)


def test_large_threaded_matches_numpy(cpu_path):
    n = 1 << 18 if SHORT else 1 << 21
    rng = np.random.default_rng(8)
    a, b = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    ampy.set_num_threads(2)
    assert np.array_equal((ampy.tensor(a) + ampy.tensor(b)).numpy(), a + b)
    assert np.array_equal(ampy.exp(ampy.tensor(a)).numpy(), torch.exp(torch.tensor(a)).numpy()) \
        or ulp_distance(ampy.exp(ampy.tensor(a)).numpy(), np.exp(a.astype(np.float64)).astype(
            np.float32)).max() <= 1


# ---- errors ----------------------------------------------------------------------------------
ERRORS = [
    (lambda: ampy.zeros(3, 4) + ampy.zeros(5), ValueError, r"add: shapes \(3, 4\) and \(5,\)"),
    (lambda: ampy.mul(ampy.zeros(2), "x"), TypeError, "argument 'other' must be a Tensor"),
    (lambda: ampy.exp([1.0]), TypeError, "must be a Tensor"),
    (lambda: ampy.add(1, 2), TypeError, "at least one Tensor"),
    (lambda: ampy.bitwise_and(ampy.zeros(2), ampy.zeros(2)), TypeError, "Float"),
    (lambda: ampy.where(ampy.zeros(2), 1.0, 0.0), RuntimeError, "boolean"),  # as torch
    (lambda: ampy.tensor([1]).add_(0.5), RuntimeError, "can't be cast"),
    (lambda: ampy.gelu(ampy.zeros(2), approximate="fast"), ValueError, "approximate"),
    (lambda: ampy.div(ampy.zeros(2), 1, rounding_mode="x"), ValueError, "rounding_mode"),
    (lambda: ampy.add(ampy.tensor([1]), 1, alpha=0.5), TypeError, "alpha"),
    (lambda: ampy.lerp(ampy.zeros(2), ampy.zeros(2).double(), 0.5), TypeError, "dtype"),
    (lambda: ampy.add(ampy.zeros(2), 2**70), OverflowError, "too big"),  # as torch
    (lambda: ampy.zeros(2, 3).mul_(ampy.zeros(4, 2, 3)), RuntimeError, "broadcast shape"),
    (lambda: ampy.maximum(ampy.zeros(2, 2), ampy.zeros(3)), ValueError, "cannot broadcast"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_bad_inputs(k):
    fn, exc, msg = ERRORS[k]
    with pytest.raises(exc, match=msg):
        fn()


def test_operator_fallbacks():
    x = ampy.tensor([1.0, 2.0])
    assert (x == None) is False and (x != "a") is True  # noqa: E711
    assert np.array_equal((np.array([1.0, 1.0]) + x).numpy(), [2.0, 3.0])
    assert (x + np.float32(1)).dtype is ampy.float32


# ---- the one-pass AVX-512 add/sub/mul/div (csrc/ewise.c ewx_run) ----------------------
_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38, 65504.0, 70000.0,
                     1.0 + 2.0 ** -8, 1.0 + 2.0 ** -9 + 2.0 ** -20, 6e-8, -2.0 ** -133],
                    np.float32)


def _operand(rng, dt, n):
    x = np.concatenate([rng.standard_normal(n - len(_SPECIAL)).astype(np.float32) * 50,
                        _SPECIAL])
    return ampy.tensor(rng.permutation(x)).to(getattr(ampy, dt))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "add_alpha", "sub_alpha"])
@pytest.mark.parametrize("da,db", [("float32", "bfloat16"), ("bfloat16", "float32"),
                                   ("bfloat16", "bfloat16"), ("float16", "float16"),
                                   ("float16", "float32"), ("bfloat16", "float16"),
                                   ("float32", "float32"), ("bfloat16", "scalar"),
                                   ("float16", "scalar"), ("scalar", "bfloat16")])
def test_fast_float_binary_same_bits_as_portable(op, da, db):
    """The AVX-512 one-pass path (in-register conversions, one rounding out)
    gives the generic path's bits, tails (n % 16) and specials included; the
    portable C path is the reference."""
    rng = np.random.default_rng(len(op) + len(da) * 7 + len(db) * 13)
    fn = {"add": lambda a, b: ampy.add(a, b), "sub": lambda a, b: ampy.sub(a, b),
          "mul": lambda a, b: ampy.mul(a, b), "div": lambda a, b: ampy.div(a, b),
          "add_alpha": lambda a, b: ampy.add(a, b, alpha=0.3),
          "sub_alpha": lambda a, b: ampy.sub(a, b, alpha=-1.7)}[op]
    for n in (16 * 70 + 5, 37, 3):
        n = max(n, len(_SPECIAL) + 1)
        a = 0.125 if da == "scalar" else _operand(rng, da, n)
        b = -0.37 if db == "scalar" else _operand(rng, db, n)
        got = fn(a, b)
        outs = [got]
        if not isinstance(a, float) and a.dtype is got.dtype:  # out= and in-place forms
            o = ampy.empty_like(got)
            fn_out = {"add": ampy.add, "sub": ampy.sub, "mul": ampy.mul, "div": ampy.div}
            if op in fn_out:
                fn_out[op](a, b, out=o)
                outs.append(o)
        ampy._C._set_cpu_level("portable")
        try:
            want = fn(a, b)
        finally:
            ampy._C._set_cpu_level(None)
        w = want.to(ampy.float32).numpy().view(np.uint32)
        for g in outs:
            assert g.dtype is want.dtype
            gb = g.to(ampy.float32).numpy().view(np.uint32)
            assert np.array_equal(gb, w), (op, da, db, n, np.flatnonzero(gb != w)[:5])


# ================================================================ CUDA
# Element-wise kernels (cuda/ewise.cu) on a GPU against the CPU; skipped without a GPU.
# The oracle is ampy's CPU kernel on the same inputs (itself tested against NumPy and
# torch above). Ops whose formula is pure IEEE arithmetic (ampy/ewise_expr.h,
# --fmad=false) give the CPU's bits; ops that call libm (exp, log, tanh, erf, pow, ...)
# may differ by a few ulp (CUDA libdevice against glibc).

_CODE = _C.EWISE_OPS
# ops computed with + - * / sqrt, comparisons, rounding functions: bit-exact
EXACT_UNARY = {"abs", "neg", "reciprocal", "square", "sign", "sqrt", "rsqrt", "relu", "floor",
               "ceil", "round", "trunc", "frac", "isnan", "isinf", "isfinite", "logical_not",
               "leaky_relu"}
LIBM_UNARY = {"exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sin", "cos", "tan",
              "tanh", "atan", "sigmoid", "gelu", "gelu_tanh", "erf", "silu", "softplus", "elu",
              "mish", "asin", "acos", "sinh", "cosh", "logsigmoid"}
EXACT_BINARY = {"add", "sub", "mul", "div", "maximum", "minimum", "fmax", "fmin", "fmod",
                "remainder", "floor_divide", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                "logical_or", "logical_xor"}
INT_BINARY = EXACT_BINARY - {"div"} | {"pow", "bitwise_and", "bitwise_or", "bitwise_xor"}


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(EXACT_UNARY | LIBM_UNARY))
def test_cuda_unary_vs_cpu(name, dt):
    x = sample((37, 129), dt)
    alpha = {"softplus": 1.5, "leaky_relu": 0.1, "elu": 0.7}.get(name)
    beta = 10.0 if name == "softplus" else None
    c = _C.ewise(_CODE[name], None, alpha, beta, x)
    g = _C.ewise(_CODE[name], None, alpha, beta, x.cuda())
    assert g.is_cuda and g.dtype is c.dtype and tuple(g.shape) == tuple(c.shape)
    if name in EXACT_UNARY:
        assert_same_bits(g, c)
    else:
        assert_close_ulps(g, c, c.dtype)


@requires_cuda
@pytest.mark.parametrize("name", ["abs", "neg", "square", "sign", "relu", "floor", "logical_not",
                                  "bitwise_not", "isfinite"])
@pytest.mark.parametrize("dt", [ampy.int64, ampy.int32, ampy.uint8, ampy.bool])
def test_cuda_unary_int_vs_cpu(name, dt):
    x = sample((5, 33), dt)
    try:
        c = _C.ewise(_CODE[name], None, None, None, x)
    except (TypeError, RuntimeError) as e:
        with pytest.raises(type(e)):
            _C.ewise(_CODE[name], None, None, None, x.cuda())
        return
    assert_same_bits(_C.ewise(_CODE[name], None, None, None, x.cuda()), c)


CUDA_BINARY_CASES = [(n, dt) for dt in list(FLOAT_DTYPES) + [ampy.int64, ampy.int32]
                     for n in sorted(EXACT_BINARY | INT_BINARY | {"pow", "atan2"})
                     if (n in INT_BINARY if dt in (ampy.int64, ampy.int32)
                         else not n.startswith("bitwise"))]


@requires_cuda
@pytest.mark.parametrize("name,dt", CUDA_BINARY_CASES)
def test_cuda_binary_broadcast_strided_vs_cpu(name, dt):
    is_int = dt in (ampy.int64, ampy.int32)
    a = sample((4, 1, 65), dt, 1)
    b = sample((65, 3), dt, 2).t()  # (3, 65), non-contiguous: broadcast + strides
    if is_int and name in ("fmod", "remainder", "floor_divide"):
        b = ampy.where(b == 0, ampy.ones_like(b), b)
    if is_int and name == "pow":
        b = b.abs() % 5
    c = _C.ewise(_CODE[name], None, None, None, a, b)
    g = _C.ewise(_CODE[name], None, None, None, a.cuda(), b.cuda())
    assert tuple(g.shape) == (4, 3, 65)
    if name in ("pow", "atan2") and not is_int:
        assert_close_ulps(g, c, c.dtype)
    else:
        assert_same_bits(g, c)


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16])
def test_cuda_scalars_promotion_alpha_and_inplace(dt):
    x = sample((8, 31), dt, 3)
    gx = x.cuda()
    # Python numbers (host scalars), alpha, mixed dtypes, 0-dim CPU tensors
    assert_same_bits(ampy.add(gx, 2.5, alpha=3), ampy.add(x, 2.5, alpha=3))
    assert_same_bits(ampy.sub(gx, gx * 0.5, alpha=0.25), ampy.sub(x, x * 0.5, alpha=0.25))
    assert_same_bits(gx * 3, x * 3)
    assert_same_bits(gx / 7, x / 7)
    y = sample((31,), ampy.float32, 4)
    assert_same_bits(gx + y.cuda(), x + y)  # half + float32 -> float32
    s = ampy.tensor(1.75)
    assert_same_bits(gx * s, x * s)  # a 0-dim CPU tensor joins a CUDA op
    assert_same_bits(ampy.where(gx > 0, gx, 0.0), ampy.where(x > 0, x, 0.0))
    assert_same_bits(ampy.clamp(gx, -1.0, 0.5), ampy.clamp(x, -1.0, 0.5))
    assert_same_bits(ampy.lerp(gx, gx * 2, 0.3), ampy.lerp(x, x * 2, 0.3))
    assert_same_bits(ampy.addcmul(gx, gx, gx, value=0.5), ampy.addcmul(x, x, x, value=0.5))
    assert_same_bits(ampy.addcdiv(gx, gx, gx + 4, value=2), ampy.addcdiv(x, x, x + 4, value=2))
    # in place on a strided view, and the overlapping x[1:] += x[:-1]
    cx, gy = x.clone(), gx.clone()
    cx[:, ::2].mul_(3)
    gy[:, ::2].mul_(3)
    assert_same_bits(gy, cx)
    cx[1:].add_(cx[:-1])
    gy[1:].add_(gy[:-1])
    assert_same_bits(gy, cx)


@requires_cuda
def test_cuda_integer_division_by_zero_raises_at_next_sync():
    """A deferred device-side check: no host wait at the op, the CPU's error
    at the next synchronisation (then cleared); at the op in sync-checks mode."""
    a = ampy.tensor([4, 5, 6]).cuda()
    b = ampy.tensor([1, 0, 2]).cuda()
    with sync_checks(False):
        q = ampy.floor_divide(a, b)  # queued: does not wait for the device
        with pytest.raises(RuntimeError, match="ZeroDivisionError.*synchronisation"):
            q.cpu()
        assert q.cpu().tolist()[0] == 4  # the record was cleared by the report
    with sync_checks(True):
        with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
            ampy.floor_divide(a, b)
    assert (a.cpu().tolist(), b.cpu().tolist()) == ([4, 5, 6], [1, 0, 2])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int64", "bool"])
@pytest.mark.parametrize("number", [1.0, 3.0, 2, -0.7])
def test_number_over_tensor_gives_torchs_bits(dtype, number):
    # torch computes `number / t` as t.reciprocal() * number (two roundings); a
    # correctly rounded quotient differs from it in about a quarter of float32 values
    a = np.random.default_rng(7).standard_normal(20000).astype(np.float32) * 10
    t = torch.tensor(a).to(TORCH[dtype]) if dtype != "bool" else torch.tensor(a > 0)
    x = ampy.tensor(t.numpy() if dtype != "bfloat16" else t.float().numpy())
    x = x.to(getattr(ampy, dtype))
    want, got = number / t, number / x
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(bits(got), bits(want))
    assert torch.equal(t, torch.tensor(x.float().numpy()).to(t.dtype))  # input unchanged


def test_number_over_tensor_gradient_matches_torch():
    a = np.array([0.5, -2.0, 3.0, 7.0], dtype=np.float32)
    t = torch.tensor(a, requires_grad=True)
    x = ampy.tensor(a, requires_grad=True)
    (3.0 / t).sum().backward()
    (3.0 / x).sum().backward()
    np.testing.assert_array_equal(bits(x.grad), bits(t.grad))
