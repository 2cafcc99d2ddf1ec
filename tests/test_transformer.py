"""nn.MultiheadAttention, the Transformer encoder/decoder layers and stacks,
nn.Transformer and RMSNorm against torch 2.13 CPU: state_dicts loaded both
ways, forward and gradients in train mode (dropout 0, so both sides are
deterministic) and eval mode, masks (bool / float attn_mask, key padding,
causal), batch_first, norm_first, activations, kdim/vdim, need_weights.

Tolerance (float32): the layers are compositions of GEMMs, softmax and layer
norms whose summation orders differ from torch's; each GEMM output carries
<= K u sum|a b| of rounding (u = 2^-24, K <= 64 here) and the layer norms
keep errors relative, so 2e-5 relative to the output's scale (plus 2e-5
absolute) bounds the differences with margin; gradients get 5e-5.
"""
import numpy as np
import pytest

import ampy
from ampy import nn
from ampy.nn import functional as F

torch = pytest.importorskip("torch")


def _a(t):
    return ampy.from_numpy(t.detach().numpy().copy())


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a.detach().numpy()))


def _load_from_torch(mod, tmod):
    mod.load_state_dict({k: _a(v) for k, v in tmod.state_dict().items()})


def _close(a, t, tol=2e-5):
    got, ref = a.detach().numpy().astype(np.float64), t.detach().double().numpy()
    assert got.shape == ref.shape
    scale = max(1.0, float(np.abs(ref).max()))
    assert np.abs(got - ref).max() <= tol * scale + tol, np.abs(got - ref).max()


def _rand(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _pair_inputs(*ts):
    out_a, out_t = [], []
    for t in ts:
        tt = t.clone().requires_grad_()
        out_t.append(tt)
        out_a.append(_a(t).requires_grad_())
    return out_a, out_t


# ------------------------------------------------------------ MultiheadAttention
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("mask", [None, "bool", "float", "kpm", "both", "mask3d"])
def test_mha_self_attention(batch_first, need_weights, average, mask):
    E, H, L, N = 16, 4, 7, 3
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    m = nn.MultiheadAttention(E, H, batch_first=batch_first)
    _load_from_torch(m, tm)
    x = _rand(N, L, E) if batch_first else _rand(L, N, E)
    (ax,), (tx,) = _pair_inputs(x)
    rng = np.random.default_rng(1)
    am = kpm = None
    if mask in ("bool", "both"):
        am = torch.from_numpy(rng.random((L, L)) > 0.7)
        am.fill_diagonal_(False)
    if mask == "float":
        am = _rand(L, L, seed=2)
    if mask == "mask3d":
        am = _rand(N * H, L, L, seed=3)
    if mask in ("kpm", "both"):
        kpm = torch.zeros(N, L, dtype=torch.bool)
        kpm[0, -2:] = True
    kw = dict(need_weights=need_weights, average_attn_weights=average)
    out, w = m(ax, ax, ax, attn_mask=None if am is None else _a(am),
               key_padding_mask=None if kpm is None else _a(kpm), **kw)
    tout, tw = tm(tx, tx, tx, attn_mask=am, key_padding_mask=kpm, **kw)
    _close(out, tout)
    assert (w is None) == (tw is None)
    if w is not None:
        _close(w, tw)
    g = _rand(*tout.shape, seed=4)
    out.backward(_a(g))
    tout.backward(g)
    _close(ax.grad, tx.grad, 5e-5)
    for (name, p), (_, tp) in zip(m.named_parameters(), tm.named_parameters()):
        _close(p.grad, tp.grad, 5e-5)


@pytest.mark.parametrize("kv", ["same", "kdim"])
def test_mha_cross_attention_and_kdim(kv):
    E, H, L, S, N = 12, 3, 5, 9, 2
    kdim, vdim = (E, E) if kv == "same" else (10, 6)
    tm = torch.nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim, bias=kv == "same")
    m = nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim, bias=kv == "same")
    assert sorted(m.state_dict()) == sorted(tm.state_dict())
    _load_from_torch(m, tm)
    (q, k, v), (tq, tk, tv) = _pair_inputs(_rand(L, N, E), _rand(S, N, kdim, seed=1),
                                           _rand(S, N, vdim, seed=2))
    out, w = m(q, k, v)
    tout, tw = tm(tq, tk, tv)
    _close(out, tout)
    _close(w, tw)
    out.sum().backward()
    tout.sum().backward()
    for a, t in ((q, tq), (k, tk), (v, tv)):
        _close(a.grad, t.grad, 5e-5)


def test_mha_unbatched_causal_hint_and_eval():
    E, H, L = 8, 2, 6
    tm = torch.nn.MultiheadAttention(E, H, dropout=0.5)
    m = nn.MultiheadAttention(E, H, dropout=0.5)
    _load_from_torch(m, tm)
    m.eval(), tm.eval()
    x = _rand(L, E)
    cm = torch.nn.Transformer.generate_square_subsequent_mask(L)
    assert np.array_equal(nn.Transformer.generate_square_subsequent_mask(L).numpy(), cm.numpy())
    out, _ = m(_a(x), _a(x), _a(x), attn_mask=_a(cm), is_causal=True, need_weights=False)
    tout, _ = tm(x, x, x, attn_mask=cm, is_causal=True, need_weights=False)
    _close(out, tout)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(_a(x), _a(x), _a(x), is_causal=True)


def test_mha_dropout_trains_and_bad_masks():
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = ampy.randn(4, 2, 8)
    a, _ = m(x, x, x)
    b, _ = m(x, x, x)
    assert not np.array_equal(a.detach().numpy(), b.detach().numpy())
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        m(x, x, x, attn_mask=ampy.zeros(3, 4))
    with pytest.raises(AssertionError, match="key_padded_mask.shape"):
        m(x, x, x, key_padding_mask=ampy.zeros(3, 4, dtype=ampy.bool))
    with pytest.raises(AssertionError, match="only bool and floating"):
        m(x, x, x, attn_mask=ampy.zeros(4, 4, dtype=ampy.int64))
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(10, 3)


# ------------------------------------------------------------ encoder / decoder
def _encoder_pair(norm_first, activation, batch_first, layers=2):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=32, dropout=0.0, batch_first=batch_first, norm_first=norm_first)
    tact = {"relu": "relu", "gelu": "gelu", "callable": torch.nn.functional.silu}[activation]
    act = {"relu": "relu", "gelu": "gelu", "callable": F.silu}[activation]
    tl = torch.nn.TransformerEncoderLayer(16, 4, activation=tact, **kw)
    te = torch.nn.TransformerEncoder(tl, layers, norm=torch.nn.LayerNorm(16),
                                     enable_nested_tensor=False)
    e = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, activation=act, **kw), layers,
                              norm=nn.LayerNorm(16))
    assert list(e.state_dict()) == list(te.state_dict())
    _load_from_torch(e, te)
    return e, te


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", "callable"])
@pytest.mark.parametrize("mask", [None, "causal", "kpm"])
def test_encoder_train_and_grads(norm_first, activation, mask):
    e, te = _encoder_pair(norm_first, activation, batch_first=True)
    (x,), (tx,) = _pair_inputs(_rand(3, 7, 16))
    cm = torch.nn.Transformer.generate_square_subsequent_mask(7) if mask == "causal" else None
    kpm = None
    if mask == "kpm":
        kpm = torch.zeros(3, 7, dtype=torch.bool)
        kpm[1, -3:] = True
    out = e(x, mask=None if cm is None else _a(cm),
            src_key_padding_mask=None if kpm is None else _a(kpm))
    tout = te(tx, mask=cm, src_key_padding_mask=kpm)
    _close(out, tout)
    out.pow(2).sum().backward()
    tout.pow(2).sum().backward()
    _close(x.grad, tx.grad, 5e-5)
    for (n, p), (_, tp) in zip(e.named_parameters(), te.named_parameters()):
        _close(p.grad, tp.grad, 5e-5)


def test_encoder_eval_seq_first():
    e, te = _encoder_pair(False, "relu", batch_first=False)
    e.eval(), te.eval()
    x = _rand(7, 3, 16)
    with torch.no_grad():
        tout = te(x)
    with ampy.no_grad():
        out = e(_a(x))
    _close(out, tout)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_train_and_grads(norm_first, batch_first):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=24, dropout=0.0, batch_first=batch_first, norm_first=norm_first)
    td = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(16, 2, **kw), 2)
    d = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 2, **kw), 2)
    assert list(d.state_dict()) == list(td.state_dict())
    _load_from_torch(d, td)
    shp_t, shp_m = ((2, 6, 16), (2, 9, 16)) if batch_first else ((6, 2, 16), (9, 2, 16))
    (t, mem), (tt, tmem) = _pair_inputs(_rand(*shp_t), _rand(*shp_m, seed=1))
    cm = torch.nn.Transformer.generate_square_subsequent_mask(6)
    mkpm = torch.zeros(2, 9, dtype=torch.bool)
    mkpm[0, -4:] = True
    out = d(t, mem, tgt_mask=_a(cm), memory_key_padding_mask=_a(mkpm))
    tout = td(tt, tmem, tgt_mask=cm, memory_key_padding_mask=mkpm)
    _close(out, tout)
    out.sum().backward()
    tout.sum().backward()
    _close(t.grad, tt.grad, 5e-5)
    _close(mem.grad, tmem.grad, 5e-5)


def test_transformer_state_dict_both_ways():
    torch.manual_seed(0)
    kw = dict(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
              dim_feedforward=20, dropout=0.0)
    m = nn.Transformer(**kw)
    tm = torch.nn.Transformer(**kw)
    assert list(m.state_dict()) == list(tm.state_dict())
    tm.load_state_dict({k: _t(v) for k, v in m.state_dict().items()})
    src, tgt = _rand(5, 2, 16), _rand(4, 2, 16, seed=1)
    cm = torch.nn.Transformer.generate_square_subsequent_mask(4)
    _close(m(_a(src), _a(tgt), tgt_mask=_a(cm)), tm(src, tgt, tgt_mask=cm))


# ---------------------------------------------------------------------- RMSNorm
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float64", "float16"])
@pytest.mark.parametrize("eps", [None, 1e-5])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_matches_torch(dt, eps, affine):
    """Same composite as torch (upcast, rsqrt(mean(x^2) + eps), cast back, * weight):
    the only difference is mean's summation order, so halves agree to one
    rounding of the result (1 ulp) and float32/float64 to a few u."""
    tdt = getattr(torch, dt)
    x = (_rand(4, 5, 16) * 3).to(tdt)
    tn = torch.nn.RMSNorm((5, 16), eps=eps, elementwise_affine=affine, dtype=tdt)
    if affine:
        with torch.no_grad():
            tn.weight.copy_(_rand(5, 16, seed=1).to(tdt))
    n = nn.RMSNorm((5, 16), eps=eps, elementwise_affine=affine, dtype=getattr(ampy, dt))
    if affine:
        n.load_state_dict({"weight": _a(tn.weight.float()).to(getattr(ampy, dt))})
    tx = x.clone().requires_grad_()
    ax = _a(x.float()).to(getattr(ampy, dt)).requires_grad_()
    out, tout = n(ax), tn(tx)
    assert out.dtype is getattr(ampy, dt)
    rel = {"float32": 1e-6, "float64": 1e-14, "bfloat16": 2 ** -7, "float16": 2 ** -10}[dt]
    got, ref = out.detach().double().numpy(), tout.detach().double().numpy()
    assert np.all(np.abs(got - ref) <= rel * np.abs(ref) + rel)
    g = _rand(4, 5, 16, seed=2).to(tdt)
    out.backward(_a(g.float()).to(getattr(ampy, dt)))
    tout.backward(g)
    gr, tg = ax.grad.double().numpy(), tx.grad.double().numpy()
    assert np.all(np.abs(gr - tg) <= 8 * rel * (np.abs(tg) + np.abs(tg).max()))


def test_rms_norm_bad_inputs():
    x = ampy.randn(3, 4)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.rms_norm(x, (5,))
    with pytest.raises(RuntimeError, match="weight"):
        F.rms_norm(x, (4,), ampy.ones(3))
    with pytest.raises(TypeError, match="'input' must be Tensor"):
        F.rms_norm([1.0], (1,))


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_autocast_dtypes_and_values_as_torch(dt):
    """Under CPU autocast the projections and attention run in the half dtype,
    layer norm and the residual sums in float32, on both sides: the same
    output dtypes, and values within the half dtype's rounding (4 u)."""
    e, te = _encoder_pair(False, "gelu", batch_first=True, layers=1)
    x = _rand(2, 5, 16)
    with torch.autocast("cpu", dtype=getattr(torch, dt)):
        tout, (tm, _) = te(x), te.layers[0].self_attn(x, x, x)
    with ampy.autocast("cpu", dtype=getattr(ampy, dt)):
        ax = _a(x)
        out, (m, _) = e(ax), e.layers[0].self_attn(ax, ax, ax)
    assert str(out.dtype).split(".")[-1] == str(tout.dtype).split(".")[-1] == "float32"
    assert str(m.dtype).split(".")[-1] == str(tm.dtype).split(".")[-1] == dt
    u = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}[dt]
    _close(out, tout, 4 * u)
    _close(m, tm, 4 * u)
