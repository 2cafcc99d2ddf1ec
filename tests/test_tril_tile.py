"""tril / triu (and in place), repeat / tile, chunk / split / narrow and type_as
against torch 2.13: element moves, so compared as bits in every dtype."""
import numpy as np
import pytest
import torch

import ampy

from _helpers import (AMPY_DTYPE, DTYPE_NAMES, FLOAT_NAMES, TORCH_DTYPE, assert_same_bits,
                      bits, host_f64, requires_cuda, sample, same_bits_or_both_nan)


def _torch(t):
    return torch.from_numpy(host_f64(t)).to(TORCH_DTYPE[t.dtype.name])


def _same(got, want):
    assert tuple(got.shape) == tuple(want.shape)
    assert same_bits_or_both_nan(got, want)


# ---------------------------------------------------------------- tril / triu
@pytest.mark.parametrize("name", DTYPE_NAMES)
@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (2, 3, 7, 4), (4, 1)])
def test_tril_triu_bits_match_torch(name, shape, cpu_path):
    x = sample(shape, AMPY_DTYPE[name])
    t = _torch(x)
    before = bits(x)
    for d in (0, 1, -1, 3, -4, 100, -100):
        _same(ampy.tril(x, d), torch.tril(t, d))
        _same(x.triu(d), t.triu(d))
    np.testing.assert_array_equal(bits(x), before)


@pytest.mark.parametrize("name", ["float32", "bfloat16", "bool"])
def test_tril_triu_in_place_and_strided(name):
    base = sample((6, 9), AMPY_DTYPE[name])
    tb = _torch(base)
    for f in (lambda b: b.t(), lambda b: b[1::2, ::2], lambda b: b.reshape(3, 2, 9)[:, :, 1:]):
        _same(f(base).tril(1), f(tb).tril(1))
        y, ty = base.clone(), tb.clone()
        assert f(y).triu_(-1) is not None
        f(ty).triu_(-1)
        _same(y, ty)  # written through the view only
        y, ty = base.clone(), tb.clone()
        f(y).tril_()
        f(ty).tril_()
        _same(y, ty)


def test_tril_empty_and_causal_mask():
    assert tuple(ampy.tril(ampy.ones(0, 3)).shape) == (0, 3)
    assert tuple(ampy.triu(ampy.ones(2, 3, 0)).shape) == (2, 3, 0)
    T = 6
    _same(ampy.tril(ampy.ones(T, T)).view(1, 1, T, T), torch.tril(torch.ones(T, T)).view(1, 1, T, T))


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_tril_triu_grads_as_torch(name):
    x = sample((2, 4, 5), AMPY_DTYPE[name], specials=False).requires_grad_(True)
    t = _torch(x.detach()).requires_grad_(True)
    g = sample((2, 4, 5), AMPY_DTYPE[name], seed=1, specials=False)
    (ampy.tril(x, 1) + ampy.triu(x * 2, -1)).backward(g)
    (torch.tril(t, 1) + torch.triu(t * 2, -1)).backward(_torch(g))
    assert_same_bits(x.grad, t.grad)


def test_tril_bad_inputs_raise_as_torch():
    for M in (ampy, torch):
        with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 "
                                               "dimensions"):
            M.tril(M.ones(3))
        with pytest.raises(RuntimeError, match="triu: input tensor must have at least 2"):
            M.ones(3).triu_()
        with pytest.raises(TypeError, match="diagonal"):
            M.tril(M.ones(3, 3), 1.5)


def test_tril_leaf_in_place_raises_and_autocast_keeps_dtype():
    x = ampy.ones(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.tril_()
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        assert ampy.tril(ampy.ones(3, 3)).dtype is ampy.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.tril(torch.ones(3, 3)).dtype == torch.float32


# ---------------------------------------------------------------- repeat / tile
@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64", "int64", "bool"])
def test_repeat_and_tile_match_torch(name):
    x = sample((2, 3), AMPY_DTYPE[name])
    t = _torch(x)
    for reps in ((2, 1), (1, 3), (2, 2, 2), (1, 0), (3, 1, 1, 2)):
        _same(x.repeat(*reps), t.repeat(*reps))
        _same(x.repeat(reps), t.repeat(reps))
    for dims in ((2,), (2, 2), (3, 1, 2), ()):
        _same(ampy.tile(x, dims), torch.tile(t, dims))
        _same(x.tile(*dims) if dims else x.tile(dims), t.tile(*dims) if dims else t.tile(dims))
    _same(x.t().repeat(2, 3), t.t().repeat(2, 3))
    _same(ampy.tensor(1.5).repeat(3), torch.tensor(1.5).repeat(3))


def test_repeat_grad_and_errors_as_torch():
    x = sample((2, 3), ampy.float32, specials=False).requires_grad_(True)
    t = _torch(x.detach()).requires_grad_(True)
    g = sample((4, 2, 9), ampy.float32, seed=1, specials=False)
    x.repeat(4, 1, 3).backward(g)
    t.repeat(4, 1, 3).backward(_torch(g))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-6)
    for M in (ampy, torch):
        with pytest.raises(RuntimeError, match="can not be smaller than number of dimensions"):
            M.ones(2, 3).repeat(2)
        with pytest.raises(RuntimeError, match=r"negative dimension -2: \[-2, 6\]"):
            M.ones(2, 3).repeat(-1, 2)


# ---------------------------------------------------------------- chunk / split / narrow
def test_chunk_split_narrow_functions_match_torch():
    a, t = ampy.arange(10), torch.arange(10)
    for n in (1, 3, 4, 6, 11):
        assert [c.tolist() for c in ampy.chunk(a, n)] == [c.tolist() for c in torch.chunk(t, n)]
    for s in (3, [3, 7], [0, 10]):
        assert [c.tolist() for c in ampy.split(a, s)] == [c.tolist() for c in torch.split(t, s)]
    m, tm = ampy.arange(12).reshape(3, 4), torch.arange(12).reshape(3, 4)
    assert [c.tolist() for c in ampy.chunk(m, 2, -1)] == [c.tolist() for c in
                                                          torch.chunk(tm, 2, -1)]
    assert ampy.narrow(m, 1, 1, 2).tolist() == torch.narrow(tm, 1, 1, 2).tolist()
    assert ampy.narrow(m, 0, ampy.tensor(1), 2).tolist() == \
        torch.narrow(tm, 0, torch.tensor(1), 2).tolist()
    for M, x in ((ampy, a), (torch, t)):
        with pytest.raises(RuntimeError, match="chunk expects `chunks` to be greater than 0"):
            M.chunk(x, 0)
        with pytest.raises(RuntimeError, match=r"start \(2\) \+ length \(9\) exceeds"):
            M.narrow(x, 0, 2, 9)
        with pytest.raises(IndexError, match="Dimension out of range"):
            M.narrow(x, 1, 0, 1)


def test_qkv_split_grad_as_torch():
    x = sample((2, 5, 12), ampy.float32, specials=False).requires_grad_(True)
    t = _torch(x.detach()).requires_grad_(True)
    q, k, v = x.split(4, dim=2)
    tq, tk, tv = t.split(4, dim=2)
    (q * 1 + k * 2 + v * 3).sum().backward()
    (tq * 1 + tk * 2 + tv * 3).sum().backward()
    assert_same_bits(x.grad, t.grad)


# ---------------------------------------------------------------- type_as
def test_type_as_matches_torch():
    x = sample((2, 3), ampy.float32)
    for name in ("float16", "bfloat16", "int64", "float32"):
        other = ampy.zeros(1, dtype=AMPY_DTYPE[name])
        _same(x.type_as(other), _torch(x).type_as(torch.zeros(1, dtype=TORCH_DTYPE[name])))
    assert x.type_as(ampy.zeros(1)) is x
    y = ampy.ones(2, requires_grad=True)
    y.type_as(ampy.zeros(1, dtype=ampy.float64)).sum().backward()
    assert y.grad.dtype is ampy.float32 and y.grad.tolist() == [1.0, 1.0]


@requires_cuda
def test_tril_on_cuda_tensors_gives_the_cpu_bits():
    x = sample((4, 4), ampy.float32).cuda()
    assert_same_bits(x.tril(1).cpu(), x.cpu().tril(1))
    assert_same_bits(x.repeat(2, 1).cpu(), x.cpu().repeat(2, 1))


def test_the_cuda_formulation_gives_the_kernels_results():
    """CUDA tensors take where(mask, x, 0) (ampy/_tril.py); on CPU tensors it gives
    libampy's tril/triu bits."""
    from ampy import _tril
    x = sample((2, 4, 6), ampy.bfloat16)
    for d in (-5, -1, 0, 2, 7):
        assert_same_bits(_tril._tril_by_mask(x, d, False, False), x.tril(d))
        assert_same_bits(_tril._tril_by_mask(x.clone(), d, True, True), x.triu(d))
