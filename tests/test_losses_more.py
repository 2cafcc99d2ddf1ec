"""The margin, embedding and likelihood losses (ampy/nn/_functional_loss_more.py)
side by side with torch: forward, input grads, reductions, a non-contiguous
input, error cases, CPU autocast dtypes and the modules."""
import numpy as np
import pytest
import torch

import ampy
import ampy.nn.functional as F

TF = torch.nn.functional
TOL = {"float32": 1e-5, "float64": 1e-10, "bfloat16": 3e-2, "float16": 5e-3}


def _pair(arr, dtype, grad=True):
    t = torch.tensor(arr, dtype=getattr(torch, dtype), requires_grad=grad)
    a = ampy.tensor(arr, dtype=getattr(ampy, dtype), requires_grad=grad)
    return a, t


def _lab(arr):
    return ampy.tensor(arr), torch.tensor(arr)


def _is_cls(arr):
    return np.asarray(arr).dtype.kind == "i"


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().float().numpy().astype(np.float64)
    return np.asarray(t.detach().float().tolist(), dtype=np.float64)


rng = np.random.default_rng(0)
X = rng.standard_normal((4, 5))
X2 = rng.standard_normal((4, 5))
X3 = rng.standard_normal((4, 5))
SIGN4 = np.array([1.0, -1.0, -1.0, 1.0])
SIGN45 = np.sign(rng.standard_normal((4, 5)))
MULTI = (rng.random((4, 5)) > 0.5).astype(np.float64)
CLS = np.array([0, 3, 4, 1])
POS = rng.random((4, 5)) * 3 + 0.1
COUNTS = np.floor(rng.random((4, 5)) * 5)
W5 = rng.random(5) + 0.5


CASES = {
    "margin_ranking_loss": ([X[:, 0], X2[:, 0]], [SIGN4], {"margin": 0.3}),
    "hinge_embedding_loss": ([X], [SIGN45], {"margin": 0.7}),
    "soft_margin_loss": ([X], [SIGN45], {}),
    "multilabel_soft_margin_loss": ([X], [MULTI], {}),
    "multilabel_soft_margin_loss|w": ([X], [MULTI], {"weight": W5}),
    "cosine_embedding_loss": ([X, X2], [SIGN4], {"margin": 0.2}),
    "triplet_margin_loss": ([X, X2, X3], [], {"margin": 0.8}),
    "triplet_margin_loss|swap": ([X, X2, X3], [], {"margin": 2.0, "p": 1, "swap": True,
                                                   "eps": 1e-3}),
    "poisson_nll_loss": ([X], [COUNTS], {}),
    "poisson_nll_loss|full": ([POS], [COUNTS], {"log_input": False, "full": True}),
    "gaussian_nll_loss": ([X, X2, POS], [], {}),
    "gaussian_nll_loss|full": ([X, X2, POS[:, 0]], [], {"full": True, "eps": 0.5}),
    "multi_margin_loss": ([X], [CLS], {}),
    "multi_margin_loss|p2w": ([X], [CLS], {"p": 2, "margin": 0.5, "weight": W5}),
    "triplet_margin_with_distance_loss": ([X, X2, X3], [], {"swap": True, "margin": 2.0}),
    "cosine_embedding_loss|1d": ([X[0], X2[0]], [np.array(-1.0)], {"margin": -0.5}),
    "multi_margin_loss|1d": ([X[0]], [CLS[1:2]], {"margin": 2.0}),
    "triplet_margin_loss|1d": ([X[0], X2[0], X3[0]], [], {"margin": 3.0}),
    "gaussian_nll_loss|hetero": ([X, X2, POS[:, :1]], [], {}),
    "poisson_nll_loss|fulllog": ([X], [COUNTS], {"full": True, "eps": 1e-3}),
    "hinge_embedding_loss|0": ([X], [np.where(SIGN45 > 0, 1.0, 0.0)], {}),
    "margin_ranking_loss|2d": ([X, X2], [SIGN45], {"margin": -0.1}),
}


def _run(key, dtype, reduction, noncontig=False):
    fl, lab, kw = CASES[key]
    name = key.split("|")[0]
    kw = dict(kw)
    wa = wt = None
    if "weight" in kw:
        wa, wt = _pair(kw.pop("weight"), dtype, grad=False)
    a_in, t_in = [], []
    for arr in fl:
        if noncontig:  # leaves twice as wide; the loss sees every other column
            arr = np.repeat(np.asarray(arr), 2, axis=-1)
        a, t = _pair(arr, dtype)
        a_in.append(a)
        t_in.append(t)
    la, lt = [], []
    for arr in lab:
        if _is_cls(arr):
            a, t = _lab(arr)
        else:
            a, t = _pair(arr, dtype, grad=False)
        la.append(a)
        lt.append(t)
    ai, ti = a_in + la, t_in + lt
    ka, kt = dict(kw), dict(kw)
    if wa is not None:
        ka["weight"], kt["weight"] = wa, wt
    if noncontig:
        ai = [x[..., ::2] if x.requires_grad else x for x in ai]
        ti = [x[..., ::2] if x.requires_grad else x for x in ti]
        assert not ai[0].is_contiguous()
    oa = getattr(F, name)(*ai, reduction=reduction, **ka)
    if dtype in ("bfloat16", "float16") and name == "multi_margin_loss":
        # torch has no bfloat16 CPU kernel: compare with its float32 result on the same values
        ti = [x.detach().float().requires_grad_(x.requires_grad) if x.is_floating_point() else x
              for x in ti]
        t_in[:] = [x for x in ti if x.requires_grad]
        kt = {k: (v.float() if isinstance(v, torch.Tensor) else v) for k, v in kt.items()}
        ot = getattr(TF, name)(*ti, reduction=reduction, **kt).to(getattr(torch, dtype))
        return oa, ot, a_in, t_in
    ot = getattr(TF, name)(*ti, reduction=reduction, **kt)
    return oa, ot, a_in, t_in


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("key", list(CASES))
def test_forward_backward(key, dtype, reduction):
    oa, ot, a_in, t_in = _run(key, dtype, reduction)
    assert str(oa.dtype).split(".")[-1] == str(ot.dtype).split(".")[-1]
    assert tuple(oa.shape) == tuple(ot.shape)
    tol = TOL[dtype]
    np.testing.assert_allclose(_np(oa), _np(ot), rtol=tol, atol=tol)
    g = rng.standard_normal(tuple(ot.shape))
    oa.backward(ampy.tensor(g, dtype=oa.dtype))
    ot.backward(torch.tensor(g, dtype=ot.dtype))
    for a, t in zip(a_in, t_in):
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=tol, atol=tol)


@pytest.mark.parametrize("key", list(CASES))
def test_noncontiguous(key):
    oa, ot, a_in, t_in = _run(key, "float64", "sum", noncontig=True)
    np.testing.assert_allclose(_np(oa), _np(ot), rtol=1e-10, atol=1e-10)
    oa.backward()
    ot.backward()
    for a, t in zip(a_in, t_in):
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("key", list(CASES))
def test_cpu_autocast_dtypes(key):
    fl, lab, kw = CASES[key]
    name = key.split("|")[0]
    kw = dict(kw)
    w = kw.pop("weight", None)
    a_in = [ampy.tensor(x, dtype=ampy.bfloat16) for x in fl]
    t_in = [torch.tensor(x, dtype=torch.bfloat16) for x in fl]
    for arr in lab:
        a, t = _lab(arr) if _is_cls(arr) else (ampy.tensor(arr, dtype=ampy.bfloat16),
                                             torch.tensor(arr, dtype=torch.bfloat16))
        a_in.append(a)
        t_in.append(t)
    ka, kt = dict(kw), dict(kw)
    if w is not None:
        ka["weight"] = ampy.tensor(w, dtype=ampy.bfloat16)
        kt["weight"] = torch.tensor(w, dtype=torch.bfloat16)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        oa = getattr(F, name)(*a_in, **ka)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ot = getattr(TF, name)(*t_in, **kt)
    assert str(oa.dtype).split(".")[-1] == str(ot.dtype).split(".")[-1]


def _raises_like(fa, ft, match):
    with pytest.raises(Exception) as et:
        ft()
    with pytest.raises(type(et.value), match=match):
        fa()


def test_errors():
    a, t = _pair(X, "float32")
    a1, t1 = _pair(X[:, 0], "float32")
    sa, st = _pair(SIGN4, "float32", grad=False)
    before = _np(a)
    _raises_like(lambda: F.margin_ranking_loss(a, a1, sa),
                 lambda: TF.margin_ranking_loss(t, t1, st),
                 "input1")
    _raises_like(lambda: F.triplet_margin_loss(a, a, a1), lambda: TF.triplet_margin_loss(t, t, t1),
                 "negative")
    _raises_like(lambda: F.multi_margin_loss(a, _lab(CLS)[0], p=3),
                 lambda: TF.multi_margin_loss(t, _lab(CLS)[1], p=3), "p ==")
    _raises_like(lambda: F.gaussian_nll_loss(a, a, a1[:3]),
                 lambda: TF.gaussian_nll_loss(t, t, t1[:3]), "var")
    _raises_like(lambda: F.gaussian_nll_loss(a, a, -a.abs()),
                 lambda: TF.gaussian_nll_loss(t, t, -t.abs()), "var")
    _raises_like(lambda: F.soft_margin_loss(a, a, reduction="bad"),
                 lambda: TF.soft_margin_loss(t, t, reduction="bad"), "reduction|bad")
    _raises_like(lambda: F.triplet_margin_with_distance_loss(a, a, a, margin=0.0),
                 lambda: TF.triplet_margin_with_distance_loss(t, t, t, margin=0.0), "margin")
    _raises_like(lambda: F.cosine_embedding_loss(a, a, a),
                 lambda: TF.cosine_embedding_loss(t, t, t),
                 "target")
    np.testing.assert_array_equal(_np(a), before)


def test_legacy_args():
    a, t = _pair(X, "float64")
    la, lt = _pair(SIGN45, "float64", grad=False)
    with pytest.warns(UserWarning):
        oa = F.soft_margin_loss(a, la, size_average=False)
    with pytest.warns(UserWarning):
        ot = TF.soft_margin_loss(t, lt, size_average=False)
    np.testing.assert_allclose(_np(oa), _np(ot), rtol=1e-10)
    oa = F.hinge_embedding_loss(a, la, reduce=False)
    ot = TF.hinge_embedding_loss(t, lt, reduce=False)
    assert tuple(oa.shape) == tuple(ot.shape)


MODULES = [
    ("MarginRankingLoss", {"margin": 0.5}, "margin_ranking_loss"),
    ("HingeEmbeddingLoss", {"margin": 2.0}, "hinge_embedding_loss"),
    ("SoftMarginLoss", {"reduction": "sum"}, "soft_margin_loss"),
    ("MultiLabelSoftMarginLoss", {}, "multilabel_soft_margin_loss"),
    ("CosineEmbeddingLoss", {"margin": 0.1}, "cosine_embedding_loss"),
    ("TripletMarginLoss", {"p": 1.0, "swap": True}, "triplet_margin_loss"),
    ("PoissonNLLLoss", {"log_input": True}, "poisson_nll_loss"),
    ("GaussianNLLLoss", {"full": True}, "gaussian_nll_loss"),
    ("MultiMarginLoss", {"p": 2}, "multi_margin_loss"),
    ("TripletMarginWithDistanceLoss", {"margin": 0.5}, "triplet_margin_with_distance_loss"),
]


@pytest.mark.parametrize("cls,kw,key", MODULES)
def test_modules(cls, kw, key):
    ma, mt = getattr(ampy.nn, cls)(**kw), getattr(torch.nn, cls)(**kw)
    assert repr(ma) == repr(mt)
    assert ma.reduction == mt.reduction
    fl, lab, _ = CASES[key]
    a_in = [ampy.tensor(x) for x in fl] + [_lab(x)[0] if _is_cls(x) else ampy.tensor(x)
                                           for x in lab]
    t_in = [torch.tensor(x) for x in fl] + [_lab(x)[1] if _is_cls(x) else torch.tensor(x)
                                            for x in lab]
    np.testing.assert_allclose(_np(ma(*a_in)), _np(mt(*t_in)), rtol=1e-10, atol=1e-10)


def test_module_args():
    w = rng.random(5) + 0.5
    ma = ampy.nn.MultiMarginLoss(p=2, margin=0.5, weight=ampy.tensor(w), reduction="sum")
    mt = torch.nn.MultiMarginLoss(p=2, margin=0.5, weight=torch.tensor(w), reduction="sum")
    assert sorted(ma.state_dict()) == sorted(mt.state_dict()) == ["weight"]
    xa, xt = _pair(X, "float64")
    np.testing.assert_allclose(_np(ma(xa, _lab(CLS)[0])), _np(mt(xt, _lab(CLS)[1])), rtol=1e-10)
    with pytest.warns(UserWarning):
        ma = ampy.nn.PoissonNLLLoss(log_input=False, size_average=False)
    with pytest.warns(UserWarning):
        mt = torch.nn.PoissonNLLLoss(log_input=False, size_average=False)
    assert ma.reduction == mt.reduction == "sum"
    pa, pt = _pair(POS, "float64")
    np.testing.assert_allclose(_np(ma(pa, ampy.tensor(COUNTS))), _np(mt(pt, torch.tensor(COUNTS))),
                               rtol=1e-10)
    for cls in ("TripletMarginLoss", "TripletMarginWithDistanceLoss"):
        with pytest.raises(ValueError, match="margin"):
            getattr(ampy.nn, cls)(margin=0.0)
    with pytest.raises(ValueError, match="p =="):
        ampy.nn.MultiMarginLoss(p=3)
    da = ampy.nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: 1 - F.cosine_similarity(a, b), margin=0.5)
    dt = torch.nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: 1 - TF.cosine_similarity(a, b), margin=0.5)
    ia = [_pair(x, "float64") for x in (X, X2, X3)]
    oa, ot = da(*[p[0] for p in ia]), dt(*[p[1] for p in ia])
    np.testing.assert_allclose(_np(oa), _np(ot), rtol=1e-10)
    oa.backward()
    ot.backward()
    for a, t in ia:
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=1e-9, atol=1e-12)


def test_gaussian_float_var():
    xa, xt = _pair(X, "float64")
    oa = F.gaussian_nll_loss(xa, ampy.tensor(X2), 0.3, full=True)
    ot = TF.gaussian_nll_loss(xt, torch.tensor(X2), 0.3, full=True)
    np.testing.assert_allclose(_np(oa), _np(ot), rtol=1e-10)


BAD_SHAPES = [
    ("cosine_embedding_loss", [(4, 5), (4, 6), (4,)], {}),
    ("cosine_embedding_loss", [(4, 5), (4, 5), (3,)], {}),
    ("cosine_embedding_loss", [(4, 5), (4, 5), (4, 5)], {}),
    ("multi_margin_loss", [(4, 5), "cls3"], {}),
    ("multi_margin_loss", [(4, 5, 2), "cls4"], {}),
    ("hinge_embedding_loss", [(4, 5), (4, 6)], {}),
    ("soft_margin_loss", [(4, 5), (4, 6)], {}),
    ("margin_ranking_loss", [(4,), (5,), (4,)], {}),
    ("margin_ranking_loss", [(4,), (4, 1), (4,)], {}),
    ("poisson_nll_loss", [(4, 5), (4, 6)], {}),
    ("multilabel_soft_margin_loss", [(4, 5), (4, 6)], {}),
    ("triplet_margin_loss", [(4, 5), (4, 5), (4,)], {}),
    ("triplet_margin_with_distance_loss", [(4, 5), (4,), (4, 5)], {}),
    ("gaussian_nll_loss", [(4, 5), (4, 5), (4, 2)], {}),
]


@pytest.mark.parametrize("name,shapes,kw", BAD_SHAPES)
def test_bad_shapes_like_torch(name, shapes, kw):
    def make(lib):
        out = []
        for i, s in enumerate(shapes):
            if isinstance(s, str):
                out.append(lib.tensor(CLS[:int(s[3:])]) if s != "cls4" else lib.tensor(CLS))
            else:
                out.append(lib.tensor(rng.standard_normal(s) if i == 0 else np.ones(s)))
        return out
    ta, tt = make(ampy), make(torch)
    before = [_np(x) for x in ta]
    with pytest.raises(Exception) as et:
        getattr(TF, name)(*tt, **kw)
    with pytest.raises(type(et.value)) as ea:
        getattr(F, name)(*ta, **kw)
    assert str(ea.value) == str(et.value).replace("torch.Size", "ampy.Size")
    for x, b in zip(ta, before):
        np.testing.assert_array_equal(_np(x), b)


@pytest.mark.parametrize("key", [k for k in CASES if "|" not in k])
def test_bad_reduction_like_torch(key):
    fl, lab, kw = CASES[key]
    kw = {k: v for k, v in kw.items() if k != "weight"}
    args_a = [ampy.tensor(x) for x in fl + lab]
    args_t = [torch.tensor(x) for x in fl + lab]
    with pytest.raises(ValueError) as et:
        getattr(TF, key)(*args_t, reduction="bad", **kw)
    with pytest.raises(ValueError) as ea:
        getattr(F, key)(*args_a, reduction="bad", **kw)
    assert str(ea.value) == str(et.value)


@pytest.mark.parametrize("target", [[0, 1, 5, 2], [0, -1, 2, 2], [0.0, 1.0, 2.0, 3.0]])
def test_multi_margin_bad_target_like_torch(target):
    with pytest.raises(RuntimeError) as et:
        TF.multi_margin_loss(torch.ones(4, 5), torch.tensor(target))
    with pytest.raises(RuntimeError) as ea:
        F.multi_margin_loss(ampy.ones(4, 5), ampy.tensor(target))
    assert str(ea.value) == str(et.value)


def test_multi_margin_empty_batch():
    xa, xt = ampy.ones(0, 5, requires_grad=True), torch.ones(0, 5, requires_grad=True)
    ya, yt = ampy.tensor([], dtype=ampy.int64), torch.tensor([], dtype=torch.int64)
    oa, ot = F.multi_margin_loss(xa, ya, reduction="sum"), TF.multi_margin_loss(xt, yt,
                                                                                reduction="sum")
    # torch's own value here is uninitialised memory (seen: 1e-15, 4e30): compare the shape, and
    # the value with torch's sum over nothing
    assert tuple(oa.shape) == tuple(ot.shape)
    np.testing.assert_array_equal(_np(oa), _np(torch.ones(0).sum()))
    assert tuple(F.multi_margin_loss(xa, ya, reduction="none").shape) == (0,)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(4, 5), (6,)])
def test_multilabel_margin_loss_like_torch(reduction, shape):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape)
    t = np.full(shape, -1, dtype=np.int64)
    rows = t.reshape(-1, shape[-1])
    for r in rows:
        k = rng.integers(0, shape[-1])
        r[:k] = rng.choice(shape[-1], k, replace=False)
    res = []
    for lib in (ampy, torch):
        xi = lib.tensor(x).requires_grad_()
        out = lib.nn.functional.multilabel_margin_loss(xi, lib.tensor(t), reduction=reduction)
        out.sum().backward()
        res.append((out.detach().numpy(), xi.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12, atol=1e-12)
    m = ampy.nn.MultiLabelMarginLoss(reduction=reduction)
    assert repr(m) == repr(torch.nn.MultiLabelMarginLoss(reduction=reduction))
