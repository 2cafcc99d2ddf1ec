"""The rest of torch.nn.functional's activations and their nn modules
(ampy/nn/_functional_act.py, ampy/nn/modules/activation.py), side by side
with torch 2.13: forward and input gradients in float32 / float64 / bfloat16,
transposed inputs, autocast dtypes, in-place variants, module reprs and
state_dicts, bad arguments, and the random ones (rrelu in training,
gumbel_softmax, alpha dropout) by their structure.
"""
import re
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ampy
import ampy.nn.functional as AF

DT = {"float32": (ampy.float32, torch.float32), "float64": (ampy.float64, torch.float64),
      "bfloat16": (ampy.bfloat16, torch.bfloat16)}
TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-12),
       "bfloat16": dict(rtol=2e-2, atol=2e-2)}

# (function name, keyword arguments)
FUNCS = [
    ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}), ("elu", {}),
    ("elu", {"alpha": 0.5}), ("softplus", {}), ("softplus", {"beta": 2.0, "threshold": 3.0}),
    ("mish", {}), ("logsigmoid", {}), ("hardtanh", {}),
    ("hardtanh", {"min_val": -2.0, "max_val": 0.5}), ("relu6", {}), ("selu", {}), ("celu", {}),
    ("celu", {"alpha": 2.0}), ("celu", {"alpha": -0.5}), ("hardsigmoid", {}), ("softsign", {}), ("tanhshrink", {}),
    ("threshold", {"threshold": 0.1, "value": -2.0}), ("glu", {}), ("glu", {"dim": 0}),
    ("softmin", {"dim": 1}), ("softmin", {"dim": 0}), ("softshrink", {}),
    ("softshrink", {"lambd": 1.0}), ("hardshrink", {}), ("hardshrink", {"lambd": 1.5}),
    ("rrelu", {}), ("rrelu", {"lower": 0.1, "upper": 0.3}),
]
INPLACE = ["leaky_relu", "elu", "mish", "hardtanh", "relu6", "selu", "celu", "hardsigmoid",
           "threshold", "rrelu"]
UNDERSCORE = [("leaky_relu_", {"negative_slope": 0.3}), ("elu_", {}), ("hardtanh_", {}),
              ("selu_", {}), ("celu_", {"alpha": 0.7}),
              ("threshold_", {"threshold": 0.0, "value": 5.0}), ("rrelu_", {})]
KW = {}
for _n, _k in FUNCS:
    KW.setdefault(_n, _k)


def _ids(table):
    return [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in table]


def _data(shape, seed, scale=3.0):
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale)


def _pair(a, dt, grad=True):
    at, tt = DT[dt]
    x = ampy.from_numpy(a).to(at)
    t = torch.from_numpy(a).to(tt)
    if grad:
        x.requires_grad_(True)
        t.requires_grad_(True)
    return x, t


def _np(x):
    x = x.detach()
    return x.double().numpy() if isinstance(x, ampy.Tensor) else x.double().numpy()


def _close(a, t, dt):
    assert tuple(a.shape) == tuple(t.shape)
    np.testing.assert_allclose(_np(a), _np(t), **TOL[dt])


def _fwd_bwd(name, kw, a, dt, transpose=False):
    x, t = _pair(a, dt)
    xs, ts = (x.t(), t.t()) if transpose else (x, t)
    if transpose:
        assert not xs.is_contiguous()
    ya, yt = getattr(AF, name)(xs, **kw), getattr(TF, name)(ts, **kw)
    assert ya.dtype.name == str(yt.dtype).split(".")[1]
    _close(ya, yt, dt)
    g = _data(tuple(yt.shape), 7, 1.0)
    ya.backward(_pair(g, dt, False)[0])
    yt.backward(_pair(g, dt, False)[1])
    if name == "hardsigmoid" and dt == "float64":
        # torch's hardsigmoid backward multiplies by 1/6 rounded to float32
        np.testing.assert_allclose(_np(x.grad), _np(t.grad), rtol=1e-7, atol=1e-12)
    else:
        _close(x.grad, t.grad, dt)


@pytest.mark.parametrize("dt", list(DT))
@pytest.mark.parametrize("name,kw", FUNCS, ids=_ids(FUNCS))
def test_forward_and_grad_match_torch(name, kw, dt):
    _fwd_bwd(name, kw, _data((4, 6), 1), dt)


@pytest.mark.parametrize("name,kw", FUNCS, ids=_ids(FUNCS))
def test_transposed_input(name, kw):
    _fwd_bwd(name, kw, _data((6, 4), 2), "float32", transpose=True)


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 6.0, -3.0, 3.0, 100.0, -100.0, 0.5,
                     -0.5, 0.1, 1e-30, -1e-30])


@pytest.mark.parametrize("name,kw", FUNCS, ids=_ids(FUNCS))
def test_special_values_and_nan(name, kw):
    """Bounds, infinities, zeros of both signs (forward and grad), NaN kept NaN."""
    a = SPECIALS.reshape(4, 4)
    if name == "glu":  # inf * sigmoid(-100): torch's float32 sigmoid underflows to 0, ampy's
        a = np.clip(a, -50, 50)  # keeps the subnormal, so the product differs (inf vs nan)
    x, t = _pair(a, "float32")
    ya, yt = getattr(AF, name)(x, **kw), getattr(TF, name)(t, **kw)
    np.testing.assert_allclose(_np(ya), _np(yt), rtol=1e-6, atol=1e-30)
    g = _data(tuple(yt.shape), 23, 1.0)
    ya.backward(_pair(g, "float32", False)[0])
    yt.backward(_pair(g, "float32", False)[1])
    np.testing.assert_allclose(_np(x.grad), _np(t.grad), rtol=1e-6, atol=1e-30)
    n = np.full((2, 2), np.nan)
    ya = getattr(AF, name)(ampy.from_numpy(n).float(), **kw)
    yt = getattr(TF, name)(torch.from_numpy(n).float(), **kw)
    np.testing.assert_array_equal(np.isnan(_np(ya)), np.isnan(_np(yt)))


@pytest.mark.parametrize("name,kw", FUNCS + [("prelu", {})], ids=_ids(FUNCS + [("prelu", {})]))
def test_dtype_under_autocast_matches_torch(name, kw):
    a = _data((4, 6), 3)
    x, t = _pair(a, "float32", grad=False)
    args_a, args_t = (), ()
    if name == "prelu":
        w = _data((6,), 4, 0.3)
        args_a, args_t = (ampy.from_numpy(w).float(),), (torch.from_numpy(w).float(),)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        ya = getattr(AF, name)(x, *args_a, **kw)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = getattr(TF, name)(t, *args_t, **kw)
    assert ya.dtype.name == str(yt.dtype).split(".")[1]
    _close(ya, yt, "bfloat16")


# --------------------------------------------------------------- prelu
@pytest.mark.parametrize("dt", list(DT))
@pytest.mark.parametrize("xshape,wshape", [((4, 3), (3,)), ((2, 3, 5), (3,)),
                                           ((2, 3, 4, 2), (1,)), ((5,), (1,)), ((), (1,)),
                                           ((2, 3), ())], ids=str)
def test_prelu_forward_input_and_weight_grads(xshape, wshape, dt):
    x, t = _pair(_data(xshape, 5), dt)
    wa, wt = _pair(_data(wshape, 6, 0.3), dt)
    ya, yt = AF.prelu(x, wa), TF.prelu(t, wt)
    _close(ya, yt, dt)
    g = _data(tuple(yt.shape), 8, 1.0)
    ya.backward(_pair(g, dt, False)[0])
    yt.backward(_pair(g, dt, False)[1])
    _close(x.grad, t.grad, dt)
    _close(wa.grad, wt.grad, "bfloat16" if dt == "bfloat16" else "float32")


def test_prelu_transposed_input():
    x, t = _pair(_data((5, 3, 4), 9), "float32")
    wa, wt = _pair(_data((3,), 10, 0.3), "float32")
    ya, yt = AF.prelu(x.transpose(0, 2), wa), TF.prelu(t.transpose(0, 2), wt)
    _close(ya, yt, "float32")
    ya.sum().backward()
    yt.sum().backward()
    _close(x.grad, t.grad, "float32")
    _close(wa.grad, wt.grad, "float32")


# ------------------------------------------------------------- in-place
@pytest.mark.parametrize("name", INPLACE)
def test_inplace_true_writes_into_input_and_keeps_grad(name):
    kw = dict(KW.get(name, {}))
    a = _data((4, 6), 11)
    x, t = _pair(a, "float32")
    ya_in, yt_in = x * 1.0, t * 1.0
    ra = getattr(AF, name)(ya_in, inplace=True, **kw)
    rt = getattr(TF, name)(yt_in, inplace=True, **kw)
    assert ra is ya_in
    _close(ya_in, yt_in, "float32")
    np.testing.assert_allclose(_np(ya_in), _np(getattr(TF, name)(torch.from_numpy(a).float(),
                                                                 **kw)), rtol=1e-5, atol=1e-6)
    (ra * ra).sum().backward()
    (rt * rt).sum().backward()
    _close(x.grad, t.grad, "float32")


@pytest.mark.parametrize("name,kw", UNDERSCORE, ids=_ids(UNDERSCORE))
def test_underscore_variants(name, kw):
    a = _data((3, 5), 12)
    x, t = _pair(a, "float32", grad=False)
    ra, rt = getattr(AF, name)(x, **kw), getattr(TF, name)(t, **kw)
    assert ra is x
    _close(x, t, "float32")
    base = name[:-1]
    _close(x, getattr(TF, base)(torch.from_numpy(a).float(), **kw), "float32")


def test_inplace_on_a_leaf_that_requires_grad_raises_like_torch():
    x = ampy.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        AF.elu(x, inplace=True)
    with pytest.raises(RuntimeError, match="leaf"):
        TF.elu(torch.randn(3, requires_grad=True), inplace=True)


# ----------------------------------------------------------------- errors
def _torch_error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    raise AssertionError("torch did not raise")


ERRORS = [
    ("glu odd dim", lambda F, m: F.glu(m.ones(2, 3))),
    ("glu odd dim 0", lambda F, m: F.glu(m.ones(5, 2), dim=0)),
    ("glu scalar", lambda F, m: F.glu(m.ones(()))),
    ("prelu weight numel", lambda F, m: F.prelu(m.ones(2, 3), m.ones(2))),
    ("prelu weight numel 1-d", lambda F, m: F.prelu(m.ones(3), m.ones(3))),
    ("prelu weight ndim", lambda F, m: F.prelu(m.ones(2, 3), m.ones(3, 1))),
    ("hardtanh min>max", lambda F, m: F.hardtanh(m.ones(3), 2.0, 1.0)),
    ("celu alpha 0", lambda F, m: F.celu(m.ones(3), alpha=0.0)),
    ("rrelu lower>upper", lambda F, m: F.rrelu(m.ones(3), 0.5, 0.1)),
    ("alpha_dropout p", lambda F, m: F.alpha_dropout(m.ones(3), 1.5)),
    ("feature_alpha_dropout p", lambda F, m: F.feature_alpha_dropout(m.ones(3, 2), -0.1)),
    ("Hardtanh module", lambda F, m: m.nn.Hardtanh(1.0, 0.0)),
    ("PReLU channels", lambda F, m: m.nn.PReLU(3)(m.ones(2, 4))),
    ("Softmax2d 2-d", lambda F, m: m.nn.Softmax2d()(m.ones(2, 4))),
    ("AlphaDropout p", lambda F, m: m.nn.AlphaDropout(2.0)),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_arguments_raise_like_torch(case):
    _, fn = case
    etype, msg = _torch_error(lambda: fn(TF, torch))
    with pytest.raises(etype, match="^" + re.escape(msg) + "$"):
        fn(AF, ampy)


def test_input_unchanged_after_a_raise():
    x = ampy.from_numpy(_data((2, 3), 13)).float()
    before = x.numpy().copy()
    with pytest.raises(ValueError, match="min_val"):
        AF.hardtanh(x, 3.0, 1.0, inplace=True)
    with pytest.raises(RuntimeError, match="channel size"):
        AF.prelu(x, ampy.ones(2))
    np.testing.assert_array_equal(x.numpy(), before)


# ---------------------------------------------------------------- modules
MODULES = [
    ("LeakyReLU", (), {}), ("LeakyReLU", (0.2, True), {}), ("ELU", (), {}),
    ("ELU", (), {"alpha": 0.5, "inplace": True}), ("SELU", (), {}), ("SELU", (True,), {}),
    ("CELU", (), {"alpha": 2.0}), ("Softplus", (), {}), ("Softplus", (2, 5), {}),
    ("Mish", (), {}), ("Mish", (True,), {}), ("LogSigmoid", (), {}), ("Hardtanh", (), {}),
    ("Hardtanh", (-2.0, 0.5, True), {}), ("ReLU6", (), {}), ("ReLU6", (True,), {}),
    ("Hardsigmoid", (), {}), ("Hardsigmoid", (True,), {}), ("Softsign", (), {}),
    ("Tanhshrink", (), {}), ("Threshold", (0.1, 20), {}), ("Threshold", (0.1, 20, True), {}),
    ("GLU", (), {}), ("GLU", (0,), {}), ("PReLU", (), {}), ("PReLU", (4,), {"init": 0.1}),
    ("Softmin", (), {"dim": 1}), ("Softmin", (), {}), ("Softmax2d", (), {}),
    ("Softshrink", (), {}), ("Softshrink", (1.0,), {}), ("Hardshrink", (), {}),
    ("Hardshrink", (0.25,), {}), ("RReLU", (), {}), ("RReLU", (0.1, 0.3, True), {}),
    ("AlphaDropout", (), {}), ("AlphaDropout", (0.2, True), {}), ("FeatureAlphaDropout", (), {}),
]


@pytest.mark.parametrize("name,args,kw", MODULES,
                         ids=[f"{n}{a}{k}" for n, a, k in MODULES])
def test_module_repr_state_dict_and_forward_match_torch(name, args, kw):
    ma, mt = getattr(ampy.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ma) == repr(mt)
    assert list(ma.state_dict()) == list(mt.state_dict())
    ma.eval()
    mt.eval()
    a = _data((2, 4, 3, 2), 14)
    x, t = _pair(a, "float32", grad=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Softmin() without dim
        ya, yt = ma(x * 1.0), mt(t * 1.0)
    _close(ya, yt, "float32")


def test_prelu_module_loads_torch_state_dict_and_trains():
    mt = torch.nn.PReLU(4, init=0.3)
    with torch.no_grad():
        mt.weight.copy_(torch.from_numpy(_data((4,), 15, 0.3)))
    ma = ampy.nn.PReLU(4, init=0.3)
    ma.load_state_dict({k: ampy.from_numpy(v.detach().numpy()) for k, v in
                        mt.state_dict().items()})
    assert isinstance(ma.weight, ampy.nn.Parameter) and ma.weight.requires_grad
    a = _data((2, 4, 3), 16)
    ya, yt = ma(ampy.from_numpy(a).float()), mt(torch.from_numpy(a).float())
    _close(ya, yt, "float32")
    ya.sum().backward()
    yt.sum().backward()
    _close(ma.weight.grad, mt.weight.grad, "float32")
    assert ma.init == mt.init and ma.num_parameters == mt.num_parameters


def test_prelu_module_dtype():
    ma = ampy.nn.PReLU(3, dtype=ampy.float64)
    assert ma.weight.dtype is ampy.float64


def test_hardtanh_deprecated_keywords_warn_like_torch():
    with pytest.warns(FutureWarning, match="is deprecated and renamed") as wa:
        ma = ampy.nn.Hardtanh(min_value=-0.5, max_value=2.0)
    with pytest.warns(FutureWarning, match="is deprecated and renamed") as wt:
        mt = torch.nn.Hardtanh(min_value=-0.5, max_value=2.0)
    assert [str(w.message) for w in wa] == [str(w.message) for w in wt]
    assert repr(ma) == repr(mt)


def test_softmin_implicit_dim_warns_like_torch():
    with pytest.warns(UserWarning, match="softmin") as wa:
        ya = AF.softmin(ampy.ones(2, 3))
    with pytest.warns(UserWarning, match="softmin") as wt:
        yt = TF.softmin(torch.ones(2, 3))
    assert str(wa[0].message) == str(wt[0].message)
    _close(ya, yt, "float32")


def test_softmin_dtype():
    a = _data((3, 4), 17)
    ya = AF.softmin(ampy.from_numpy(a).float(), 1, dtype=ampy.float64)
    yt = TF.softmin(torch.from_numpy(a).float(), 1, dtype=torch.float64)
    assert ya.dtype is ampy.float64
    _close(ya, yt, "float32")


# ---------------------------------------------------------------- random
def test_rrelu_training_draws_slopes_in_range():
    a = _data((50, 40), 18)
    x = ampy.from_numpy(a).float().requires_grad_(True)
    lo, hi = 0.1, 0.4
    y = AF.rrelu(x, lo, hi, training=True)
    y.sum().backward()
    yn, g = y.detach().numpy(), x.grad.numpy()
    pos = a > 0
    np.testing.assert_array_equal(yn[pos], a[pos].astype(np.float32))
    slope = yn[~pos] / a[~pos].astype(np.float32)
    assert slope.min() >= lo - 1e-6 and slope.max() <= hi + 1e-6
    assert slope.std() > 0.05  # random, not one slope
    np.testing.assert_allclose(g[~pos], slope, rtol=1e-5)
    np.testing.assert_array_equal(g[pos], 1.0)
    # torch draws from the same range
    yt = TF.rrelu(torch.from_numpy(a).float(), lo, hi, training=True).numpy()
    st = yt[~pos] / a[~pos].astype(np.float32)
    assert abs(st.mean() - slope.mean()) < 0.02


def test_rrelu_module_train_and_eval():
    m = ampy.nn.RReLU()
    x = ampy.from_numpy(-np.abs(_data((100,), 19)) - 0.1).float()
    assert len(np.unique(np.round(m(x).numpy() / x.numpy(), 5))) > 10
    m.eval()
    mt = torch.nn.RReLU().eval()
    _close(m(x), mt(torch.from_numpy(x.numpy())), "float32")


@pytest.mark.parametrize("dim", [-1, 0])
def test_gumbel_softmax_soft_and_hard(dim):
    a = _data((5, 6), 20, 1.0)
    w = ampy.from_numpy(_data((5, 6), 21, 1.0)).float()
    x1 = ampy.from_numpy(a).float().requires_grad_(True)
    x2 = ampy.from_numpy(a).float().requires_grad_(True)
    ampy.manual_seed(3)
    soft = AF.gumbel_softmax(x1, tau=0.5, dim=dim)
    ampy.manual_seed(3)
    hard = AF.gumbel_softmax(x2, tau=0.5, hard=True, dim=dim)
    np.testing.assert_allclose(soft.detach().sum(dim).numpy(), 1.0, rtol=1e-5)
    hn = hard.detach().numpy()
    assert set(np.unique(hn)) <= {0.0, 1.0}
    np.testing.assert_array_equal(hn.sum(dim), 1.0)
    np.testing.assert_array_equal(hn.argmax(dim), soft.detach().numpy().argmax(dim))
    (soft * w).sum().backward()
    (hard * w).sum().backward()
    np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-5, atol=1e-6)
    # same shapes and kinds as torch's
    t = TF.gumbel_softmax(torch.from_numpy(a).float(), tau=0.5, hard=True, dim=dim)
    assert tuple(t.shape) == tuple(hard.shape)
    np.testing.assert_array_equal(t.sum(dim).numpy(), hn.sum(dim))


def _two_values(out):
    v = np.unique(np.round(out, 5))
    assert len(v) == 2
    return v


@pytest.mark.parametrize("p", [0.2, 0.6])
def test_alpha_dropout_constants_match_torch(p):
    n = 4000
    za, zt = AF.alpha_dropout(ampy.zeros(n), p, True), TF.alpha_dropout(torch.zeros(n), p, True)
    np.testing.assert_allclose(_two_values(za.numpy()), _two_values(zt.numpy()), rtol=1e-5)
    dropped = _two_values(zt.numpy())[0]
    assert abs((np.round(za.numpy(), 5) == np.round(dropped, 5)).mean() - p) < 0.05
    # the slope on kept elements: torch's out(1) - out(0)
    kept0 = _two_values(zt.numpy())[1]
    slope = _two_values(TF.alpha_dropout(torch.ones(n), p, True).numpy())[1] - kept0
    a = _data((n,), 22, 1.0)
    ya = AF.alpha_dropout(ampy.from_numpy(a).float(), p, True).numpy()
    keep = ~np.isclose(ya, dropped, atol=1e-6)
    np.testing.assert_allclose(ya[keep], a[keep] * slope + kept0, rtol=1e-4, atol=1e-5)
    # self-normalising: SELU-like input keeps mean 0 and std 1
    big = ampy.randn(200000)
    out = AF.alpha_dropout(big, p, True).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02


def test_alpha_dropout_eval_p0_p1_and_inplace():
    x = ampy.randn(10)
    assert AF.alpha_dropout(x, 0.5) is x  # training=False by default, as torch
    assert AF.alpha_dropout(x, 0.0, True) is x
    _close(AF.alpha_dropout(x, 1.0, True), TF.alpha_dropout(torch.from_numpy(x.numpy()), 1.0,
                                                            True), "float32")
    y = x * 1.0
    r = AF.alpha_dropout(y, 0.5, True, inplace=True)
    assert r is y and not np.array_equal(y.numpy(), x.numpy())


def test_alpha_dropout_grad_is_the_kept_slope():
    x = ampy.randn(1000, requires_grad=True)
    y = AF.alpha_dropout(x, 0.3, True)
    y.sum().backward()
    g = np.unique(np.round(x.grad.numpy(), 5))
    assert len(g) == 2 and g[0] == 0.0


def test_feature_alpha_dropout_drops_whole_channels():
    a = AF.feature_alpha_dropout(ampy.zeros(8, 16, 5, 3), 0.5, True).numpy()
    t = TF.feature_alpha_dropout(torch.zeros(8, 16, 5, 3), 0.5, True).numpy()
    np.testing.assert_allclose(_two_values(a), _two_values(t), rtol=1e-5)
    assert (a.reshape(8, 16, -1).std(-1) == 0).all()
    with pytest.raises(RuntimeError, match="2 dimensions"):
        TF.feature_alpha_dropout(torch.zeros(5), 0.5, True)
    with pytest.raises(RuntimeError, match="2 dimensions"):
        AF.feature_alpha_dropout(ampy.zeros(5), 0.5, True)


def test_alpha_dropout_modules_train_and_eval():
    for name in ("AlphaDropout", "FeatureAlphaDropout"):
        m = getattr(ampy.nn, name)(0.5)
        x = ampy.randn(4, 6, 3)
        assert not np.array_equal(m(x).numpy(), x.numpy())
        m.eval()
        assert m(x) is x


def test_new_names_are_exported():
    import ampy.nn.functional as F
    for n in ("leaky_relu_", "relu6", "glu", "prelu", "gumbel_softmax", "rrelu_"):
        assert n in F.__all__ and hasattr(torch.nn.functional, n)
    for n in ("PReLU", "Softmax2d", "RReLU", "FeatureAlphaDropout"):
        assert n in ampy.nn.__all__ and n in ampy.nn.modules.__all__


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_on_a_transposed_view_writes_the_base(name):
    kw = dict(KW.get(name, {}))
    a = _data((4, 6), 24)
    base_a, base_t = ampy.from_numpy(a).float(), torch.from_numpy(a).float()
    va, vt = base_a.t(), base_t.t()
    assert getattr(AF, name)(va, inplace=True, **kw) is va
    getattr(TF, name)(vt, inplace=True, **kw)
    _close(base_a, base_t, "float32")
    with ampy.no_grad():
        x = ampy.from_numpy(a).float().requires_grad_(True)
        assert getattr(AF, name)(x * 1.0, inplace=True, **kw).shape == x.shape


@pytest.mark.parametrize("name,kw", [("leaky_relu", dict(negative_slope=0.1)),
                                     ("elu", dict(alpha=0.7)), ("silu", {})])
def test_top_level_inplace_on_a_non_leaf_keeps_backward(name, kw):
    """ampy.leaky_relu / ampy.elu with inplace=True on an intermediate tensor: the backward
    reads the input it saved, not the overwritten values (grads equal torch's)."""
    grads = []
    a_fn = getattr(ampy.nn.functional if name == "silu" else ampy, name)
    for lib, fn in ((ampy, a_fn), (torch, getattr(torch.nn.functional, name))):
        x = lib.tensor([-1.5, 2.0, -0.25, 3.0], requires_grad=True)
        y = x * 2
        out = fn(y, **kw, inplace=True)
        assert out is y
        (out * out).sum().backward()
        grads.append(x.grad.detach().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
