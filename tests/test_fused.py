"""ampy._C.fused_*: hot-path specialisations must give the same bits as the
general kernels they replace (nn_mse_* of csrc/nn_misc.c, zeros through
copy_), and reject what they do not take with a clear error."""
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
