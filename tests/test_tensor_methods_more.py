"""repeat_interleave, unfold, ravel, sum_to_size, the in-place view ops,
fill_diagonal_, index_add/index_copy/index_fill, masked_scatter, cumsum_ /
cumprod_, apply_, new and the bookkeeping queries, side by side with torch:
values, dtypes, shapes, gradients (float32 exactly, bfloat16 with a
tolerance), non-contiguous inputs and errors."""
import numpy as np
import pytest
import torch

import ampy

DTYPES = ["float32", "float64", "bfloat16", "int64"]


def _a(n):
    return getattr(ampy, n)


def _t(n):
    return getattr(torch, n)


def _pair(shape, dt="float32", seed=0, noncontig=False):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape) * 3
    if dt in ("int64", "int32"):
        v = np.round(v)
    t = torch.tensor(v, dtype=torch.float64).to(_t(dt))
    a = ampy.tensor(v, dtype=ampy.float64).to(_a(dt))
    if noncontig:  # same values, transposed storage
        t = t.transpose(0, -1).contiguous().transpose(0, -1)
        a = a.transpose(0, -1).contiguous().transpose(0, -1)
        assert not a.is_contiguous() or a.ndim < 2
    return a, t


def _same(a, t, tol=0.0):
    tn = t.detach().to(torch.float64).numpy() if t.dtype != torch.bool else t.numpy()
    an = a.detach().double().numpy() if a.dtype is not ampy.bool else a.numpy()
    assert tuple(a.shape) == tuple(t.shape)
    assert a.dtype.name == str(t.dtype).split(".")[1]
    if tol:
        np.testing.assert_allclose(an, tn, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(an, tn)


def _grads(fa, ft, inputs, dt="float32", tol=1e-6):
    """Forward and backward of fa/ft on the paired inputs (leaves made here)."""
    la = [a.detach().clone().requires_grad_() if a.dtype.is_floating_point else a
          for a, _ in inputs]
    lt = [t.detach().clone().requires_grad_() if t.dtype.is_floating_point else t
          for _, t in inputs]
    oa, ot = fa(*la), ft(*lt)
    _same(oa, ot, tol)
    wa, wt = _pair(tuple(ot.shape), dt, seed=99)
    (oa * wa).sum().backward()
    (ot * wt).sum().backward()
    for a, t in zip(la, lt):
        if t.requires_grad:
            _same(a.grad, t.grad, tol)


# ---- repeat_interleave ---------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("nc", [False, True])
def test_repeat_interleave_values(dt, nc):
    a, t = _pair((3, 4), dt, noncontig=nc)
    for args, kw in [((2,), {}), ((3,), {"dim": 1}), ((2,), {"dim": -2}),
                     ((0,), {"dim": 0}),
                     (("r0",), {"dim": 0}), (("r1",), {"dim": 1}), (("one",), {"dim": 1}),
                     (("r0",), {"dim": 0, "output_size": 6})]:
        reps = {"r0": ([1, 0, 5],), "r1": ([2, 1, 0, 3],), "one": ([2],)}
        aa = tuple(ampy.tensor(reps[x][0]) if isinstance(x, str) else x for x in args)
        tt = tuple(torch.tensor(reps[x][0]) if isinstance(x, str) else x for x in args)
        _same(a.repeat_interleave(*aa, **kw), t.repeat_interleave(*tt, **kw))
        _same(ampy.repeat_interleave(a, *aa, **kw), torch.repeat_interleave(t, *tt, **kw))


def test_repeat_interleave_counts_only_and_scalar():
    _same(ampy.repeat_interleave(ampy.tensor([2, 0, 3])),
          torch.repeat_interleave(torch.tensor([2, 0, 3])))
    _same(ampy.tensor(5.0).repeat_interleave(3), torch.tensor(5.0).repeat_interleave(3))


@pytest.mark.parametrize("dt,tol", [("float32", 1e-6), ("bfloat16", 1e-2)])
def test_repeat_interleave_grad(dt, tol):
    x = _pair((3, 4), dt)
    _grads(lambda v: v.repeat_interleave(ampy.tensor([1, 0, 2]), dim=0),
           lambda v: v.repeat_interleave(torch.tensor([1, 0, 2]), dim=0), [x], dt, tol)
    _grads(lambda v: v.repeat_interleave(3, dim=1), lambda v: v.repeat_interleave(3, dim=1),
           [x], dt, tol)
    _grads(lambda v: v.repeat_interleave(2), lambda v: v.repeat_interleave(2), [x], dt, tol)


def test_repeat_interleave_errors():
    a, t = _pair((2, 3))
    for args, kw, exc, word in [
            ((torch.tensor([1, 2, 3]),), {"dim": 0}, RuntimeError, "same size"),
            ((torch.tensor([1, -2]),), {"dim": 0}, RuntimeError, "negative"),
            ((-1,), {}, RuntimeError, "non-negative"),
            ((torch.tensor([1.0, 2.0]),), {"dim": 0}, NotImplementedError, "Float"),
            ((torch.tensor([[1, 2]]),), {"dim": 0}, RuntimeError, "0-dim or 1-dim"),
            ((torch.tensor([1, 2]),), {"dim": 0, "output_size": 4}, RuntimeError, "size")]:
        aargs = tuple(ampy.tensor(x.numpy()) if isinstance(x, torch.Tensor) else x
                      for x in args)
        with pytest.raises(exc, match=word) as et:
            t.repeat_interleave(*args, **kw)
        with pytest.raises(exc, match=word) as ea:
            a.repeat_interleave(*aargs, **kw)
        assert str(ea.value) == str(et.value)


# ---- unfold / ravel / sum_to_size -----------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("nc", [False, True])
def test_unfold_values_and_view(dt, nc):
    a, t = _pair((4, 7), dt, noncontig=nc)
    for args in [(1, 3, 1), (1, 3, 2), (0, 2, 2), (-1, 7, 1), (1, 1, 5), (0, 4, 3), (1, 0, 1)]:
        ua, ut = a.unfold(*args), t.unfold(*args)
        _same(ua, ut)
        assert ua.stride() == ut.stride()
    _same(a[:, 1:].unfold(1, 2, 2), t[:, 1:].unfold(1, 2, 2))
    _same(ampy.tensor(3.0).unfold(0, 1, 1), torch.tensor(3.0).unfold(0, 1, 1))
    if dt == "float32":  # a view: writes show through
        u = a.unfold(1, 2, 3)
        u[0, 0, 0] = 100.0
        assert a[0, 0].item() == 100.0


@pytest.mark.parametrize("dt,tol", [("float32", 1e-6), ("bfloat16", 1e-2)])
def test_unfold_grad_overlapping_windows(dt, tol):
    x = _pair((3, 8), dt)
    _grads(lambda v: v.unfold(1, 3, 1), lambda v: v.unfold(1, 3, 1), [x], dt, tol)
    _grads(lambda v: v.t().unfold(0, 2, 3), lambda v: v.t().unfold(0, 2, 3), [x], dt, tol)


def test_unfold_errors():
    a, t = _pair((2, 3))
    for args, exc, word in [((1, 4, 1), RuntimeError, "maximum size"),
                            ((1, 2, 0), RuntimeError, "step"),
                            ((2, 1, 1), IndexError, "Dimension out of range")]:
        with pytest.raises(exc, match=word) as et:
            t.unfold(*args)
        with pytest.raises(exc, match=word) as ea:
            a.unfold(*args)
        assert str(ea.value) == str(et.value)


@pytest.mark.parametrize("dt", DTYPES)
def test_ravel(dt):
    a, t = _pair((3, 4), dt, noncontig=True)
    _same(a.ravel(), t.ravel())
    _same(ampy.ravel(a), torch.ravel(t))
    b, u = _pair((3, 4), dt)
    assert b.ravel().data_ptr() == b.data_ptr()


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_sum_to_size(dt):
    a, t = _pair((2, 3, 4), dt, noncontig=True)
    for size in [(3, 4), (1, 3, 1), (2, 1, 4), (4,), (1,), (2, 3, 4), ((3, 1),)]:
        _same(a.sum_to_size(*size), t.sum_to_size(*size), 1e-6 if dt != "int64" else 0)
    with pytest.raises(RuntimeError, match="not expandable") as et:
        t.sum_to_size(2, 2)
    with pytest.raises(RuntimeError, match="not expandable") as ea:
        a.sum_to_size(2, 2)
    assert str(ea.value).replace("ampy", "torch") == str(et.value)


def test_sum_to_size_grad():
    x = _pair((2, 3, 4))
    _grads(lambda v: v.sum_to_size(1, 3, 1), lambda v: v.sum_to_size(1, 3, 1), [x])


# ---- bookkeeping -------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64", "bfloat16", "float16", "int64", "int32",
                                "uint8", "bool"])
def test_bookkeeping(dt):
    a, t = ampy.zeros(2, 3, dtype=_a(dt)), torch.zeros(2, 3, dtype=_t(dt))
    for name in ("nelement", "ndimension", "is_signed", "is_complex"):
        assert getattr(a, name)() == getattr(t, name)(), name
    assert a.nbytes == t.nbytes and a.itemsize == t.itemsize
    assert a[:, ::2].nbytes == t[:, ::2].nbytes
    assert a.is_same_size(ampy.zeros(2, 3)) and not a.is_same_size(ampy.zeros(3, 2))


def test_is_nonzero():
    for v in ([0.0], [[2.0]], 3, 0, float("nan"), [True], [False]):
        assert ampy.tensor(v).is_nonzero() == torch.tensor(v).is_nonzero()
    for v in ([1.0, 2.0], [], [[0.0], [0.0]]):
        with pytest.raises(RuntimeError, match="ambiguous") as et:
            torch.tensor(v).is_nonzero()
        with pytest.raises(RuntimeError, match="ambiguous") as ea:
            ampy.tensor(v).is_nonzero()
        assert str(ea.value) == str(et.value)


# ---- in-place views ----------------------------------------------------------------
@pytest.mark.parametrize("name,args", [("squeeze_", ()), ("squeeze_", (1,)), ("squeeze_", (0,)),
                                       ("unsqueeze_", (0,)), ("unsqueeze_", (-1,)),
                                       ("transpose_", (0, 2)), ("swapaxes_", (1, 2)),
                                       ("swapdims_", (0, -1))])
def test_inplace_views(name, args):
    a, t = _pair((3, 1, 4))
    pa = a.data_ptr()
    assert getattr(a, name)(*args) is a
    getattr(t, name)(*args)
    _same(a, t)
    assert a.stride() == t.stride() and a.data_ptr() == pa


def test_t_():
    for shape in [(2, 3), (4,), ()]:
        a, t = _pair(shape)
        assert a.t_() is a
        t.t_()
        _same(a, t)
        assert a.stride() == t.stride()
    a, t = _pair((2, 3, 4))
    with pytest.raises(RuntimeError, match="expects a tensor with <= 2") as ea:
        a.t_()
    with pytest.raises(RuntimeError, match="expects a tensor with <= 2") as et:
        t.t_()
    assert str(ea.value) == str(et.value)


def test_inplace_view_errors_and_grad_rules():
    a, t = _pair((2, 3))
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.transpose_(0, 2)
    with pytest.raises(IndexError, match="Dimension out of range"):
        a.transpose_(0, 2)
    assert tuple(a.shape) == (2, 3)
    wa, wt = ampy.zeros(2, 3, requires_grad=True), torch.zeros(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        wt.t_()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        wa.t_()
    assert tuple(wa.shape) == (2, 3)
    with ampy.no_grad():
        wa.t_()
    assert tuple(wa.shape) == (3, 2) and wa.requires_grad


# ---- fill_diagonal_ ----------------------------------------------------------------
@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((2, 5), False), ((7, 3), False),
                                        ((7, 3), True), ((8, 3), True), ((4, 3), True),
                                        ((3, 3, 3), False), ((1, 1), False)])
@pytest.mark.parametrize("dt", DTYPES)
def test_fill_diagonal(shape, wrap, dt):
    a, t = _pair(shape, dt)
    assert a.fill_diagonal_(2, wrap=wrap) is a
    t.fill_diagonal_(2, wrap=wrap)
    _same(a, t)


def test_fill_diagonal_noncontig_and_errors():
    a, t = _pair((5, 4), noncontig=True)
    a.fill_diagonal_(-1.5)
    t.fill_diagonal_(-1.5)
    _same(a, t)
    for shape, word in [((3,), "dimensions must"), ((2, 3, 4), "equal length")]:
        with pytest.raises(RuntimeError, match=word):
            torch.zeros(shape).fill_diagonal_(1)
        with pytest.raises(RuntimeError, match=word):
            ampy.zeros(*shape).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        ampy.zeros(2, 2, requires_grad=True).fill_diagonal_(1)


def test_fill_diagonal_grad():
    x = _pair((3, 4))
    _grads(lambda v: (v * 2).fill_diagonal_(0.5), lambda v: (v * 2).fill_diagonal_(0.5), [x])


# ---- index_add / index_copy / index_fill ---------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("nc", [False, True])
def test_index_add_copy_fill_values(dt, nc):
    a, t = _pair((4, 5), dt, noncontig=nc)
    ia, it = ampy.tensor([4, 0, 2]), torch.tensor([4, 0, 2])
    sa, st = _pair((4, 3), dt, seed=1, noncontig=nc)
    ra, rt = _pair((3, 5), dt, seed=2)
    _same(a.index_add(1, ia, sa), t.index_add(1, it, st))
    _same(ampy.index_add(a, 0, ampy.tensor([1, 1, 3]), ra, alpha=2),  # (repeats: 1 ulp)
          torch.index_add(t, 0, torch.tensor([1, 1, 3]), rt, alpha=2),
          1e-2 if dt == "bfloat16" else 1e-6 if dt == "float32" else 0)
    _same(a.index_copy(1, ia, sa), t.index_copy(1, it, st))
    _same(ampy.index_copy(a, 0, ampy.tensor([3, 0, 1]), ra),
          torch.index_copy(t, 0, torch.tensor([3, 0, 1]), rt))
    _same(a.index_fill(1, ia, -3), t.index_fill(1, it, -3))
    _same(ampy.index_fill(a, 0, ampy.tensor([2]), ampy.tensor(7, dtype=a.dtype)),
          torch.index_fill(t, 0, torch.tensor([2]), torch.tensor(7, dtype=t.dtype)))
    _same(a.index_fill(-1, ampy.tensor([-1]), 1), t.index_fill(-1, torch.tensor([-1]), 1))
    _same(a, t)  # out of place: unchanged
    b, u = a.clone(), t.clone()
    assert b.index_add_(1, ia, sa) is b
    u.index_add_(1, it, st)
    _same(b, u)
    assert b.index_copy_(0, ampy.tensor([2, 3, 0]), ra) is b
    u.index_copy_(0, torch.tensor([2, 3, 0]), rt)
    _same(b, u)
    assert b.index_fill_(1, ampy.tensor([1, 3]), 0) is b
    u.index_fill_(1, torch.tensor([1, 3]), 0)
    _same(b, u)


def test_index_add_int32_index_and_views():
    a, t = _pair((4, 6))
    va, vt = a[:, ::2], t[:, ::2]
    sa, st = _pair((4, 2), seed=3)
    va.index_add_(1, ampy.tensor([2, 0], dtype=ampy.int32), sa)
    vt.index_add_(1, torch.tensor([2, 0], dtype=torch.int32), st)
    _same(a, t)


@pytest.mark.parametrize("dt,tol", [("float32", 1e-6), ("bfloat16", 2e-2)])
def test_index_ops_grad(dt, tol):
    x, s = _pair((4, 5), dt), _pair((4, 3), dt, seed=1)
    ia, it = ampy.tensor([4, 0, 4]), torch.tensor([4, 0, 4])
    _grads(lambda v, w: v.index_add(1, ia, w, alpha=3),
           lambda v, w: v.index_add(1, it, w, alpha=3), [x, s], dt, tol)
    ic, jc = ampy.tensor([4, 0, 2]), torch.tensor([4, 0, 2])
    _grads(lambda v, w: v.index_copy(1, ic, w), lambda v, w: v.index_copy(1, jc, w),
           [x, s], dt, tol)
    _grads(lambda v: v.index_fill(1, ic, 2.0), lambda v: v.index_fill(1, jc, 2.0), [x], dt, tol)
    _grads(lambda v, w: (v * 1).index_add_(1, ia, w), lambda v, w: (v * 1).index_add_(1, it, w),
           [x, s], dt, tol)
    _grads(lambda v, w: (v * 1).index_copy_(1, ic, w),
           lambda v, w: (v * 1).index_copy_(1, jc, w), [x, s], dt, tol)


_IDX_ERRORS = [
    ("index_add", (1, [0, 2], (2, 3)), "Number of indices"),
    ("index_add", (1, [0, 3], (2, 2)), "out of bounds"),
    ("index_add", (1, [[0, 1]], (2, 2)), "vector"),
    ("index_add", (1, "float", (2, 2)), "int32/int64"),
    ("index_add", (1, [0, 2], "double"), "same scalar type"),
    ("index_copy", (1, [0, 3], (2, 2)), "out of bounds"),
    ("index_copy", (1, [0, 2], (2, 3)), "Number of indices"),
    ("index_copy", (1, [0, 2], "double"), "same dtype"),
    ("index_fill", (1, [0, 3], 1.0), "out of bounds"),
    ("index_fill", (1, [0, 2], "vec"), "0-dimensional"),
    ("index_fill", (1, "float", 1.0), "int64"),
]


@pytest.mark.parametrize("name,args,word", _IDX_ERRORS)
def test_index_errors_like_torch(name, args, word):
    def build(lib):
        x = lib.zeros(2, 3)
        dim, ix, third = args
        ix = lib.tensor([0.0, 2.0]) if ix == "float" else lib.tensor(ix)
        if third == "double":
            third = lib.ones(2, 2, dtype=lib.float64)
        elif third == "vec":
            third = lib.tensor([1.0, 2.0])
        elif isinstance(third, tuple):
            third = lib.ones(*third)
        return x, (dim, ix, third)
    xt, at = build(torch)
    xa, aa = build(ampy)
    with pytest.raises((RuntimeError, IndexError), match=word) as et:
        getattr(xt, name)(*at)
    with pytest.raises(et.type, match=word) as ea:
        getattr(xa, name)(*aa)
    assert str(ea.value) == str(et.value)
    assert np.all(xa.numpy() == 0)


# ---- masked_scatter ----------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("nc", [False, True])
def test_masked_scatter_values(dt, nc):
    a, t = _pair((3, 4), dt, noncontig=nc)
    mv = np.array([[True, False, True, True], [False] * 4, [True, True, False, True]])
    sa, st = _pair((3, 5), dt, seed=5, noncontig=nc)
    _same(a.masked_scatter(ampy.tensor(mv), sa), t.masked_scatter(torch.tensor(mv), st))
    _same(ampy.masked_scatter(a, ampy.tensor(mv[0]), sa),
          torch.masked_scatter(t, torch.tensor(mv[0]), st))
    _same(a.masked_scatter(ampy.zeros(3, 4, dtype=ampy.bool), ampy.tensor([], dtype=a.dtype)),
          t.masked_scatter(torch.zeros(3, 4, dtype=torch.bool), torch.tensor([], dtype=t.dtype)))
    b, u = a.clone(), t.clone()
    assert b.masked_scatter_(ampy.tensor(mv), sa) is b
    u.masked_scatter_(torch.tensor(mv), st)
    _same(b, u)


@pytest.mark.parametrize("dt,tol", [("float32", 1e-6), ("bfloat16", 2e-2)])
def test_masked_scatter_grad(dt, tol):
    mv = np.array([[True, False, True], [False, True, True]])
    ma, mt = ampy.tensor(mv), torch.tensor(mv)
    _grads(lambda v, s: v.masked_scatter(ma, s), lambda v, s: v.masked_scatter(mt, s),
           [_pair((2, 3), dt), _pair((7,), dt, seed=2)], dt, tol)
    _grads(lambda v, s: (v * 1).masked_scatter_(ma, s),
           lambda v, s: (v * 1).masked_scatter_(mt, s),
           [_pair((2, 3), dt), _pair((2, 3), dt, seed=2)], dt, tol)


def test_masked_scatter_errors_like_torch():
    for mk, src, word in [(lambda lib: lib.tensor([True, False, True]), (2,), "Number of"),
                          (lambda lib: lib.tensor([1, 0, 1], dtype=lib.int32), (10,), "boolean"),
                          (lambda lib: lib.tensor([True, False]), (10,), "size of tensor"),
                          (lambda lib: lib.tensor([True, False, True]), "double", "same dtypes")]:
        res = []
        for lib in (torch, ampy):
            x = lib.zeros(2, 3)
            s = lib.ones(10, dtype=lib.float64) if src == "double" else lib.ones(*src)
            with pytest.raises(RuntimeError, match=word) as e:
                x.masked_scatter(mk(lib), s)
            res.append(str(e.value))
            assert np.all(x.numpy() == 0)
        assert res[0] == res[1]


# ---- cumsum_ / cumprod_ / apply_ / new ----------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_cumsum_cumprod_inplace(dt):
    a, t = _pair((3, 4), dt, noncontig=True)
    a, t = a * 0.5 if dt != "int64" else a, t * 0.5 if dt != "int64" else t
    for d in (0, 1, -1):
        b, u = a.clone(), t.clone()
        assert b.cumsum_(d) is b
        u.cumsum_(d)
        _same(b, u, 1e-6 if dt == "float32" else 0)
        b, u = a.clone(), t.clone()
        assert b.cumprod_(dim=d) is b
        u.cumprod_(dim=d)
        _same(b, u, 1e-6 if dt == "float32" else 0)


def test_cumsum_cumprod_inplace_grad():
    x = _pair((3, 4))
    _grads(lambda v: (v * 1).cumsum_(1), lambda v: (v * 1).cumsum_(1), [x])
    _grads(lambda v: (v * 1).cumprod_(0), lambda v: (v * 1).cumprod_(0), [x], tol=1e-5)


def test_apply_():
    for dt, f in [("float32", lambda v: v * 2 + 1), ("int64", lambda v: v + 1.7),
                  ("float64", lambda v: v ** 2)]:
        a, t = _pair((2, 3), dt, noncontig=True)
        assert a.apply_(f) is a
        t.apply_(f)
        _same(a, t)
    a, t = _pair((4, 4))
    a[:, 1].apply_(lambda v: 0.0)
    t[:, 1].apply_(lambda v: 0.0)
    _same(a, t)


def test_new():
    a, t = _pair((2, 3), "float64")
    assert tuple(a.new().shape) == tuple(t.new().shape) and a.new().dtype is ampy.float64
    assert tuple(a.new(2, 3).shape) == (2, 3) and a.new(2, 3).dtype is ampy.float64
    _same(a.new([1, 2]), t.new([1, 2]))
    _same(a.new((2, 3)), t.new((2, 3)))
    assert tuple(a.new(ampy.Size([4, 1])).shape) == tuple(t.new(torch.Size([4, 1])).shape)
    _same(a.new(ampy.ones(2, dtype=ampy.float64)), t.new(torch.ones(2, dtype=torch.float64)))
