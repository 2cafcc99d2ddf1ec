"""The element-wise losses (binary_cross_entropy(_with_logits), l1_loss,
smooth_l1_loss, huber_loss, kl_div), the class losses with their options
(nll_loss, cross_entropy: class weights, ignore_index, label_smoothing,
probability targets) and their modules, side by side with torch 2.13.

Tolerances: ampy computes torch's formula step by step, each step rounded
once to the dtype (halves of smooth_l1 computed in float32, as torch's
kernel), so most results are torch's bits. They are not always: torch's
vectorised kernels use Sleef's log/exp/log1p (within 1 ulp), its own
summation order in the reductions and, in float64, fused multiply-adds. A
result is therefore checked against torch within ULPS[dtype] units of the
dtype's epsilon, relative to the element and, for elements where terms
cancel, to the largest magnitude of the array (a cancellation's error is
bounded by eps times its operands, which that maximum bounds).
"""
import warnings

import numpy as np
import pytest
import torch

import ampy
import ampy.nn.functional as AF
import torch.nn.functional as TF

from _helpers import TORCH_DTYPE, same_bits_or_both_nan

DTYPES = ("float32", "float64", "float16", "bfloat16")
EPS = {"float32": 2.0**-23, "float64": 2.0**-52, "float16": 2.0**-10, "bfloat16": 2.0**-7}
ULPS = {"float32": 16, "float64": 16, "float16": 2, "bfloat16": 2}
REDS = ("mean", "sum", "none")


def _rng(key):
    return np.random.default_rng(abs(hash(key)) % 2**32)


def _pair(a, dtype, grad=True):
    """A torch tensor of dtype from the float64 array a, and the ampy tensor
    holding exactly its values."""
    t = torch.tensor(a).to(TORCH_DTYPE[dtype])
    x = ampy.tensor(t.double().numpy()).to(getattr(ampy, dtype))
    if grad:
        t.requires_grad_(True)
        x.requires_grad_(True)
    return t, x


def _close(got, want, dtype):
    g = got.detach().to(ampy.float64).numpy()
    w = want.detach().double().numpy()
    assert np.array_equal(np.isnan(g), np.isnan(w))
    finite = np.isfinite(w)
    assert np.array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)])
    tol = ULPS[dtype] * EPS[dtype]
    scale = np.max(np.abs(w[finite]), initial=0.0)
    np.testing.assert_allclose(g[finite], w[finite], rtol=tol, atol=tol * scale)


def _run(fa, ft, arrays, dtype, grad=(True, True)):
    """Forward + backward of both libraries on the same values; compares the
    output, its dtype and every gradient."""
    pairs = [_pair(a, dtype, g) for a, g in zip(arrays, grad)]
    ot = ft(*[p[0] for p in pairs])
    oa = fa(*[p[1] for p in pairs])
    assert oa.dtype is getattr(ampy, str(ot.dtype).split(".")[1])
    assert tuple(oa.shape) == tuple(ot.shape)
    _close(oa, ot, dtype)
    g = _rng(("g", ot.shape)).uniform(0.5, 1.5, tuple(ot.shape))
    ot.backward(torch.tensor(g).to(ot.dtype))
    oa.backward(ampy.tensor(torch.tensor(g).to(ot.dtype).double().numpy()).to(oa.dtype))
    for (t, a), want in zip(pairs, grad):
        if want:
            _close(a.grad, t.grad, dtype)


def _probs(shape, key):
    return _rng(key).uniform(0.02, 0.98, shape)


def _normal(shape, key, scale=2.0):
    return _rng(key).normal(0, scale, shape)


# ----------------------------------------------------------- forward + backward
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS)
def test_binary_cross_entropy(dtype, red):
    x, t = _probs((5, 7), "x"), _probs((5, 7), "t")
    _run(lambda a, b: AF.binary_cross_entropy(a, b, reduction=red),
         lambda a, b: TF.binary_cross_entropy(a, b, reduction=red), [x, t], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_cross_entropy_weight(dtype):
    x, t, w = _probs((5, 7), "x"), _probs((5, 7), "t"), _probs((7,), "w") * 2
    wt, wa = _pair(w, dtype, grad=False)
    _run(lambda a, b: AF.binary_cross_entropy(a, b, wa),
         lambda a, b: TF.binary_cross_entropy(a, b, wt), [x, t], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_cross_entropy_clamps_log_at_minus_100(dtype):
    """x = 0 or 1 gives torch's finite 100 (log clamped at -100), not inf."""
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    t = np.array([1.0, 0.0, 0.0, 1.0, 0.3])
    _run(lambda a, b: AF.binary_cross_entropy(a, b, reduction="none"),
         lambda a, b: TF.binary_cross_entropy(a, b, reduction="none"), [x, t], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS)
def test_bce_with_logits(dtype, red):
    x, t = _normal((5, 7), "x", 3.0), _probs((5, 7), "t")
    _run(lambda a, b: AF.binary_cross_entropy_with_logits(a, b, reduction=red),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=red), [x, t], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS)
def test_bce_with_logits_weight_and_pos_weight(dtype, red):
    x, t = _normal((5, 7), "x", 3.0), _probs((5, 7), "t")
    w, pw = _probs((7,), "w") * 2, _probs((7,), "pw") * 4
    (wt, wa), (pt, pa) = _pair(w, dtype, False), _pair(pw, dtype, False)
    _run(lambda a, b: AF.binary_cross_entropy_with_logits(a, b, wa, reduction=red, pos_weight=pa),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, wt, reduction=red, pos_weight=pt),
         [x, t], dtype)


@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_bce_with_logits_is_stable_for_huge_logits(dtype):
    x = np.array([-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0])
    t = np.array([1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.0])
    _, xa = _pair(x, dtype)
    out = AF.binary_cross_entropy_with_logits(xa, ampy.tensor(t).to(xa.dtype), reduction="none")
    assert np.isfinite(out.detach().numpy()).all()
    _run(lambda a, b: AF.binary_cross_entropy_with_logits(a, b, reduction="none"),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction="none"), [x, t], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS)
def test_l1_loss(dtype, red):
    _run(lambda a, b: AF.l1_loss(a, b, reduction=red),
         lambda a, b: TF.l1_loss(a, b, reduction=red),
         [_normal((5, 7), "x"), _normal((5, 7), "y")], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("beta", (1.0, 0.3, 2.5, 0.0))
def test_smooth_l1_loss(dtype, red, beta):
    _run(lambda a, b: AF.smooth_l1_loss(a, b, reduction=red, beta=beta),
         lambda a, b: TF.smooth_l1_loss(a, b, reduction=red, beta=beta),
         [_normal((5, 7), "x"), _normal((5, 7), "y")], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("delta", (1.0, 0.3, 2.5))
def test_huber_loss(dtype, red, delta):
    _run(lambda a, b: AF.huber_loss(a, b, reduction=red, delta=delta),
         lambda a, b: TF.huber_loss(a, b, reduction=red, delta=delta),
         [_normal((5, 7), "x"), _normal((5, 7), "y")], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS)
def test_l1_and_huber_weight(dtype, red):
    w = _probs((5, 7), "w")
    wt, wa = _pair(w, dtype, False)
    arrs = [_normal((5, 7), "x"), _normal((5, 7), "y")]
    _run(lambda a, b: AF.l1_loss(a, b, reduction=red, weight=wa),
         lambda a, b: TF.l1_loss(a, b, reduction=red, weight=wt), arrs, dtype)
    _run(lambda a, b: AF.huber_loss(a, b, reduction=red, weight=wa, delta=0.7),
         lambda a, b: TF.huber_loss(a, b, reduction=red, weight=wt, delta=0.7), arrs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS + ("batchmean",))
@pytest.mark.parametrize("log_target", (False, True))
def test_kl_div(dtype, red, log_target):
    lp = np.log(_rng("p").dirichlet(np.ones(7), 5))
    q = _rng("q").dirichlet(np.ones(7), 5)
    q[0, 0] = 0.0  # xlogy(0, 0) = 0
    tgt = np.log(q + 0.01) if log_target else q
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(lambda a, b: AF.kl_div(a, b, reduction=red, log_target=log_target),
             lambda a, b: TF.kl_div(a, b, reduction=red, log_target=log_target), [lp, tgt],
             dtype)


def test_kl_div_mean_warns_as_torch():
    x, t = ampy.zeros(2, 3), ampy.ones(2, 3) / 3
    with warnings.catch_warnings(record=True) as wt:
        warnings.simplefilter("always")
        TF.kl_div(torch.zeros(2, 3), torch.ones(2, 3) / 3)
    with warnings.catch_warnings(record=True) as wa:
        warnings.simplefilter("always")
        AF.kl_div(x, t)
        AF.kl_div(x, t, reduction="batchmean")
    assert [str(w.message) for w in wa] == [str(w.message) for w in wt]
    assert wa[0].filename == __file__


@pytest.mark.parametrize("fn", ("l1_loss", "smooth_l1_loss", "huber_loss"))
def test_broadcast_target_warns_and_broadcasts(fn):
    x, y = _normal((4, 3), "x"), _normal((3,), "y")
    with pytest.warns(UserWarning, match="Using a target size") as rec:
        out = getattr(AF, fn)(ampy.tensor(x), ampy.tensor(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(TF, fn)(torch.tensor(x), torch.tensor(y))
    assert rec[0].filename == __file__
    _close(out, want, "float64")


@pytest.mark.parametrize("fn", ("binary_cross_entropy", "l1_loss", "kl_div"))
def test_empty_inputs_mean_is_nan_sum_is_zero(fn):
    x = ampy.zeros(0, 3).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for red in ("mean", "sum"):
            got = getattr(AF, fn)(x, ampy.zeros(0, 3), reduction=red)
            want = getattr(TF, fn)(torch.zeros(0, 3), torch.zeros(0, 3), reduction=red)
            assert same_bits_or_both_nan(got, want)
            got.backward()
            assert tuple(x.grad.shape) == (0, 3)


def test_legacy_size_average_and_reduce():
    x, t = _probs((3, 4), "x"), _probs((3, 4), "t")
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        got = AF.binary_cross_entropy(ampy.tensor(x), ampy.tensor(t), size_average=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = TF.binary_cross_entropy(torch.tensor(x), torch.tensor(t), size_average=False)
    _close(got, want, "float64")


# ----------------------------------------------------------- the class losses
def _class_case(key, n=6, c=5, rest=()):
    rng = _rng(key)
    x = rng.normal(0, 2, (n, c) + rest)
    t = rng.integers(0, c, (n,) + rest)
    t.flat[0] = 1  # ignore_index=1 below always hits a row
    return x, t


_CLASS_OPTS = {"plain": {}, "weight": {"weight": True}, "ignore": {"ignore_index": 1},
               "weight-ignore": {"weight": True, "ignore_index": 1},
               "smooth": {"label_smoothing": 0.2},
               "weight-smooth-ignore": {"weight": True, "label_smoothing": 0.1,
                                        "ignore_index": 1}}
_CLASS_CASES = [(fn, k) for fn in ("cross_entropy", "nll_loss") for k in _CLASS_OPTS
                if fn == "cross_entropy" or "smooth" not in k]  # nll_loss has no smoothing


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("fn,opt", _CLASS_CASES)
def test_class_losses_options(fn, opt, dtype, red):
    """The fused kernel accumulates in float32 (float64 for float64) and rounds
    halves once at the end, where torch rounds its half log_softmax first:
    the bound is a few roundings of the dtype."""
    opts = _CLASS_OPTS[opt]
    x, t = _class_case((fn, dtype, red))
    kw = dict(opts)
    tw = aw = None
    if kw.pop("weight", False):
        tw, aw = _pair(_probs((5,), "cw") * 2, dtype, grad=False)
    xt, xa = _pair(x, dtype)
    ot = getattr(TF, fn)(xt, torch.tensor(t), weight=tw, reduction=red, **kw)
    oa = getattr(AF, fn)(xa, ampy.tensor(t), weight=aw, reduction=red, **kw)
    ot.sum().backward()
    oa.sum().backward()
    tol = {"float32": 1e-5, "float64": 1e-12, "float16": 4e-3, "bfloat16": 3e-2}[dtype]
    for a, b in ((oa, ot), (xa.grad, xt.grad)):
        np.testing.assert_allclose(a.detach().float().numpy(), b.detach().float().numpy(),
                                   rtol=tol, atol=tol)
    assert oa.dtype.name == str(ot.dtype).split(".")[1]


@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("smooth", (0.0, 0.25))
def test_cross_entropy_probability_targets(dtype, red, smooth):
    x = _normal((6, 5, 3), "x")
    p = _rng("p").dirichlet(np.ones(5), (6, 3)).transpose(0, 2, 1)
    w = _probs((5,), "cw") * 2
    (wt, wa) = _pair(w, dtype, grad=False)
    _run(lambda a, b: AF.cross_entropy(a, b, wa, reduction=red, label_smoothing=smooth),
         lambda a, b: TF.cross_entropy(a, b, wt, reduction=red, label_smoothing=smooth),
         [x, p], dtype, grad=(True, False))


# ------------------------------------------------------------------- autocast
_AUTOCAST_CASES = {
    "binary_cross_entropy": lambda M, x, t: M.nn.functional.binary_cross_entropy(
        M.sigmoid(x), t),
    "bce_with_logits": lambda M, x, t: M.nn.functional.binary_cross_entropy_with_logits(x, t),
    "l1_loss": lambda M, x, t: M.nn.functional.l1_loss(x, t),
    "smooth_l1_loss": lambda M, x, t: M.nn.functional.smooth_l1_loss(x, t),
    "huber_loss": lambda M, x, t: M.nn.functional.huber_loss(x, t, reduction="none"),
    "kl_div": lambda M, x, t: M.nn.functional.kl_div(x, t, reduction="batchmean"),
    "cross_entropy_probs": lambda M, x, t: M.nn.functional.cross_entropy(x, t),
    "linear_then_l1": lambda M, x, t: M.nn.functional.l1_loss(
        M.nn.functional.linear(x, t), t[:, :4]),
}


@pytest.mark.parametrize("name", sorted(_AUTOCAST_CASES))
@pytest.mark.parametrize("fast", ("bfloat16", "float16"))
@pytest.mark.parametrize("in_dtype", ("float32", "bfloat16"))
def test_autocast_output_dtypes(name, fast, in_dtype):
    """CPU autocast: every loss runs in float32 (torch's CPU fp32 list), so a
    half input gives a float32 loss, as in torch."""
    fn = _AUTOCAST_CASES[name]
    x, t = _normal((4, 4), "x"), _probs((4, 4), "t")
    xt, xa = _pair(x, in_dtype)
    tt, ta = _pair(t, in_dtype, grad=False)
    with torch.autocast("cpu", dtype=TORCH_DTYPE[fast]):
        ot = fn(torch, xt, tt)
    with ampy.autocast("cpu", dtype=getattr(ampy, fast)):
        oa = fn(ampy, xa, ta)
    assert oa.dtype.name == str(ot.dtype).split(".")[1]
    ot.float().sum().backward()
    oa.float().sum().backward()
    assert xa.grad.dtype.name == str(xt.grad.dtype).split(".")[1]


def test_policies_are_torchs():
    """binary_cross_entropy is banned on CUDA autocast (torch's error), the
    others are float32 on both devices."""
    from ampy._dispatch import get_op
    for name in ("binary_cross_entropy_with_logits", "l1_loss", "smooth_l1_loss", "huber_loss",
                 "kl_div"):
        assert get_op(name).policy == {"cpu": "fp32", "cuda": "fp32"}, name
    assert get_op("binary_cross_entropy").policy == {"cpu": "fp32", "cuda": "banned"}
    from ampy.amp._policy import BANNED_MESSAGE
    assert "binary_cross_entropy_with_logits" in BANNED_MESSAGE


# -------------------------------------------------------------------- strided
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("name", ("bce", "bce_logits", "l1", "smooth_l1", "huber", "kl"))
def test_strided_inputs_give_the_contiguous_result(dtype, name):
    fns = {"bce": lambda x, t: AF.binary_cross_entropy(x.sigmoid(), t, reduction="none"),
           "bce_logits": lambda x, t: AF.binary_cross_entropy_with_logits(x, t),
           "l1": lambda x, t: AF.l1_loss(x, t, reduction="none"),
           "smooth_l1": lambda x, t: AF.smooth_l1_loss(x, t, beta=0.5),
           "huber": lambda x, t: AF.huber_loss(x, t, reduction="sum"),
           "kl": lambda x, t: AF.kl_div(x, t, reduction="none")}
    fn = fns[name]
    x, t = _normal((6, 8), "x"), _probs((8, 6), "t")
    xs = ampy.tensor(x).to(getattr(ampy, dtype))[::2, 1:7].requires_grad_()
    ts = ampy.tensor(t).to(getattr(ampy, dtype)).T[::2, 1:7]
    assert not ts.is_contiguous()
    xc = xs.detach().contiguous().requires_grad_()
    a, b = fn(xs, ts), fn(xc, ts.contiguous())
    assert same_bits_or_both_nan(a.detach(), b.detach())
    a.sum().backward()
    b.sum().backward()
    assert same_bits_or_both_nan(xs.grad, xc.grad)


# ---------------------------------------------------------------- bad inputs
def test_bad_inputs_raise_torchs_errors_and_leave_inputs_unchanged():
    x = ampy.tensor(_probs((3, 4), "x"))
    t = ampy.tensor(_probs((3, 4), "t"))
    before = (x.numpy().copy(), t.numpy().copy())
    with pytest.raises(ValueError, match="Using a target size .* is deprecated"):
        AF.binary_cross_entropy(x, t[:, :3])
    with pytest.raises(ValueError, match=r"Target size .* must be the same as input size"):
        AF.binary_cross_entropy_with_logits(x, t[:2])
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        AF.binary_cross_entropy(x * 3, t)
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        AF.binary_cross_entropy(x, t - 2)
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values "
                                           "for beta."):
        AF.smooth_l1_loss(x, t, beta=-1.0)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values "
                                           "for delta."):
        AF.huber_loss(x, t, delta=0.0)
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        AF.l1_loss(x, t, reduction="bad")
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        AF.l1_loss(x, t, weight=ampy.ones(4))
    with pytest.raises(TypeError, match="argument 'target' must be Tensor"):
        AF.kl_div(x, [1.0])
    with pytest.raises(TypeError, match="argument 'beta' must be float"):
        AF.smooth_l1_loss(x, t, beta="1")
    with pytest.raises(RuntimeError, match="must match the size of tensor b"), \
            pytest.warns(UserWarning, match="Using a target size"):
        AF.l1_loss(x, ampy.ones(5))
    assert np.array_equal(x.numpy(), before[0]) and np.array_equal(t.numpy(), before[1])


@pytest.mark.parametrize("fn,arg", [("binary_cross_entropy", "weight"),
                                    ("binary_cross_entropy_with_logits", "weight"),
                                    ("binary_cross_entropy_with_logits", "pos_weight")])
def test_weight_that_requires_grad_raises_as_torch(fn, arg):
    x, t = _probs((3, 4), "x"), _probs((3, 4), "t")
    msgs = []
    for M in (torch, ampy):
        w = M.ones(4, requires_grad=True)
        with pytest.raises(RuntimeError) as e:
            getattr(M.nn.functional, fn)(M.tensor(x), M.tensor(t), **{arg: w})
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


# -------------------------------------------------------------------- modules
@pytest.mark.parametrize("name,kw", [
    ("BCELoss", {}), ("BCELoss", {"reduction": "sum"}), ("BCEWithLogitsLoss", {}),
    ("BCEWithLogitsLoss", {"pos_weight": True}), ("L1Loss", {"reduction": "none"}),
    ("SmoothL1Loss", {"beta": 0.5}), ("HuberLoss", {"delta": 0.4}),
    ("KLDivLoss", {"reduction": "batchmean", "log_target": True}),
    ("CrossEntropyLoss", {"label_smoothing": 0.1}), ("NLLLoss", {"ignore_index": 2}),
])
def test_loss_modules(name, kw):
    kw = dict(kw)
    pw = kw.pop("pos_weight", None)
    mt = getattr(torch.nn, name)(**kw, **({"pos_weight": torch.full((4,), 2.0)} if pw else {}))
    ma = getattr(ampy.nn, name)(**kw, **({"pos_weight": ampy.full((4,), 2.0)} if pw else {}))
    assert sorted(ma.state_dict()) == sorted(mt.state_dict())
    x, t = _probs((3, 4), "x"), _probs((3, 4), "t")
    if name in ("CrossEntropyLoss", "NLLLoss"):
        t = np.array([0, 2, 3])
    want = mt(torch.tensor(x), torch.tensor(t))
    got = ma(ampy.tensor(x), ampy.tensor(t))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-15)
