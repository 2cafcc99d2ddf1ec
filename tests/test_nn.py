"""ampy.nn side by side with torch 2.13 (CPU): fused functional ops forward and
backward, Module semantics, state_dict, init statistics, dropout."""
import math
import pickle

import numpy as np
import pytest

import ampy
from ampy import nn
from ampy.nn import functional as F

from _helpers import (TORCH_DTYPE as TORCH_DT, assert_close_ulps, assert_same_bits, grads_cpu_gpu,
                      requires_cuda, sample, sync_checks)

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float32": (2e-5, 2e-6), "float64": (1e-12, 1e-12), "float16": (2e-2, 2e-3),
       "bfloat16": (5e-2, 1e-2)}


def a_(x, dtype="float32", rg=False):
    t = ampy.tensor(np.asarray(x, np.float64) if np.asarray(x).dtype.kind == "f" else x)
    if np.asarray(x).dtype.kind == "f":
        t = t.to(getattr(ampy, dtype))
    if rg:
        t.requires_grad_(True)
    return t


def t_(x, dtype="float32", rg=False):
    t = torch.tensor(np.asarray(x))
    if t.is_floating_point():
        t = t.to(TORCH_DT[dtype])
    return t.requires_grad_(rg) if rg else t


def np_(t):
    if isinstance(t, torch.Tensor):
        return t.detach().double().numpy() if t.is_floating_point() else t.numpy()
    return t.detach().double().numpy() if t.dtype.is_floating_point else t.numpy()


def close(a, b, dtype="float32", scale=1.0):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(np_(a), np_(b), rtol=rtol, atol=atol * scale)


def backward(out, grad):
    out.backward(grad)


# ------------------------------------------------------------------ layer_norm
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("shape,norm", [((6, 33), (33,)), ((3, 4, 40), (40,)),
                                        ((2, 5, 6, 7), (6, 7)), ((4, 1), (1,))])
def test_layer_norm_forward_backward(dtype, shape, norm, cpu_path):
    rng = np.random.default_rng([len(dtype), *shape])
    x = rng.standard_normal(shape) * 3 + 1
    w, b = rng.standard_normal(norm), rng.standard_normal(norm)
    g = rng.standard_normal(shape)
    ax, aw, ab = a_(x, dtype, True), a_(w, dtype, True), a_(b, dtype, True)
    # oracle: torch in float64 on the same (rounded) inputs
    tx, tw, tb = (t_(np_(v.detach()), "float64", True) for v in (ax, aw, ab))
    ay = F.layer_norm(ax, norm, aw, ab, eps=1e-5)
    ty = TF.layer_norm(tx, norm, tw, tb, eps=1e-5)
    assert ay.dtype is getattr(ampy, dtype) and tuple(ay.shape) == shape
    close(ay, ty, dtype)
    ag = a_(g, dtype)
    backward(ay, ag)
    ty.backward(t_(np_(ag), "float64"))
    scale = math.prod(shape) / math.prod(norm)  # dw/db sum over rows
    close(ax.grad, tx.grad, dtype, scale=10)
    close(aw.grad, tw.grad, dtype, scale=scale)
    close(ab.grad, tb.grad, dtype, scale=scale)
    assert aw.grad.dtype is aw.dtype


def test_layer_norm_no_affine_and_mixed_weight_dtype():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 50))
    ax, tx = a_(x, "bfloat16", True), t_(x, "bfloat16", True)
    close(F.layer_norm(ax, (50,)), TF.layer_norm(tx, (50,)), "bfloat16")
    # bf16 input, fp32 weight (what CPU autocast produces): output bf16, dw fp32
    w = rng.standard_normal(50)
    aw, tw = a_(w, "float32", True), t_(w, "float32", True)
    ay, ty = F.layer_norm(ax, (50,), aw), TF.layer_norm(tx, (50,), tw)
    assert ay.dtype is ampy.bfloat16 and ty.dtype == torch.bfloat16
    close(ay, ty, "bfloat16")
    g = rng.standard_normal((8, 50))
    backward(ay, a_(g, "bfloat16"))
    ty.backward(t_(g, "bfloat16"))
    assert aw.grad.dtype is ampy.float32
    close(aw.grad, tw.grad, "bfloat16", scale=8)


def test_layer_norm_bad_inputs():
    x = ampy.randn(3, 5)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match="weight"):
        F.layer_norm(x, (5,), ampy.ones(4))
    with pytest.raises(TypeError, match="input"):
        F.layer_norm(np.zeros((3, 5)), (5,))


def test_layer_norm_portable_path_matches_simd():
    rng = np.random.default_rng(2)
    x = a_(rng.standard_normal((16, 257)))
    y1 = F.layer_norm(x, (257,))
    ampy._C._set_cpu_level("portable")
    try:
        y0 = F.layer_norm(x, (257,))
        l0 = F.cross_entropy(x, ampy.tensor(np.arange(16) * 7))
    finally:
        ampy._C._set_cpu_level(None)
    l1 = F.cross_entropy(x, ampy.tensor(np.arange(16) * 7))
    np.testing.assert_allclose(l0.item(), l1.item(), rtol=1e-6)
    np.testing.assert_allclose(y0.numpy(), y1.numpy(), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------- cross_entropy
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted,ls", [(False, 0.0), (True, 0.0), (False, 0.1), (True, 0.25)])
def test_cross_entropy(dtype, reduction, weighted, ls, cpu_path):
    rng = np.random.default_rng(7)
    n, c = 13, 37
    x = rng.standard_normal((n, c)) * 3
    t = rng.integers(0, c, n)
    t[[2, 5]] = -100
    w = rng.random(c) + 0.5 if weighted else None
    ax, tx = a_(x, dtype, True), t_(x, dtype, True)
    aw = None if w is None else a_(w, dtype)
    tw = None if w is None else t_(w, dtype)
    al = F.cross_entropy(ax, a_(t), weight=aw, reduction=reduction, label_smoothing=ls)
    tl = TF.cross_entropy(tx, t_(t), weight=tw, reduction=reduction, label_smoothing=ls)
    assert al.dtype is getattr(ampy, dtype) and tuple(al.shape) == tuple(tl.shape)
    close(al, tl, dtype, scale=10)
    g = rng.standard_normal(tuple(tl.shape)) + 1
    backward(al, a_(g, dtype))
    tl.backward(t_(g, dtype))
    close(ax.grad, tx.grad, dtype)


def test_cross_entropy_kdim_1d_ignore_all_and_module():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 3, 4))
    t = rng.integers(0, 5, (2, 3, 4))
    ax, tx = a_(x, rg=True), t_(x, rg=True)
    close(F.cross_entropy(ax, a_(t), reduction="none"), TF.cross_entropy(tx, t_(t),
                                                                          reduction="none"))
    al, tl = nn.CrossEntropyLoss(label_smoothing=0.2)(ax, a_(t)), \
        torch.nn.CrossEntropyLoss(label_smoothing=0.2)(tx, t_(t))
    close(al, tl)
    al.backward()
    tl.backward()
    close(ax.grad, tx.grad)
    # 1-d input with a 0-d target
    v = rng.standard_normal(6)
    close(F.cross_entropy(a_(v), ampy.tensor(2)), TF.cross_entropy(t_(v), torch.tensor(2)))
    # every target ignored: mean is nan, as torch
    tt = np.full(4, -100)
    a_nan = F.cross_entropy(a_(x[:, :, 0, 0].T[:4] if False else rng.standard_normal((4, 3))),
                            a_(tt))
    assert math.isnan(a_nan.item())


def test_cross_entropy_bad_targets_leave_inputs():
    x = ampy.randn(4, 3)
    before = x.numpy().copy()
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        F.cross_entropy(x, ampy.tensor([0, 1, 3, 2]))
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        F.nll_loss(x, ampy.tensor([0, -1, 1, 2]))
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(x, ampy.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, ampy.tensor([0, 1, 1, 2]), reduction="avg")
    with pytest.raises(RuntimeError, match="label_smoothing"):
        F.cross_entropy(x, ampy.tensor([0, 1, 1, 2]), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="weight tensor should be defined"):
        F.cross_entropy(x, ampy.tensor([0, 1, 1, 2]), weight=ampy.ones(5))
    np.testing.assert_array_equal(x.numpy(), before)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction, cpu_path):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((9, 6))
    t = rng.integers(0, 6, 9)
    t[1] = 3
    w = rng.random(6) + 0.1
    ax, tx = a_(x, rg=True), t_(x, rg=True)
    al = F.nll_loss(ax, a_(t), weight=a_(w), ignore_index=3, reduction=reduction)
    tl = TF.nll_loss(tx, t_(t), weight=t_(w), ignore_index=3, reduction=reduction)
    close(al, tl)
    g = rng.standard_normal(tuple(tl.shape))
    backward(al, a_(g))
    tl.backward(t_(g))
    close(ax.grad, tx.grad)


# ------------------------------------------------------------------ embedding
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_embedding(dtype, cpu_path):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((11, 70))
    idx = rng.integers(0, 11, (4, 9))
    idx[0, :3] = 2  # repeated rows accumulate
    aw, tw = a_(w, dtype, True), t_(w, dtype, True)
    ao = F.embedding(a_(idx), aw, padding_idx=2)
    to = TF.embedding(t_(idx), tw, padding_idx=2)
    close(ao, to, dtype)
    g = rng.standard_normal((4, 9, 70))
    backward(ao, a_(g, dtype))
    to.backward(t_(g, dtype))
    close(aw.grad, tw.grad, dtype, scale=10)
    assert np.all(np_(aw.grad)[2] == 0)


def test_embedding_module_and_bad_index():
    ampy.manual_seed(0)
    e = nn.Embedding(10, 4, padding_idx=-1)
    assert e.padding_idx == 9 and np.all(e.weight.detach().numpy()[9] == 0)
    with pytest.raises(IndexError, match="index out of range in self"):
        e(ampy.tensor([1, 10]))
    with pytest.raises(RuntimeError, match="indices"):
        e(ampy.tensor([1.0, 2.0]))
    with pytest.raises(AssertionError, match="Padding_idx"):
        nn.Embedding(10, 4, padding_idx=10)


# -------------------------------------------------------------------- mse_loss
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(dtype, reduction, cpu_path):
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((7, 5)), rng.standard_normal((7, 5))
    ax, ay, tx, ty = a_(x, dtype, True), a_(y, dtype, True), t_(x, dtype, True), t_(y, dtype, True)
    al, tl = F.mse_loss(ax, ay, reduction=reduction), TF.mse_loss(tx, ty, reduction=reduction)
    close(al, tl, dtype, scale=10)
    g = rng.standard_normal(tuple(tl.shape))
    backward(al, a_(g, dtype))
    tl.backward(t_(g, dtype))
    close(ax.grad, tx.grad, dtype)
    close(ay.grad, ty.grad, dtype)


# --------------------------------------------------------------------- dropout
def test_dropout_statistics_and_scaling():
    ampy.manual_seed(123)
    x = ampy.ones(200_000)
    for p in (0.1, 0.5, 0.8):
        y = F.dropout(x, p).numpy()
        kept = y != 0
        frac = kept.mean()
        sd = math.sqrt(p * (1 - p) / y.size)
        assert abs((1 - frac) - p) < 5 * sd
        np.testing.assert_allclose(y[kept], np.float32(1.0) / np.float32(1 - p), rtol=1e-7)
    # different draws each call, reproducible by seed
    ampy.manual_seed(1)
    a = F.dropout(x, 0.5).numpy()
    b = F.dropout(x, 0.5).numpy()
    ampy.manual_seed(1)
    c = F.dropout(x, 0.5).numpy()
    assert (a != b).any() and (a == c).all()


def test_dropout_modes_and_errors():
    x = ampy.randn(10)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert np.all(F.dropout(x, 1.0).numpy() == 0)
    d = nn.Dropout(0.3)
    d.eval()
    assert d(x) is x
    with pytest.raises(ValueError, match="dropout probability"):
        F.dropout(x, 1.5)
    with pytest.raises(ValueError, match="dropout probability"):
        nn.Dropout(-0.1)
    h = F.dropout(ampy.ones(1000, dtype=ampy.float16), 0.1).numpy()
    assert set(np.unique(h)) <= {0, np.float16(1 / np.float16(0.9))}


def test_dropout_backward_uses_the_mask():
    ampy.manual_seed(9)
    x = ampy.randn(1000, requires_grad=True)
    y = F.dropout(x, 0.4)
    y.backward(ampy.ones(1000))
    mask = y.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy()[mask], np.float32(1) / np.float32(0.6))
    assert np.all(x.grad.numpy()[~mask] == 0)


# ---------------------------------------------------------------- Module / init
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.emb = nn.Embedding(5, 6)
        self.blocks = nn.ModuleList([nn.LayerNorm(6), nn.LayerNorm(6, bias=False)])
        self.register_buffer("running", ampy.zeros(3))
        self.register_buffer("tmp", ampy.zeros(2), persistent=False)


class TNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(6)
        self.emb = torch.nn.Embedding(5, 6)
        self.blocks = torch.nn.ModuleList([torch.nn.LayerNorm(6),
                                           torch.nn.LayerNorm(6, bias=False)])
        self.register_buffer("running", torch.zeros(3))
        self.register_buffer("tmp", torch.zeros(2), persistent=False)


def test_module_registration_traversal_and_state_dict_keys():
    m, tm = Net(), TNet()
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in m.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in m.named_children()] == [n for n, _ in tm.named_children()]
    assert len(list(m.parameters(recurse=False))) == 0
    assert all(isinstance(p, ampy.Tensor) and isinstance(p, nn.Parameter)
               for p in m.parameters())
    assert repr(m) == repr(tm)[1:]  # class names Net / TNet differ by one letter
    # load torch's weights, then the round trip through ampy's own state_dict
    tm.emb.weight.data.normal_()
    m.load_state_dict(tm.state_dict())
    for (k, v), (tk, tv) in zip(m.state_dict().items(), tm.state_dict().items()):
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
    m2 = Net()
    r = m2.load_state_dict(m.state_dict())
    assert repr(r) == "<All keys matched successfully>"
    np.testing.assert_array_equal(m2.emb.weight.detach().numpy(), m.emb.weight.detach().numpy())
    # the state_dict shares memory with the parameters, as torch's
    sd = m.state_dict()
    assert sd["emb.weight"].data_ptr() == m.emb.weight.data_ptr()


def test_load_state_dict_errors_match_torch():
    m, tm = nn.Sequential(nn.LayerNorm(4), nn.LayerNorm(3)), \
        torch.nn.Sequential(torch.nn.LayerNorm(4), torch.nn.LayerNorm(3))
    before = m[0].weight.detach().numpy().copy()
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    del sd["1.bias"]
    sd["extra"] = np.zeros(1)
    sd["0.weight"] = np.zeros(5, np.float32)
    tsd = {k: torch.tensor(v) for k, v in sd.items()}
    with pytest.raises(RuntimeError) as ea:
        m.load_state_dict(sd)
    with pytest.raises(RuntimeError) as et:
        tm.load_state_dict(tsd)
    assert str(ea.value).replace("ampy.Size", "torch.Size") == str(et.value)
    np.testing.assert_array_equal(m[0].weight.detach().numpy(), before)
    r = nn.LayerNorm(4).load_state_dict({"weight": ampy.ones(4)}, strict=False)
    assert r.missing_keys == ["bias"] and r.unexpected_keys == []


def test_module_setattr_getattr_semantics():
    m = nn.Linear(3, 2) if True else None
    with pytest.raises(TypeError, match="cannot assign 'ampy.Tensor' as parameter 'weight'"):
        m.weight = ampy.zeros(2, 3)
    m.bias = None
    assert m.bias is None and "bias" in m._parameters
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        m.nope
    m.extra = nn.ReLU()
    assert "extra" in dict(m.named_children())
    del m.extra
    assert "extra" not in dict(m.named_children())
    with pytest.raises(AttributeError, match="before Module.__init__"):
        class Bad(nn.Module):
            def __init__(self):
                self.p = nn.Parameter(ampy.zeros(1))
        Bad()


def test_parameter_shares_data_and_pickles():
    x = ampy.randn(4)
    p = nn.Parameter(x)
    assert p.data_ptr() == x.data_ptr() and p.requires_grad and isinstance(p, ampy.Tensor)
    assert not nn.Parameter(x, requires_grad=False).requires_grad
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, nn.Parameter)
    np.testing.assert_array_equal(q.detach().numpy(), x.numpy())


def test_module_conversions_keep_parameter_identity():
    m = nn.Sequential(nn.LayerNorm(5), nn.Embedding(3, 5))
    params = list(m.parameters())
    m.half()
    assert all(p.dtype is ampy.float16 for p in m.parameters())
    assert [id(p) for p in m.parameters()] == [id(p) for p in params]
    m.to(ampy.bfloat16)
    assert params[0].dtype is ampy.bfloat16
    m.float()
    m.double()
    assert params[2].dtype is ampy.float64
    with pytest.raises(TypeError, match="floating point"):
        m.to(ampy.int64)
    m.float()
    y = m[0](ampy.randn(2, 5))
    assert y.dtype is ampy.float32


def test_train_eval_zero_grad_apply_containers():
    m = nn.Sequential(nn.LayerNorm(2), nn.Dropout(), nn.Flatten(), nn.Identity(7, x=1))
    m.eval()
    assert not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    for p in m.parameters():
        p.grad = ampy.ones(*p.shape)
    m.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "Sequential" and len(seen) == 5
    assert len(m) == 4 and isinstance(m[-1], nn.Identity) and len(m[1:3]) == 2
    m.append(nn.Tanh())
    assert list(m.state_dict()) == ["0.weight", "0.bias"] and len(m) == 5
    assert m[2](ampy.zeros(2, 3, 4)).shape == (2, 12)
    ml = nn.ModuleList([nn.LayerNorm(1)])
    ml.append(nn.LayerNorm(2))
    ml += [nn.LayerNorm(3)]
    assert [n for n, _ in ml.named_parameters()][-1] == "2.bias"


def test_forward_hooks():
    m = nn.LayerNorm(3)
    calls = []
    h = m.register_forward_hook(lambda mod, inp, out: calls.append(out.shape))
    m(ampy.randn(2, 3))
    h.remove()
    m(ampy.randn(2, 3))
    assert calls == [(2, 3)]


@pytest.mark.parametrize("fn,kw,expect", [
    ("uniform_", dict(a=-2.0, b=3.0), ("uniform", -2.0, 3.0)),
    ("normal_", dict(mean=1.0, std=2.0), ("normal", 1.0, 2.0)),
    ("kaiming_uniform_", dict(a=math.sqrt(5)), ("uniform", -1 / math.sqrt(200), 1 / math.sqrt(200))),
    ("kaiming_normal_", dict(nonlinearity="relu"), ("normal", 0.0, math.sqrt(2 / 200))),
    ("xavier_uniform_", dict(), ("uniform", -math.sqrt(6 / 500), math.sqrt(6 / 500))),
    ("xavier_normal_", dict(gain=2.0), ("normal", 0.0, 2 * math.sqrt(2 / 500))),
])
def test_init_distributions(fn, kw, expect):
    ampy.manual_seed(0)
    t = ampy.empty(300, 200)
    out = getattr(nn.init, fn)(t, **kw)
    assert out is t
    v = t.numpy().astype(np.float64).ravel()
    n = v.size
    kind, p, q = expect
    if kind == "uniform":
        assert v.min() >= p and v.max() < q
        mean, sd = (p + q) / 2, (q - p) / math.sqrt(12)
    else:
        mean, sd = p, q
    assert abs(v.mean() - mean) < 5 * sd / math.sqrt(n)
    assert abs(v.std() / sd - 1) < 0.01
    if kind == "uniform":  # flat: every decile holds ~10%
        hist, _ = np.histogram(v, bins=10, range=(p, q))
        assert np.all(np.abs(hist / n - 0.1) < 0.005)


def test_init_constants_and_default_layer_init():
    t = ampy.empty(3, 4)
    nn.init.constant_(t, 2.5)
    assert np.all(t.numpy() == 2.5)
    nn.init.zeros_(t)
    assert np.all(t.numpy() == 0)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.kaiming_uniform_(ampy.empty(5))
    ampy.manual_seed(3)
    lin = nn.Linear(400, 300)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    bound = 1 / math.sqrt(400)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() / (bound / math.sqrt(3)) - 1) < 0.02
    e = nn.Embedding(300, 200).weight.detach().numpy()
    assert abs(e.std() - 1) < 0.02 and abs(e.mean()) < 0.01
    ln = nn.LayerNorm(7)
    assert np.all(ln.weight.detach().numpy() == 1) and np.all(ln.bias.detach().numpy() == 0)
    assert repr(lin) == repr(torch.nn.Linear(400, 300))
    assert repr(nn.GELU("tanh")) == repr(torch.nn.GELU("tanh"))
    assert repr(nn.Dropout(0.2)) == repr(torch.nn.Dropout(0.2))
    assert repr(nn.Flatten()) == repr(torch.nn.Flatten())
    assert repr(nn.Embedding(3, 4, padding_idx=1)) == repr(torch.nn.Embedding(3, 4,
                                                                              padding_idx=1))


# ---------------------------------------------- modules built on math and GEMM
@pytest.mark.parametrize("act", ["ReLU", "GELU", "Tanh", "Sigmoid"])
def test_mlp_matches_torch(act, cpu_path):
    tm = torch.nn.Sequential(torch.nn.Linear(12, 16), getattr(torch.nn, act)(),
                             torch.nn.LayerNorm(16), torch.nn.Linear(16, 5))
    am = nn.Sequential(nn.Linear(12, 16), getattr(nn, act)(), nn.LayerNorm(16),
                       nn.Linear(16, 5))
    am.load_state_dict(tm.state_dict())
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 12)), rng.integers(0, 5, 8)
    tl = TF.cross_entropy(tm(t_(x)), t_(y))
    al = F.cross_entropy(am(a_(x)), a_(y))
    close(al, tl)
    tl.backward()
    al.backward()
    for (n, ap), (_, tp) in zip(am.named_parameters(), tm.named_parameters()):
        close(ap.grad, tp.grad)


# ================================================================ CUDA
# The nn kernels and Philox dropout (cuda/nn.cu) on a GPU against the CPU;
# skipped without a GPU.

@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
@pytest.mark.parametrize("n", [1, 7, 768, 1500])
def test_cuda_layer_norm_fwd_bwd_vs_cpu(dt, n):
    x = sample((13, n), dt, 7, specials=False)
    w = sample((n,), dt, 8, specials=False)
    b = sample((n,), dt, 9, specials=False)
    (oc, gc), (og, gg) = grads_cpu_gpu(lambda x, w, b: F.layer_norm(x, (n,), w, b), x, w, b)
    assert_close_ulps(og, oc, dt, ulps=4)
    for a, c in zip(gg, gc):
        assert_close_ulps(a, c, dt, ulps=64 if n > 1 else 4)


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
@pytest.mark.parametrize("red", ["mean", "sum", "none"])
@pytest.mark.parametrize("ls,weighted", [(0.0, False), (0.1, True)])
def test_cuda_cross_entropy_and_nll_vs_cpu(dt, red, ls, weighted):
    M, C = 50, 1000
    x = sample((M, C), dt, 10, specials=False)
    t = ampy.from_numpy(np.random.default_rng(11).integers(0, C, M))
    t[3] = -100  # ignore_index
    w = sample((C,), dt, 12, specials=False).abs() if weighted else None
    for fn in (lambda x: F.cross_entropy(x, t.to(x.device), weight=None if w is None else
                                         w.to(x.device), reduction=red, label_smoothing=ls),
               lambda x: F.nll_loss(F.log_softmax(x, 1), t.to(x.device), weight=None if w is None
                                    else w.to(x.device), reduction=red)):
        (oc, gc), (og, gg) = grads_cpu_gpu(fn, x)
        assert_close_ulps(og, oc, dt, ulps=16)
        assert_close_ulps(gg[0], gc[0], dt, ulps=16)
    bad = t.clone()
    bad[0] = C
    loss = F.cross_entropy(x.cuda(), bad.cuda())  # deferred check: no wait here
    with pytest.raises((IndexError, RuntimeError), match=f"Target {C} is out of bounds"):
        loss.cpu()
    with sync_checks(True), pytest.raises(IndexError, match=f"^Target {C} is out of bounds.$"):
        F.cross_entropy(x.cuda(), bad.cuda())


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
@pytest.mark.parametrize("red", ["mean", "sum", "none"])
def test_cuda_mse_loss_vs_cpu(dt, red):
    x, y = sample((33, 65), dt, 16, specials=False), sample((33, 65), dt, 17, specials=False)
    (oc, gc), (og, gg) = grads_cpu_gpu(lambda x, y: F.mse_loss(x, y, reduction=red), x, y)
    if red == "none":
        assert_same_bits(og, oc)  # element math identical; only the sums' order differs
    else:
        assert_close_ulps(og, oc, dt, ulps=2)
    for a, c in zip(gg, gc):
        assert_same_bits(a, c)


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16])
def test_cuda_embedding_fwd_bwd_bitwise(dt):
    V, D = 100, 64
    w = sample((V, D), dt, 13, specials=False)
    idx = ampy.from_numpy(np.random.default_rng(14).integers(0, V, (8, 33)))
    (oc, gc), (og, gg) = grads_cpu_gpu(lambda w: F.embedding(idx.to(w.device), w,
                                                              padding_idx=5), w)
    assert_same_bits(og, oc)
    assert_same_bits(gg[0], gc[0])  # rows added in index order on both sides
    out = F.embedding(ampy.tensor([0, V]).cuda(), w.cuda())  # deferred check
    with pytest.raises((IndexError, RuntimeError), match="index out of range in self"):
        ampy.cuda.synchronize()
    with sync_checks(True), pytest.raises(IndexError, match="^index out of range in self$"):
        F.embedding(ampy.tensor([0, V]).cuda(), w.cuda())
    del out


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
def test_cuda_dropout_mask_and_values_match_cpu(dt):
    x = sample((64, 257), dt, 15, specials=False)
    ampy.manual_seed(123)
    c = F.dropout(x, 0.3)
    ampy.manual_seed(123)
    g = F.dropout(x.cuda(), 0.3)
    assert_same_bits(g, c)  # same Philox draws, same mask-and-scale rounding


@requires_cuda
def test_cuda_embedding_backward_many_repeats_bitwise():
    V, D = 7, 96  # few rows, long segments after the device sort
    w = sample((V, D), ampy.float16, 39, specials=False)
    idx = ampy.from_numpy(np.random.default_rng(40).integers(0, V, (64, 50)))
    (oc, gc), (og, gg) = grads_cpu_gpu(lambda w: F.embedding(idx.to(w.device), w), w)
    assert_same_bits(og, oc)
    assert_same_bits(gg[0], gc[0])


def test_load_state_dict_keeps_0d_values_0d():
    # a torch 0-d buffer (BatchNorm's num_batches_tracked) loads into a 0-d buffer
    m = ampy.nn.Module()
    m.register_buffer("count", ampy.zeros((), dtype=ampy.int64))
    m.register_buffer("scale", ampy.zeros((), dtype=ampy.float32))
    m.load_state_dict({"count": torch.tensor(7), "scale": torch.tensor(0.25)})
    assert tuple(m.count.shape) == () and m.count.item() == 7
    assert tuple(m.scale.shape) == () and m.scale.item() == 0.25
