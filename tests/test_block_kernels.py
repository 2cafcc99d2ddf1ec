"""Kernels added for the transformer-block training step (benchmarks/bench_train.py):
the column sum behind linear's bias gradient, and the blocked gelu forward /
backward tiers (a lane's result must not depend on its neighbours)."""
import numpy as np
import pytest

import ampy
from ampy import _C

from _helpers import bits

_DTS = ["float32", "float16", "bfloat16"]


@pytest.mark.parametrize("dt", _DTS)
@pytest.mark.parametrize("shape", [(4096, 96), (7, 3), (1, 1), (0, 5), (5, 0), (300, 1),
                                   (33, 1100)])
@pytest.mark.parametrize("threads", [1, 2])
def test_colsum_same_bits_as_sum0(dt, shape, threads, cpu_path):
    rng = np.random.default_rng(sum(shape))
    old = ampy.get_num_threads()
    ampy.set_num_threads(threads)
    try:
        x = ampy.tensor((rng.standard_normal(shape) * 10).astype(np.float32)).to(getattr(ampy, dt))
        got, want = _C.fused_colsum(x), ampy.sum(x, 0)
    finally:
        ampy.set_num_threads(old)
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    assert (bits(got) == bits(want)).all()
    # and close to a float64 oracle
    ref = x.to(ampy.float64).numpy().sum(0)
    np.testing.assert_allclose(got.to(ampy.float64).numpy(), ref,
                               rtol={"float32": 2e-7, "float16": 1e-3, "bfloat16": 8e-3}[dt],
                               atol=1e-30)


def test_colsum_bad_input():
    with pytest.raises(ValueError, match="contiguous 2-d"):
        _C.fused_colsum(ampy.ones(3, 4).t())
    with pytest.raises(ValueError, match="contiguous 2-d"):
        _C.fused_colsum(ampy.ones(3))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        _C.fused_colsum(ampy.ones(3, 4, dtype=ampy.float64))
    with pytest.raises(TypeError):
        _C.fused_colsum(np.ones((3, 4)))


@pytest.mark.parametrize("dt", _DTS)
def test_linear_bias_grad_matches_sum(dt, cpu_path):
    dtype = getattr(ampy, dt)
    rng = np.random.default_rng(3)
    x = ampy.tensor(rng.standard_normal((4, 50, 24)).astype(np.float32)).to(dtype)
    w = ampy.tensor(rng.standard_normal((40, 24)).astype(np.float32)).to(dtype).requires_grad_()
    b = ampy.tensor(rng.standard_normal(40).astype(np.float32)).to(dtype).requires_grad_()
    g = ampy.tensor(rng.standard_normal((4, 50, 40)).astype(np.float32)).to(dtype)
    ampy.nn.functional.linear(x, w, b).backward(g)
    assert b.grad.dtype is dtype
    assert (bits(b.grad) == bits(ampy.sum(g.reshape(-1, 40), 0))).all()


def _lane_independent(fn, x):
    """fn on a whole array vs lane by lane inside neighbourhoods of other values"""
    whole = fn(ampy.tensor(x)).numpy().view(np.uint32)
    for fill in (0.5, 2.9, 5.0, 20.0, np.nan):
        for i in range(0, len(x), 7):
            blk = np.full(16, fill, np.float32)
            blk[i % 16] = x[i]
            one = fn(ampy.tensor(blk)).numpy().view(np.uint32)[i % 16]
            assert one == whole[i], (x[i], fill)


def test_gelu_lanes_do_not_depend_on_neighbours(cpu_path):
    x = np.concatenate([np.linspace(-4, 4, 300), [-3.1112698, 3.1112698, 3.11127, -3.11127,
                                                  0.494, 0.496, 14.5, -14.5]]).astype(np.float32)
    _lane_independent(ampy.nn.functional.gelu, x)


def test_gelu_bwd_lanes_do_not_depend_on_neighbours(cpu_path):
    x = np.concatenate([np.linspace(-4, 4, 300), [-3.11, 3.11, 3.1100001, -3.1100001,
                                                  14.5, -15.0]]).astype(np.float32)
    _lane_independent(lambda t: _C.fused_gelu_bwd(t, ampy.ones(*t.shape)), x)


@pytest.mark.parametrize("dt", _DTS)
def test_matmul_heads_read_in_place(dt):
    """q @ k^T on permuted heads (batch dims that do not flatten): one GEMM per
    outer batch index, reading in place; same values as on contiguous copies,
    gradients too (the backward's matmuls take the same path)."""
    dtype = getattr(ampy, dt)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 10, 3, 4, 8)).astype(np.float32)
    base = ampy.tensor(x).to(dtype).requires_grad_()
    qkv = base.permute(2, 0, 3, 1, 4)
    q, k = qkv[0], qkv[1]
    got = ampy.matmul(q, k.transpose(-2, -1))
    want = ampy.matmul(q.detach().contiguous(), k.detach().transpose(-2, -1).contiguous())
    assert got.dtype is dtype and tuple(got.shape) == (3, 4, 10, 10)
    assert (bits(got) == bits(want)).all()
    g = rng.standard_normal((3, 4, 10, 10)).astype(np.float32)
    got.backward(ampy.tensor(g).to(dtype))
    torch = pytest.importorskip("torch")
    tb = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tq = tb.permute(2, 0, 3, 1, 4)
    (tq[0] @ tq[1].transpose(-2, -1)).backward(torch.tensor(g, dtype=torch.float64))
    tol = {"float32": 1e-5, "float16": 2e-2, "bfloat16": 1e-1}[dt]
    np.testing.assert_allclose(base.grad.to(ampy.float64).numpy(), tb.grad.numpy(), rtol=tol,
                               atol=tol)
    # 5-d operands with a broadcast second operand, and out_dtype
    a = ampy.tensor(rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)).to(dtype)
    a = a.permute(1, 0, 2, 3, 4)
    b = ampy.tensor(rng.standard_normal((4, 6, 7)).astype(np.float32)).to(dtype)
    assert (bits(ampy.matmul(a, b)) == bits(ampy.matmul(a.contiguous(), b))).all()
    r = ampy.matmul(q.detach(), k.detach().transpose(-2, -1), out_dtype=ampy.float32)
    assert r.dtype is ampy.float32


def test_slice_grads_summed_in_place_match_torch():
    """q, k, v = qkv[0], qkv[1], qkv[2] (and select/narrow/slices): the engine adds
    each slice's gradient into its own buffer in place; values equal torch's,
    hooks and retained grads still see whole tensors, retain_graph reruns agree."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    xs = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    w = [rng.standard_normal((2, 5, 4)).astype(np.float32) for _ in range(3)]

    def run(lib, x):
        p = x.permute(2, 0, 1, 3)
        a, b, c = p[0], p.select(0, 1), p[2]
        n = x.narrow(3, 1, 2)
        s = x[:, 1:4]
        return ((a * lib.tensor(w[0])).sum() + (b * lib.tensor(w[1])).sum() +
                (c * lib.tensor(w[2])).sum() + n.sum() * 5 + b[1].sum() + (s * s).sum()), p

    xa = ampy.tensor(xs).requires_grad_()
    xt = torch.tensor(xs).requires_grad_()
    la, pa = run(ampy, xa)
    lt, pt = run(torch, xt)
    seen = []
    pa.register_hook(lambda g: seen.append(g.detach().numpy().copy()))
    pa.retain_grad()
    la.backward(retain_graph=True)
    lt.backward(retain_graph=True)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert len(seen) == 1 and seen[0].shape == (3, 2, 5, 4)
    want_p = np.stack([w[0], w[1], w[2]])
    want_p[1, 1] += 1
    np.testing.assert_allclose(pa.grad.numpy(), want_p, rtol=1e-6)
    first = xa.grad.numpy().copy()
    la.backward()
    np.testing.assert_allclose(xa.grad.numpy(), 2 * first, rtol=1e-6)
    # create_graph: the composite path, still differentiable
    xb = ampy.tensor(xs).requires_grad_()
    lb, _ = run(ampy, xb)
    (gx,) = ampy.autograd.grad(lb, xb, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), first, rtol=1e-6)
    gx.sum().backward()
    want2 = np.zeros(xs.shape, np.float32)
    want2[:, 1:4] = 2.0  # d/dx of sum(2 s) for s = x[:, 1:4]
    np.testing.assert_allclose(xb.grad.numpy(), want2, rtol=1e-6)


@pytest.mark.parametrize("dt", _DTS)
@pytest.mark.parametrize("shape", [(1, 128), (3, 128), (4, 128), (7, 5), (9, 256), (2, 257),
                                   (4, 4, 129), (0, 128), (6, 600), (5, 17)])
def test_softmax_bwd_short_rows_are_the_composite_bits(dt, shape, cpu_path):
    """fused_softmax_bwd takes rows four at a time (AVX-512) or one by one
    (portable); each row's sum is ampy.sum's (16 lanes in double, then a tree,
    per block of 256), so the bits equal the composite rule's"""
    dtype = getattr(ampy, dt)
    rng = np.random.default_rng(len(shape) + shape[-1])
    x = ampy.tensor(rng.standard_normal(shape).astype(np.float32) * 3).to(dtype)
    g = ampy.tensor(rng.standard_normal(shape).astype(np.float32)).to(dtype)
    y = ampy.softmax(x, -1)
    y32, g32 = y.to(ampy.float32), g.to(ampy.float32)
    want = (y32 * (g32 - ampy.sum(g32 * y32, -1, keepdim=True))).to(dtype)
    got = _C.fused_softmax_bwd(y, g)
    assert got.dtype is dtype and (bits(got) == bits(want)).all()


@pytest.mark.parametrize("dt", _DTS)
def test_layer_norm_rows_do_not_depend_on_batching(dt, cpu_path):
    """layer_norm's forward takes rows two at a time; a row's output, mean and
    rstd must be the same bits alone, at an odd offset and in a batch."""
    rng = np.random.default_rng(5)
    dtype = getattr(ampy, dt)
    x = ampy.tensor((rng.standard_normal((7, 300)) * 4 + 1).astype(np.float32)).to(dtype)
    w = ampy.tensor(rng.standard_normal(300).astype(np.float32))
    b = ampy.tensor(rng.standard_normal(300).astype(np.float32))
    y, mean, rstd = _C.nn_layer_norm_fwd(x, 300, w, b, 1e-5, True)
    yb, mb, rb = bits(y), mean.numpy(), rstd.numpy()
    for r0 in range(7):
        yr, mr, rr = _C.nn_layer_norm_fwd(x[r0:], 300, w, b, 1e-5, True)
        assert (bits(yr) == yb[r0:]).all()
        assert np.array_equal(mr.numpy().ravel(), mb.ravel()[r0:])
        assert np.array_equal(rr.numpy().ravel(), rb.ravel()[r0:])
