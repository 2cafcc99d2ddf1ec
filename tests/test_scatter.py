"""gather / scatter / scatter_add / masked_fill / index_select / masked_select /
one_hot (and where) against torch 2.13.

These ops move elements (scatter_add adds them in index order, as torch's
CPU loop), so results and gradients are compared as bits in every dtype.
"""
import numpy as np
import pytest
import torch

import ampy
import ampy.nn.functional as F

from _helpers import (AMPY_DTYPE, DTYPE_NAMES, FLOAT_NAMES, TORCH_DTYPE, assert_same_bits,
                      bits, host_f64, requires_cuda, sample, same_bits_or_both_nan)

ADDABLE = ("float32", "float64", "float16", "bfloat16", "int64", "int32")


def _torch(t):
    return torch.from_numpy(host_f64(t)).to(TORCH_DTYPE[t.dtype.name])


def _idx(shape, high, seed=0):
    a = np.random.default_rng(seed).integers(0, high, size=shape)
    return ampy.tensor(a), torch.tensor(a)


def _line_perm(shape, dim, high, seed=0):
    """Index of `shape` whose lines along dim hold distinct values < high (scatter
    writes each target once)."""
    rng = np.random.default_rng(seed)
    a = np.moveaxis(np.zeros(shape, np.int64), dim, -1)
    for pos in np.ndindex(a.shape[:-1]):
        a[pos] = rng.permutation(high)[:a.shape[-1]]
    a = np.ascontiguousarray(np.moveaxis(a, -1, dim))
    return ampy.tensor(a), torch.tensor(a)


def _same(got, want):
    assert tuple(got.shape) == tuple(want.shape)
    assert same_bits_or_both_nan(got, want)


# ---------------------------------------------------------------- gather
@pytest.mark.parametrize("name", DTYPE_NAMES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_bits_match_torch(name, dim, cpu_path):
    x = sample((4, 5, 6), AMPY_DTYPE[name])
    shape = [3, 4, 5]
    shape[dim] = 7
    ia, it = _idx(shape, x.shape[dim])
    _same(ampy.gather(x, dim, ia), torch.gather(_torch(x), dim, it))
    _same(x.gather(dim, ia.to(ampy.int32)), _torch(x).gather(dim, it.int()))


def test_gather_strided_0d_and_empty():
    base = sample((6, 8), ampy.float32)
    tb = _torch(base)
    ia, it = _idx((4, 3), 6)
    _same(base.t()[:, ::2].gather(0, ia), tb.t()[:, ::2].gather(0, it))  # [8, 3] <- [4, 3]
    _same(base[::2].gather(1, ia[:3]), tb[::2].gather(1, it[:3]))
    _same(base.gather(1, ia[:1].expand(6, 3)), tb.gather(1, it[:1].expand(6, 3)))
    assert float(ampy.tensor(3.0).gather(0, ampy.tensor(0))) == 3.0
    assert tuple(base.gather(0, ampy.zeros(0, 8, dtype=ampy.int64)).shape) == (0, 8)


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_gather_grad_sums_repeats_as_torch(name):
    x = sample((4, 6), AMPY_DTYPE[name], specials=False).requires_grad_(True)
    t = _torch(x.detach()).requires_grad_(True)
    ia, it = _idx((4, 9), 6)
    g = sample((4, 9), AMPY_DTYPE[name], seed=2, specials=False)
    x.gather(1, ia).backward(g)
    t.gather(1, it).backward(_torch(g))
    assert_same_bits(x.grad, t.grad)


@pytest.mark.parametrize("fn,err,match", [
    (lambda M, x: M.gather(x, 0, M.tensor([[5]])), RuntimeError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    (lambda M, x: M.gather(x, 0, M.tensor([[-1]])), RuntimeError, "index -1 is out of bounds"),
    (lambda M, x: M.gather(x, 0, M.tensor([[1.0]])), RuntimeError, "int32/int64 for index"),
    (lambda M, x: M.gather(x, 0, M.tensor([1])), RuntimeError, "same number of dimensions"),
    (lambda M, x: M.gather(x, 2, M.tensor([[1]])), IndexError, "Dimension out of range"),
    (lambda M, x: M.gather(x, 1, M.zeros(4, 1, dtype=M.int64)), RuntimeError,
     "Size does not match at dimension 0"),
])
def test_gather_bad_inputs_raise_as_torch(fn, err, match):
    x = ampy.ones(3, 4)
    before = bits(x)
    with pytest.raises(err, match=match):
        fn(ampy, x)
    with pytest.raises(err, match=match):
        fn(torch, torch.ones(3, 4))
    np.testing.assert_array_equal(bits(x), before)


# ---------------------------------------------------------------- scatter
@pytest.mark.parametrize("name", DTYPE_NAMES)
@pytest.mark.parametrize("dim", [0, -1])
def test_scatter_src_and_value_bits_match_torch(name, dim, cpu_path):
    x = sample((5, 6), AMPY_DTYPE[name])
    src = sample((4, 4), AMPY_DTYPE[name], seed=3)
    ia, it = _line_perm((4, 4), dim, x.shape[dim])
    tx, ts = _torch(x), _torch(src)
    _same(ampy.scatter(x, dim, ia, src), torch.scatter(tx, dim, it, ts))
    _same(x.scatter(dim, ia, 2), tx.scatter(dim, it, 2))
    _same(ampy.scatter(x, dim, ia, value=1), torch.scatter(tx, dim, it, value=1))
    y, ty = x.clone(), tx.clone()
    assert y.scatter_(dim, ia, src) is y
    ty.scatter_(dim, it, ts)
    _same(y, ty)


def test_scatter_value_is_cast_to_the_input_dtype():
    x, t = ampy.ones(3, dtype=ampy.int64), torch.ones(3, dtype=torch.int64)
    i = ampy.tensor([0, 2])
    _same(x.scatter(0, i, 2.7), t.scatter(0, torch.tensor([0, 2]), 2.7))


@pytest.mark.parametrize("name", ADDABLE)
def test_scatter_add_adds_repeats_in_index_order_as_torch(name, cpu_path):
    x = sample((5, 6), AMPY_DTYPE[name], specials=False)
    src = sample((5, 9), AMPY_DTYPE[name], seed=4, specials=False)
    ia, it = _idx((5, 9), 6)
    tx, ts = _torch(x), _torch(src)
    _same(ampy.scatter_add(x, 1, ia, src), torch.scatter_add(tx, 1, it, ts))
    y, ty = x.clone(), tx.clone()
    y.scatter_add_(1, ia, src)
    ty.scatter_add_(1, it, ts)
    _same(y, ty)
    i0, t0 = _idx((8, 6), 5, seed=1)
    s0 = sample((8, 6), AMPY_DTYPE[name], seed=5, specials=False)
    _same(x.scatter_add(0, i0, s0), tx.scatter_add(0, t0, _torch(s0)))


def test_scatter_strided_self_and_src():
    base, src = sample((6, 8), ampy.float32), sample((8, 6), ampy.float32, seed=1)
    tb, ts = _torch(base), _torch(src)
    ia, it = _line_perm((3, 4), 0, 3)
    y, ty = base.clone(), tb.clone()
    y[::2].scatter_(0, ia, src.t())
    ty[::2].scatter_(0, it, ts.t())
    _same(y, ty)
    y.t().scatter_add_(1, ia.t(), src[::2, ::2])
    ty.t().scatter_add_(1, it.t(), ts[::2, ::2])
    _same(y, ty)


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_scatter_and_scatter_add_grads_as_torch(name):
    dt = AMPY_DTYPE[name]
    ia, it = _line_perm((3, 2), 1, 4)
    for op in ("scatter", "scatter_add"):
        x = sample((3, 4), dt, specials=False).requires_grad_(True)
        s = sample((3, 2), dt, seed=1, specials=False).requires_grad_(True)
        tx, ts = (_torch(v.detach()).requires_grad_(True) for v in (x, s))
        g = sample((3, 4), dt, seed=2, specials=False)
        getattr(ampy, op)(x, 1, ia, s).backward(g)
        getattr(torch, op)(tx, 1, it, ts).backward(_torch(g))
        assert_same_bits(x.grad, tx.grad)
        assert_same_bits(s.grad, ts.grad)


@pytest.mark.parametrize("fn,match", [
    (lambda M, x: M.scatter(x, 0, M.tensor([[5]]), 1.0), "index 5 is out of bounds"),
    (lambda M, x: x.scatter_(0, M.tensor([[0, 7]]), 1.0), "index 7 is out of bounds"),
    (lambda M, x: x.scatter_add_(1, M.tensor([[0, 9]]), M.ones(1, 2)), "index 9 is out of"),
    (lambda M, x: M.scatter(x, 0, M.tensor([[1.0]]), 1.0), "int32/int64 for index"),
    (lambda M, x: M.scatter(x, 0, M.tensor([[1]]), M.ones(1, 1, dtype=M.float64)),
     "self.dtype to be equal to src.dtype"),
    (lambda M, x: M.scatter_add(x, 0, M.tensor([[1]]), M.ones(1, 1, dtype=M.float64)),
     "self.dtype to be equal to src.dtype"),
    (lambda M, x: M.scatter(x, 0, M.tensor([1]), 1.0), "same number of dimensions as self"),
    (lambda M, x: M.scatter(x, 1, M.zeros(3, 2, dtype=M.int64), M.tensor(1.0)),
     "same number of dimensions as src"),
    (lambda M, x: M.scatter(x, 0, M.zeros(2, 2, dtype=M.int64), M.ones(1, 1)),
     "no larger size than src"),
    (lambda M, x: M.scatter(x, 1, M.zeros(4, 1, dtype=M.int64), 1.0),
     r"Expected index \[4, 1\] to be no larger than self \[3, 4\] apart from dimension 1"),
])
def test_scatter_bad_inputs_raise_as_torch_and_write_nothing(fn, match):
    x = ampy.ones(3, 4)
    before = bits(x)
    with pytest.raises(RuntimeError, match=match):
        fn(ampy, x)
    with pytest.raises(RuntimeError, match=match):
        fn(torch, torch.ones(3, 4))
    np.testing.assert_array_equal(bits(x), before)


# ---------------------------------------------------------------- masked_fill
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_masked_fill_bits_match_torch(name, cpu_path):
    x = sample((3, 4, 5), AMPY_DTYPE[name])
    tx = _torch(x)
    m = np.random.default_rng(1).random((4, 5)) > 0.5
    am, tm = ampy.tensor(m), torch.tensor(m)
    for value in (2, 0.5, True, -3):
        _same(x.masked_fill(am, value), tx.masked_fill(tm, value))
    _same(ampy.masked_fill(x, am, ampy.tensor(1.25, dtype=ampy.float64)),
          torch.masked_fill(tx, tm, torch.tensor(1.25, dtype=torch.float64)))
    big = np.random.default_rng(2).random((2, 3, 4, 5)) > 0.5  # the mask broadcasts x too
    _same(x.masked_fill(ampy.tensor(big), 7), tx.masked_fill(torch.tensor(big), 7))
    y, ty = x.clone(), tx.clone()
    assert y.masked_fill_(am, 3) is y
    ty.masked_fill_(tm, 3)
    _same(y, ty)


def test_masked_fill_strided_and_inf():
    base = sample((6, 8), ampy.float32)
    tb = _torch(base)
    m = base > 0
    tm = tb > 0
    _same(base.t().masked_fill(m.t(), float("-inf")), tb.t().masked_fill(tm.t(), float("-inf")))
    y, ty = base.clone(), tb.clone()
    y[:, ::2].masked_fill_(m[0, ::2], -1.0)
    ty[:, ::2].masked_fill_(tm[0, ::2], -1.0)
    _same(y, ty)


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_masked_fill_grads_as_torch_including_the_value(name):
    dt = AMPY_DTYPE[name]
    x = sample((3, 4), dt, specials=False).requires_grad_(True)
    v = ampy.tensor(0.5, dtype=dt, requires_grad=True)
    tx, tv = _torch(x.detach()).requires_grad_(True), _torch(v.detach()).requires_grad_(True)
    m = np.random.default_rng(3).random((2, 3, 4)) > 0.4
    g = sample((2, 3, 4), dt, seed=1, specials=False)
    x.masked_fill(ampy.tensor(m), v).backward(g)
    tx.masked_fill(torch.tensor(m), tv).backward(_torch(g))
    np.testing.assert_allclose(host_f64(x.grad), tx.grad.double().numpy(), rtol=2e-2)
    np.testing.assert_allclose(float(v.grad), float(tv.grad), rtol=2e-2)
    if name in ("float32", "float64"):  # one addition per element: the same sums
        assert_same_bits(x.grad, tx.grad)


@pytest.mark.parametrize("fn,match", [
    (lambda M, x: x.masked_fill(M.ones(3, 4), 1.0),
     "only supports boolean masks, but got mask with dtype float"),
    (lambda M, x: x.masked_fill(M.ones(3, 4, dtype=M.uint8), 1.0),
     "but got mask with dtype unsigned char"),
    (lambda M, x: x.masked_fill(M.ones(3, 4, dtype=M.bool), M.ones(2)),
     "only supports a 0-dimensional value tensor"),
    (lambda M, x: x.masked_fill(M.ones(5, dtype=M.bool), 1.0),
     r"The size of tensor a \(5\) must match the size of tensor b \(4\) at non-singleton "
     "dimension 1"),
    (lambda M, x: x.masked_fill_(M.ones(2, 3, 4, dtype=M.bool), 1.0),
     r"output with shape \[3, 4\] doesn't match the broadcast shape \[2, 3, 4\]"),
])
def test_masked_fill_bad_inputs_raise_as_torch(fn, match):
    x = ampy.ones(3, 4)
    before = bits(x)
    with pytest.raises(RuntimeError, match=match):
        fn(ampy, x)
    with pytest.raises(RuntimeError, match=match):
        fn(torch, torch.ones(3, 4))
    np.testing.assert_array_equal(bits(x), before)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_autocast_leaves_these_ops_alone_as_torch(dtype):
    x = sample((3, 4), ampy.float32)
    i = ampy.tensor([[0, 1], [2, 3], [1, 0]])
    with ampy.autocast("cpu", dtype=AMPY_DTYPE[dtype]):
        got = [x.masked_fill(x > 0, 0.0), x.gather(1, i), x.scatter(1, i, 1.0),
               x.scatter_add(1, i, x[:, :2].contiguous()), x.index_select(0, i[0])]
    with torch.autocast("cpu", dtype=TORCH_DTYPE[dtype]):
        t, ti = _torch(x), torch.tensor(i.numpy())
        want = [t.masked_fill(t > 0, 0.0), t.gather(1, ti), t.scatter(1, ti, 1.0),
                t.scatter_add(1, ti, t[:, :2].contiguous()), t.index_select(0, ti[0])]
    assert [g.dtype.name for g in got] == [str(w.dtype).split(".")[1] for w in want]


# ---------------------------------------------------------------- where
def test_where_matches_torch():
    c = np.random.default_rng(0).random((3, 4)) > 0.5
    for name in ("float32", "bfloat16", "int64", "bool"):
        a, b = sample((3, 4), AMPY_DTYPE[name]), sample((4,), AMPY_DTYPE[name], seed=1)
        _same(ampy.where(ampy.tensor(c), a, b), torch.where(torch.tensor(c), _torch(a),
                                                            _torch(b)))
        _same(a.where(ampy.tensor(c), 0), _torch(a).where(torch.tensor(c), 0))
    assert ampy.where(ampy.tensor(c), 1.0, 0).dtype.name == \
        str(torch.where(torch.tensor(c), 1.0, 0).dtype).split(".")[1]


@pytest.mark.parametrize("name", ["int64", "int32", "float32", "float64", "float16", "bfloat16"])
def test_where_with_a_non_bool_condition_raises_as_torch(name):
    c = np.array([1, 0, 2])
    x = ampy.ones(3)
    msgs = []
    for M, cond, a in ((ampy, ampy.tensor(c).to(AMPY_DTYPE[name]), x),
                       (torch, torch.tensor(c).to(getattr(torch, name)), torch.ones(3))):
        with pytest.raises(RuntimeError) as e:
            M.where(cond, a, M.zeros(3))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    np.testing.assert_array_equal(x.numpy(), np.ones(3))


def test_where_with_a_uint8_condition_warns_and_selects_as_torch():
    c = np.array([1, 0, 2], np.uint8)
    with pytest.warns(UserWarning, match="uint8 condition tensor"):
        got = ampy.where(ampy.tensor(c), ampy.ones(3), ampy.zeros(3))
    with pytest.warns(UserWarning, match="uint8 condition tensor"):
        want = torch.where(torch.tensor(c), torch.ones(3), torch.zeros(3))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---------------------------------------------------------------- index_select, masked_select
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_index_select_matches_torch(name):
    x = sample((4, 5, 6), AMPY_DTYPE[name])
    tx = _torch(x)
    for dim, idx in ((0, [3, 0, 3]), (-1, [5, 1]), (1, [])):
        ia, it = ampy.tensor(idx, dtype=ampy.int64), torch.tensor(idx, dtype=torch.int64)
        _same(ampy.index_select(x, dim, ia), torch.index_select(tx, dim, it))
        _same(x.transpose(0, 1).index_select(dim, ia.to(ampy.int32)),
              tx.transpose(0, 1).index_select(dim, it.int()))
    _same(x.index_select(1, ampy.tensor(2)), tx.index_select(1, torch.tensor(2)))


def test_index_select_grad_and_errors_as_torch():
    x = sample((4, 3), ampy.float32, specials=False).requires_grad_(True)
    t = _torch(x.detach()).requires_grad_(True)
    x.index_select(0, ampy.tensor([1, 1, 3])).sum().backward()
    t.index_select(0, torch.tensor([1, 1, 3])).sum().backward()
    assert_same_bits(x.grad, t.grad)
    for M, y in ((ampy, ampy.ones(3, 4)), (torch, torch.ones(3, 4))):
        with pytest.raises(IndexError, match="Index is supposed to be a vector"):
            y.index_select(0, M.tensor([[1]]))
        with pytest.raises(RuntimeError, match="int32 or int64 for index"):
            y.index_select(0, M.tensor([1.0]))
        with pytest.raises(IndexError, match="index out of range in self"):
            y.index_select(0, M.tensor([7]))


def test_masked_select_matches_torch():
    x = sample((3, 4), ampy.float32)
    tx = _torch(x)
    for m in (np.random.default_rng(0).random((3, 4)) > 0.5,
              np.random.default_rng(1).random(4) > 0.5,
              np.random.default_rng(2).random((2, 3, 4)) > 0.5):
        _same(x.masked_select(ampy.tensor(m)), tx.masked_select(torch.tensor(m)))
    with pytest.raises(RuntimeError, match="expected BoolTensor for mask"):
        x.masked_select(ampy.ones(3, 4))
    x.requires_grad_(True)
    tx.requires_grad_(True)
    ampy.masked_select(x, x > 0).sum().backward()
    torch.masked_select(tx, tx > 0).sum().backward()
    assert_same_bits(x.grad, tx.grad)


# ---------------------------------------------------------------- one_hot
def test_one_hot_matches_torch():
    a = np.array([[0, 3, 1], [2, 2, 0]])
    _same(F.one_hot(ampy.tensor(a)), torch.nn.functional.one_hot(torch.tensor(a)))
    _same(F.one_hot(ampy.tensor(a), 6), torch.nn.functional.one_hot(torch.tensor(a), 6))
    _same(F.one_hot(ampy.tensor(a).t()), torch.nn.functional.one_hot(torch.tensor(a).t()))
    e = ampy.zeros(0, dtype=ampy.int64)
    assert tuple(F.one_hot(e, 3).shape) == (0, 3)
    for fn, match in ((lambda M: M.nn.functional.one_hot(M.tensor([1.0])), "LongTensor"),
                      (lambda M: M.nn.functional.one_hot(M.tensor([-1])), "non-negative"),
                      (lambda M: M.nn.functional.one_hot(M.tensor([3]), 2), "smaller than"),
                      (lambda M: M.nn.functional.one_hot(M.zeros(0, dtype=M.int64)),
                       "empty tensor")):
        for M in (ampy, torch):
            with pytest.raises(RuntimeError, match=match):
                fn(M)


@requires_cuda
def test_scatter_ops_on_cuda_tensors_give_the_cpu_bits():
    x = sample((3, 4), ampy.float32).cuda()
    i = ampy.tensor([[0, 1], [2, 3], [1, 0]]).cuda()
    assert_same_bits(x.gather(1, i).cpu(), x.cpu().gather(1, i.cpu()))
    assert_same_bits(x.scatter_add(1, i, x[:, :2].contiguous()).cpu(),
                     x.cpu().scatter_add(1, i.cpu(), x.cpu()[:, :2].contiguous()))
    assert_same_bits(x.masked_fill(x > 0, 1.0).cpu(), x.cpu().masked_fill(x.cpu() > 0, 1.0))


def test_the_cuda_formulation_gives_the_kernels_results():
    """CUDA tensors take advanced indexing's kernels (ampy/_scatter.py); the same
    formulation on CPU tensors gives libampy's gather/scatter results."""
    from ampy import _scatter
    x = sample((4, 5, 6), ampy.float32)
    ia, _ = _idx((3, 7, 6), 5)
    assert_same_bits(_scatter._gather_by_index(x, 1, ia), x.gather(1, ia))
    src = sample((4, 8, 6), ampy.float32, seed=1, specials=False)
    xs = sample((4, 5, 6), ampy.float32, specials=False)
    ip, _ = _line_perm((4, 3, 6), 1, 5)
    assert_same_bits(_scatter._scatter_by_index(xs.clone(), 1, ip, src, False),
                     xs.scatter(1, ip, src))
    assert_same_bits(_scatter._scatter_by_index(xs.clone(), 1, ia, src, True),
                     xs.scatter_add(1, ia, src))
