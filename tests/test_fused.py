"""ampy._C.fused_*: hot-path specialisations must give the same bits as the
general kernels they replace (nn_mse_* of csrc/nn_misc.c, zeros through
copy_), and reject what they do not take with a clear error."""
import math

import numpy as np
import pytest

import ampy
from ampy import _C

from _helpers import same_bits


def _data(n, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3], n)).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    if n > 10:
        x[3], x[5], y[7] = np.inf, np.nan, -np.inf
    return ampy.tensor(x), ampy.tensor(y), rng


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 70001])
@pytest.mark.parametrize("red", [0, 1, 2])
def test_mse_matches_general_kernel_bits(n, red, cpu_path):
    x, y, rng = _data(n, n + red)
    a, b = _C.nn_mse_fwd(x, y, red), _C.fused_mse_fwd(x, y, red)
    assert a.shape == b.shape and a.numpy().tobytes() == b.numpy().tobytes()
    g = ampy.tensor(rng.standard_normal(n).astype(np.float32)) if red == 0 else \
        ampy.tensor(np.float32(0.37))
    for need in ((True, True), (True, False), (False, True), (False, False)):
        for p, q in zip(_C.nn_mse_bwd(x, y, red, g, *need), _C.fused_mse_bwd(x, y, red, g, *need)):
            assert (p is None) == (q is None)
            if p is not None:
                assert p.numpy().tobytes() == q.numpy().tobytes()


def test_mse_loss_value_and_grad_vs_float64():
    x, y, _ = _data(4097, 3)
    xs = ampy.tensor(np.nan_to_num(x.numpy(), posinf=1.0, neginf=-1.0)).requires_grad_()
    ys = ampy.tensor(np.nan_to_num(y.numpy(), posinf=1.0, neginf=-1.0))
    loss = ampy.nn.functional.mse_loss(xs, ys)
    loss.backward()
    d = xs.detach().numpy().astype(np.float64) - ys.numpy()
    np.testing.assert_allclose(loss.item(), np.mean(d * d), rtol=1e-6)
    np.testing.assert_allclose(xs.grad.numpy(), 2 * d / d.size, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int64", "bool"])
def test_zeros_bits(dtype):
    dt = getattr(ampy, dtype)
    z = _C.fused_zeros((3, 5, 7), dt)
    assert z.dtype is dt and tuple(z.shape) == (3, 5, 7) and z.is_contiguous()
    assert not np.asarray(z.numpy()).view(np.uint8).any()
    big = _C.fused_zeros((1 << 21,), dt)  # parallel path
    assert not np.asarray(big.numpy()).view(np.uint8).any()


@pytest.mark.parametrize("call,exc,words", [
    (lambda x, y: _C.fused_mse_fwd(x.to(ampy.float16), y, 1), TypeError, "'input'"),
    (lambda x, y: _C.fused_mse_fwd(x[::2], y[::2], 1), ValueError, "contiguous"),
    (lambda x, y: _C.fused_mse_fwd(x, y[:5], 1), ValueError, "same number"),
    (lambda x, y: _C.fused_mse_fwd(1, y, 1), TypeError, "'input'"),
    (lambda x, y: _C.fused_mse_fwd(x, y, 7), ValueError, "reduction"),
    (lambda x, y: _C.fused_mse_bwd(x, y, 1, x, True, True), ValueError, "'grad_output'"),
    (lambda x, y: _C.fused_zeros((-1,), ampy.float32), ValueError, "negative"),
    (lambda x, y: _C.fused_zeros((2,), "float32x"), TypeError, "dtype"),
])
def test_bad_input_raises(call, exc, words):
    x, y, _ = _data(16, 0)
    before = x.numpy().copy()
    with pytest.raises(exc, match=words):
        call(x, y)
    assert x.numpy().tobytes() == before.tobytes()


# ------------------------------------------------ one-pass backward kernels
_HALFS = ["float32", "float16", "bfloat16"]


def _pair(shape, dtype, seed, scale=3.0):
    rng = np.random.default_rng(seed)
    x = ampy.tensor((rng.standard_normal(shape) * scale).astype(np.float32)).to(dtype)
    g = ampy.tensor(rng.standard_normal(shape).astype(np.float32)).to(dtype)
    return x, g


@pytest.mark.parametrize("dt", _HALFS)
def test_relu_bwd_is_the_where_rule_bit_for_bit(dt, cpu_path):
    dtype = getattr(ampy, dt)
    y, g = _pair((37, 129), dtype, 1)
    y = ampy.relu(y)
    special = ampy.tensor(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 2.0],
                                   np.float32)).to(dtype)
    for yy, gg in ((y, g), (special, ampy.ones(8, dtype=dtype))):
        want = ampy.where(yy > 0, gg, ampy.zeros((), dtype=dtype))
        assert same_bits(_C.fused_relu_bwd(yy, gg), want)


@pytest.mark.parametrize("dt", _HALFS)
@pytest.mark.parametrize("shape", [(5, 1), (64, 515), (2, 3, 1100)])
def test_softmax_bwd_is_the_composite_rule_bit_for_bit(dt, shape, cpu_path):
    dtype = getattr(ampy, dt)
    x, g = _pair(shape, dtype, 2)
    y = ampy.softmax(x, -1)
    y32, g32 = y.to(ampy.float32), g.to(ampy.float32)
    want = (y32 * (g32 - ampy.sum(g32 * y32, -1, keepdim=True))).to(dtype)
    got = _C.fused_softmax_bwd(y, g)
    assert got.dtype is dtype and same_bits(got, want)


@pytest.mark.parametrize("dt", _HALFS)
def test_gelu_bwd_vs_float64_and_torch(dt, cpu_path):
    torch = pytest.importorskip("torch")
    dtype = getattr(ampy, dt)
    x, g = _pair((300, 1001), dtype, 3)
    got = _C.fused_gelu_bwd(x, g)
    assert got.dtype is dtype
    xd = x.to(ampy.float64).numpy()
    gd = g.to(ampy.float64).numpy()
    ref = gd * (0.5 * (1 + np.vectorize(math.erf)(xd / np.sqrt(2))) +
                xd * np.exp(-xd * xd / 2) / np.sqrt(2 * np.pi))
    tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dt]
    tt = torch.ops.aten.gelu_backward(torch.tensor(g.to(ampy.float32).numpy()).to(tdt),
                                      torch.tensor(x.to(ampy.float32).numpy()).to(tdt))
    err = np.abs(got.to(ampy.float64).numpy() - ref)
    terr = np.abs(tt.double().numpy() - ref)
    # error relative to |g| (the derivative itself is O(1)): as good as torch's, + 1 ulp
    eps = {"float32": 2 ** -23, "float16": 2 ** -10, "bfloat16": 2 ** -7}[dt]
    assert (err <= terr + 2 * eps * (np.abs(gd) + np.abs(ref))).all()


def test_gelu_bwd_specials(cpu_path):
    x = ampy.tensor(np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 100.0, -100.0, 1e-40],
                             np.float32))
    got = _C.fused_gelu_bwd(x, ampy.ones(8)).numpy()
    assert np.isnan(got[:3]).all()  # inf * exp(-inf) = inf * 0, as the composite rule
    np.testing.assert_allclose(got[3:], [0.5, 0.5, 1.0, 0.0, 0.5], rtol=1e-6, atol=1e-30)


def _gelu_der64(x):
    """gelu'(x) = Phi(x) + x phi(x) in float64 (torch's ndtr: no cancellation)."""
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(np.asarray(x, np.float64))
    return (torch.special.ndtr(t) + t * torch.exp(-t * t / 2) / math.sqrt(2 * math.pi)).numpy()


def _gelu_bwd_inputs():
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([rng.uniform(-3.9375, 3.9375, 300_000), rng.uniform(-12, 12, 100_000),
                        np.linspace(-4.5, 4.5, 100_001), bits[np.isfinite(bits)],
                        np.nextafter(np.float32(3.9375), np.float32([0, 9])),
                        -np.nextafter(np.float32(3.9375), np.float32([0, 9]))]).astype(np.float32)
    return x


def test_gelu_bwd_float32_accuracy():
    # AVX-512: |x| < 3.9375 by a piecewise polynomial of gelu' (absolute error
    # <= 7.2e-8 measured; <= 1.37 ulp of the exact value wherever |gelu'| >=
    # 1/16, i.e. 1 ulp from the correctly rounded one), other lanes by the
    # scalar Phi + x phi; portable (no FMA): Phi + x phi throughout. Bound,
    # absolute (the derivative is O(1); g = 1): 2^-23 on AVX-512 (1.04e-7
    # measured), 2^-22 portable (1.43e-7 measured); both below torch's (2.9e-7).
    torch = pytest.importorskip("torch")
    x = _gelu_bwd_inputs()
    ref = _gelu_der64(x)
    tt = torch.ops.aten.gelu_backward(torch.ones(len(x)), torch.from_numpy(x)).double().numpy()
    for level, bound in (("portable", 2.0 ** -22), (None, 2.0 ** -23)):
        ampy._C._set_cpu_level(level)
        try:
            got = _C.fused_gelu_bwd(ampy.tensor(x), ampy.ones(len(x))).numpy()
        finally:
            ampy._C._set_cpu_level(None)
        err = np.abs(got.astype(np.float64) - ref)
        assert err.max() <= bound, (level, x[np.argmax(err)], err.max())
        assert err.max() <= np.abs(tt - ref).max()
    if _C.cpu_info()["level"] in ("portable", "avx2"):
        return
    near = (np.abs(x) < 3.9375) & (np.abs(ref) >= 1 / 16)
    ulp = np.spacing(np.abs(ref[near]).astype(np.float32)).astype(np.float64)
    assert (err[near] <= 1.5 * ulp).all()


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_gelu_bwd_per_element_and_half_rounding(dt, cpu_path):
    # a lane's result never depends on its neighbours (vectors holding an
    # out-of-range lane take the scalar kernels for those lanes only), and the
    # half types give exactly the float32 result rounded once
    dtype = getattr(ampy, dt)
    rng = np.random.default_rng(12)
    x = rng.uniform(-3.9, 3.9, 4099).astype(np.float32)
    g = rng.standard_normal(4099).astype(np.float32)
    xt, gt = ampy.tensor(x).to(dtype), ampy.tensor(g).to(dtype)
    alone = _C.fused_gelu_bwd(xt, gt).to(ampy.float32).numpy()
    specials = np.array([np.nan, np.inf, -np.inf, 5.0, -5.0, 1e30, -20.0, 3.9375], np.float32)
    mixed_x = x.copy()
    mixed_x[1::3] = specials[np.arange(len(x[1::3])) % len(specials)]
    got = _C.fused_gelu_bwd(ampy.tensor(mixed_x).to(dtype), gt).to(ampy.float32).numpy()
    keep = np.ones(len(x), bool)
    keep[1::3] = False
    assert np.array_equal(got[keep].view(np.int32), alone[keep].view(np.int32))
    if dt != "float32":  # vs the float32 kernel on the converted inputs, then rounded
        x32, g32 = ampy.tensor(mixed_x).to(dtype).to(ampy.float32), gt.to(ampy.float32)
        want = _C.fused_gelu_bwd(x32, g32).to(dtype).to(ampy.float32).numpy()
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        assert np.array_equal(got[ok].view(np.int32), want[ok].view(np.int32))


def test_backward_uses_fused_rules_and_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((8, 16, 33)).astype(np.float32)
    for name, fa, ft in (("gelu", ampy.nn.functional.gelu, torch.nn.functional.gelu),
                         ("relu", ampy.relu, torch.relu),
                         ("softmax", lambda t: ampy.softmax(t, -1), lambda t: torch.softmax(t, -1))):
        a = ampy.tensor(xs).to(ampy.bfloat16).requires_grad_()
        t = torch.tensor(xs).to(torch.bfloat16).requires_grad_()
        w = rng.standard_normal(xs.shape).astype(np.float32)
        (fa(a).to(ampy.float32) * ampy.tensor(w)).sum().backward()
        (ft(t).float() * torch.tensor(w)).sum().backward()
        assert a.grad.dtype is ampy.bfloat16, name
        np.testing.assert_allclose(a.grad.to(ampy.float32).numpy(), t.grad.float().numpy(),
                                   rtol=2 ** -7, atol=2 ** -7, err_msg=name)


@pytest.mark.parametrize("fn", ["fused_relu_bwd", "fused_gelu_bwd", "fused_softmax_bwd"])
def test_backward_kernels_bad_input(fn):
    f = getattr(_C, fn)
    a, g = ampy.ones(4, 6), ampy.ones(4, 6)
    with pytest.raises(TypeError, match="grad_output"):
        f(a, g.to(ampy.float16))
    with pytest.raises(ValueError, match="shape"):
        f(a, ampy.ones(6, 4))
    with pytest.raises(ValueError, match="contiguous"):
        f(a.t(), ampy.ones(6, 4))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        f(a.to(ampy.float64), g.to(ampy.float64))
    with pytest.raises(TypeError):
        f(a)


def test_gelu_bwd_far_range_relative_accuracy(cpu_path):
    # 3.9375 <= |x| <= 14.5 (AVX-512: gelu_bwd_far_vec; portable: Phi + x phi):
    # for x < 0 gelu' is tiny (down to 1e-44), so it is checked in ulps of the
    # float64 value Phi(x) + x phi(x) with Phi from math.erfc (torch's ndtr
    # loses digits in this tail); torch's own gelu_backward is off by up to
    # ~1.7e7 ulp here (1 + erf cancels). A lane's result must not depend on
    # a neighbour above 14.5 (which takes the scalar kernels). The portable
    # build keeps 0.5 + 0.5 erf for Phi (absolute accuracy only).
    if _C.cpu_info()["level"] in ("portable", "avx2"):
        pytest.skip("the far arm is AVX-512 only")
    rng = np.random.default_rng(21)
    x = np.concatenate([-rng.uniform(3.9375, 14.5, 40000), rng.uniform(3.9375, 14.5, 40000),
                        [-3.9375, 3.9375, -14.5, 14.5]]).astype(np.float32)
    xd = x.astype(np.float64)
    erfc = np.vectorize(math.erfc)
    ref = 0.5 * erfc(-xd / math.sqrt(2)) + xd * np.exp(-xd * xd / 2) / math.sqrt(2 * math.pi)
    got = _C.fused_gelu_bwd(ampy.tensor(x), ampy.ones(len(x))).numpy()
    ulp = np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32))
    normal = np.abs(ref) > 1e-30
    assert ulp[(x < 0) & normal].max() <= 16
    assert ulp[x > 0].max() <= 1
    # the same values with a lane above 14.5 in every vector of 16
    m = np.repeat(x[:, None], 16, axis=1)
    m[:, 7] = 30.0
    mixed = _C.fused_gelu_bwd(ampy.tensor(m.ravel()), ampy.ones(m.size)).numpy().reshape(-1, 16)
    assert np.array_equal(mixed[:, 0].view(np.int32), got.view(np.int32))
