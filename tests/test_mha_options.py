"""nn.MultiheadAttention's less common options against torch 2.13 CPU from the
same weights: kdim / vdim different from embed_dim (separate q/k/v projection
weights, in_proj_weight None), add_bias_kv (bias_k / bias_v appended to the
key and value sequences, the masks padded with an unmasked column),
add_zero_attn (a zero key/value row per head), and static_k / static_v of the
functional form (ampy.nn._mha against torch.nn.functional's). Outputs,
attention weights, gradients of the inputs and of every parameter,
batch_first both ways, key_padding_mask and attn_mask, need_weights both
ways; state_dicts loaded both ways.

Tolerance (float32): compositions of four GEMMs (K <= 16), a softmax and the
concatenations; each GEMM output carries <= K u sum|a b| of rounding
(u = 2^-24), so 2e-5 relative to the output's scale (plus 2e-5 absolute)
bounds the differences with margin; gradients get 5e-5. bf16 autocast against
torch in float64: every GEMM rounds its inputs to bf16 (u = 2^-8) and its
output to bf16, four GEMMs in a chain with softmax between, so the error
is <= ~8 u of the output's scale; the bound is 10 u = 0.04. The parameter
gradients run each GEMM twice more (both operands' gradients) through the
same bf16 roundings: 16 u = 0.06.
"""
import numpy as np
import pytest

import ampy
from ampy import nn
from ampy.nn import _mha

torch = pytest.importorskip("torch")

E, H, L, S, N = 16, 4, 5, 7, 3


def _a(t):
    return ampy.from_numpy(t.detach().numpy().copy())


def _close(a, t, tol=2e-5):
    got, ref = a.detach().float().numpy().astype(np.float64), t.detach().double().numpy()
    assert got.shape == ref.shape
    scale = max(1.0, float(np.abs(ref).max()))
    assert np.abs(got - ref).max() <= tol * scale + tol, np.abs(got - ref).max()


def _rand(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _pair(kdim, vdim, bias_kv, zero_attn, batch_first=False, bias=True):
    torch.manual_seed(0)
    kw = dict(kdim=kdim, vdim=vdim, add_bias_kv=bias_kv, add_zero_attn=zero_attn,
              batch_first=batch_first, bias=bias)
    tm = torch.nn.MultiheadAttention(E, H, **kw)
    m = nn.MultiheadAttention(E, H, **kw)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    m.load_state_dict({k: _a(v) for k, v in tm.state_dict().items()})
    return m, tm


def _masks(kind):
    rng = np.random.default_rng(5)
    am = kpm = None
    if kind in ("bool", "both"):
        am = torch.from_numpy(rng.random((L, S)) > 0.7)
        am[:, 0] = False
    if kind == "float":
        am = _rand(L, S, seed=6)
    if kind == "mask3d":
        am = _rand(N * H, L, S, seed=7)
    if kind in ("kpm", "both"):
        kpm = torch.zeros(N, S, dtype=torch.bool)
        kpm[0, -3:] = True
        kpm[2, 1] = True
    return am, kpm


OPTIONS = [(None, None, True, False), (None, None, False, True), (None, None, True, True),
           (10, 6, False, False), (10, 6, True, True), (8, None, True, False)]


@pytest.mark.parametrize("kdim,vdim,bias_kv,zero_attn", OPTIONS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("mask", [None, "bool", "float", "kpm", "both", "mask3d"])
def test_options_match_torch(kdim, vdim, bias_kv, zero_attn, batch_first, need_weights,
                             average, mask):
    m, tm = _pair(kdim, vdim, bias_kv, zero_attn, batch_first)
    shapes = [(L, E), (S, kdim or E), (S, vdim or E)]
    ts = [_rand(*((N,) + s if batch_first else (s[0], N, s[1])), seed=i)
          for i, s in enumerate(shapes)]
    ts = [t.requires_grad_() for t in ts]
    aa = [_a(t).requires_grad_() for t in ts]
    am, kpm = _masks(mask)
    kw = dict(need_weights=need_weights, average_attn_weights=average)
    out, w = m(*aa, attn_mask=None if am is None else _a(am),
               key_padding_mask=None if kpm is None else _a(kpm), **kw)
    tout, tw = tm(*ts, attn_mask=am, key_padding_mask=kpm, **kw)
    _close(out, tout)
    assert (w is None) == (tw is None)
    if w is not None:
        _close(w, tw)
    g = _rand(*tout.shape, seed=9)
    out.backward(_a(g))
    tout.backward(g)
    for a, t in zip(aa, ts):
        _close(a.grad, t.grad, 5e-5)
    named, tnamed = list(m.named_parameters()), list(tm.named_parameters())
    assert [n for n, _ in named] == [n for n, _ in tnamed]
    for (name, p), (_, tp) in zip(named, tnamed):
        _close(p.grad, tp.grad, 5e-5)


@pytest.mark.parametrize("bias_kv,zero_attn", [(True, False), (False, True), (True, True)])
def test_causal_hint_with_extra_keys(bias_kv, zero_attn):
    """is_causal without need_weights hands the extended (L, L+1..) keys to the
    fused kernel with its causal flag, as torch's does."""
    m, tm = _pair(None, None, bias_kv, zero_attn)
    x = _rand(L, N, E)
    cm = torch.nn.Transformer.generate_square_subsequent_mask(L)
    out, _ = m(_a(x), _a(x), _a(x), attn_mask=_a(cm), is_causal=True, need_weights=False)
    tout, _ = tm(x, x, x, attn_mask=cm, is_causal=True, need_weights=False)
    _close(out, tout)


def test_unbatched_with_extra_keys():
    m, tm = _pair(10, 6, True, True)
    q, k, v = _rand(L, E), _rand(S, 10, seed=1), _rand(S, 6, seed=2)
    kpm = torch.tensor([False] * (S - 2) + [True] * 2)
    out, w = m(_a(q), _a(k), _a(v), key_padding_mask=_a(kpm))
    tout, tw = tm(q, k, v, key_padding_mask=kpm)
    _close(out, tout)
    _close(w, tw)


@pytest.mark.parametrize("kdim,vdim,bias_kv,zero_attn", OPTIONS)
def test_state_dict_both_ways(kdim, vdim, bias_kv, zero_attn):
    """ampy's freshly initialised weights load into torch and give ampy's
    numbers; separate projections leave in_proj_weight None on both sides."""
    m = nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim, add_bias_kv=bias_kv,
                              add_zero_attn=zero_attn)
    tm = torch.nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim, add_bias_kv=bias_kv,
                                     add_zero_attn=zero_attn)
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in
                        m.state_dict().items()})
    separate = (kdim or E) != E or (vdim or E) != E
    assert (m.in_proj_weight is None) == (tm.in_proj_weight is None) == separate
    assert (m.bias_k is None) == (tm.bias_k is None) == (not bias_kv)
    assert m.add_zero_attn == tm.add_zero_attn == zero_attn
    q, k, v = _rand(L, N, E), _rand(S, N, kdim or E, seed=1), _rand(S, N, vdim or E, seed=2)
    out, w = m(_a(q), _a(k), _a(v))
    tout, tw = tm(q, k, v)
    _close(out, tout)
    _close(w, tw)


def test_initialisation_is_torchs():
    """bias_k / bias_v: xavier_normal_ of a (1, 1, E) tensor, std sqrt(1 / E);
    separate projections xavier_uniform_ of their own shapes; biases zero."""
    ampy.manual_seed(0)
    big = 4096
    m = nn.MultiheadAttention(big, 1, add_bias_kv=True, kdim=64, vdim=32)
    for p in (m.bias_k, m.bias_v):
        assert tuple(p.shape) == (1, 1, big)
        std = float(p.detach().numpy().std())
        assert abs(std - (1.0 / big) ** 0.5) < 0.05 * (1.0 / big) ** 0.5
    for p, fan_in in ((m.q_proj_weight, big), (m.k_proj_weight, 64), (m.v_proj_weight, 32)):
        bound = (6.0 / (fan_in + big)) ** 0.5
        vals = p.detach().numpy()
        assert vals.shape == (big, fan_in) and np.abs(vals).max() <= bound
        assert np.abs(vals).max() > 0.99 * bound
    assert not m.in_proj_bias.detach().numpy().any()
    assert not m.out_proj.bias.detach().numpy().any()


@pytest.mark.parametrize("kdim,vdim,bias_kv,zero_attn", OPTIONS)
def test_bf16_autocast_against_float64(kdim, vdim, bias_kv, zero_attn):
    m, tm = _pair(kdim, vdim, bias_kv, zero_attn)
    q, k, v = _rand(L, N, E), _rand(S, N, kdim or E, seed=1), _rand(S, N, vdim or E, seed=2)
    am, kpm = _masks("both")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tout, tw = tm(q, k, v, attn_mask=am, key_padding_mask=kpm)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        out, w = m(_a(q), _a(k), _a(v), attn_mask=_a(am), key_padding_mask=_a(kpm))
    assert str(out.dtype).split(".")[-1] == str(tout.dtype).split(".")[-1]
    assert str(w.dtype).split(".")[-1] == str(tw.dtype).split(".")[-1]
    g = _rand(*out.shape, seed=9)
    out.float().backward(_a(g))
    tm.double()
    ref, rw = tm(q.double(), k.double(), v.double(), attn_mask=am, key_padding_mask=kpm)
    ref.backward(g.double())
    _close(out, ref, 0.04)
    _close(w, rw, 0.04)
    for (_, p), (_, tp) in zip(m.named_parameters(), tm.named_parameters()):
        _close(p.grad, tp.grad, 0.06)


def test_static_keys_and_values_match_torch():
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H)
    args = [t.detach() for t in (tm.in_proj_weight, tm.in_proj_bias)]
    out_args = [t.detach() for t in (tm.out_proj.weight, tm.out_proj.bias)]
    q = _rand(L, N, E)
    sk, sv = _rand(N * H, S, E // H, seed=1), _rand(N * H, S, E // H, seed=2)
    kpm = torch.zeros(N, S, dtype=torch.bool)
    kpm[1, 2] = True
    tout, tw = torch.nn.functional.multi_head_attention_forward(
        q, q, q, E, H, *args, None, None, True, 0.0, *out_args, key_padding_mask=kpm,
        static_k=sk, static_v=sv)
    out, w = _mha.multi_head_attention_forward(
        _a(q), _a(q), _a(q), E, H, *map(_a, args), None, None, True, 0.0, *map(_a, out_args),
        key_padding_mask=_a(kpm), static_k=_a(sk), static_v=_a(sv))
    _close(out, tout)
    _close(w, tw)


def _raises_like_torch(fn, tfn, match):
    with pytest.raises(Exception) as texc:
        tfn()
    with pytest.raises(type(texc.value), match=match):
        fn()


def test_bad_inputs_raise_as_torch_and_leave_inputs_unchanged():
    m, tm = _pair(10, 6, True, True)
    q, k, v = _rand(L, N, E), _rand(S, N, 10, seed=1), _rand(S, N, 6, seed=2)
    aq, ak, av = _a(q), _a(k), _a(v)
    before = [t.numpy().copy() for t in (aq, ak, av)]
    bad_kpm = torch.zeros(N, S + 1, dtype=torch.bool)
    _raises_like_torch(lambda: m(aq, ak, av, key_padding_mask=_a(bad_kpm)),
                       lambda: tm(q, k, v, key_padding_mask=bad_kpm),
                       "key_padded_mask.shape\\[1\\] to be 9")
    bad_am = torch.zeros(L, S + 2)
    _raises_like_torch(lambda: m(aq, ak, av, attn_mask=_a(bad_am)),
                       lambda: tm(q, k, v, attn_mask=bad_am), "2D attn_mask")
    _raises_like_torch(lambda: m(aq, ak, av[:-1]), lambda: tm(q, k, v[:-1]),
                       "do not match value's")
    for t, b in zip((aq, ak, av), before):
        assert np.array_equal(t.numpy(), b)
    torch.manual_seed(0)
    t2 = torch.nn.MultiheadAttention(E, H, add_bias_kv=True)
    w = [t.detach() for t in (t2.in_proj_weight, t2.in_proj_bias)]
    o = [t.detach() for t in (t2.out_proj.weight, t2.out_proj.bias)]
    bk, bv = t2.bias_k.detach(), t2.bias_v.detach()
    sk = _rand(N * H, S, E // H)
    x = _rand(L, N, E)
    for extra, msg in (((bk, None), "bias_k is set but bias_v is None"),
                       ((None, bv), "bias_v is set but bias_k is None"),
                       ((bk, bv), "bias cannot be added to static key")):
        tkw = dict(static_k=sk) if None not in extra else {}
        akw = {k_: _a(t) for k_, t in tkw.items()}
        aextra = [None if t is None else _a(t) for t in extra]
        _raises_like_torch(
            lambda: _mha.multi_head_attention_forward(_a(x), _a(x), _a(x), E, H, *map(_a, w),
                                                   *aextra, False, 0.0, *map(_a, o), **akw),
            lambda: torch.nn.functional.multi_head_attention_forward(
                x, x, x, E, H, *w, *extra, False, 0.0, *o, **tkw), msg)
    bad_sk = _rand(N * H + 1, S, E // H)
    _raises_like_torch(
        lambda: _mha.multi_head_attention_forward(_a(x), _a(x), _a(x), E, H, *map(_a, w), None,
                                               None, False, 0.0, *map(_a, o),
                                               static_k=_a(bad_sk), static_v=_a(bad_sk)),
        lambda: torch.nn.functional.multi_head_attention_forward(
            x, x, x, E, H, *w, None, None, False, 0.0, *o, static_k=bad_sk, static_v=bad_sk),
        "static_k.size")


def test_transformer_layers_keep_plain_attention():
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=32)
    dec = nn.TransformerDecoderLayer(E, H, dim_feedforward=32)
    for attn in (layer.self_attn, dec.self_attn, dec.multihead_attn):
        assert attn.bias_k is None and attn.bias_v is None and not attn.add_zero_attn
        assert attn.in_proj_weight is not None and attn.q_proj_weight is None
