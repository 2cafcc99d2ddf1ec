"""The 1-d and 3-d pools and the adaptive max pools against torch 2.13 CPU:
max_pool1d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d,
adaptive_max_pool2d, max_pool3d, avg_pool3d, adaptive_avg_pool3d (the
functions and their nn modules).

Every value, index and gradient is compared as bits with torch's, in
float32, float64, bfloat16 and float16 (torch's CPU avg_pool3d has no half
kernel: ampy raises as it does), on every CPU path (the `cpu_path`
fixture): the maxima are input values at torch's indices (first maximum in
scan order on ties, NaN wins), the averages one float32 (float64) window
sum divided as torch divides, the backward adds in torch's output order.
Inputs with many ties and NaNs, non-contiguous inputs, unbatched and empty
batches, autocast dtypes and torch's errors (type and message, inputs
unchanged) are covered too.
"""
import warnings

import numpy as np
import pytest

import ampy
import ampy.nn.functional as AF

from _helpers import TORCH_DTYPE, bits

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = ("float32", "float64", "bfloat16", "float16")

# (id, F name, shape, args, kwargs)
CASES = [
    ("mp1", "max_pool1d", (2, 3, 11), (3,), {}),
    ("mp1_s2p1", "max_pool1d", (2, 3, 11), (3, 2, 1), {}),
    ("mp1_dil_ceil", "max_pool1d", (2, 3, 12), (3, 2, 1, 2), {"ceil_mode": True}),
    ("mp1_idx", "max_pool1d", (2, 4, 13), (4, 3, 2), {"return_indices": True}),
    ("mp1_unbatched", "max_pool1d", (5, 9), (2,), {"return_indices": True}),
    ("mp1_empty_batch", "max_pool1d", (0, 3, 9), (2,), {}),
    ("ap1", "avg_pool1d", (2, 3, 11), (3, 2, 1), {}),
    ("ap1_ceil_nopad", "avg_pool1d", (2, 3, 10), (3, 2, 1, True, False), {}),
    ("ap1_unbatched", "avg_pool1d", (4, 10), (4,), {}),
    ("aap1", "adaptive_avg_pool1d", (2, 3, 11), (4,), {}),
    ("aap1_up", "adaptive_avg_pool1d", (2, 3, 5), (7,), {}),
    ("aap1_one", "adaptive_avg_pool1d", (2, 3, 9), (1,), {}),
    ("amp1", "adaptive_max_pool1d", (2, 3, 11), (4, True), {}),
    ("amp1_up", "adaptive_max_pool1d", (3, 5), (8,), {"return_indices": True}),
    ("amp2", "adaptive_max_pool2d", (2, 3, 7, 9), ((3, 4), True), {}),
    ("amp2_none", "adaptive_max_pool2d", (2, 3, 7, 9), ((None, 2),), {"return_indices": True}),
    ("amp2_one", "adaptive_max_pool2d", (3, 6, 5), (1, True), {}),
    ("amp2_up", "adaptive_max_pool2d", (1, 2, 3, 4), ((5, 7), True), {}),
    ("mp3", "max_pool3d", (2, 3, 6, 7, 8), (2,), {}),
    ("mp3_idx", "max_pool3d", (2, 3, 6, 7, 8), (3, 2, 1), {"return_indices": True}),
    ("mp3_geom", "max_pool3d", (1, 2, 7, 8, 9), ((2, 3, 2), (1, 2, 3), (1, 1, 0), (2, 1, 2)),
     {"ceil_mode": True, "return_indices": True}),
    ("mp3_unbatched", "max_pool3d", (3, 5, 6, 7), (2, 1), {"return_indices": True}),
    ("ap3", "avg_pool3d", (2, 3, 6, 7, 8), (2,), {}),
    ("ap3_pad", "avg_pool3d", (2, 3, 6, 7, 8), (3, 2, 1), {}),
    ("ap3_nopad_ceil", "avg_pool3d", (1, 2, 7, 6, 9), ((3, 2, 3), (2, 2, 2), (1, 1, 1), True,
                                                        False), {}),
    ("ap3_div", "avg_pool3d", (2, 2, 5, 6, 7), (3, 2, 1), {"divisor_override": 5}),
    ("ap3_unbatched", "avg_pool3d", (3, 5, 6, 7), ((2, 3, 2),), {}),
    ("aap3", "adaptive_avg_pool3d", (2, 3, 6, 7, 8), ((3, 4, 5),), {}),
    ("aap3_none", "adaptive_avg_pool3d", (2, 3, 6, 7, 8), ((None, 2, None),), {}),
    ("aap3_up", "adaptive_avg_pool3d", (1, 2, 3, 4, 5), ((5, 6, 7),), {}),
    ("aap3_one", "adaptive_avg_pool3d", (2, 3, 4, 5, 6), (1,), {}),
    ("aap3_unbatched", "adaptive_avg_pool3d", (3, 5, 6, 7), (3,), {}),
]
IDS = [c[0] for c in CASES]


def _values(shape, seed, ties=False, nans=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    if ties:  # few distinct values: every window has ties
        x = np.round(x * 2) / 2
    if nans and x.size:
        x.reshape(-1)[rng.choice(x.size, max(1, x.size // 17), replace=False)] = np.nan
    return x


def _supported(name, dt):
    return not (name == "avg_pool3d" and dt in ("bfloat16", "float16"))


def _run(name, args, kwargs, x, dt, layout=None, g_seed=5):
    """(ampy outputs, torch outputs, ampy grad, torch grad) from the same values."""
    a = ampy.tensor(x).to(getattr(ampy, dt))
    if layout == "transposed":
        a = ampy.tensor(np.ascontiguousarray(np.swapaxes(x, -1, -2))).to(
            getattr(ampy, dt)).transpose(-1, -2)
        assert not a.is_contiguous()
    elif layout == "stepped":
        big = np.repeat(x, 2, axis=-1)
        a = ampy.tensor(big).to(getattr(ampy, dt))[..., ::2]
        assert not a.is_contiguous()
    a.requires_grad_()
    t = torch.from_numpy(x.copy()).to(TORCH_DTYPE[dt]).requires_grad_()
    ya, yt = getattr(AF, name)(a, *args, **kwargs), getattr(TF, name)(t, *args, **kwargs)
    ya = ya if isinstance(ya, tuple) else (ya,)
    yt = yt if isinstance(yt, tuple) else (yt,)
    g = np.random.default_rng(g_seed).standard_normal(tuple(yt[0].shape)).astype(np.float32)
    ya[0].backward(ampy.tensor(g).to(getattr(ampy, dt)))
    yt[0].backward(torch.from_numpy(g).to(TORCH_DTYPE[dt]))
    return ya, yt, a.grad, t.grad


def _same(a, t):
    assert tuple(a.shape) == tuple(t.shape)
    assert a.dtype.name == str(t.dtype).split(".")[-1]
    np.testing.assert_array_equal(bits(a), bits(t.detach()))


# torch's CPU avg_pool3d has no half kernel: those pairs are test_avg_pool3d_half_raises_as_torch
CASE_DTYPES = [(c, dt) for c in CASES for dt in DTYPES if _supported(c[1], dt)]
# an empty batch has no layout to vary (its empty-batch case runs in the bits test above)
LAID_OUT = [c for c in CASES if 0 not in c[2]]


@pytest.mark.parametrize("case,dt", CASE_DTYPES, ids=[f"{c[0]}-{dt}" for c, dt in CASE_DTYPES])
def test_values_indices_and_grads_are_torch_bits(cpu_path, case, dt):
    _, name, shape, args, kwargs = case
    ya, yt, ga, gt = _run(name, args, kwargs, _values(shape, 1), dt)
    assert len(ya) == len(yt)
    if case[0].endswith("_one") and name.startswith("adaptive_avg"):
        _close_to_mean(ya[0], yt[0], shape, dt)
    else:
        for p, q in zip(ya, yt):
            _same(p, q)
    _same(ga, gt)


def _close_to_mean(a, t, shape, dt):
    """A single adaptive-average bin is torch's (and ampy's) mean reduction,
    whose summation orders differ: within 2 ulps of the result's magnitude of
    the float64 mean, as torch's own result is."""
    want = np.asarray(t.detach().double())
    got = np.asarray(a.double())
    assert tuple(a.shape) == tuple(t.shape) and a.dtype.name == str(t.dtype).split(".")[-1]
    eps = {"float32": 2.0**-23, "float64": 2.0**-52, "bfloat16": 2.0**-7, "float16": 2.0**-10}[dt]
    scale = np.abs(want).max() + 1e-30
    assert np.abs(got - want).max() <= 2 * eps * scale


@pytest.mark.parametrize("case", [c for c in CASES if "max" in c[1]],
                         ids=[c[0] for c in CASES if "max" in c[1]])
@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_ties_and_nans_pick_torch_indices(cpu_path, case, dt):
    _, name, shape, args, kwargs = case
    kwargs = dict(kwargs, return_indices=True)
    args = args[:1] if name.startswith("adaptive") else args
    for ties, nans in ((True, False), (True, True)):
        ya, yt, ga, gt = _run(name, args, kwargs, _values(shape, 2, ties, nans), dt)
        _same(ya[0], yt[0])
        np.testing.assert_array_equal(np.asarray(ya[1]), yt[1].numpy())
        _same(ga, gt)


@pytest.mark.parametrize("case", LAID_OUT, ids=[c[0] for c in LAID_OUT])
@pytest.mark.parametrize("layout", ("transposed", "stepped"))
def test_non_contiguous_inputs_equal_torch(case, layout):
    _, name, shape, args, kwargs = case
    ya, yt, ga, gt = _run(name, args, kwargs, _values(shape, 3), "float32", layout)
    if case[0].endswith("_one") and name.startswith("adaptive_avg"):
        _close_to_mean(ya[0], yt[0], shape, "float32")
    else:
        for p, q in zip(ya, yt):
            _same(p, q)
    _same(ga, gt)


def test_avg_pool3d_half_raises_as_torch():
    for dt in ("float16", "bfloat16"):
        x = _values((1, 2, 4, 4, 4), 4)
        a, t = ampy.tensor(x).to(getattr(ampy, dt)), torch.from_numpy(x).to(TORCH_DTYPE[dt])
        before = bits(a)
        with pytest.raises(NotImplementedError) as ea:
            AF.avg_pool3d(a, 2)
        with pytest.raises(NotImplementedError) as et:
            TF.avg_pool3d(t, 2)
        assert str(ea.value) == str(et.value)
        np.testing.assert_array_equal(bits(a), before)


@pytest.mark.parametrize("dt", ("bfloat16", "float16"))
def test_autocast_dtypes_are_torch(dt):
    """On the CPU torch autocasts max_pool3d / avg_pool3d / adaptive_avg_pool3d to
    float32; max_pool3d(return_indices=True) and the others keep the input's dtype."""
    calls = [("max_pool1d", (2, 3, 8), (2,), {}), ("avg_pool1d", (2, 3, 8), (2,), {}),
             ("adaptive_avg_pool1d", (2, 3, 8), (3,), {}),
             ("adaptive_max_pool1d", (2, 3, 8), (3,), {}),
             ("adaptive_max_pool2d", (2, 3, 6, 6), (2,), {}),
             ("max_pool3d", (2, 3, 4, 4, 4), (2,), {}),
             ("max_pool3d", (2, 3, 4, 4, 4), (2,), {"return_indices": True}),
             ("avg_pool3d", (2, 3, 4, 4, 4), (2,), {}),
             ("adaptive_avg_pool3d", (2, 3, 4, 4, 4), (2,), {})]
    for name, shape, args, kwargs in calls:
        x = _values(shape, 6)
        for src in (dt, "float32"):
            a = ampy.tensor(x).to(getattr(ampy, src))
            t = torch.from_numpy(x).to(TORCH_DTYPE[src])
            with ampy.autocast("cpu", dtype=getattr(ampy, dt)):
                ya = getattr(AF, name)(a, *args, **kwargs)
            with torch.autocast("cpu", dtype=TORCH_DTYPE[dt]):
                yt = getattr(TF, name)(t, *args, **kwargs)
            ya = ya[0] if isinstance(ya, tuple) else ya
            yt = yt[0] if isinstance(yt, tuple) else yt
            assert ya.dtype.name == str(yt.dtype).split(".")[-1], (name, src, kwargs)
            np.testing.assert_array_equal(bits(ya), bits(yt))


# ------------------------------------------------------------------ errors
_X3 = (2, 3, 8)
ERRORS = [
    ("max_pool1d", _X3, (0,), {}),
    ("max_pool1d", _X3, (3, 0), {}),
    ("max_pool1d", _X3, (3, 1, 2), {}),
    ("max_pool1d", _X3, (3, 1, -1), {}),
    ("max_pool1d", _X3, (3, 1, 1, 0), {}),
    ("max_pool1d", _X3, (9,), {}),
    ("max_pool1d", _X3, ((2, 2),), {}),
    ("max_pool1d", (8,), (2,), {}),
    ("max_pool1d", (2, 3, 4, 8), (2,), {}),
    ("max_pool1d", (2, 0, 8), (2,), {}),
    ("max_pool1d", (2, 3, 0), (2,), {}),
    ("max_pool1d", _X3, (9,), {"return_indices": True}),
    ("max_pool1d", _X3, (3, 1, 2), {"return_indices": True}),
    ("max_pool1d", (2, 3, 4, 8), (2,), {"return_indices": True}),
    ("max_pool1d", _X3, ((2, 2),), {"return_indices": True}),
    ("avg_pool1d", _X3, (0,), {}),
    ("avg_pool1d", _X3, (3, 1, 2), {}),
    ("avg_pool1d", _X3, (9,), {}),
    ("avg_pool1d", _X3, ((2, 2),), {}),
    ("avg_pool1d", (8,), (2,), {}),
    ("avg_pool1d", (2, 3, 0), (2,), {}),
    ("adaptive_avg_pool1d", _X3, ((2, 2),), {}),
    ("adaptive_avg_pool1d", _X3, (-1,), {}),
    ("adaptive_avg_pool1d", (2, 3, 4, 8), (2,), {}),
    ("adaptive_avg_pool1d", (2, 3, 0), (2,), {}),
    ("adaptive_avg_pool1d", _X3, (None,), {}),
    ("adaptive_max_pool1d", _X3, ((2, 2),), {}),
    ("adaptive_max_pool1d", (8,), (2,), {}),
    ("adaptive_max_pool1d", (2, 3, 0), (2,), {}),
    ("adaptive_max_pool1d", _X3, (None,), {}),
    ("adaptive_max_pool2d", (2, 3, 6, 7), ((2, 2, 2),), {}),
    ("adaptive_max_pool2d", (2, 3, 6, 7), (-1,), {}),
    ("adaptive_max_pool2d", (2, 3, 4, 8, 2), (2,), {}),
    ("adaptive_max_pool2d", (8, 2), (2,), {}),
    ("adaptive_max_pool2d", (2, 3, 0, 3), (2,), {}),
    ("adaptive_max_pool2d", (2, 0, 5, 3), (2,), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), ((2, 2),), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (2, (1, 1)), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (2, 2, (1, 1)), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (2, 2, 0, (1, 1)), {}),
    ("max_pool3d", (3, 4, 4), (2,), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (2, 0), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (3, 1, 2), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (2, 1, -1), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (0,), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (2, 1, 0, 0), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), (5,), {}),
    ("max_pool3d", (2, 0, 4, 4, 4), (2,), {}),
    ("max_pool3d", (2, 3, 4, 4, 4), ((1, 3, 3), 1, (1, 1, 1)), {}),
    ("avg_pool3d", (2, 3, 4, 4, 4), ((2, 2),), {}),
    ("avg_pool3d", (3, 4, 4), (2,), {}),
    ("avg_pool3d", (2, 3, 4, 4, 4), (2,), {"divisor_override": 0}),
    ("avg_pool3d", (2, 3, 4, 4, 4), (5,), {}),
    ("avg_pool3d", (2, 3, 4, 4, 4), (5, 1, 2), {}),
    ("avg_pool3d", (2, 3, 4, 4, 4), (2, 0), {}),
    ("avg_pool3d", (2, 3, 0, 4, 4), (2,), {}),
    ("adaptive_avg_pool3d", (2, 3, 4, 4, 4), ((2, 2),), {}),
    ("adaptive_avg_pool3d", (2, 3, 4, 4, 4), (-1,), {}),
    ("adaptive_avg_pool3d", (3, 4, 4), (2,), {}),
    ("adaptive_avg_pool3d", (2, 3, 0, 4, 4), (2,), {}),
]


@pytest.mark.parametrize("call", ERRORS, ids=[f"{c[0]}-{i}" for i, c in enumerate(ERRORS)])
def test_bad_arguments_raise_as_torch_and_change_nothing(call):
    name, shape, args, kwargs = call
    x = _values(shape, 8)
    a, t = ampy.tensor(x), torch.from_numpy(x.copy())
    before = bits(a)
    with pytest.raises(Exception) as et:
        getattr(TF, name)(t, *args, **kwargs)
    with pytest.raises(Exception) as ea:
        getattr(AF, name)(a, *args, **kwargs)
    assert type(ea.value) is type(et.value), (ea.value, et.value)
    assert str(ea.value) == str(et.value)
    np.testing.assert_array_equal(bits(a), before)


@pytest.mark.parametrize("name,shape,args", [
    ("max_pool1d", (2, 3, 8), (2,)), ("avg_pool1d", (2, 3, 8), (2,)),
    ("adaptive_max_pool1d", (2, 3, 8), (2,)), ("adaptive_avg_pool1d", (2, 3, 8), (2,)),
    ("adaptive_max_pool2d", (2, 3, 4, 4), (2,)), ("max_pool3d", (2, 3, 4, 4, 4), (2,)),
    ("adaptive_avg_pool3d", (2, 3, 4, 4, 4), (2,))])
def test_integer_input_raises_not_implemented(name, shape, args):
    a = ampy.tensor(np.arange(int(np.prod(shape))).reshape(shape))
    before = bits(a)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        getattr(AF, name)(a, *args)
    np.testing.assert_array_equal(bits(a), before)


# ------------------------------------------------------------------ modules
MODULES = [
    ("MaxPool1d", (3,), {}, (2, 3, 11)),
    ("MaxPool1d", (3, 2, 1, 2, True, True), {}, (2, 3, 11)),
    ("AvgPool1d", (3,), {}, (2, 3, 11)),
    ("AvgPool1d", (3, 2, 1, True, False), {}, (3, 11)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 11)),
    ("AdaptiveMaxPool1d", (4, True), {}, (2, 3, 11)),
    ("AdaptiveMaxPool2d", ((3, None),), {}, (2, 3, 7, 5)),
    ("MaxPool3d", (2,), {}, (2, 3, 4, 6, 6)),
    ("MaxPool3d", ((2, 3, 2), 1, 1), {"return_indices": True}, (2, 3, 4, 6, 6)),
    ("AvgPool3d", (2,), {"divisor_override": 3}, (2, 3, 4, 6, 6)),
    ("AdaptiveAvgPool3d", ((2, None, 3),), {}, (2, 3, 4, 6, 6)),
]


@pytest.mark.parametrize("mod", MODULES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_modules_repr_and_outputs_are_torch(mod):
    cls, args, kwargs, shape = mod
    ma, mt = getattr(ampy.nn, cls)(*args, **kwargs), getattr(torch.nn, cls)(*args, **kwargs)
    assert repr(ma) == repr(mt)
    assert list(ma.state_dict()) == list(mt.state_dict()) == []
    x = _values(shape, 9)
    ya, yt = ma(ampy.tensor(x)), mt(torch.from_numpy(x))
    ya = ya if isinstance(ya, tuple) else (ya,)
    yt = yt if isinstance(yt, tuple) else (yt,)
    for p, q in zip(ya, yt):
        _same(p, q)


def _sgd(ma, mt, lr):
    """p -= lr * grad on both models (ampy.optim takes float32/half parameters only)."""
    with ampy.no_grad(), torch.no_grad():
        for pa, pt in zip(ma.parameters(), mt.parameters()):
            pa.sub_(pa.grad * lr)
            pt.sub_(pt.grad * lr)
            pa.grad, pt.grad = None, None


def test_text_cnn_trains_as_torch():
    """Conv1d + ReLU + MaxPool1d + AdaptiveMaxPool1d + Linear, three SGD steps in
    float64: the losses and parameters follow torch's to float64 rounding."""
    def build(nn):
        return nn.Sequential(nn.Conv1d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2),
                             nn.Conv1d(6, 5, 3), nn.ReLU(), nn.AdaptiveMaxPool1d(1),
                             nn.Flatten(), nn.Linear(5, 2))
    ma, mt = build(ampy.nn).double(), build(torch.nn).double()
    ma.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    rng = np.random.default_rng(10)
    for _ in range(3):
        x = rng.standard_normal((8, 4, 20))
        y = rng.integers(0, 2, 8)
        la = AF.cross_entropy(ma(ampy.tensor(x)), ampy.tensor(y))
        lt = TF.cross_entropy(mt(torch.from_numpy(x)), torch.from_numpy(y))
        la.backward(), lt.backward()
        _sgd(ma, mt, 0.1)
        assert abs(float(la) - float(lt)) < 1e-12
    for (k, pa), (_, pt) in zip(ma.state_dict().items(), mt.state_dict().items()):
        np.testing.assert_allclose(np.asarray(pa), pt.numpy(), rtol=1e-12, atol=1e-14,
                                   err_msg=k)


def test_unet3d_block_trains_as_torch():
    """Conv3d + BatchNorm3d + ReLU + MaxPool3d (the 3-d U-Net encoder step), two
    SGD steps in float64 against torch."""
    def build(nn):
        return nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(),
                             nn.MaxPool3d(2), nn.Conv3d(4, 3, 1), nn.AdaptiveAvgPool3d(1))
    ma, mt = build(ampy.nn).double(), build(torch.nn).double()
    ma.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    rng = np.random.default_rng(11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            x = rng.standard_normal((2, 2, 6, 6, 6))
            la, lt = ma(ampy.tensor(x)).square().sum(), mt(torch.from_numpy(x)).square().sum()
            la.backward(), lt.backward()
            _sgd(ma, mt, 0.05)
            assert abs(float(la) - float(lt)) <= 1e-10 * max(1.0, abs(float(lt)))
    for (k, pa), (_, pt) in zip(ma.state_dict().items(), mt.state_dict().items()):
        np.testing.assert_allclose(np.asarray(pa).astype(np.float64), pt.numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=k)


@pytest.mark.parametrize("name,shape,args", [
    ("max_pool1d", (1, 2, 12), (2,)), ("max_pool1d", (1, 2, 12), (3, 2, 1)),
    ("adaptive_max_pool1d", (1, 2, 12), (5,)), ("adaptive_max_pool2d", (1, 2, 4, 6), (3,)),
    ("max_pool3d", (1, 2, 2, 2, 6), (2,)), ("max_pool3d", (1, 2, 2, 4, 6), (2, 1, 1))])
def test_signed_zeros_infinities_and_nans_as_torch(cpu_path, name, shape, args):
    """-0.0 before 0.0 (the first wins), all -inf windows, +inf and NaN after it."""
    pattern = np.array([-0.0, 0.0, -np.inf, -np.inf, np.inf, np.nan, 0.0, -0.0, 1.0, np.nan,
                        -np.inf, 2.0], np.float32)
    x = np.resize(pattern, int(np.prod(shape))).reshape(shape)
    for kwargs in ({}, {"return_indices": True}):
        if name.startswith("adaptive") and not kwargs:
            continue
        ya = getattr(AF, name)(ampy.tensor(x), *args, **kwargs)
        yt = getattr(TF, name)(torch.from_numpy(x), *args, **kwargs)
        ya = ya if isinstance(ya, tuple) else (ya,)
        yt = yt if isinstance(yt, tuple) else (yt,)
        for p, q in zip(ya, yt):
            np.testing.assert_array_equal(bits(p), bits(q))
