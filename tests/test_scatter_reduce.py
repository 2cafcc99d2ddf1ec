"""scatter_reduce / Tensor.scatter_reduce(_) and scatter(..., reduce=) against
torch 2.13 CPU.

The forward combines each element with its src values in index order, as
torch's serial CPU loop does (float16/bfloat16 in float, rounded once;
"mean" divides by the count in the input's dtype, as torch), so the results
are compared as bits in every dtype. The gradients are torch's
scatter_reduce_backward formulas built from the same ops: float32/float64
bits too where they run the same arithmetic (checked here), the half types
within 2 ulps (their intermediate roundings may land in different ops).
"""
import warnings

import numpy as np
import pytest
import torch

import ampy

from _helpers import (AMPY_DTYPE, TORCH_DTYPE, assert_close_ulps, assert_same_bits, bits,
                      host_f64, requires_cuda, sample, same_bits_or_both_nan)

REDUCES = ("sum", "prod", "mean", "amax", "amin")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8")


def _torch(t):
    return torch.from_numpy(np.array(host_f64(t))).to(TORCH_DTYPE[t.dtype.name])


def _idx(shape, high, seed=0):
    a = np.random.default_rng(seed).integers(0, high, size=shape)
    return ampy.tensor(a), torch.tensor(a)


def _values(shape, dt, seed, reduce):
    """Values whose products stay finite (prod) and with ties (amax/amin: a
    few distinct values), zeros included."""
    rng = np.random.default_rng(seed)
    if reduce == "prod":
        a = rng.choice([0.0, 0.5, -0.75, 1.25, 1.5, -2.0], size=shape)
    elif reduce in ("amax", "amin"):
        a = rng.integers(-3, 4, size=shape).astype(np.float64)
    else:
        a = rng.standard_normal(shape) * 3
    if AMPY_DTYPE[dt] in (ampy.int64, ampy.int32, ampy.uint8):
        a = np.abs(np.round(a * (1 if reduce == "prod" else 10)))
    return ampy.from_numpy(a).to(AMPY_DTYPE[dt])


def _same(got, want):
    assert tuple(got.shape) == tuple(want.shape)
    assert same_bits_or_both_nan(got, want)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_forward_bits_as_torch(cpu_path, dt, reduce, include_self):
    x = _values((5, 6, 4), dt, 0, reduce)
    src = _values((5, 9, 4), dt, 1, reduce)
    ia, it = _idx((4, 9, 3), 6)
    for dim in (1, -2):
        got = x.scatter_reduce(dim, ia, src, reduce, include_self=include_self)
        want = _torch(x).scatter_reduce(dim, it, _torch(src), reduce,
                                        include_self=include_self)
        _same(got, want)
    y = x.clone()
    assert y.scatter_reduce_(0, ia[:, :6] % 5, src, reduce, include_self=include_self) is y
    _same(y, _torch(x).scatter_reduce_(0, it[:, :6] % 5, _torch(src), reduce,
                                       include_self=include_self))


@pytest.mark.parametrize("reduce", REDUCES)
def test_long_lines_sum_in_index_order(reduce):
    """Many values into few targets: the order of combination shows in the bits."""
    x = sample((3, 2), ampy.float32, specials=False)
    src = (sample((3, 500), ampy.float32, seed=1, specials=False) * 0.01 + 1.0) \
        if reduce == "prod" else sample((3, 500), ampy.float32, seed=1, specials=False)
    ia, it = _idx((3, 500), 2)
    for dt in ("float32", "bfloat16", "float16"):
        a, s = x.to(AMPY_DTYPE[dt]), src.to(AMPY_DTYPE[dt])
        _same(ampy.scatter_reduce(a, 1, ia, s, reduce),
              torch.scatter_reduce(_torch(a), 1, it, _torch(s), reduce))


def test_nan_wins_amax_amin_and_aliases():
    x = ampy.tensor([1.0, float("nan"), 3.0, -1.0])
    src = ampy.tensor([float("nan"), 2.0, 5.0, -7.0, 0.5])
    ia, it = _idx((5,), 4, seed=3)
    for reduce in ("amax", "amin", "max", "min"):
        for inc in (True, False):
            _same(x.scatter_reduce(0, ia, src, reduce, include_self=inc),
                  _torch(x).scatter_reduce(0, it, _torch(src), reduce, include_self=inc))


def test_strided_inputs(cpu_path):
    x = sample((6, 5), ampy.float32, specials=False)
    src = sample((7, 12), ampy.float32, seed=1, specials=False)
    ia, it = _idx((6, 5), 6, seed=2)
    for reduce in REDUCES:
        got = x.t().scatter_reduce(1, ia.t()[:, ::2], src.t()[::2], reduce, include_self=False)
        want = _torch(x).t().scatter_reduce(1, it.t()[:, ::2], _torch(src).t()[::2], reduce,
                                            include_self=False)
        _same(got, want)


def _grads(M, x, src, index, reduce, include_self, g, dim=1):
    x = x.clone().requires_grad_()
    src = src.clone().requires_grad_()
    out = M.scatter_reduce(x, dim, index, src, reduce, include_self=include_self)
    out.backward(g)
    return out, x.grad, src.grad


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dt", ["float32", "float64", "bfloat16", "float16"])
def test_backward_as_torch(reduce, include_self, dt):
    """sum: the gradient itself and its gather; mean: divided by the count
    (self included when it is); prod: exclusive products, one zero and
    several zeros per target; amax/amin: split evenly among the tied values
    (input's own included); include_self=False zeroes input's gradient at the
    indexed positions."""
    x = _values((4, 5), dt, 0, reduce)
    src = _values((4, 7), dt, 1, reduce)
    ia, it = _idx((4, 7), 5, seed=4)
    g = sample((4, 5), AMPY_DTYPE[dt], seed=5, specials=False)
    got = _grads(ampy, x, src, ia, reduce, include_self, g)
    want = _grads(torch, _torch(x), _torch(src), it, reduce, include_self, _torch(g))
    _same(got[0], want[0])
    for a, t in zip(got[1:], want[1:]):
        if dt in ("float32", "float64"):
            _same(a, t)
        else:
            assert_close_ulps(a, t, dt, ulps=2)


def test_prod_gradient_with_zeros():
    x = ampy.tensor([[0.0, 2.0, 3.0, 0.0]])
    src = ampy.tensor([[0.0, 4.0, 0.0, 0.0, 5.0, 0.5]])
    ia, it = ampy.tensor([[1, 1, 2, 2, 3, 3]]), torch.tensor([[1, 1, 2, 2, 3, 3]])
    g = ampy.tensor([[1.0, -2.0, 0.5, 3.0]])
    for inc in (True, False):
        got = _grads(ampy, x, src, ia, "prod", inc, g)
        want = _grads(torch, _torch(x), _torch(src), it, "prod", inc, _torch(g))
        for a, t in zip(got, want):
            _same(a, t)


def test_second_derivative_as_torch():
    x = _values((3, 4), "float64", 0, "mean")
    src = _values((3, 5), "float64", 1, "mean")
    ia, it = _idx((3, 5), 4, seed=6)
    for reduce in ("sum", "mean", "amax", "prod"):
        res = []
        for M, xx, ss, ii in ((ampy, x, src, ia), (torch, _torch(x), _torch(src), it)):
            xx, ss = xx.clone().requires_grad_(), ss.clone().requires_grad_()
            out = M.scatter_reduce(xx * xx, 1, ii, ss * ss, reduce, include_self=False)
            gx, gs = M.autograd.grad(out.sum(), (xx, ss), create_graph=True)
            res.append(M.autograd.grad((gx * gx).sum() + (gs * gs).sum(), (xx, ss)))
        for a, t in zip(*res):
            np.testing.assert_allclose(host_f64(a), t.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("adt", ["bfloat16", "float16"])
def test_autocast_leaves_the_dtype(adt):
    """scatter_reduce is on none of torch's autocast lists: it runs in the
    input's dtype under autocast on both sides."""
    x = sample((3, 4), ampy.float32, specials=False)
    src = sample((3, 4), ampy.float32, seed=1, specials=False)
    ia, it = _idx((3, 4), 4)
    with ampy.autocast("cpu", dtype=AMPY_DTYPE[adt]):
        got = ampy.scatter_reduce(x, 1, ia, src, "mean")
    with torch.autocast("cpu", dtype=TORCH_DTYPE[adt]):
        want = torch.scatter_reduce(_torch(x), 1, it, _torch(src), "mean")
    assert got.dtype.name == str(want.dtype).split(".")[-1] == "float32"
    _same(got, want)


def test_empty():
    x = ampy.zeros((0, 3))
    assert tuple(x.scatter_reduce(0, ampy.zeros((0, 3), dtype=ampy.int64), x, "amax").shape) \
        == (0, 3)
    y = sample((2, 3), ampy.float32)
    e = ampy.zeros((2, 0), dtype=ampy.int64)
    _same(y.scatter_reduce(1, e, y, "prod", include_self=False),
          _torch(y).scatter_reduce(1, torch.zeros((2, 0), dtype=torch.int64), _torch(y), "prod",
                                   include_self=False))


# ---- scatter(..., reduce=) --------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_argument_bits_as_torch(cpu_path, dt, reduce):
    x = _values((4, 6), dt, 0, "prod")
    src = _values((4, 8), dt, 1, "prod")
    ia, it = _idx((3, 8), 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        want = torch.scatter(_torch(x), 1, it, _torch(src), reduce=reduce)
        want_v = _torch(x).scatter_(0, it[:, :6] % 4, 1.5, reduce=reduce)
    _same(ampy.scatter(x, 1, ia, src, reduce=reduce), want)
    y = x.clone()
    assert y.scatter_(0, ia[:, :6] % 4, 1.5, reduce=reduce) is y
    _same(y, want_v)


def test_scatter_reduce_argument_warns_and_has_no_gradient_as_torch():
    from ampy import _scatter
    _scatter._warned_reduce.clear()
    x = ampy.ones(4, requires_grad=True)
    tx = torch.ones(4, requires_grad=True)
    i, ti = ampy.tensor([0, 1, 1]), torch.tensor([0, 1, 1])
    with pytest.warns(UserWarning, match="reduce argument of torch.scatter with Tensor src"):
        y = ampy.scatter(x, 0, i, ampy.ones(3), reduce="multiply")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ty = torch.scatter(tx, 0, ti, torch.ones(3), reduce="multiply")
    assert y.requires_grad and ty.requires_grad
    for out in (y, ty):
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
            out.sum().backward()


def test_multiply_on_host_copies_gives_the_kernels_result():
    """The CUDA tensors' reduce="multiply" path, run here on CPU tensors."""
    from ampy import _scatter
    x = _values((4, 6), "float32", 0, "prod")
    src = _values((4, 8), "float32", 1, "prod")
    ia, _ = _idx((3, 8), 6)
    assert_same_bits(_scatter._multiply_on_host(x.clone(), 1, ia, src),
                     ampy.scatter(x, 1, ia, src, reduce="multiply"))


# ---- bad inputs ----------------------------------------------------------------------
def _bad_calls(M, x, src, i):
    oob = M.tensor([[0, 5, 1]])
    return [
        (lambda: x.scatter_reduce(1, i, src, "foo"),
         "reduce argument must be either sum, prod, mean, amax or amin, got foo"),
        (lambda: x.scatter_reduce(1, i, src, "add"), "got add"),
        (lambda: x.scatter_reduce_(1, oob, src, "amax", include_self=False),
         "index 5 is out of bounds for dimension 1 with size 4"),
        (lambda: x.scatter_reduce_(1, oob, src, "sum"), "index 5 is out of bounds"),
        (lambda: x.scatter_reduce(1, i, src.double(), "sum"),
         "Expected self.dtype to be equal to src.dtype"),
        (lambda: x.scatter_reduce(1, i.float(), src, "sum"),
         "Expected dtype int32/int64 for index"),
        (lambda: x.scatter_reduce(1, i[0], src, "sum"),
         "Index tensor must have the same number of dimensions as self tensor"),
        (lambda: x.scatter_reduce(1, i, 2.0, "sum"), "argument 'src'"),
        (lambda: x.scatter_reduce(1, i, src, "sum", include_self=1), "include_self"),
        (lambda: x.scatter_(1, i, src, reduce="mean"),
         "reduce argument must be either add or multiply"),
        (lambda: x.scatter_(1, oob, 2.0, reduce="multiply"), "index 5 is out of bounds"),
        (lambda: (x > 0).scatter_reduce(1, i, src > 0, "mean"),
         "scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'"),
    ]


def test_bad_inputs_raise_as_torch_and_leave_inputs_unchanged():
    x = sample((2, 4), ampy.float32)
    src = sample((2, 3), ampy.float32, seed=1)
    i = ampy.tensor([[0, 1, 1], [3, 2, 0]])
    before = [bits(t) for t in (x, src, i)]
    tx, tsrc, ti = _torch(x), _torch(src), torch.tensor(i.numpy())
    for (fn, match), (tfn, _) in zip(_bad_calls(ampy, x, src, i), _bad_calls(torch, tx, tsrc, ti)):
        with pytest.raises(Exception) as texc, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            tfn()
        with pytest.raises(type(texc.value), match=match.replace("(", r"\(")):
            fn()
        assert match in str(texc.value) or type(texc.value) is TypeError
    for t, b in zip((x, src, i), before):
        np.testing.assert_array_equal(bits(t), b)


@requires_cuda
def test_cuda_tensors_give_the_cpu_bits():
    x = _values((4, 6), "float32", 0, "prod")
    src = _values((4, 8), "float32", 1, "prod")
    ia, _ = _idx((3, 8), 6)
    for reduce in REDUCES:
        assert_same_bits(x.cuda().scatter_reduce(1, ia.cuda(), src.cuda(), reduce).cpu(),
                         x.scatter_reduce(1, ia, src, reduce))
    for reduce in ("add", "multiply"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            assert_same_bits(x.cuda().scatter(1, ia.cuda(), src.cuda(), reduce=reduce).cpu(),
                             x.scatter(1, ia, src, reduce=reduce))
