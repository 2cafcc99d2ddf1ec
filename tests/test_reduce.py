"""Reductions, softmax, scans, cat and stack vs NumPy float64 (rounded once to
the result dtype) and torch (indices, NaN rules, dtype promotion)."""
import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import ampy
from _helpers import (EPS, FLOAT_DTYPES, NP_DTYPE as NP, SHORT, assert_close_ulps,
                      assert_same_bits, requires_cuda, sample)

FLOATS = ["float32", "float16", "bfloat16", "float64"]


def close_to_ref(got, ref64, dtype, ulps=1.0, scale=None):
    """got (Tensor) within `ulps` units of its dtype of the float64 reference,
    relative to |ref| (or to `scale` when cancellation makes |ref| small)."""
    g = got.numpy().astype(np.float64)
    r = np.asarray(ref64, dtype=np.float64)
    s = np.abs(r) if scale is None else np.maximum(np.abs(r), scale)
    tol = ulps * EPS[dtype] * s + (1e-300 if dtype == "float64" else 0)
    both_nan = np.isnan(g) & np.isnan(r)
    ok = both_nan | (g == r) | (np.abs(g - r) <= tol)
    assert ok.all(), (g[~ok][:5], r[~ok][:5])


def _dims(ndim, data):
    if ndim == 0:
        return data.draw(st.sampled_from([None, 0, -1, ()]))
    return data.draw(st.one_of(
        st.none(), st.integers(-ndim, ndim - 1),
        st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)))


def _np_axis(dim):
    return None if dim is None or dim == () else dim


@given(data=st.data())
def test_reductions_vs_float64(data, cpu_path):
    dtype = data.draw(st.sampled_from(FLOATS))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=6))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.uniform(-3, 3, shape).astype(NP[dtype])
    t = ampy.tensor(x)
    if len(shape) >= 2 and data.draw(st.booleans()):  # same values, transposed storage
        t = ampy.tensor(np.ascontiguousarray(x.swapaxes(0, 1))).transpose(0, 1)
    dim = _dims(len(shape), data)
    keep = data.draw(st.booleans())
    x64 = x.astype(np.float64)
    ax = _np_axis(dim) if shape else None
    n = x64.size if ax is None else int(np.prod([shape[d] for d in np.atleast_1d(ax)]))
    absum = np.sum(np.abs(x64), axis=ax, keepdims=keep)
    cases = {
        "sum": (ampy.sum(t, dim, keep), np.sum(x64, axis=ax, keepdims=keep), absum),
        "mean": (ampy.mean(t, dim, keep), np.mean(x64, axis=ax, keepdims=keep), absum / n),
        "amax": (ampy.amax(t, () if dim is None else dim, keep),
                 np.max(x64, axis=ax, keepdims=keep), None),
        "amin": (ampy.amin(t, () if dim is None else dim, keep),
                 np.min(x64, axis=ax, keepdims=keep), None),
        "norm": (ampy.norm(t, dim=dim, keepdim=keep),
                 np.sqrt(np.sum(x64 * x64, axis=ax, keepdims=keep)), None),
        "logsumexp": (ampy.logsumexp(t, () if dim is None else dim, keep),
                      np.log(np.sum(np.exp(x64), axis=ax, keepdims=keep)), 1.0),  # log(~1)
    }
    if n > 1:
        cases["var"] = (ampy.var(t, dim, keepdim=keep), np.var(x64, axis=ax, ddof=1,
                                                               keepdims=keep), None)
        cases["std"] = (ampy.std(t, dim, keepdim=keep, correction=0),
                        np.std(x64, axis=ax, keepdims=keep), None)
    for name, (got, ref, scale) in cases.items():
        assert got.dtype.name == dtype, name
        assert tuple(got.shape) == np.shape(ref), (name, got.shape, np.shape(ref))
        close_to_ref(got, ref, dtype, 1.0 if dtype != "float64" else 64.0, scale)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_integer_reductions_exact(dtype, cpu_path):
    rng = np.random.default_rng(1)
    x = (rng.integers(0, 2, (5, 7)) if dtype == "bool" else
         rng.integers(0, 100, (5, 7))).astype(NP[dtype])
    t = ampy.tensor(x)
    assert ampy.sum(t).dtype is ampy.int64 and ampy.sum(t).item() == int(x.astype(np.int64).sum())
    assert np.array_equal(ampy.sum(t, 1).numpy(), x.astype(np.int64).sum(1))
    assert np.array_equal(ampy.prod(t, 0).numpy(), x.astype(np.int64).prod(0))
    assert ampy.amax(t).dtype.name == dtype and ampy.amax(t).item() == x.max()
    assert np.array_equal(ampy.argmin(t, 1).numpy(), x.argmin(1))
    with pytest.raises(TypeError, match="floating point"):
        ampy.mean(t)
    assert ampy.mean(t, dtype=ampy.float64).item() == pytest.approx(x.astype(np.float64).mean())


def test_max_min_dim_indices_nan_and_ties_match_torch(cpu_path):
    nan = float("nan")
    x = np.array([[1.0, 3.0, 3.0, 0.0], [nan, 2.0, nan, 5.0], [-1.0, -1.0, -2.0, -2.0]],
                 dtype=np.float32)
    t, tt = ampy.tensor(x), torch.tensor(x)
    for fn in ("max", "min"):
        g, w = getattr(ampy, fn)(t, 1), getattr(torch, fn)(tt, 1)
        assert np.array_equal(g.values.numpy(), w.values.numpy(), equal_nan=True)
        assert np.array_equal(g.indices.numpy(), w.indices.numpy())
        v, i = getattr(t, fn)(dim=0, keepdim=True)
        wv, wi = getattr(tt, fn)(dim=0, keepdim=True)
        assert np.array_equal(v.numpy(), wv.numpy(), equal_nan=True)
        assert np.array_equal(i.numpy(), wi.numpy())
    for fn in ("argmax", "argmin"):
        assert np.array_equal(getattr(ampy, fn)(t, 1).numpy(), getattr(torch, fn)(tt, 1).numpy())
        assert getattr(ampy, fn)(t).item() == getattr(torch, fn)(tt).item()
    assert np.isnan(ampy.amax(t).item()) and np.isnan(t.max().item())
    assert np.isnan(ampy.sum(t).item())
    assert ampy.max(t, ampy.zeros(4)).shape == (3, 4)  # max(input, other) is maximum


def test_softmax_log_softmax_vs_float64_and_stable(cpu_path):
    rng = np.random.default_rng(2)
    for dtype in FLOATS:
        x = rng.normal(0, 3, (6, 33)).astype(NP[dtype])
        x64 = x.astype(np.float64)
        for dim in (0, 1, -1):
            e = np.exp(x64 - x64.max(axis=dim, keepdims=True))
            sm = e / e.sum(axis=dim, keepdims=True)
            lsm = np.log(sm)
            t = ampy.tensor(x).t().contiguous().t()  # non-contiguous strides
            # float32 math: exp(x - max) carries the rounding of x - max (~|x - max| ulps)
            ulps = {"float64": 64.0, "float32": 8.0}.get(dtype, 1.0)
            close_to_ref(ampy.softmax(t, dim), sm, dtype, ulps, 0.05)
            close_to_ref(ampy.log_softmax(t, dim), lsm, dtype, ulps, np.abs(lsm).max())
    big = ampy.tensor([[1000.0, 1001.0, -1000.0], [-5e4, -5e4, -5e4]])
    s = ampy.softmax(big, 1).numpy()
    assert np.isfinite(s).all() and np.allclose(s.sum(1), 1.0)
    ls = ampy.log_softmax(big, 1).numpy()
    assert np.allclose(ls[0], [-1.3132617, -0.3132617, -2001.3132617])
    h = ampy.softmax(ampy.tensor([[1.0, 2.0]]).half(), 1, dtype=ampy.float32)
    assert h.dtype is ampy.float32
    assert ampy.softmax(ampy.tensor([[1.0, 2.0]]).half(), -1).dtype is ampy.float16


def test_logsumexp_infinities_match_torch(cpu_path):
    inf = float("inf")
    x = np.array([[-inf, -inf], [inf, 1.0], [1e4, 1e4]], dtype=np.float32)
    g = ampy.logsumexp(ampy.tensor(x), 1).numpy()
    w = torch.logsumexp(torch.tensor(x), 1).numpy()
    assert np.array_equal(g, w)


def test_var_std_corrections(cpu_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 9))
    t = ampy.tensor(x)
    assert np.allclose(ampy.var(t, 1).numpy(), x.var(1, ddof=1))
    assert np.allclose(ampy.var(t, 1, unbiased=False).numpy(), x.var(1))
    assert np.allclose(ampy.std(t, (0, 1), correction=2).numpy(), np.sqrt(x.var(ddof=2) *
                                                                         1.0))
    assert np.allclose(ampy.var(t, False).numpy(), x.var())
    v, m = ampy.var_mean(t, 0)
    assert np.allclose(v.numpy(), x.var(0, ddof=1)) and np.allclose(m.numpy(), x.mean(0))
    assert np.isnan(ampy.var(ampy.tensor([1.0])).item())  # N - 1 == 0: 0/0, as torch


def test_norm_kinds(cpu_path):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 5)).astype(np.float32)
    t, tt = ampy.tensor(x), torch.tensor(x)
    for p in ("fro", 1, 2, 3, float("inf"), -float("inf"), 0):
        assert np.allclose(ampy.norm(t, p).numpy(), torch.norm(tt, p).numpy(), rtol=1e-5), p
    assert np.allclose(t.norm(dim=1).numpy(), torch.norm(tt, dim=1).numpy(), rtol=1e-6)


def test_all_any_cumsum_cumprod(cpu_path):
    x = np.array([[1, 0, 2], [3, 4, 5]])
    t = ampy.tensor(x)
    assert ampy.all(t, 1).tolist() == [False, True] and ampy.any(t).item() is True
    assert ampy.all(ampy.zeros(0)).item() is True and ampy.any(ampy.zeros(0)).item() is False
    assert np.array_equal(ampy.cumsum(t, 1).numpy(), np.cumsum(x, 1))
    assert ampy.cumsum(t, 0).dtype is ampy.int64
    assert np.array_equal(ampy.cumprod(t, 1).numpy(), np.cumprod(x, 1))
    f = np.random.default_rng(5).normal(size=(4, 50)).astype(np.float32)
    close_to_ref(ampy.cumsum(ampy.tensor(f).half(), 1),
                 np.cumsum(f.astype(np.float16).astype(np.float64), 1), "float16", 1.0,
                 np.cumsum(np.abs(f), 1))
    assert ampy.cumsum(ampy.tensor([1, 2]), 0, dtype=ampy.float32).dtype is ampy.float32


def test_empty_reductions():
    e = ampy.zeros(0, 3)
    assert ampy.sum(e).item() == 0.0 and np.isnan(ampy.mean(e).item())
    assert ampy.prod(e).item() == 1.0
    assert ampy.sum(e, 0).tolist() == [0.0, 0.0, 0.0]
    assert tuple(ampy.sum(e, 1).shape) == (0,)
    assert ampy.logsumexp(e, 0).tolist() == [-float("inf")] * 3
    with pytest.raises(IndexError):
        ampy.amax(e, 0)
    with pytest.raises(IndexError):
        ampy.argmax(e)
    s = ampy.tensor(5.0)
    assert ampy.sum(s, 0).item() == 5.0 and ampy.max(s, 0).indices.item() == 0


def test_large_reductions_threaded(cpu_path):
    n = 1 << 19 if SHORT else 1 << 22
    rng = np.random.default_rng(6)
    x = rng.normal(size=n).astype(np.float32)
    x[n // 3] = 50.0
    ampy.set_num_threads(2)
    t = ampy.tensor(x)
    x64 = x.astype(np.float64)
    close_to_ref(ampy.sum(t), x64.sum(), "float32", 1.0, np.abs(x64).sum())
    assert ampy.argmax(t).item() == n // 3
    close_to_ref(ampy.var(t), x64.var(ddof=1), "float32", 1.0)
    close_to_ref(ampy.norm(t), np.sqrt((x64 ** 2).sum()), "float32", 1.0)
    m = x.reshape(512, -1)
    close_to_ref(ampy.sum(ampy.tensor(m), 0), m.astype(np.float64).sum(0), "float32", 1.0,
                 np.abs(m).sum(0))
    close_to_ref(ampy.mean(ampy.tensor(m).half(), 1), m.astype(np.float16).astype(
        np.float64).mean(1), "float16", 1.0, np.abs(m).mean(1))


# ---- cat / stack -----------------------------------------------------------------------
@given(data=st.data())
def test_cat_stack_vs_numpy(data):
    nd = data.draw(st.integers(1, 3))
    base = data.draw(hnp.array_shapes(min_dims=nd, max_dims=nd, min_side=0, max_side=4))
    dim = data.draw(st.integers(-nd, nd - 1))
    k = data.draw(st.integers(1, 4))
    dts = [data.draw(st.sampled_from(["float32", "float16", "int64", "bool", "bfloat16"]))
           for _ in range(k)]
    rng = np.random.default_rng(0)
    arrs = []
    for i in range(k):
        s = list(base)
        s[dim] = data.draw(st.integers(0, 3))
        arrs.append((rng.uniform(0, 5, s) > 2.5 if dts[i] == "bool" else
                     rng.integers(0, 9, s)).astype(NP[dts[i]]))
    got = ampy.cat([ampy.tensor(a) for a in arrs], dim)
    want = torch.cat([torch.tensor(a.astype(np.float64)).to(getattr(torch, d))
                      for a, d in zip(arrs, dts)], dim)
    assert got.dtype.name == str(want.dtype).split(".")[1]
    assert np.array_equal(got.float().numpy(), want.float().numpy())
    same = [ampy.tensor(arrs[0]) for _ in range(k)]
    sdim = data.draw(st.integers(-nd - 1, nd))
    assert np.array_equal(ampy.stack(same, sdim).float().numpy(),
                          np.stack([arrs[0].astype(np.float32)] * k, sdim))


# ---- errors -------------------------------------------------------------------------------
ERRORS = [
    (lambda: ampy.sum(ampy.zeros(2, 3), 2), IndexError, r"range of \[-2, 1\], but got 2"),
    (lambda: ampy.sum(ampy.zeros(2, 3), (0, -2)), RuntimeError, "appears multiple times"),
    (lambda: ampy.sum(ampy.zeros(2), "a"), TypeError, "dim"),
    (lambda: ampy.mean(ampy.tensor([1, 2])), TypeError, "floating point"),
    (lambda: ampy.softmax(ampy.zeros(2, 2), 2), IndexError, "out of range"),
    (lambda: ampy.softmax(ampy.tensor([1, 2]), 0), TypeError, "floating point"),
    (lambda: ampy.softmax(ampy.zeros(2), None), TypeError, "dim"),
    (lambda: ampy.amax(ampy.zeros(0, 2), 0), IndexError, "non-empty"),
    (lambda: ampy.cat([]), RuntimeError, "non-empty"),
    (lambda: ampy.cat([ampy.zeros(2, 3), ampy.zeros(2, 4)], 0), RuntimeError,
     "Sizes of tensors must match except in dimension 0"),
    (lambda: ampy.cat([ampy.zeros(2), ampy.zeros(2, 2)]), RuntimeError, "same number"),
    (lambda: ampy.cat([ampy.tensor(1.0)]), RuntimeError, "zero-dimensional"),
    (lambda: ampy.cat(ampy.zeros(2)), TypeError, "tuple or list"),
    (lambda: ampy.stack([ampy.zeros(2), ampy.zeros(3)]), RuntimeError, "equal size"),
    (lambda: ampy.cumsum(ampy.zeros(2), 1), IndexError, "out of range"),
    (lambda: ampy.max(ampy.zeros(2), 1.5), TypeError, "dim"),
    (lambda: ampy.var(ampy.zeros(3), unbiased=True, correction=1), TypeError, "either"),
    (lambda: ampy.norm(ampy.zeros(3), "nuc"), ValueError, "norm type"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_bad_inputs(k):
    fn, exc, msg = ERRORS[k]
    with pytest.raises(exc, match=msg):
        fn()


# ================================================================ CUDA
# Reductions, softmax, scans, cat and stack (cuda/reduce.cu) on a GPU against the CPU;
# skipped without a GPU.

@requires_cuda
def test_cuda_cat_stack_on_device():
    a, b = sample((3, 5), ampy.float32, 20), sample((2, 5), ampy.float16, 21)
    g = ampy.cat([a.cuda(), b.cuda()], 0)
    assert g.is_cuda
    assert_same_bits(g, ampy.cat([a, b], 0))
    assert_same_bits(ampy.stack([a.cuda(), a.cuda()], 1), ampy.stack([a, a], 1))


@requires_cuda
@pytest.mark.parametrize("dt", list(FLOAT_DTYPES) + [ampy.int64, ampy.bool])
@pytest.mark.parametrize("dims,keep", [(None, False), (0, False), (1, True), ((0, 2), False),
                                       (-1, False)])
def test_cuda_reductions_vs_cpu(dt, dims, keep):
    x = sample((6, 7, 129), dt, 5, specials=False)
    g = x.cuda()
    ops = ["sum", "prod", "amax", "amin", "all", "any"]
    if dt.is_floating_point:
        ops += ["mean", "var", "std", "norm", "logsumexp"]
    for name in ops:
        kw = {}
        if name in ("amax", "amin"):
            kw = dict(dim=() if dims is None else dims, keepdim=keep)
        elif name == "logsumexp":
            kw = dict(dim=(0, 1, 2) if dims is None else dims, keepdim=keep)
        elif name == "norm":
            kw = dict(dim=dims, keepdim=keep)
        elif name in ("all", "any") and isinstance(dims, tuple):
            kw = dict(dim=dims[0], keepdim=keep)
        elif dims is not None:
            kw = dict(dim=dims, keepdim=keep)
        c = getattr(ampy, name)(x, **kw)
        r = getattr(ampy, name)(g, **kw)
        assert r.is_cuda and r.dtype is c.dtype and tuple(r.shape) == tuple(c.shape), name
        if name in ("amax", "amin", "all", "any") or not dt.is_floating_point:
            assert_same_bits(r, c)
        else:  # double accumulation in another order: at most 1 ulp of the result
            assert_close_ulps(r, c, c.dtype, ulps=2)


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.int64])
def test_cuda_split_reductions_vs_cpu(dt):
    """Few outputs over many elements (several blocks per output) and column
    sums (a thread per output and chunk): both paths of cuda/reduce.cu."""
    x = sample((1 << 20,), dt, 18, specials=False)
    g = x.cuda()
    for name in ("sum", "amax", "amin", "argmax", "argmin", "any", "all") + (
            ("mean", "norm") if dt.is_floating_point else ()):
        c, r = getattr(ampy, name)(x), getattr(ampy, name)(g)
        if name in ("sum", "mean", "norm") and dt.is_floating_point:
            assert_close_ulps(r, c, c.dtype, ulps=2)
        else:
            assert_same_bits(r, c)
    m = x.reshape(4096, 256)
    for dim in (0, 1):
        assert_close_ulps(ampy.sum(m.cuda(), dim), ampy.sum(m, dim), dt, ulps=2) if dt.is_floating_point \
            else assert_same_bits(ampy.sum(m.cuda(), dim), ampy.sum(m, dim))
        cv, ci = ampy.max(m, dim)
        gv, gi = ampy.max(m.cuda(), dim)
        assert_same_bits(gv, cv)
        assert gi.cpu().tolist() == ci.tolist()


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_cuda_max_min_argmax_with_nan_and_ties(dt):
    a = np.array([[1.0, 3.0, 3.0, -2.0], [np.nan, 5.0, np.nan, 1.0], [2.0, 2.0, 2.0, 2.0]])
    x = ampy.from_numpy(a).to(dt)
    g = x.cuda()
    for d in (0, 1):
        cv, ci = ampy.max(x, d)
        gv, gi = ampy.max(g, d)
        assert_same_bits(gv, cv)
        assert gi.cpu().tolist() == ci.tolist()
        assert ampy.argmax(g, d).cpu().tolist() == ampy.argmax(x, d).tolist()
        assert ampy.argmin(g, d).cpu().tolist() == ampy.argmin(x, d).tolist()
    with pytest.raises(IndexError):
        ampy.amax(ampy.empty(0, 3).cuda())


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_cuda_softmax_vs_cpu(dt, dim, log):
    x = sample((9, 17, 300), dt, 6, specials=False)
    f = ampy.log_softmax if log else ampy.softmax
    c, g = f(x, dim), f(x.cuda(), dim)
    assert_close_ulps(g, c, dt, ulps=8)
    xt = x.transpose(0, 2)  # strided lines
    assert_close_ulps(f(xt.cuda(), 1), f(xt, 1), dt, ulps=8)


@requires_cuda
@pytest.mark.parametrize("dt", list(FLOAT_DTYPES) + [ampy.int64, ampy.bool])
def test_cuda_cumsum_cumprod_bitwise(dt):
    """One thread per line, in order, double (int64) accumulation: the CPU's bits."""
    x = sample((5, 300, 3), dt, 19, specials=False)
    if dt.is_floating_point:
        x = x / 16
    for f in (ampy.cumsum, ampy.cumprod):
        for d in (0, 1, -1):
            assert_same_bits(f(x.cuda(), d), f(x, d))
