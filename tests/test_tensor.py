"""ampy.Tensor: creation, dtypes, attributes, NumPy interop, views, indexing,
conversions, repr and errors — each compared with torch or NumPy."""
import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ampy
from ampy import _C

from _helpers import (ALL_DTYPES, TORCH_DTYPE as TORCH, assert_same_bits, bits, grads_cpu_gpu,
                      no_cpu_fallback, requires_cuda, requires_torch_cuda, sample, sync_checks)

DTYPES = [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64, ampy.int64, ampy.int32,
          ampy.uint8, ampy.bool]


def to_torch(t):
    a = t.detach().numpy()
    if t.dtype is ampy.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def same(t, want):
    """Same dtype, shape and bits as the torch tensor `want` (or NumPy array)."""
    if isinstance(want, torch.Tensor):
        assert TORCH[t.dtype] == want.dtype, (t.dtype, want.dtype)
        want = (want.view(torch.int16) if want.dtype == torch.bfloat16 else want).numpy()
    got = t.detach().numpy()
    assert tuple(t.shape) == want.shape, (t.shape, want.shape)
    assert got.dtype.itemsize == want.dtype.itemsize
    assert np.array_equal(bits(got), bits(want)), (got, want)


# ------------------------------------------------------------------- dtypes
def test_dtype_objects():
    for d in DTYPES:
        td = TORCH[d]
        assert d.itemsize == td.itemsize
        assert d.is_floating_point == td.is_floating_point
        assert repr(d) == repr(td).replace("torch.", "ampy.")
        assert ampy.tensor([1], dtype=d.name).dtype is d
        assert ampy.tensor([1], dtype=d.to_numpy()).dtype is d
        assert ampy.tensor([1], dtype=td).dtype is d
    assert ampy.half is ampy.float16 and ampy.float is ampy.float32
    assert ampy.double is ampy.float64 and ampy.long is ampy.int64 and ampy.int is ampy.int32
    assert ampy.tensor([1.0], dtype=np.float16).dtype is ampy.float16
    assert ampy.tensor([1.0], dtype="bf16").dtype is ampy.bfloat16


@pytest.mark.parametrize("d", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
def test_finfo_vs_torch(d):
    a, b = ampy.finfo(d), torch.finfo(TORCH[d])
    for name in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(a, name) == getattr(b, name), name


def test_promote_types_vs_torch():
    for a in DTYPES:
        for b in DTYPES:
            want = torch.promote_types(TORCH[a], TORCH[b])
            assert TORCH[ampy.promote_types(a, b)] == want, (a, b)


# ----------------------------------------------------------------- creation
def test_tensor_inference_vs_torch():
    for data in ([1.5, 2.0], [1, 2, 3], [True, False], [[1, 2], [3, 4]], 3.5, 7, True,
                 [[1.0, 2], [3, 4]], np.arange(6, dtype=np.float64).reshape(2, 3),
                 np.arange(4, dtype=np.int32), np.array([1, 2], np.uint8)):
        t, w = ampy.tensor(data), torch.tensor(data)
        assert TORCH[t.dtype] == w.dtype, data
        assert t.tolist() == w.tolist()
        assert tuple(t.shape) == tuple(w.shape)


def test_creation_functions_vs_torch():
    cases = [
        (lambda m: m.zeros(2, 3), None), (lambda m: m.ones((4,)), None),
        (lambda m: m.full((2, 2), 7), None), (lambda m: m.full((3,), 2.5), None),
        (lambda m: m.full((2,), True), None),
        (lambda m: m.zeros(3, dtype=m.float16), None), (lambda m: m.ones(2, 2, dtype=m.int32), None),
        (lambda m: m.arange(10), None), (lambda m: m.arange(1, 10, 3), None),
        (lambda m: m.arange(0.0, 1.0, 0.1), None), (lambda m: m.arange(5, dtype=m.bfloat16), None),
        (lambda m: m.linspace(0, 1, 7), None), (lambda m: m.linspace(-3, 5, 1), None),
        (lambda m: m.eye(3), None), (lambda m: m.eye(2, 4, dtype=m.int64), None),
        (lambda m: m.zeros_like(m.ones(2, 3, dtype=m.float16)), None),
        (lambda m: m.ones_like(m.zeros(4, dtype=m.int32)), None),
        (lambda m: m.full_like(m.zeros(2), 3.0), None),
        (lambda m: m.zeros(0, 4), None),
    ]
    for make, _ in cases:
        a, w = make(ampy), make(torch)
        assert TORCH[a.dtype] == w.dtype
        assert tuple(a.shape) == tuple(w.shape)
        np.testing.assert_allclose(a.float().numpy(), w.float().numpy(), rtol=1e-6, atol=1e-6)
    e = ampy.empty(3, 4, dtype=ampy.float16)
    assert tuple(e.shape) == (3, 4) and e.dtype is ampy.float16
    assert ampy.empty_like(e).dtype is ampy.float16


def test_random_reproducible_and_in_range():
    ampy.manual_seed(123)
    a = ampy.rand(1000)
    b, c = ampy.randn(3, 5), ampy.randint(2, 9, (100,))
    ampy.manual_seed(123)
    assert np.array_equal(a.numpy(), ampy.rand(1000).numpy())
    assert np.array_equal(b.numpy(), ampy.randn(3, 5).numpy())
    assert np.array_equal(c.numpy(), ampy.randint(2, 9, (100,)).numpy())
    assert not np.array_equal(a.numpy(), ampy.rand(1000).numpy())  # the stream moves on
    x = a.numpy()
    assert x.min() >= 0 and x.max() < 1 and 0.4 < x.mean() < 0.6
    assert c.dtype is ampy.int64 and c.numpy().min() >= 2 and c.numpy().max() < 9
    g = ampy.Generator().manual_seed(5)
    assert np.array_equal(ampy.randn(10, generator=g).numpy(),
                          ampy.randn(10, generator=ampy.Generator().manual_seed(5)).numpy())
    r = ampy.randn(20000).numpy().astype(np.float64)
    assert abs(r.mean()) < 0.05 and abs(r.std() - 1) < 0.05
    assert ampy.rand(4, dtype=ampy.bfloat16).dtype is ampy.bfloat16


# --------------------------------------------------------------- attributes
def test_attributes_vs_torch():
    a = ampy.arange(24, dtype=ampy.float32).reshape(2, 3, 4)
    w = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    assert isinstance(a.shape, tuple) and isinstance(a.shape, ampy.Size)
    assert a.shape == w.shape and repr(a.shape) == repr(w.shape).replace("torch", "ampy")
    assert a.stride() == w.stride() and a.stride(1) == w.stride(1) and a.stride(-1) == 1
    assert a.ndim == w.ndim == a.dim() and a.numel() == w.numel()
    assert a.size() == w.size() and a.size(-2) == w.size(-2)
    assert a.is_contiguous() and not a.transpose(0, 2).is_contiguous()
    c = a.transpose(0, 2).contiguous()
    assert c.is_contiguous() and c.stride() == w.transpose(0, 2).contiguous().stride()
    same(c, w.transpose(0, 2).contiguous())
    assert a.contiguous() is a
    assert a.device == ampy.device("cpu") and str(a.device) == "cpu"
    assert a.tolist() == w.tolist() and a[1, 2, 3].item() == 23.0
    assert isinstance(ampy.tensor(3).item(), int) and isinstance(ampy.tensor(True).item(), bool)
    assert ampy.tensor([1.5], dtype=ampy.bfloat16).item() == 1.5
    assert ampy.tensor([[1.0, 2.5]], dtype=ampy.float16).tolist() == [[1.0, 2.5]]
    assert len(a) == 2 and [x.tolist() for x in a] == [x.tolist() for x in w]
    assert ampy.Tensor.__array_ufunc__ is None
    assert a.element_size() == 4 and a.half().element_size() == 2


def test_numpy_zero_copy_both_ways():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = ampy.from_numpy(arr)
    assert t.data_ptr() == arr.ctypes.data
    arr[0, 0] = 100
    assert t[0, 0].item() == 100
    n = t.numpy()
    n[1, 1] = -5
    assert arr[1, 1] == -5 and np.shares_memory(n, arr)
    b = ampy.ones(3, dtype=ampy.bfloat16)
    bn = b.numpy()
    assert bn.dtype == ml_dtypes.bfloat16 and bn.ctypes.data == b.data_ptr()
    tb = ampy.from_numpy(np.array([1.5, -2], ml_dtypes.bfloat16))
    assert tb.dtype is ampy.bfloat16 and tb.tolist() == [1.5, -2.0]
    s = t[:, ::2]
    assert np.shares_memory(s.numpy(), arr) and np.array_equal(s.numpy(), arr[:, ::2])
    # __array__ with dtype and copy
    h = ampy.tensor([1.0, 2.0], dtype=ampy.float16)
    assert np.asarray(h).dtype == np.float16 and np.shares_memory(np.asarray(h), h.numpy())
    assert np.asarray(h, dtype=np.float64).dtype == np.float64
    c = np.array(h, copy=True)
    assert not np.shares_memory(c, h.numpy())
    with pytest.raises(ValueError):
        np.asarray(h, dtype=np.float32, copy=False)
    # operators do not let NumPy take over (__array_ufunc__ = None)
    with pytest.raises(TypeError):
        np.add(np.ones(2), h)


# -------------------------------------------------------------------- views
def _views(t, n):
    return [
        ("view", t.view(6, 4), n.reshape(6, 4)), ("view-1", t.view(-1), n.reshape(-1)),
        ("reshape", t.reshape(4, -1), n.reshape(4, -1)),
        ("transpose", t.transpose(0, 2), n.transpose(2, 1, 0)),
        ("permute", t.permute(2, 0, 1), n.transpose(2, 0, 1)),
        ("T", t.T, n.transpose(2, 1, 0)), ("t", t[0].t(), n[0].T),
        ("unsqueeze", t.unsqueeze(1), n[:, None]), ("unsqueeze-1", t.unsqueeze(-1), n[..., None]),
        ("squeeze", t[:, :1].squeeze(), n[:, 0]), ("squeeze1", t[:, :1].squeeze(1), n[:, 0]),
        ("expand", t[:, :1].expand(3, 2, 5, 4), np.broadcast_to(n[:, :1], (3, 2, 5, 4))),
        ("flatten", t.flatten(1), n.reshape(2, 12)), ("narrow", t.narrow(2, 1, 2), n[:, :, 1:3]),
        ("select", t.select(1, -1), n[:, -1]),
    ]


@pytest.mark.parametrize("dtype", [ampy.float32, ampy.float16, ampy.int64])
def test_views_share_memory_and_match_numpy(dtype):
    n = np.arange(24).reshape(2, 3, 4).astype(dtype.to_numpy())
    t = ampy.from_numpy(n.copy())
    lo, hi = t.data_ptr(), t.data_ptr() + 24 * t.element_size()
    for name, v, want in _views(t, n):
        assert np.array_equal(v.numpy(), want), name
        assert lo <= v.data_ptr() < hi, name
        assert v._storage is t._storage, name
    # a write through a view shows in the base
    t.transpose(0, 2)[1, 2, 0] = 99
    assert t[0, 2, 1].item() == 99
    with pytest.raises(RuntimeError):
        t.transpose(0, 1).view(-1)  # not viewable: torch raises too
    r = t.transpose(0, 1).reshape(-1)  # reshape copies instead
    assert np.array_equal(r.numpy(), t.numpy().transpose(1, 0, 2).reshape(-1))


# ----------------------------------------------------------------- indexing
BASIC_KEYS = [0, -1, (1, 2), slice(None, None, 2), (slice(1, None), None), (Ellipsis, 1),
              (None, Ellipsis, slice(0, 3, 2)),
              (slice(None), 1, slice(1, 4, 3)), (1, Ellipsis, None), (slice(5, 1),),
              (slice(-3, None), slice(None, -1, 2))]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=str)
def test_basic_indexing_vs_numpy(key):
    n = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = ampy.from_numpy(n.copy())
    v = t[key]
    assert np.array_equal(v.numpy(), n[key])
    if v.numel():
        assert v._storage is t._storage  # a view, no copy
    t2 = ampy.from_numpy(n.copy())
    t2[key] = -1.0
    n2 = n.copy()
    n2[key] = -1.0
    assert np.array_equal(t2.numpy(), n2)


@st.composite
def adv_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    kind = draw(st.sampled_from(["int", "bool", "int2", "mixed"]))
    if kind == "bool":
        k = draw(st.integers(1, len(shape)))
        mask = draw(hnp.arrays(np.bool_, shape[:k]))
        return shape, (mask,)
    idx = lambda d: draw(hnp.arrays(np.int64, draw(hnp.array_shapes(max_dims=2, max_side=4)),  # noqa
                                    elements=st.integers(-shape[d], shape[d] - 1)))
    if kind == "int" or len(shape) == 1:
        return shape, (idx(0),)
    if kind == "int2":
        a = idx(0)
        b = draw(hnp.arrays(np.int64, a.shape, elements=st.integers(-shape[1], shape[1] - 1)))
        return shape, (a, b)
    return shape, (slice(None), idx(1))


@given(adv_case(), st.integers(0, 2 ** 31))
def test_advanced_indexing_vs_numpy(case, seed):
    shape, key = case
    n = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    t = ampy.from_numpy(n.copy())
    tkey = tuple(ampy.from_numpy(k) if isinstance(k, np.ndarray) else k for k in key)
    got = t[tkey]
    want = n[key]
    assert got.shape == want.shape and np.array_equal(got.numpy(), want)
    arrays = [k for k in key if isinstance(k, np.ndarray)]
    if arrays[0].dtype == np.bool_:
        distinct = True
    else:  # assigning an array is well defined only when no position repeats
        pos = np.ravel_multi_index(
            tuple(np.broadcast_arrays(*[k % shape[d + (len(key) - len(arrays))]
                                        for d, k in enumerate(arrays)])), shape[:len(arrays)]
            if len(key) == len(arrays) else (shape[1],))
        distinct = np.unique(pos).size == pos.size
    n2, t2 = n.copy(), ampy.from_numpy(n.copy())
    n2[key] = 7.0
    t2[tkey] = 7.0
    assert np.array_equal(t2.numpy(), n2)
    if distinct:
        vals = np.arange(want.size, dtype=np.float32).reshape(want.shape)
        n3, t3 = n.copy(), ampy.from_numpy(n.copy())
        n3[key] = vals
        t3[tkey] = ampy.from_numpy(vals)
        assert np.array_equal(t3.numpy(), n3)


def test_index_with_lists_and_tensors_vs_torch():
    w = torch.arange(20.0).reshape(4, 5)
    a = ampy.arange(20.0).reshape(4, 5)
    mask = ampy.from_numpy(np.array([False, True, False, True]))
    for key in ([0, 2], ([1, 3], [0, 4]), (slice(None), [4, 0, 4]), mask, (mask, 2)):
        tkey = tuple(to_torch(k) if isinstance(k, ampy.Tensor) else k for k in key) \
            if isinstance(key, tuple) else (to_torch(key) if isinstance(key, ampy.Tensor) else key)
        assert a[key].tolist() == w[tkey].tolist()


# -------------------------------------------------------------- conversions
def test_conversions_vs_torch():
    x = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32) * 300
    a, w = ampy.from_numpy(x.copy()), torch.from_numpy(x.copy())
    for meth in ("half", "bfloat16", "float", "double", "long", "int", "bool"):
        same(getattr(a, meth)(), getattr(w, meth)())
    same(a.to(ampy.float16), w.to(torch.float16))
    same(a.to("bfloat16"), w.to(torch.bfloat16))
    same(a.to(dtype=ampy.float64), w.to(dtype=torch.float64))
    same(a.to(ampy.ones(1, dtype=ampy.float16)), w.to(torch.ones(1, dtype=torch.float16)))
    assert a.to(ampy.float32) is a and a.float() is a
    c = a.clone()
    assert c.data_ptr() != a.data_ptr() and np.array_equal(c.numpy(), x)
    d = a.detach()
    assert d.data_ptr() == a.data_ptr() and not d.requires_grad
    h = ampy.zeros(3, 7, dtype=ampy.float16)
    assert h.copy_(a) is h
    same(h, w.half())
    h.copy_(ampy.tensor([1.0, 2, 3, 4, 5, 6, 7]))  # broadcast
    assert h.tolist() == [[1.0, 2, 3, 4, 5, 6, 7]] * 3
    t = a.t().half()  # non-contiguous source
    same(t, w.t().half())
    assert t.is_contiguous()


# --------------------------------------------------------------------- repr
def _repr_cases():
    rng = np.random.default_rng(1)
    return [
        rng.standard_normal((2, 2)).astype(np.float32),
        np.array([1.0, 2.0, 3.0], np.float32), np.array([-1.0, 20.0], np.float32),
        np.array([1e-5, 1.0, 1e5], np.float32), np.array([1e10, -3.0], np.float32),
        np.array([np.nan, np.inf, -np.inf, 1.5], np.float32), np.array([0.0, -0.0], np.float32),
        np.array(2.5, np.float32), np.array(3, np.int64), np.array([1, -20, 300], np.int64),
        np.array([True, False]), np.array([1, 2], np.int32), np.array([200, 3], np.uint8),
        np.arange(2000, dtype=np.float32).reshape(40, 50) / 7,
        rng.standard_normal((3, 2, 4)).astype(np.float64),
        rng.standard_normal(30).astype(np.float32), np.arange(100, dtype=np.int64),
        rng.standard_normal((2, 3)).astype(np.float16), np.zeros((0, 3), np.float32),
        np.zeros(0, np.int64), np.zeros((2, 0), np.float16),
    ]


@pytest.mark.parametrize("i", range(len(_repr_cases())))
def test_repr_matches_torch(i):
    n = _repr_cases()[i]
    a, w = ampy.from_numpy(n.copy()), torch.from_numpy(n.copy())
    assert repr(a) == repr(w).replace("torch.", "ampy."), (repr(a), repr(w))


def test_repr_bf16_and_grad_suffixes():
    n = np.array([[0.5, -1.25], [3.0, 1e-3]], np.float32)
    assert repr(ampy.from_numpy(n).bfloat16()) == \
        repr(torch.from_numpy(n).bfloat16()).replace("torch.", "ampy.")
    a = ampy.from_numpy(n.copy()).requires_grad_()
    w = torch.from_numpy(n.copy()).requires_grad_()
    assert repr(a) == repr(w)
    assert repr(ampy.ones(2, dtype=ampy.float16, requires_grad=True)) == \
        repr(torch.ones(2, dtype=torch.float16, requires_grad=True)).replace("torch.", "ampy.")


# -------------------------------------------------------------- bad inputs
def _bad_inputs():
    x = ampy.arange(12.0).reshape(3, 4)
    i = ampy.arange(5)
    return x, i, [
        ("reshape bad size", lambda: x.view(5, 3), RuntimeError),
        ("reshape two -1", lambda: x.reshape(-1, -1), RuntimeError),
        ("transpose dim", lambda: x.transpose(0, 2), IndexError),
        ("permute length", lambda: x.permute(0), RuntimeError),
        ("permute dup", lambda: x.permute(0, 0), RuntimeError),
        ("unsqueeze dim", lambda: x.unsqueeze(4), IndexError),
        ("squeeze dim", lambda: x.squeeze(3), IndexError),
        ("expand mismatch", lambda: x.expand(3, 5), RuntimeError),
        ("expand fewer", lambda: x.expand(4), RuntimeError),
        ("flatten order", lambda: x.unsqueeze(0).flatten(2, 1), RuntimeError),
        ("narrow range", lambda: x.narrow(1, 2, 5), RuntimeError),  # as torch
        ("select range", lambda: x.select(0, 3), IndexError),
        ("index range", lambda: x[3], IndexError),
        ("index neg range", lambda: x[:, -5], IndexError),
        ("too many indices", lambda: x[0, 0, 0], IndexError),
        ("two ellipses", lambda: x[..., ...], IndexError),
        ("float index", lambda: x[1.5], IndexError),
        ("float tensor index", lambda: x[ampy.tensor([0.0])], IndexError),
        ("int tensor out of range", lambda: x[ampy.tensor([0, 3])], IndexError),
        ("mask shape", lambda: x[ampy.tensor([True, False])], IndexError),
        ("zero step", lambda: x[::0], ValueError),
        ("setitem bad shape", lambda: x.__setitem__(slice(None), ampy.zeros(5)), RuntimeError),
        ("copy_ bad shape", lambda: x.copy_(ampy.zeros(2, 4)), RuntimeError),
        ("dtype name", lambda: x.to("float128"), TypeError),
        ("dtype object", lambda: ampy.zeros(2, dtype=object), TypeError),
        ("numpy complex", lambda: ampy.tensor(np.ones(2, np.complex64)), TypeError),
        ("from_numpy list", lambda: ampy.from_numpy([1, 2]), TypeError),
        ("from_numpy dtype", lambda: ampy.from_numpy(np.ones(2, np.complex128)), TypeError),
        ("ragged", lambda: ampy.tensor([[1, 2], [3]]), ValueError),
        ("negative size", lambda: ampy.zeros(-1), RuntimeError),
        ("float size", lambda: ampy.zeros(2.5), TypeError),
        ("absurd size", lambda: ampy.empty(1 << 40, 1 << 40), RuntimeError),  # as torch
        ("huge alloc", lambda: ampy.empty(1 << 50, dtype=ampy.uint8), MemoryError),
        ("item many", lambda: x.item(), RuntimeError),
        ("len 0-d", lambda: len(ampy.tensor(1.0)), TypeError),
        ("bool ambiguous", lambda: bool(x), RuntimeError),
        ("arange step 0", lambda: ampy.arange(0, 5, 0), RuntimeError),
        ("randint empty range", lambda: ampy.randint(5, 5, (2,)), RuntimeError),
        ("rand int dtype", lambda: ampy.rand(2, dtype=ampy.int64), TypeError),
        ("requires_grad int", lambda: i.requires_grad_(), RuntimeError),
        ("numpy requires_grad", lambda: ampy.ones(2, requires_grad=True).numpy(), RuntimeError),
        ("finfo int", lambda: ampy.finfo(ampy.int32), TypeError),
        ("device string", lambda: ampy.zeros(2, device="tpu"), RuntimeError),
        ("Tensor()", lambda: ampy.Tensor(), TypeError),
        ("stride dim", lambda: x.stride(2), IndexError),
        ("size dim", lambda: x.size(-3), IndexError),
        ("as_strided out of bounds", lambda: x.as_strided((4, 4), (4, 1)), RuntimeError),
        ("as_strided negative offset", lambda: x.as_strided((2,), (1,), -1), RuntimeError),
    ]


@pytest.mark.parametrize("k", range(len(_bad_inputs()[2])), ids=lambda k: _bad_inputs()[2][k][0])
def test_bad_inputs_raise_and_leave_inputs_unchanged(k):
    x, i, cases = _bad_inputs()
    name, fn, exc = cases[k]
    before_x, before_i = x.numpy().copy(), i.numpy().copy()
    shape_x = tuple(x.shape)
    with pytest.raises(exc):
        fn()
    assert tuple(x.shape) == shape_x
    assert np.array_equal(x.numpy(), before_x) and np.array_equal(i.numpy(), before_i)


@pytest.mark.parametrize("meth,tdt", [("byte", torch.uint8), ("int", torch.int32),
                                      ("long", torch.int64), ("half", torch.float16),
                                      ("bfloat16", torch.bfloat16), ("double", torch.float64),
                                      ("bool", torch.bool)])
def test_conversion_methods_match_torch(meth, tdt):
    x = np.array([0.0, 1.5, 2.75, 200.0, 255.0, 3.25, -0.0, 7.0], dtype=np.float32)
    got = getattr(ampy.tensor(x), meth)()
    ref = getattr(torch.tensor(x), meth)()
    assert ref.dtype == tdt and got.dtype.name == str(tdt).split(".")[1]
    assert np.array_equal(got.to(ampy.float64).numpy(), ref.double().numpy())


# ================================================================ CUDA
# Advanced indexing (cuda/index.cu) on a GPU against the CPU and torch;
# skipped without a GPU.

def _keys(shape):
    rng = np.random.default_rng(sum(shape))
    i0 = rng.integers(-shape[0], shape[0], 17)  # negative indices and repeats
    i1 = rng.integers(0, shape[1], 17)
    return [
        ampy.from_numpy(i0),                                       # one dim
        (ampy.from_numpy(i0), ampy.from_numpy(i1)),                # adjacent
        (ampy.from_numpy(i0.reshape(17, 1)), slice(None), ampy.from_numpy(i1 % shape[2])),
        (slice(1, None), ampy.from_numpy(i1)),                     # placed after a slice
        [0, 2, 2, -1],                                             # a list
        (Ellipsis, ampy.from_numpy(i1 % shape[2]).to(ampy.int32)),  # int32 indices
    ]


@requires_cuda
@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_cuda_advanced_getitem_matches_cpu_bitwise(dt):
    x = sample((6, 7, 5), dt, 30, specials=dt.is_floating_point)
    g = x.cuda()
    with no_cpu_fallback():
        for key in _keys(tuple(x.shape)):
            gkey = tuple(k.cuda() if isinstance(k, ampy.Tensor) else k for k in key) \
                if isinstance(key, tuple) else (key.cuda() if isinstance(key, ampy.Tensor) else key)
            for kk in (key, gkey):  # CPU index arrays are moved to the device
                r = g[kk]
                assert r.is_cuda
                assert_same_bits(r, x[key])


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.int64, ampy.bool])
def test_cuda_bool_mask_getitem_and_setitem(dt):
    x = sample((5, 9), dt, 31, specials=False)
    m = ampy.from_numpy(np.random.default_rng(32).random((5, 9)) < 0.4)
    g = x.cuda()
    for mk in (m, m.cuda()):  # a CUDA mask syncs once for the count
        assert_same_bits(g[mk], x[m])
    row = ampy.from_numpy(np.array([True, False, True, True, False]))
    assert_same_bits(g[row.cuda()], x[row])
    assert_same_bits(g[:, 3][row.cuda()], x[:, 3][row])
    assert_same_bits(g[m.cuda()], x[m])
    empty = ampy.zeros((5, 9), dtype=ampy.bool)
    assert tuple(g[empty.cuda()].shape) == (0,)
    c, d = x.clone(), g.clone()
    c[m] = 1
    d[m.cuda()] = 1
    assert_same_bits(d, c)
    t = torch.from_numpy(x.numpy().copy())
    t[torch.from_numpy(m.numpy())] = 1
    np.testing.assert_array_equal(d.cpu().numpy(), t.numpy())


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.bfloat16, ampy.int64])
def test_cuda_advanced_setitem_last_repeat_wins_like_cpu(dt):
    x = sample((6, 7, 5), dt, 33, specials=False)
    for key in _keys(tuple(x.shape)):
        c, g = x.clone(), x.cuda()
        shape = tuple(c[key].shape)
        v = sample(shape, dt, 34, specials=False)
        c[key] = v
        g[key] = v.cuda()
        assert_same_bits(g, c)
        c[key] = 3
        g[key] = 3
        assert_same_bits(g, c)
        c[key] = v[-1:] if len(shape) else v  # broadcast value
        g[key] = (v[-1:] if len(shape) else v).cuda()
        assert_same_bits(g, c)


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
def test_cuda_getitem_backward_accumulates_repeats_like_cpu(dt):
    x = sample((40, 33), dt, 35, specials=False)
    idx = ampy.from_numpy(np.random.default_rng(36).integers(-40, 40, 500))  # many repeats
    for key in (idx, (idx, idx % 33), (slice(None), idx % 33)):
        def fn(t):
            k = tuple(i.to(t.device) if isinstance(i, ampy.Tensor) else i for i in key) \
                if isinstance(key, tuple) else key.to(t.device)
            return t[k] * 1.5
        (oc, gc), (og, gg) = grads_cpu_gpu(fn, x)
        assert_same_bits(og, oc)
        assert_same_bits(gg[0], gc[0])  # repeats added one by one in the CPU rule's order


@requires_cuda
@requires_torch_cuda
def test_advanced_indexing_vs_torch_cuda():
    x = sample((50, 16), ampy.float32, 37, specials=False)
    idx = np.random.default_rng(38).integers(0, 50, 300)
    tx = torch.from_numpy(x.numpy()).cuda().requires_grad_(True)
    gx = x.cuda().requires_grad_(True)
    ti, gi = torch.from_numpy(idx).cuda(), ampy.from_numpy(idx).cuda()
    (tx[ti] * 2).sum().backward()
    (gx[gi] * 2).sum().backward()
    np.testing.assert_array_equal(gx[gi].detach().cpu().numpy(),
                                  tx[ti].detach().cpu().numpy())
    # torch adds repeats in its own order: equal up to float32 rounding
    np.testing.assert_allclose(gx.grad.cpu().numpy(), tx.grad.cpu().numpy(), rtol=1e-6)


@requires_cuda
def test_cuda_index_out_of_range_deferred_and_sync_checks():
    x = ampy.arange(10.0).cuda()
    bad = ampy.tensor([1, 10]).cuda()
    r = x[bad]  # no host wait: reported at the next synchronisation
    with pytest.raises((IndexError, RuntimeError),
                       match="index 10 is out of bounds for dimension 0 with size 10"):
        r.cpu()
    assert x[ampy.tensor([1, -1]).cuda()].cpu().tolist() == [1.0, 9.0]  # cleared
    with sync_checks(True):
        with pytest.raises(IndexError, match="^index 10 is out of bounds for dimension 0 "
                                             "with size 10$"):
            x[bad]
        y = x.clone()
        with pytest.raises(IndexError, match="out of bounds"):
            y[bad] = 5.0
        np.testing.assert_array_equal(y.cpu().numpy(), x.cpu().numpy())  # unchanged
