"""In-place random fills (Tensor.uniform_/normal_/random_/bernoulli_/exponential_/
geometric_/log_normal_/cauchy_) and ampy.bernoulli/normal/poisson/randint_like:
statistics on 1e5 draws (means and variances within a few standard errors, a
Kolmogorov-Smirnov distance against the exact CDF in float64), bounds,
reproducibility under manual_seed / a Generator, in-place view semantics,
dtypes, autograd rules and bad arguments — the deterministic parts (dtypes,
shapes, errors, grads) side by side with torch. Values are never compared with
torch's RNG."""
import math

import numpy as np
import pytest
import torch

import ampy

N = 100_000
FLOATS = ["float32", "float64", "float16", "bfloat16"]
INTS = ["int64", "int32", "uint8"]


def _a(name):
    return getattr(ampy, name)


def _t(name):
    return getattr(torch, name)


def _np(x):
    return x.double().numpy().reshape(-1)


def _close_mean(v, mean, var, k=5.0):
    se = math.sqrt(var / v.size)
    assert abs(v.mean() - mean) < k * se + 1e-12, (v.mean(), mean, se)


def _close_var(v, var, fourth, k=5.0):
    """Sample variance vs var, with the standard error from the fourth central moment."""
    se = math.sqrt(max(fourth - var * var, 1e-300) / v.size)
    assert abs(v.var() - var) < k * se + 1e-12, (v.var(), var, se)


def _ks(v, cdf):
    x = np.sort(v)
    f = cdf(x)
    n = x.size
    d = max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))
    return d


_PHI = np.vectorize(lambda z: 0.5 * math.erfc(-z / math.sqrt(2.0)))


# ---- statistics ----------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOATS)
def test_uniform_stats_and_bounds(dt):
    ampy.manual_seed(1)
    x = ampy.empty(N, dtype=_a(dt))
    assert x.uniform_(-2.0, 3.0) is x
    v = _np(x)
    assert v.min() >= -2.0 and v.max() < 3.0
    _close_mean(v, 0.5, 25 / 12)
    _close_var(v, 25 / 12, 5 ** 4 / 80)
    if dt in ("float32", "float64"):
        assert _ks(v, lambda z: (z + 2) / 5) < 1.63 / math.sqrt(N) * 1.5


@pytest.mark.parametrize("dt", FLOATS)
def test_normal_stats_ks(dt):
    ampy.manual_seed(2)
    x = ampy.empty(N, dtype=_a(dt)).normal_(1.5, 2.0)
    v = _np(x)
    _close_mean(v, 1.5, 4.0)
    _close_var(v, 4.0, 3 * 16.0, k=6)
    if dt in ("float32", "float64"):  # (half rounding would show in the KS distance)
        assert _ks(v, lambda z: _PHI((z - 1.5) / 2.0)) < 1.63 / math.sqrt(N) * 1.5


def test_normal_ks_fails_for_wrong_parameters():
    ampy.manual_seed(3)
    v = _np(ampy.empty(N, dtype=ampy.float64).normal_(0.0, 1.0))
    assert _ks(v, lambda z: _PHI((z - 0.05) / 1.0)) > 1.63 / math.sqrt(N) * 1.5


@pytest.mark.parametrize("dt", FLOATS)
def test_exponential_geometric_lognormal_cauchy(dt):
    ampy.manual_seed(4)
    x = ampy.empty(N, dtype=_a(dt))
    v = _np(x.exponential_(2.0))
    assert v.min() >= 0
    _close_mean(v, 0.5, 0.25)
    _close_var(v, 0.25, 9 / 16, k=6)
    p = 0.3
    v = _np(x.geometric_(p))
    assert v.min() >= 1 and np.all(v == np.round(v))
    _close_mean(v, 1 / p, (1 - p) / p ** 2)
    assert abs(np.mean(v == 1) - p) < 5 * math.sqrt(p * (1 - p) / N)
    mu, s = 0.2, 0.5
    v = _np(x.log_normal_(mu, s))
    m = math.exp(mu + s * s / 2)
    var = (math.exp(s * s) - 1) * math.exp(2 * mu + s * s)
    _close_mean(v, m, var, k=6)
    lv = np.log(v)
    _close_mean(lv, mu, s * s, k=6)
    v = _np(x.cauchy_(1.0, 2.0))  # median and quartiles (no moments)
    q = np.quantile(v, [0.25, 0.5, 0.75])
    se = 3 * math.pi * 2.0 / math.sqrt(N)
    assert abs(q[1] - 1.0) < 5 * se and abs(q[0] + 1.0) < 5 * se and abs(q[2] - 3.0) < 5 * se


@pytest.mark.parametrize("dt", FLOATS + ["int64", "bool", "uint8"])
def test_bernoulli_float_p(dt):
    ampy.manual_seed(5)
    x = ampy.empty(N, dtype=_a(dt))
    v = _np(x.bernoulli_(0.3))
    assert set(np.unique(v)) <= {0.0, 1.0}
    _close_mean(v, 0.3, 0.21)
    assert _np(x.bernoulli_(0.0)).max() == 0 and _np(x.bernoulli_(1.0)).min() == 1


def test_bernoulli_tensor_p_and_functional():
    ampy.manual_seed(6)
    p = ampy.tensor([0.1, 0.5, 0.9], dtype=ampy.float64)
    x = ampy.empty(N // 3, 3).bernoulli_(p)
    v = x.double().numpy()
    for j, pj in enumerate([0.1, 0.5, 0.9]):
        assert abs(v[:, j].mean() - pj) < 5 * math.sqrt(pj * (1 - pj) / v.shape[0])
    probs = ampy.tensor([0.2, 0.7]).expand(N // 2, 2)
    o = ampy.bernoulli(probs)
    assert o.dtype is ampy.float32 and tuple(o.shape) == (N // 2, 2)
    m = o.double().numpy().mean(0)
    assert abs(m[0] - 0.2) < 0.01 and abs(m[1] - 0.7) < 0.01
    o = ampy.bernoulli(ampy.zeros(N, dtype=ampy.bfloat16), 0.25)
    assert o.dtype is ampy.bfloat16
    _close_mean(_np(o), 0.25, 0.1875)
    o = ampy.zeros(N).bernoulli(0.4)
    _close_mean(_np(o), 0.4, 0.24)
    o = ampy.full((N,), 0.6).bernoulli()
    _close_mean(_np(o), 0.6, 0.24)


@pytest.mark.parametrize("dt", FLOATS + INTS)
def test_random_bounds_and_uniformity(dt):
    ampy.manual_seed(7)
    x = ampy.empty(N, dtype=_a(dt))
    v = _np(x.random_(3, 10))
    assert v.min() == 3 and v.max() == 9 and np.all(v == np.round(v))
    counts = np.bincount(v.astype(int) - 3, minlength=7)
    e = N / 7
    assert ((counts - e) ** 2 / e).sum() < 30  # chi2, 6 dof
    v = _np(x.random_(5))
    assert v.min() == 0 and v.max() == 4


@pytest.mark.parametrize("dt", FLOATS + INTS + ["bool"])
def test_random_default_range_matches_torch_rule(dt):
    """random_() covers [0, 2**mantissa] for floats and [0, max] for integers;
    random_(from, None) from `from` to that top (torch's ranges)."""
    ampy.manual_seed(8)
    x = ampy.empty(N, dtype=_a(dt)).random_()
    v = x.double().numpy() if dt != "int64" else x.numpy().astype(np.float64)
    tt = _t(dt)
    top = (2 ** {"float32": 24, "float64": 53, "float16": 11, "bfloat16": 8}[dt]
           if tt.is_floating_point else 1 if dt == "bool" else torch.iinfo(tt).max)
    assert v.min() >= 0 and v.max() <= top
    assert v.max() > top * 0.99  # spans the range
    if dt not in ("uint8", "bool"):
        y = ampy.empty(N, dtype=_a(dt)).random_(-1, None)
        w = y.double().numpy()
        assert w.min() >= -1 and w.max() <= top
        if top <= 4096:  # small ranges: the lowest value shows up
            assert w.min() == -1


def test_random_int64_full_range():
    ampy.manual_seed(9)
    x = ampy.empty(20000, dtype=ampy.int64).random_(-2 ** 63, None)
    v = x.numpy()
    assert (v < -2 ** 62).any() and (v > 2 ** 62).any()


@pytest.mark.parametrize("lam", [0.5, 4.0, 30.0, 1000.0])
def test_poisson_stats(lam):
    ampy.manual_seed(10)
    r = ampy.full((N,), lam)
    v = _np(ampy.poisson(r))
    assert np.all(v == np.round(v)) and v.min() >= 0
    _close_mean(v, lam, lam)
    _close_var(v, lam, 3 * lam * lam + lam, k=6)
    if lam == 4.0:
        pmf0 = math.exp(-lam)
        assert abs(np.mean(v == 0) - pmf0) < 5 * math.sqrt(pmf0 * (1 - pmf0) / N)


def test_poisson_zero_rate_and_dtypes():
    for dt in FLOATS:
        o = ampy.poisson(ampy.zeros(5, dtype=_a(dt)))
        assert o.dtype is _a(dt) and o.double().numpy().max() == 0
        assert torch.poisson(torch.zeros(5, dtype=_t(dt))).dtype == _t(dt)


@pytest.mark.parametrize("form", ["tt", "tf", "ft", "ff"])
def test_normal_forms_stats(form):
    ampy.manual_seed(11)
    mean_t, std_t = ampy.full((N,), 2.0), ampy.full((N,), 3.0)
    args = {"tt": (mean_t, std_t), "tf": (mean_t, 3.0), "ft": (2.0, std_t),
            "ff": (2.0, 3.0, (N,))}[form]
    v = _np(ampy.normal(*args))
    _close_mean(v, 2.0, 9.0)
    _close_var(v, 9.0, 3 * 81.0, k=6)


def test_normal_per_element_parameters():
    ampy.manual_seed(12)
    mean = ampy.tensor([0.0, 10.0]).expand(N // 2, 2)
    std = ampy.tensor([1.0, 0.0])
    v = ampy.normal(mean, std).double().numpy()
    assert np.all(v[:, 1] == 10.0)
    _close_mean(v[:, 0], 0.0, 1.0)


def test_randint_like():
    ampy.manual_seed(13)
    x = ampy.zeros(N, dtype=ampy.float32)
    for args in [(5,), (2, 5)]:
        a = ampy.randint_like(x, *args)
        t = torch.randint_like(torch.zeros(N), *args)
        assert a.dtype is ampy.float32 and t.dtype == torch.float32
        v = _np(a)
        lo = 0 if len(args) == 1 else 2
        assert v.min() == lo and v.max() == args[-1] - 1
    a = ampy.randint_like(ampy.zeros(3, dtype=ampy.int32), 5, dtype=ampy.int64)
    assert a.dtype is ampy.int64 and tuple(a.shape) == (3,)
    assert ampy.randint_like(x, high=7).double().numpy().max() == 6
    with pytest.raises(RuntimeError, match="from"):
        ampy.randint_like(x, 5, 2)
    with pytest.raises(RuntimeError, match="from"):
        torch.randint_like(torch.zeros(3), 5, 2)


# ---- reproducibility -----------------------------------------------------------------
_FILLS = [("uniform_", (0.0, 2.0)), ("normal_", (0.0, 1.0)), ("random_", (0, 100)),
          ("bernoulli_", (0.5,)), ("exponential_", (1.0,)), ("geometric_", (0.4,)),
          ("log_normal_", (0.0, 1.0)), ("cauchy_", (0.0, 1.0))]


@pytest.mark.parametrize("name,args", _FILLS)
def test_reproducible(name, args):
    ampy.manual_seed(123)
    a = getattr(ampy.empty(1000), name)(*args).numpy().copy()
    b = getattr(ampy.empty(1000), name)(*args).numpy().copy()
    ampy.manual_seed(123)
    c = getattr(ampy.empty(1000), name)(*args).numpy().copy()
    assert np.array_equal(a, c, equal_nan=True) and not np.array_equal(a, b)
    g = ampy.Generator().manual_seed(7)
    d = getattr(ampy.empty(1000), name)(*args, generator=g).numpy().copy()
    g.manual_seed(7)
    e = getattr(ampy.empty(1000), name)(*args, generator=g).numpy().copy()
    assert np.array_equal(d, e, equal_nan=True)
    ampy.manual_seed(123)  # the generator= fill did not touch the default generator
    getattr(ampy.empty(1000), name)(*args, generator=ampy.Generator())
    f = getattr(ampy.empty(1000), name)(*args).numpy().copy()
    assert np.array_equal(a, f, equal_nan=True)


def test_functions_reproducible():
    for fn in (lambda g: ampy.bernoulli(ampy.full((500,), 0.5), generator=g),
               lambda g: ampy.normal(ampy.zeros(500), 1.0, generator=g),
               lambda g: ampy.normal(0.0, 1.0, (500,), generator=g),
               lambda g: ampy.poisson(ampy.full((500,), 20.0), generator=g),
               lambda g: ampy.randint_like(ampy.zeros(500), 100, generator=g)):
        g = ampy.Generator().manual_seed(3)
        a = fn(g).numpy().copy()
        g.manual_seed(3)
        assert np.array_equal(a, fn(g).numpy())
        assert not np.array_equal(a, fn(g).numpy())


def test_state_roundtrip():
    ampy.manual_seed(5)
    s = ampy.get_rng_state()
    a = ampy.empty(100).exponential_().numpy().copy()
    ampy.set_rng_state(s)
    assert np.array_equal(a, ampy.empty(100).exponential_().numpy())


# ---- in place, views, dtypes --------------------------------------------------------
@pytest.mark.parametrize("name,args", _FILLS)
@pytest.mark.parametrize("dt", FLOATS)
def test_view_changes_only_its_elements(name, args, dt):
    w = ampy.full((6, 8), -7.0, dtype=_a(dt))
    v = w[:, ::2]
    r = getattr(v, name)(*args)
    assert r is v
    full = w.double().numpy()
    assert np.all(full[:, 1::2] == -7.0)
    assert not np.all(full[:, ::2] == -7.0)
    assert w.dtype is _a(dt)
    t = w.t()  # a transposed (non-contiguous) tensor as a whole
    assert getattr(t, name)(*args) is t and tuple(t.shape) == (8, 6)


def test_integer_random_view():
    w = ampy.zeros(4, 6, dtype=ampy.int64)
    w[1:3, 1::2].random_(5, 9)
    v = w.numpy()
    assert np.all(v[[0, 3]] == 0) and np.all(v[:, ::2] == 0)
    assert v[1:3, 1::2].min() >= 5 and v[1:3, 1::2].max() <= 8


def test_empty_tensor_is_noop():
    for name, args in _FILLS:
        x = ampy.empty(0, 3)
        assert getattr(x, name)(*args) is x
        getattr(torch.empty(0, 3), name)(*args)


def test_version_bumped():
    x = ampy.zeros(4)
    v = x._version
    x.normal_()
    assert x._version > v


# ---- autograd ----------------------------------------------------------------------
@pytest.mark.parametrize("name,args", _FILLS)
def test_leaf_requiring_grad_raises_like_torch(name, args):
    a = ampy.zeros(5, requires_grad=True)
    t = torch.zeros(5, requires_grad=True)
    ampy.manual_seed(0)
    st = ampy.get_rng_state().numpy().copy()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        getattr(a, name)(*args)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        getattr(t, name)(*args)
    assert np.all(a.detach().numpy() == 0)
    assert np.array_equal(ampy.get_rng_state().numpy(), st)  # nothing drawn
    with pytest.raises(RuntimeError):
        getattr(a[:2], name)(*args)
    with ampy.no_grad():
        assert getattr(a, name)(*args) is a
    with torch.no_grad():
        getattr(t, name)(*args)
    assert a.requires_grad and a.grad_fn is None


def test_non_leaf_fill_gives_zero_grad_like_torch():
    a = ampy.ones(4, requires_grad=True)
    t = torch.ones(4, requires_grad=True)
    b, u = a * 3, t * 3
    b.uniform_()
    u.uniform_()
    assert b.grad_fn is not None and u.grad_fn is not None
    (b * 2).sum().backward()
    (u * 2).sum().backward()
    assert np.array_equal(a.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("fn", ["normal_tt", "normal_tf", "normal_ft", "bernoulli", "poisson"])
def test_sampling_functions_zero_grad_like_torch(fn):
    def run(lib, make):
        m = make(lib) if fn != "normal_ft" else None
        s = lib.ones(3, requires_grad=True) if fn == "normal_tt" or fn == "normal_ft" else None
        out = {"normal_tt": lambda: lib.normal(m, s), "normal_tf": lambda: lib.normal(m, 2.0),
               "normal_ft": lambda: lib.normal(0.0, s), "bernoulli": lambda: lib.bernoulli(m),
               "poisson": lambda: lib.poisson(m)}[fn]()
        assert out.requires_grad
        out.sum().backward()
        return [x.grad.numpy() for x in (m, s) if x is not None and x.requires_grad]

    def make(lib):
        return lib.full((3,), 0.5, requires_grad=True)
    ga, gt = run(ampy, make), run(torch, make)
    assert len(ga) == len(gt) and all(np.array_equal(x, y) for x, y in zip(ga, gt))


# ---- dtypes and shapes of the functions (against torch) -----------------------------
@pytest.mark.parametrize("md,sd", [("float64", "float32"), ("float32", "float64"),
                                   ("bfloat16", "float16"), ("float16", None),
                                   (None, "bfloat16")])
def test_normal_result_dtype_like_torch(md, sd):
    def run(lib):
        m = lib.zeros(3, dtype=getattr(lib, md)) if md else 0.0
        s = lib.ones(3, dtype=getattr(lib, sd)) if sd else 1.0
        return lib.normal(m, s)
    assert run(ampy).dtype.name == str(run(torch).dtype).split(".")[1]


def test_normal_broadcast_and_sizes_like_torch():
    a = ampy.normal(ampy.zeros(2, 1), ampy.ones(3))
    t = torch.normal(torch.zeros(2, 1), torch.ones(3))
    assert tuple(a.shape) == tuple(t.shape)
    a = ampy.normal(0.0, 1.0, (2, 3), dtype=ampy.float64)
    t = torch.normal(0.0, 1.0, (2, 3), dtype=torch.float64)
    assert tuple(a.shape) == tuple(t.shape) and a.dtype is ampy.float64
    assert ampy.normal(0.0, 1.0, size=(4,)).dtype is ampy.float32
    assert ampy.normal(0.0, 1.0, (3,), requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="size of tensor a"):
        ampy.normal(ampy.zeros(3), ampy.ones(4))
    with pytest.raises(RuntimeError, match="size of tensor a"):
        torch.normal(torch.zeros(3), torch.ones(4))


@pytest.mark.parametrize("dt", FLOATS)
def test_bernoulli_poisson_dtype_like_torch(dt):
    a = ampy.bernoulli(ampy.full((3,), 0.5, dtype=_a(dt)))
    t = torch.bernoulli(torch.full((3,), 0.5, dtype=_t(dt)))
    assert a.dtype.name == dt and t.dtype == _t(dt)
    a = ampy.full((3,), 0.5, dtype=_a(dt)).bernoulli_(ampy.full((3,), 0.5, dtype=ampy.float64))
    assert a.dtype.name == dt


# ---- bad arguments (message and type as torch; inputs unchanged) --------------------
_BAD = [
    ("normal_", (0.0, -1.0), "std"),
    ("normal_", (0.0, float("nan")), "std"),
    ("uniform_", (1.0, 0.0), "from"),
    ("uniform_", (0.0, 6e38), "to"),
    ("uniform_", (-3e38, 3e38), "to-from"),
    ("bernoulli_", (1.5,), "p"),
    ("bernoulli_", (-0.1,), "p"),
    ("bernoulli_", (float("nan"),), "p"),
    ("exponential_", (0.0,), "lambda"),
    ("exponential_", (-1.0,), "lambda"),
    ("geometric_", (0.0,), "p"),
    ("geometric_", (1.0,), "p"),
    ("geometric_", (1.5,), "p"),
    ("log_normal_", (0.0, 0.0), "std"),
    ("log_normal_", (0.0, -1.0), "std"),
    ("cauchy_", (0.0, 0.0), "sigma"),
    ("cauchy_", (0.0, -1.0), "sigma"),
    ("random_", (3, 3), "from"),
    ("random_", (0,), "from"),
    ("random_", (-5,), "from"),
]


@pytest.mark.parametrize("name,args,word", _BAD)
def test_bad_args_like_torch(name, args, word):
    a, t = ampy.full((5,), 0.25), torch.full((5,), 0.25)
    with pytest.raises(RuntimeError, match=word) as ea:
        getattr(a, name)(*args)
    with pytest.raises(RuntimeError, match=word) as et:
        getattr(t, name)(*args)
    assert str(ea.value) == str(et.value)
    assert np.all(a.numpy() == 0.25)


@pytest.mark.parametrize("dt,args,word", [("uint8", (-3, None), "from"), ("uint8", (300,), "to"),
                                          ("int32", (5, 2 ** 33), "to"),
                                          ("float16", (0, 100000), "to"),
                                          ("float16", (70000, None), "from"),
                                          ("bool", (0, 3), "to")])
def test_random_dtype_range_errors_like_torch(dt, args, word):
    a, t = ampy.zeros(5, dtype=_a(dt)), torch.zeros(5, dtype=_t(dt))
    with pytest.raises(RuntimeError, match=word) as ea:
        a.random_(*args)
    with pytest.raises(RuntimeError, match=word) as et:
        t.random_(*args)
    assert str(ea.value) == str(et.value)
    assert np.all(a.numpy() == 0)


@pytest.mark.parametrize("name,args", [("normal_", ()), ("uniform_", ()), ("log_normal_", ()),
                                       ("exponential_", ()), ("cauchy_", ())])
@pytest.mark.parametrize("dt", ["int64", "int32"])
def test_continuous_on_integers_raises_like_torch(name, args, dt):
    a, t = ampy.zeros(3, dtype=_a(dt)), torch.zeros(3, dtype=_t(dt))
    with pytest.raises(RuntimeError) as et:
        getattr(t, name)(*args)
    with pytest.raises(type(et.value)) as ea:
        getattr(a, name)(*args)
    assert str(ea.value) == str(et.value)


def test_geometric_and_bernoulli_dtype_errors_like_torch():
    for lib in (ampy, torch):
        with pytest.raises(NotImplementedError, match="Bool"):
            lib.zeros(3, dtype=lib.bool).geometric_(0.5)
        with pytest.raises(NotImplementedError, match="Long"):
            lib.zeros(3).bernoulli_(lib.ones(3, dtype=lib.int64))
        with pytest.raises(NotImplementedError, match="Long"):
            lib.bernoulli(lib.ones(3, dtype=lib.int64))
        with pytest.raises(NotImplementedError, match="Long"):
            lib.poisson(lib.ones(3, dtype=lib.int64))
        with pytest.raises(RuntimeError, match="p_in"):
            lib.zeros(3).bernoulli_(lib.full((3,), 1.5))
        with pytest.raises(RuntimeError, match="p_in"):
            lib.bernoulli(lib.full((3,), 1.5))
        with pytest.raises(RuntimeError, match="expanded size"):
            lib.zeros(3).bernoulli_(lib.full((2,), 0.5))
        with pytest.raises(RuntimeError, match="Poisson rate"):
            lib.poisson(lib.tensor([1.0, -1.0]))
        with pytest.raises(RuntimeError, match="std"):
            lib.normal(lib.zeros(3), -1.0)
        with pytest.raises(RuntimeError, match="std"):
            lib.normal(lib.zeros(3), -lib.ones(3))
        with pytest.raises(RuntimeError, match="std"):
            lib.normal(0.0, -1.0, (2,))
        with pytest.raises(NotImplementedError, match="Long"):
            lib.normal(lib.zeros(3, dtype=lib.int64), 1.0)
        with pytest.raises(TypeError):
            lib.zeros(3).random_(1.5)


def test_keyword_forms_like_torch():
    for lib in (ampy, torch):
        x = lib.zeros(1000)
        assert x.uniform_(**{"from": 2, "to": 3}).min() >= 2
        assert x.random_(**{"from": 4, "to": 6}).min() >= 4
        assert x.random_(to=3).max() <= 2
        assert x.exponential_(lambd=2).min() >= 0
        assert x.geometric_(p=0.3).min() >= 1
        x.normal_(mean=1, std=2)
        x.log_normal_(mean=0, std=1)
        x.cauchy_(median=1, sigma=2)
        x.bernoulli_(p=0.2)
