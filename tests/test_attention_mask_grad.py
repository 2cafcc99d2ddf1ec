"""The gradient of a float attn_mask that requires grad, as torch 2.13 gives
it: scaled_dot_product_attention (the fused kernel's mask output on every
CPU path, both backward schedules, broadcast and grouped-query masks,
dropout, the composite under create_graph=True, autocast) and
nn.MultiheadAttention (attn_mask and key_padding_mask, need_weights on and
off). The no-grad mask keeps the O(T * block) workspace.

Tolerances are those of tests/test_attention.py (the same kernel and the
same float64 references): float32/float64 |err| <= 64 u (1 + max|ref|);
float16/bfloat16 4 u (|ref| + 4 max|ref|), the score gradient chaining
three half-rounded products. The mask gradient is dS before the scale, so
its bound is the dQ/dK bound of that file.
"""
import numpy as np
import pytest

import ampy
from ampy.nn import functional as F

from _helpers import (FLOAT_DTYPES, HALF_DTYPES, TORCH_DTYPE, UNIT_ROUNDOFF, host_f64,
                      requires_cuda)

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _arr(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _qkv(shapes, dt, seed=0):
    return [ampy.from_numpy(_arr(s, seed + i)).to(dt).requires_grad_()
            for i, s in enumerate(shapes)]


def _t64(a):
    return torch.from_numpy(host_f64(a)).requires_grad_()


def _check(got, ref, dt, vmax=0.0):
    got, ref = host_f64(got), ref.detach().numpy()
    assert got.shape == ref.shape
    u = UNIT_ROUNDOFF[dt]
    tol = 4 * u * (np.abs(ref) + vmax) if dt in HALF_DTYPES else 64 * u * (1 + np.abs(ref).max())
    assert np.all(np.abs(got - ref) <= tol), np.abs(got - ref).max()


def _float_mask(shape, dt, seed=9):
    m = _arr(shape, seed)
    m[np.random.default_rng(seed + 1).random(shape) < 0.15] = -np.inf
    return ampy.from_numpy(m).to(dt).requires_grad_()


def _run(shapes, dt, mshape, mdt=None, g_seed=5, **kw):
    """ampy and float64 torch: (ampy tensors, torch tensors) after backward(g)."""
    q, k, v = _qkv(shapes, dt)
    m = _float_mask(mshape, mdt or dt)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    g = ampy.from_numpy(_arr(tuple(out.shape), g_seed)).to(dt)
    out.backward(g)
    tq, tk, tv, tm = (_t64(a) for a in (q, k, v, m))
    TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, **kw).backward(
        torch.from_numpy(host_f64(g)))
    return (q, k, v, m), (tq, tk, tv, tm)


SHAPES = ((2, 3, 70, 16), (2, 3, 150, 16), (2, 3, 150, 24))   # two key blocks, L != S


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_fused_mask_grad_matches_float64(cpu_path, dt):
    (q, k, v, m), (tq, tk, tv, tm) = _run(SHAPES, dt, (2, 3, 70, 150))
    assert m.grad.dtype is dt
    for a, t in ((m, tm), (q, tq), (k, tk), (v, tv)):
        _check(a.grad, t.grad, dt, 4 * float(t.grad.abs().max()))


@pytest.mark.parametrize("dt", HALF_DTYPES, ids=str)
def test_float32_mask_of_half_inputs(dt):
    """torch allows a float32 mask with half q/k/v; its gradient is float32."""
    (q, k, v, m), (tq, tk, tv, tm) = _run(SHAPES, dt, (70, 150), mdt=ampy.float32)
    assert m.grad.dtype is ampy.float32
    _check(m.grad, tm.grad, dt, 4 * float(tm.grad.abs().max()))


@pytest.mark.parametrize("mshape", [(70, 150), (1, 150), (3, 1, 150), (2, 1, 70, 150),
                                    (2, 3, 70, 1)])
@pytest.mark.parametrize("threads", [1, 2])
def test_broadcast_mask_grad_is_summed(mshape, threads):
    """Both backward schedules (one task per item; key blocks then query
    blocks when there are fewer items than threads) store every block once."""
    prev = ampy.get_num_threads()
    ampy.set_num_threads(threads)
    try:
        shapes = SHAPES if threads == 1 else tuple((1, 1) + s[2:] for s in SHAPES)
        mshape = mshape if threads == 1 else mshape[-2:]
        (q, k, v, m), (tq, tk, tv, tm) = _run(shapes, ampy.float64, mshape)
    finally:
        ampy.set_num_threads(prev)
    assert tuple(m.grad.shape) == mshape
    for a, t in ((m, tm), (q, tq), (k, tk), (v, tv)):
        _check(a.grad, t.grad, ampy.float64)


def test_grouped_query_mask_grad():
    (q, k, v, m), (tq, tk, tv, tm) = _run(((2, 6, 20, 8), (2, 2, 30, 8), (2, 2, 30, 4)),
                                          ampy.float64, (6, 20, 30), enable_gqa=True)
    for a, t in ((m, tm), (q, tq), (k, tk), (v, tv)):
        _check(a.grad, t.grad, ampy.float64)


def test_scale_and_no_grad_inputs():
    """Only the mask requires grad; a non-default scale does not reach it."""
    q, k, v = (ampy.from_numpy(_arr(s, i)) for i, s in enumerate(SHAPES))
    m = _float_mask((70, 150), ampy.float64)
    F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.37).sum().backward()
    tm = _t64(m)
    TF.scaled_dot_product_attention(*(torch.from_numpy(host_f64(a)) for a in (q, k, v)),
                                    attn_mask=tm, scale=0.37).sum().backward()
    _check(m.grad, tm.grad, ampy.float64)


def test_dropout_mask_grad_is_the_score_grad():
    """With dropout the reference is the kernel's own chain rule: the full
    (unbroadcast) mask's gradient is dS / scale, so dQ = scale * dmask K."""
    q, k, v = _qkv(((1, 2, 40, 8), (1, 2, 90, 8), (1, 2, 90, 8)), ampy.float64)
    m = _float_mask((1, 2, 40, 90), ampy.float64)
    ampy.manual_seed(3)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=0.3)
    out.backward(ampy.from_numpy(_arr(tuple(out.shape), 4)))
    scale = 1 / np.sqrt(8)
    np.testing.assert_allclose(q.grad.numpy(), scale * m.grad.numpy() @ k.detach().numpy(),
                               atol=1e-12)
    np.testing.assert_allclose(k.grad.numpy(),
                               scale * np.swapaxes(m.grad.numpy(), -1, -2) @ q.detach().numpy(),
                               atol=1e-12)


def test_second_derivative_through_the_mask():
    q, k, v = _qkv(((1, 2, 6, 4), (1, 2, 7, 4), (1, 2, 7, 3)), ampy.float64)
    m = _float_mask((6, 7), ampy.float64)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    (gm,) = ampy.autograd.grad((out * out).sum(), m, create_graph=True)
    (gm * gm).sum().backward()
    tq, tk, tv, tm = (_t64(a) for a in (q, k, v, m))
    ref = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
    (tgm,) = torch.autograd.grad((ref * ref).sum(), tm, create_graph=True)
    (tgm * tgm).sum().backward()
    _check(gm, tgm, ampy.float64)
    for a, t in ((q, tq), (k, tk), (v, tv), (m, tm)):
        _check(a.grad, t.grad, ampy.float64)


@pytest.mark.parametrize("adt", HALF_DTYPES, ids=str)
def test_autocast_mask_grad_dtype_as_torch(adt):
    q, k, v = _qkv(((1, 2, 8, 4),) * 3, ampy.float32)
    m = _float_mask((8, 8), ampy.float32)
    with ampy.autocast("cpu", dtype=adt):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    out.float().sum().backward()
    tq, tk, tv = (torch.from_numpy(a.detach().numpy()) for a in (q, k, v))
    tm = torch.from_numpy(m.detach().numpy()).requires_grad_()
    with torch.autocast("cpu", dtype=TORCH_DTYPE[adt]):
        ref = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
    ref.float().sum().backward()
    assert out.dtype is adt and m.grad.dtype is ampy.float32 and tm.grad.dtype == torch.float32
    tol = 16 * UNIT_ROUNDOFF[adt] * (1 + float(tm.grad.abs().max()))
    assert np.abs(m.grad.numpy() - tm.grad.numpy()).max() <= tol


def test_no_grad_mask_keeps_the_memory_bound():
    """A float mask that does not require grad adds nothing O(T^2) to the
    backward: T = 1024, 2 heads, one (T, T) mask shared by the heads; beyond
    the inputs and outputs less than 4 MiB (one head's float32 scores alone
    would be 4 MiB, two heads' 8 MiB)."""
    T, E = 1024, 64
    q, k, v = _qkv(((1, 2, T, E),) * 3, ampy.float32)
    m = ampy.from_numpy(np.triu(np.full((T, T), -np.inf), 1)).float()
    g = ampy.ones(1, 2, T, E)
    ampy.reset_peak_memory_stats()
    base = ampy.memory_allocated()
    F.scaled_dot_product_attention(q, k, v, attn_mask=m).backward(g)
    peak = ampy.max_memory_allocated() - base
    io = 4 * 4 * 2 * T * E + 4 * 2 * T
    assert peak - io < 4 * 2**20, peak
    assert m.grad is None


def _mha_pair(batch_first, kdim=None):
    torch.manual_seed(0)
    tmha = torch.nn.MultiheadAttention(16, 4, batch_first=batch_first, kdim=kdim, vdim=kdim)
    amha = ampy.nn.MultiheadAttention(16, 4, batch_first=batch_first, kdim=kdim, vdim=kdim)
    amha.load_state_dict({n: ampy.from_numpy(p.detach().numpy())
                          for n, p in tmha.state_dict().items()})
    return amha, tmha


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_mask_grads(need_weights, batch_first):
    amha, tmha = _mha_pair(batch_first)
    L, S, N = 5, 7, 3
    x = _arr((N, L, 16) if batch_first else (L, N, 16), 1).astype(np.float32)
    y = _arr((N, S, 16) if batch_first else (S, N, 16), 2).astype(np.float32)
    am = _arr((L, S), 3).astype(np.float32)
    kpm = (_arr((N, S), 4) * 0.5).astype(np.float32)
    a_am, a_kpm = (ampy.from_numpy(a).requires_grad_() for a in (am, kpm))
    t_am, t_kpm = (torch.from_numpy(a).requires_grad_() for a in (am, kpm))
    out, w = amha(ampy.from_numpy(x), ampy.from_numpy(y), ampy.from_numpy(y), attn_mask=a_am,
                  key_padding_mask=a_kpm, need_weights=need_weights)
    tout, tw = tmha(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(y),
                    attn_mask=t_am, key_padding_mask=t_kpm, need_weights=need_weights)
    g = _arr(tuple(out.shape), 6).astype(np.float32)
    out.backward(ampy.from_numpy(g))
    tout.backward(torch.from_numpy(g))
    # float32, the weights of torch's CPU MHA: within 1e-5 of torch's own float32 run
    for a, t in ((out, tout), (a_am.grad, t_am.grad), (a_kpm.grad, t_kpm.grad)):
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_bool_mask_and_inputs_unchanged_after_a_raise():
    """A bool mask has no gradient; a mask of the wrong shape raises before
    anything is written."""
    q, k, v = _qkv(((1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 4)), ampy.float32)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=ampy.ones(5, 7, dtype=ampy.bool))
    out.sum().backward()
    bad = _float_mask((4, 7), ampy.float32)
    before = bad.detach().numpy().copy()
    with pytest.raises(RuntimeError, match="attn_mask of shape"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=bad)
    np.testing.assert_array_equal(bad.detach().numpy(), before)
    assert bad.grad is None


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_cuda_mask_grad_matches_the_cpu(dt):
    q, k, v = _qkv(SHAPES, dt)
    m = _float_mask((70, 150), dt)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    out.sum().backward()
    gq, gk, gv, gm = (a.detach().to("cuda").requires_grad_() for a in (q, k, v, m))
    F.scaled_dot_product_attention(gq, gk, gv, attn_mask=gm).sum().backward()
    ref = torch.from_numpy(host_f64(m.grad))
    _check(gm.grad.cpu(), ref, dt, 8 * float(ref.abs().max()))
