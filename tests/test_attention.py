"""scaled_dot_product_attention (the fused kernel of csrc/attention.c) against
torch 2.13 CPU and float64 math: every float dtype on every CPU path, bool,
float and broadcast masks, is_causal with L != S, scale, leading batch dims,
the strided head views real models make, GQA, gradients, the second
derivative, autocast dtypes, dropout (statistics, p = 0, the backward's
consistency with the forward's mask), the O(T*block) memory bound at
T = 2048, the argument checks, and the CUDA twin against the CPU kernel
where a GPU exists.

Tolerances. float32/float64: every output is a softmax-weighted sum of
values; the kernel's blocked sums and the reference's differ by a few
roundings per term, so |err| <= 64 u (1 + max|ref|) (u the unit roundoff).
float16/bfloat16: the inputs are the same half values for both sides and the
reference is float64 math on them; the kernel rounds the probabilities P to
the half dtype before P V (as torch's CPU kernel does) and rounds the output
once, so |err| <= 4 u (|ref| + max|V|) elementwise (P's rounding changes
sum_j P_j V_j by at most u sum_j P_j |V_j| <= u max|V|); gradients chain three
such products, so 16 u max|ref| per tensor.
"""
import numpy as np
import pytest

import ampy
from ampy import _C
from ampy.nn import functional as F

from _helpers import (FLOAT_DTYPES, HALF_DTYPES, TORCH_DTYPE, UNIT_ROUNDOFF, grads_cpu_gpu,
                      host_f64, requires_cuda)

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _inputs(shapes, dt, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        a = ampy.from_numpy(rng.standard_normal(s)).to(dt)
        out.append(a)
    return out


def _t64(a, grad=False):
    t = torch.from_numpy(host_f64(a))
    return t.requires_grad_() if grad else t


def _mask(kind, L, S, seed=1):
    rng = np.random.default_rng(seed)
    if kind == "bool":
        m = rng.random((L, S)) > 0.3
        m[min(3, L - 1)] = False                     # a row with no key kept
        return ampy.from_numpy(m)
    if kind == "float":
        m = rng.standard_normal((L, S))
        m[rng.random((L, S)) < 0.2] = -np.inf
        m[min(2, L - 1)] = -np.inf                   # a fully masked row
        return ampy.from_numpy(m).float()
    return None


def _tol(dt, ref, vmax=0.0, k=1.0):
    u = UNIT_ROUNDOFF[dt]
    if dt in HALF_DTYPES:
        return 4 * u * (np.abs(ref) + vmax) * k
    return 64 * u * (1 + np.abs(ref).max()) * k


def _check(got, ref, dt, vmax=0.0, k=1.0):
    got = host_f64(got)
    ref = ref.detach().numpy() if hasattr(ref, "detach") else ref
    assert got.shape == ref.shape
    assert np.all(np.abs(got - ref) <= _tol(dt, ref, vmax, k)), np.abs(got - ref).max()


SHAPES = ((2, 3, 70, 16), (2, 3, 150, 16), (2, 3, 150, 24))   # L != S, Ev != E, 2+ blocks


@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_forward_matches_float64(cpu_path, dt, kind):
    q, k, v = _inputs(SHAPES, dt)
    m = _mask(kind, 70, 150)
    causal = kind == "causal"
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)
    mt = None if m is None else torch.from_numpy(host_f64(m) if kind == "float" else m.numpy())
    ref = TF.scaled_dot_product_attention(_t64(q), _t64(k), _t64(v), attn_mask=mt,
                                          is_causal=causal)
    assert got.dtype is dt
    _check(got, ref, dt, float(np.abs(host_f64(v)).max()))


@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_backward_matches_float64(cpu_path, dt, kind):
    q, k, v = (t.requires_grad_() for t in _inputs(SHAPES, dt))
    m = _mask(kind, 70, 150)
    causal = kind == "causal"
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)
    g = _inputs(((2, 3, 70, 24),), dt, seed=5)[0]
    out.backward(g)
    tq, tk, tv = _t64(q, True), _t64(k, True), _t64(v, True)
    mt = None if m is None else torch.from_numpy(host_f64(m) if kind == "float" else m.numpy())
    TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=mt, is_causal=causal).backward(
        _t64(g))
    for a, t in ((q, tq), (k, tk), (v, tv)):
        assert a.grad.dtype is dt
        ref = t.grad.numpy()
        _check(a.grad, ref, dt, 4 * np.abs(ref).max(), k=1.0)


@pytest.mark.parametrize("dt", [ampy.float32, ampy.bfloat16], ids=str)
def test_same_as_torch_in_dtype(dt):
    """torch in the same dtype lands within the same bound of float64 math."""
    q, k, v = _inputs(SHAPES, dt)
    got = host_f64(F.scaled_dot_product_attention(q, k, v, is_causal=True))
    tt = TF.scaled_dot_product_attention(*(torch.from_numpy(host_f64(x)).to(TORCH_DTYPE[dt])
                                           for x in (q, k, v)), is_causal=True)
    ref = TF.scaled_dot_product_attention(_t64(q), _t64(k), _t64(v), is_causal=True).numpy()
    err_a, err_t = np.abs(got - ref).max(), np.abs(tt.double().numpy() - ref).max()
    assert err_a <= 2 * err_t + 64 * UNIT_ROUNDOFF[dt]


@pytest.mark.parametrize("mshape", [(70, 150), (1, 150), (3, 1, 150), (2, 1, 70, 150),
                                    (2, 3, 70, 150)])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_broadcast_masks(mshape, kind):
    q, k, v = (t.requires_grad_() for t in _inputs(SHAPES, ampy.float64))
    rng = np.random.default_rng(3)
    m = rng.random(mshape) > 0.4 if kind == "bool" else rng.standard_normal(mshape)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=ampy.from_numpy(m))
    out.sum().backward()
    tq, tk, tv = _t64(q, True), _t64(k, True), _t64(v, True)
    ref = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(m))
    ref.sum().backward()
    _check(out, ref, ampy.float64)
    for a, t in ((q, tq), (k, tk), (v, tv)):
        _check(a.grad, t.grad, ampy.float64)


def test_fully_masked_rows_give_zeros_as_torch():
    q, k, v = (t.requires_grad_() for t in _inputs(((1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 3)),
                                                   ampy.float32))
    m = np.ones((5, 7), bool)
    m[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=ampy.from_numpy(m))
    out.sum().backward()
    tq, tk, tv = (torch.from_numpy(x.detach().numpy()).requires_grad_() for x in (q, k, v))
    ref = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(m))
    ref.sum().backward()
    assert np.all(out.detach().numpy()[:, :, 1] == 0) and np.all(q.grad.numpy()[:, :, 1] == 0)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(q.grad.numpy(), tq.grad.numpy(), atol=1e-6)


@pytest.mark.parametrize("shapes", [((9, 8), (13, 8), (13, 5)),               # 2-d
                                    ((2, 2, 3, 9, 8), (2, 2, 3, 13, 8), (2, 2, 3, 13, 8)),
                                    ((3, 200, 8), (3, 100, 8), (3, 100, 8)),   # L > S causal
                                    ((3, 100, 8), (3, 300, 8), (3, 300, 8))])
@pytest.mark.parametrize("causal", [False, True])
def test_leading_dims_causal_and_scale(shapes, causal):
    q, k, v = (t.requires_grad_() for t in _inputs(shapes, ampy.float64))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3)
    out.sum().backward()
    tq, tk, tv = _t64(q, True), _t64(k, True), _t64(v, True)
    ref = TF.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=0.3)
    ref.sum().backward()
    _check(out, ref, ampy.float64)
    for a, t in ((q, tq), (k, tk), (v, tv)):
        _check(a.grad, t.grad, ampy.float64)


@pytest.mark.parametrize("dt", [ampy.float32, ampy.bfloat16], ids=str)
def test_strided_head_views(cpu_path, dt):
    """q, k, v as a GPT block makes them: one projection split, heads transposed."""
    B, T, H, D = 2, 90, 4, 16
    x = _inputs(((B, T, 3 * H * D),), dt)[0].requires_grad_()
    q, k, v = x.split(H * D, dim=2)
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
    assert not q.is_contiguous()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = out.transpose(1, 2).contiguous().view(B, T, H * D)
    y.sum().backward()
    tx = _t64(x, True)
    tq, tk, tv = (t.view(B, T, H, D).transpose(1, 2) for t in tx.split(H * D, dim=2))
    ref = TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    ref.transpose(1, 2).reshape(B, T, H * D).sum().backward()
    _check(y, ref.transpose(1, 2).reshape(B, T, H * D), dt, float(np.abs(host_f64(x)).max()))
    _check(x.grad, tx.grad.numpy(), dt, 4 * float(tx.grad.abs().max()))


def test_grouped_query_attention():
    q, k, v = (t.requires_grad_() for t in _inputs(((2, 6, 20, 8), (2, 2, 30, 8), (2, 2, 30, 4)),
                                                   ampy.float64))
    m = ampy.from_numpy(np.random.default_rng(0).random((6, 20, 30)) > 0.2)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    out.sum().backward()
    tq, tk, tv = _t64(q, True), _t64(k, True), _t64(v, True)
    ref = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(m.numpy()),
                                          enable_gqa=True)
    ref.sum().backward()
    _check(out, ref, ampy.float64)
    for a, t in ((q, tq), (k, tk), (v, tv)):
        _check(a.grad, t.grad, ampy.float64)


def test_second_derivative_matches_torch():
    q, k, v = (t.requires_grad_() for t in _inputs(((1, 2, 6, 4), (1, 2, 7, 4), (1, 2, 7, 3)),
                                                   ampy.float64))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (gq,) = ampy.autograd.grad((out * out).sum(), q, create_graph=True)
    (gq * gq).sum().backward()
    tq, tk, tv = _t64(q, True), _t64(k, True), _t64(v, True)
    ref = TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    (tgq,) = torch.autograd.grad((ref * ref).sum(), tq, create_graph=True)
    (tgq * tgq).sum().backward()
    _check(gq, tgq, ampy.float64)
    for a, t in ((q, tq), (k, tk), (v, tv)):
        _check(a.grad, t.grad, ampy.float64)


@pytest.mark.parametrize("adt", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("mask", [None, "float", "bool"])
def test_autocast_dtypes_as_torch(adt, mask):
    q, k, v = _inputs(((1, 2, 8, 4),) * 3, ampy.float32)
    m = _mask(mask, 8, 8)
    tm = None if m is None else torch.from_numpy(m.numpy())
    with ampy.autocast("cpu", dtype=adt):
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    with torch.autocast("cpu", dtype=TORCH_DTYPE[adt]):
        ref = TF.scaled_dot_product_attention(*(torch.from_numpy(x.numpy()) for x in (q, k, v)),
                                              attn_mask=tm)
    assert got.dtype is adt and TORCH_DTYPE[adt] == ref.dtype


def test_dropout_zero_is_no_dropout_and_statistics():
    q, k, v = _inputs(((2, 2, 33, 8), (2, 2, 40, 8), (2, 2, 40, 8)), ampy.float32)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
    b = F.scaled_dot_product_attention(q, k, v)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    # q = 0: P = 1/S; v = 1: each output is (1/S) sum_j Z_j / (1-p), mean 1,
    # variance p / ((1-p) S); over 4 * 64 rows the mean is 1 +- 4 sigma.
    S, p = 2000, 0.3
    q0 = ampy.zeros(4, 64, 4)
    ones = ampy.ones(4, S, 4)
    out = F.scaled_dot_product_attention(q0, ampy.randn(4, S, 4) * 0, ones, dropout_p=p).numpy()
    sigma = np.sqrt(p / ((1 - p) * S)) / np.sqrt(4 * 64)
    assert abs(out[..., 0].mean() - 1.0) < 4 * sigma
    assert np.all(out[..., 0] == out[..., 1])          # one keep-mask per (row, key)
    c = F.scaled_dot_product_attention(q0, ampy.zeros(4, S, 4), ones, dropout_p=p).numpy()
    assert not np.array_equal(out, c)                  # the generator advances
    assert np.all(F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy() == 0)


def test_dropout_backward_uses_the_forward_mask():
    """With q = 0 and v = I the output IS the dropped probability matrix Pd,
    so dv must be Pd^T g and dq = scale * dS k with dS = P (dPd * Z' - D)."""
    S, L = 50, 30
    q = ampy.zeros(1, L, 6).requires_grad_()
    k = ampy.from_numpy(np.random.default_rng(0).standard_normal((1, S, 6))).float()
    k.requires_grad_()
    v = ampy.from_numpy(np.eye(S)[None]).float().requires_grad_()
    ampy.manual_seed(7)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    g = ampy.from_numpy(np.random.default_rng(1).standard_normal((1, L, S))).float()
    out.backward(g)
    pd, gn = out.detach().numpy().astype(np.float64), g.numpy().astype(np.float64)
    np.testing.assert_allclose(v.grad.numpy(), np.swapaxes(pd, 1, 2) @ gn, atol=1e-5)
    kept = (pd != 0) / (1 - 0.4)
    dpd = gn @ np.eye(S)
    d = (gn * pd).sum(-1, keepdims=True)
    ds = (1.0 / S) * (dpd * kept - d) / np.sqrt(6)
    np.testing.assert_allclose(q.grad.numpy(), ds @ k.detach().numpy().astype(np.float64),
                               atol=1e-5)


def test_memory_is_not_quadratic():
    """T = 2048: the T x T float32 scores of one head would be 16 MiB; the
    fused forward + backward of 2 heads allocate less than 4 MiB beyond their
    inputs and outputs (workspace O(T * E + block^2) per thread)."""
    T, E = 2048, 64
    q, k, v = (t.requires_grad_() for t in _inputs(((1, 2, T, E),) * 3, ampy.float32))
    g = ampy.ones(1, 2, T, E)
    ampy.reset_peak_memory_stats()
    base = ampy.memory_allocated()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.backward(g)
    peak = ampy.max_memory_allocated() - base
    io = 4 * 4 * 2 * T * E + 4 * 2 * T        # out, dq, dk, dv, lse
    assert peak - io < 4 * 2**20, peak


def _raises(exc, match, *args, **kw):
    ts = [a for a in args if isinstance(a, ampy.Tensor)]
    before = [host_f64(a).copy() for a in ts]
    with pytest.raises(exc, match=match):
        F.scaled_dot_product_attention(*args, **kw)
    for a, b in zip(ts, before):
        np.testing.assert_array_equal(host_f64(a), b)


def test_bad_inputs_raise_and_leave_inputs_unchanged():
    q, k, v = _inputs(((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6)), ampy.float32)
    _raises(RuntimeError, "key's last dim", q, _inputs(((2, 3, 7, 3),), ampy.float32)[0], v)
    _raises(RuntimeError, "but value has 6", q, k, _inputs(((2, 3, 6, 6),),
                                                                 ampy.float32)[0])
    _raises(RuntimeError, "attn_mask of shape \\[4, 7\\]", q, k, v,
            attn_mask=ampy.ones(4, 7, dtype=ampy.bool))
    _raises(RuntimeError, "attn_mask dtype", q, k, v, attn_mask=ampy.zeros(5, 7, dtype=ampy.int64))
    _raises(RuntimeError, "attn_mask dtype", q, k, v, attn_mask=ampy.zeros(5, 7).double())
    _raises(RuntimeError, "Explicit attn_mask", q, k, v,
            attn_mask=ampy.ones(5, 7, dtype=ampy.bool), is_causal=True)
    _raises(RuntimeError, "same dtype", q, k.double(), v)
    _raises(RuntimeError, "at least 2 dimensional", ampy.ones(4), k, v)
    _raises(RuntimeError, "number of heads", ampy.ones(2, 4, 5, 4), k, v, enable_gqa=True)
    _raises(RuntimeError, "do not broadcast", ampy.ones(2, 4, 5, 4), k, v)
    _raises(TypeError, "'key' must be Tensor", q, 1.0, v)
    _raises(ValueError, "dropout_p", q, k, v, dropout_p=1.5)


def test_kernel_rejects_bad_arguments():
    q, k, v = _inputs(((1, 5, 4), (1, 7, 4), (1, 7, 4)), ampy.float32)
    with pytest.raises(ValueError, match="must agree"):
        _C.attention_fwd(q, v[:, :6], v, None, False, 1.0, 0.0, 0, 0, False)
    with pytest.raises(TypeError, match="same dtype"):
        _C.attention_fwd(q, k.double(), v, None, False, 1.0, 0.0, 0, 0, False)
    with pytest.raises(TypeError, match="attn_mask must be"):
        _C.attention_fwd(q, k, v, ampy.zeros(1, 5, 7, dtype=ampy.int64), False, 1.0, 0.0, 0, 0,
                         False)
    with pytest.raises(ValueError, match="dropout_p"):
        _C.attention_fwd(q, k, v, None, False, 1.0, 2.0, 0, 0, False)


@requires_cuda
@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_cuda_matches_the_cpu(dt, kind):
    """The twin computes the same formulas with other summation orders (and
    atomics for dK/dV): the float64-math bound of the CPU tests, doubled."""
    q, k, v = _inputs(SHAPES, dt)
    m = _mask(kind, 70, 150)
    causal = kind == "causal"
    (oc, gc), (og, gg) = grads_cpu_gpu(
        lambda a, b, c: F.scaled_dot_product_attention(
            a, b, c, attn_mask=None if m is None else m.to(a.device), is_causal=causal), q, k, v)
    vmax = float(np.abs(host_f64(v)).max())
    _check(og, host_f64(oc), dt, vmax, k=2.0)
    for a, b in zip(gg, gc):
        ref = host_f64(b)
        _check(a, ref, dt, 4 * np.abs(ref).max(), k=2.0)
