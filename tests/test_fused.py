"""ampy._C.fused_*: hot-path specialisations must give the same bits as the
general kernels they replace (nn_mse_* of csrc/nn_misc.c, zeros through
copy_), and reject what they do not take with a clear error."""
import math

import numpy as np
import pytest

import ampy
from ampy import _C


def _data(n, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3], n)).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    if n > 10:
        x[3], x[5], y[7] = np.inf, np.nan, -np.inf
    return ampy.tensor(x), ampy.tensor(y), rng


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 70001])
@pytest.mark.parametrize("red", [0, 1, 2])
def test_mse_matches_general_kernel_bits(n, red):
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


def _bits(t):
    return t.to(ampy.float32).numpy().tobytes()


@pytest.mark.parametrize("dt", _HALFS)
def test_relu_bwd_is_the_where_rule_bit_for_bit(dt):
    dtype = getattr(ampy, dt)
    y, g = _pair((37, 129), dtype, 1)
    y = ampy.relu(y)
    special = ampy.tensor(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 2.0],
                                   np.float32)).to(dtype)
    for yy, gg in ((y, g), (special, ampy.ones(8, dtype=dtype))):
        want = ampy.where(yy > 0, gg, ampy.zeros((), dtype=dtype))
        assert _bits(_C.fused_relu_bwd(yy, gg)) == _bits(want)


@pytest.mark.parametrize("dt", _HALFS)
@pytest.mark.parametrize("shape", [(5, 1), (64, 515), (2, 3, 1100)])
def test_softmax_bwd_is_the_composite_rule_bit_for_bit(dt, shape):
    dtype = getattr(ampy, dt)
    x, g = _pair(shape, dtype, 2)
    y = ampy.softmax(x, -1)
    y32, g32 = y.to(ampy.float32), g.to(ampy.float32)
    want = (y32 * (g32 - ampy.sum(g32 * y32, -1, keepdim=True))).to(dtype)
    got = _C.fused_softmax_bwd(y, g)
    assert got.dtype is dtype and _bits(got) == _bits(want)


@pytest.mark.parametrize("dt", _HALFS)
def test_gelu_bwd_vs_float64_and_torch(dt):
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


def test_gelu_bwd_specials():
    x = ampy.tensor(np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 100.0, -100.0, 1e-40],
                             np.float32))
    got = _C.fused_gelu_bwd(x, ampy.ones(8)).numpy()
    assert np.isnan(got[:3]).all()  # inf * exp(-inf) = inf * 0, as the composite rule
    np.testing.assert_allclose(got[3:], [0.5, 0.5, 1.0, 0.0, 0.5], rtol=1e-6, atol=1e-30)


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
