"""ampy.nn.functional.multi_head_attention_forward against torch 2.13's:
the signature, (L, N, E) batch-second and unbatched inputs, packed and
separate projection weights, need_weights with and without head averaging,
bool and float key_padding_mask / attn_mask (2-D and 3-D), bias_k/bias_v,
add_zero_attn, static_k/static_v, is_causal, training=False turning
dropout off, gradients, autocast dtypes and torch's errors.

Tolerances. float64: every result is a few GEMMs, a softmax and a mean,
each summing at most 32 terms of size <= max|ref|, so |err| <= 1e-12
(1 + max|ref|) (about 4500 u_64). float32/float16/bfloat16: ampy and torch
in the same dtype each round every intermediate; ampy's distance from
float64 torch is at most twice torch's own plus 64 u (1 + max|ref|).
"""
import inspect

import numpy as np
import pytest

import ampy
from ampy.nn import functional as F

from _helpers import FLOAT_DTYPES, HALF_DTYPES, TORCH_DTYPE, UNIT_ROUNDOFF, host_f64

torch = pytest.importorskip("torch")
TF = torch.nn.functional

E, H, L, S, N = 16, 4, 5, 7, 3


def _rand(shape, seed, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def _params(kdim=E, bias_kv=False):
    w = 1 / np.sqrt(E)
    p = {"in_proj_weight": _rand((3 * E, E), 10, w), "in_proj_bias": _rand((3 * E,), 11, 0.1),
         "out_proj_weight": _rand((E, E), 12, w), "out_proj_bias": _rand((E,), 13, 0.1),
         "q_proj_weight": _rand((E, E), 14, w), "k_proj_weight": _rand((E, kdim), 15, w),
         "v_proj_weight": _rand((E, kdim), 16, w)}
    if bias_kv:
        p["bias_k"], p["bias_v"] = _rand((1, 1, E), 17), _rand((1, 1, E), 18)
    return p


def _conv(x, lib, dt, grad=False):
    """A NumPy array (or None / other value) as an ampy or torch tensor."""
    if not isinstance(x, np.ndarray):
        return x
    if lib == "torch":
        t = torch.from_numpy(x)
        t = t.to(TORCH_DTYPE[dt]) if t.is_floating_point() else t
        return t.requires_grad_() if grad else t
    a = ampy.from_numpy(x)
    a = a.to(dt) if a.dtype.is_floating_point else a
    return a.requires_grad_() if grad else a


def _call(lib, dt, q, k, v, p, grad=False, separate=False, **kw):
    f = F.multi_head_attention_forward if lib == "ampy" else TF.multi_head_attention_forward
    c = {n: _conv(x, lib, dt, grad) for n, x in p.items()}
    tq = _conv(q, lib, dt, grad)
    tk = tq if k is q else _conv(k, lib, dt, grad)
    tv = tk if v is k else _conv(v, lib, dt, grad)
    kw = {n: _conv(x, lib, dt) for n, x in kw.items()}
    out = f(tq, tk, tv, E, H, None if separate else c["in_proj_weight"], c["in_proj_bias"],
            c.get("bias_k"), c.get("bias_v"), kw.pop("add_zero_attn", False),
            kw.pop("dropout_p", 0.0), c["out_proj_weight"], c["out_proj_bias"],
            use_separate_proj_weight=separate, q_proj_weight=c["q_proj_weight"],
            k_proj_weight=c["k_proj_weight"], v_proj_weight=c["v_proj_weight"], **kw)
    return out, [tq, tk, tv] + [c[n] for n in sorted(c)]


def _close(a, t, dt):
    if a is None or t is None:
        assert a is None and t is None
        return
    got, ref = host_f64(a), t.detach().double().numpy()
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 1e-12 * (1 + np.abs(ref).max()), np.abs(got - ref).max()


def _both(dt=ampy.float64, q=None, k=None, v=None, p=None, separate=False, **kw):
    q = _rand((L, N, E), 1) if q is None else q
    k = q if k is None else k
    v = k if v is None else v
    p = _params() if p is None else p
    a, _ = _call("ampy", dt, q, k, v, p, separate=separate, **kw)
    t, _ = _call("torch", dt, q, k, v, p, separate=separate, **kw)
    return a, t


def test_signature_is_torchs():
    ours = inspect.signature(F.multi_head_attention_forward).parameters
    theirs = inspect.signature(TF.multi_head_attention_forward).parameters
    assert [(n, p.default) for n, p in ours.items()] == [(n, p.default)
                                                        for n, p in theirs.items()]
    assert "multi_head_attention_forward" in F.__all__


KPM_BOOL = np.random.default_rng(3).random((N, S)) < 0.3
KPM_BOOL[:, 0] = False                                   # every row keeps a key
MASKS = {
    "none": {},
    "kpm_bool": {"key_padding_mask": KPM_BOOL[:, :L]},
    "kpm_float": {"key_padding_mask": _rand((N, L), 4)},
    "attn_bool_2d": {"attn_mask": np.triu(np.ones((L, L), bool), 1)},
    "attn_float_3d": {"attn_mask": _rand((N * H, L, L), 5)},
    "both": {"attn_mask": _rand((L, L), 6), "key_padding_mask": KPM_BOOL[:, :L]},
}


@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.filterwarnings("ignore:Support for mismatched")
def test_self_attention_masks_and_weights(mask, need_weights, average):
    (a, aw), (t, tw) = _both(need_weights=need_weights, average_attn_weights=average,
                             **MASKS[mask])
    _close(a, t, ampy.float64)
    _close(aw, tw, ampy.float64)


@pytest.mark.parametrize("need_weights", [False, True])
def test_cross_attention_separate_weights_kdim(need_weights):
    kdim = 6
    k, v = _rand((S, N, kdim), 2), _rand((S, N, kdim), 3)
    (a, aw), (t, tw) = _both(k=k, v=v, p=_params(kdim), separate=True, need_weights=need_weights,
                             key_padding_mask=KPM_BOOL)
    _close(a, t, ampy.float64)
    _close(aw, tw, ampy.float64)


@pytest.mark.parametrize("need_weights", [False, True])
def test_packed_weights_key_is_value(need_weights):
    k = _rand((S, N, E), 2)
    (a, aw), (t, tw) = _both(k=k, v=k, need_weights=need_weights)
    _close(a, t, ampy.float64)
    _close(aw, tw, ampy.float64)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.filterwarnings("ignore:Support for mismatched")
def test_bias_kv_and_zero_attn(need_weights):
    (a, aw), (t, tw) = _both(p=_params(bias_kv=True), add_zero_attn=True,
                             need_weights=need_weights, key_padding_mask=KPM_BOOL[:, :L],
                             attn_mask=_rand((L, L), 7))
    _close(a, t, ampy.float64)
    _close(aw, tw, ampy.float64)


def test_static_keys_and_values():
    sk, sv = _rand((N * H, S, E // H), 8), _rand((N * H, S, E // H), 9)
    (a, aw), (t, tw) = _both(static_k=sk, static_v=sv, key_padding_mask=KPM_BOOL)
    _close(a, t, ampy.float64)
    _close(aw, tw, ampy.float64)


@pytest.mark.parametrize("need_weights", [False, True])
def test_unbatched_and_is_causal(need_weights):
    q = _rand((L, E), 1)
    causal = np.triu(np.ones((L, L), bool), 1)
    (a, aw), (t, tw) = _both(q=q, attn_mask=causal, is_causal=True, need_weights=need_weights,
                             key_padding_mask=np.zeros(L, bool))
    _close(a, t, ampy.float64)
    _close(aw, tw, ampy.float64)


def test_training_false_turns_dropout_off():
    (a, aw), (t, tw) = _both(dropout_p=0.5, training=False)
    _close(a, t, ampy.float64)
    _close(aw, tw, ampy.float64)
    (a0, _), _ = _both(dropout_p=0.0)
    np.testing.assert_array_equal(a.numpy(), a0.numpy())


def test_dropout_in_training_drops_weights():
    ampy.manual_seed(0)
    (a, aw), _ = _both(dropout_p=0.5, training=True, average_attn_weights=False)
    w = aw.numpy()
    assert np.any(w == 0) and np.all((w == 0) | (w > 0))
    (b, bw), _ = _both(dropout_p=0.0)
    assert not np.array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.filterwarnings("ignore:Support for mismatched")
def test_gradients_match_torch(need_weights):
    q, k = _rand((L, N, E), 1), _rand((S, N, E), 2)
    p = _params()
    kw = dict(need_weights=need_weights, key_padding_mask=KPM_BOOL, attn_mask=_rand((L, S), 3))
    (a, aw), ain = _call("ampy", ampy.float64, q, k, k, p, grad=True, **kw)
    (t, tw), tin = _call("torch", ampy.float64, q, k, k, p, grad=True, **kw)
    g = _rand((L, N, E), 4)
    a.backward(ampy.from_numpy(g))
    t.backward(torch.from_numpy(g))
    for x, y in zip(ain, tin):
        if y.grad is not None or x.grad is not None:
            _close(x.grad, y.grad, ampy.float64)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("dt", [d for d in FLOAT_DTYPES if d is not ampy.float64], ids=str)
def test_dtypes_within_torchs_own_error(dt, need_weights):
    q = _rand((L, N, E), 1)
    kw = dict(need_weights=need_weights, key_padding_mask=KPM_BOOL[:, :L])
    (a, aw), _ = _call("ampy", dt, q, q, q, _params(), **kw)
    (t, tw), _ = _call("torch", dt, q, q, q, _params(), **kw)
    (r, rw), _ = _call("torch", ampy.float64, q, q, q, _params(), **kw)
    assert a.dtype is dt
    for x, y, ref in ((a, t, r), (aw, tw, rw)):
        if ref is None:
            continue
        ref = ref.numpy()
        err_a = np.abs(host_f64(x) - ref).max()
        err_t = np.abs(y.double().numpy() - ref).max()
        assert err_a <= 2 * err_t + 64 * UNIT_ROUNDOFF[dt] * (1 + np.abs(ref).max())


@pytest.mark.parametrize("adt", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("need_weights", [False, True])
def test_autocast_dtypes_as_torch(adt, need_weights):
    q = _rand((L, N, E), 1).astype(np.float32)
    p = {n: x.astype(np.float32) for n, x in _params().items()}
    with ampy.autocast("cpu", dtype=adt):
        (a, aw), _ = _call("ampy", ampy.float32, q, q, q, p, need_weights=need_weights)
    with torch.autocast("cpu", dtype=TORCH_DTYPE[adt]):
        (t, tw), _ = _call("torch", ampy.float32, q, q, q, p, need_weights=need_weights)
    assert TORCH_DTYPE[a.dtype] == t.dtype
    assert (aw is None) == (tw is None)
    if aw is not None:
        assert TORCH_DTYPE[aw.dtype] == tw.dtype


def _raises(exc, match, **kw):
    q = _rand((L, N, E), 1)
    qa = ampy.from_numpy(q)
    embed = kw.pop("embed", E)
    with pytest.raises(exc, match=match):
        F.multi_head_attention_forward(qa, qa, qa, embed, H,
                                       ampy.from_numpy(_params()["in_proj_weight"]), None, None,
                                       None, False, 0.0, ampy.ones(E, E).double(), None, **kw)
    with pytest.raises(exc):
        qt = torch.from_numpy(q)
        kw = {n: torch.from_numpy(x.numpy()) if isinstance(x, ampy.Tensor) else x
              for n, x in kw.items()}
        TF.multi_head_attention_forward(qt, qt, qt, embed, H,
                                        torch.from_numpy(_params()["in_proj_weight"]), None,
                                        None, None, False, 0.0, torch.ones(E, E).double(), None,
                                        **kw)
    np.testing.assert_array_equal(qa.numpy(), q)


def test_bad_arguments_raise_torchs_exceptions():
    _raises(AssertionError, "was expecting embedding dimension of 8", embed=8)
    _raises(AssertionError, "key_padding_mask", key_padding_mask=ampy.zeros(N, S, 2,
                                                                            dtype=ampy.bool))
    _raises(RuntimeError, "shape of the 2D attn_mask", attn_mask=ampy.zeros(L, L + 1))
    _raises(RuntimeError, "shape of the 3D attn_mask", attn_mask=ampy.zeros(2, L, L))
    _raises(RuntimeError, "Need attn_mask", is_causal=True)
    _raises(AssertionError, "key_padded_mask", key_padding_mask=ampy.zeros(N + 1, L,
                                                                          dtype=ampy.bool))


def test_mismatched_mask_types_warn_as_torch():
    q = _rand((L, N, E), 1)
    kw = dict(key_padding_mask=KPM_BOOL[:, :L], attn_mask=_rand((L, L), 6))
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
        _call("ampy", ampy.float64, q, q, q, _params(), **kw)
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
        _call("torch", ampy.float64, q, q, q, _params(), **kw)
