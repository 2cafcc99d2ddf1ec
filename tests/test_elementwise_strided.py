"""Element-wise ops and casts on transposed / permuted operands: the tiled
traversal of csrc/iter.c (ampy_iter_run_ew), checked bit for bit against the
same op on contiguous copies made by NumPy, at 1 and 2 threads."""
import numpy as np
import pytest
import torch

import ampy

from _helpers import NP_DTYPE as NP

FLOATS = ["float32", "float16", "bfloat16", "float64"]
ALL = FLOATS + ["int64", "int32", "uint8", "bool"]

# ---- transposed / permuted operands (tiled traversal) ----------------------------------------
# The element-wise iterator walks transposed operands in 2-d tiles through a small buffer and
# reorders dims by stride; each result must equal, bit for bit, the same op on contiguous
# copies made by NumPy (a separate code path), at 1 and 2 threads, at tile edges (odd sizes).
def _src(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("uint8", "int32", "int64"):
        return rng.integers(0, 100, size=shape).astype(NP[dtype])
    x = rng.normal(size=shape) * 3
    x.flat[::97] = 0.0
    return x.astype(NP[dtype])


def _same_bits(got, ref):
    g, r = np.ascontiguousarray(got.numpy()), np.ascontiguousarray(ref.numpy())
    assert g.dtype == r.dtype and g.shape == r.shape
    gb, rb = g.view(np.uint8).reshape(g.shape + (-1,)), r.view(np.uint8).reshape(r.shape + (-1,))
    bad = (gb != rb).any(-1)
    assert not bad.any(), f"{bad.sum()} elements differ, first at {np.argwhere(bad)[0]}"


@pytest.fixture(params=[1, 2], ids=["t1", "t2"])
def threads(request):
    old = ampy.get_num_threads()
    ampy.set_num_threads(request.param)
    yield request.param
    ampy.set_num_threads(old)


TSHAPE = (300, 257)  # > 2 x 32768 elements (splits at 2 threads), not a multiple of any tile


@pytest.mark.parametrize("dtype", ALL)
def test_transposed_unary_and_scalar_bitwise(dtype, threads, cpu_path):
    x = _src(TSHAPE, dtype, 1)
    a, c = ampy.tensor(x).T, ampy.tensor(np.ascontiguousarray(x.T))
    assert not a.is_contiguous()
    fns = [lambda t: t * 2, lambda t: t + 1, lambda t: ampy.abs(t) if dtype != "bool" else ~t]
    if dtype in FLOATS:
        fns += [ampy.exp, ampy.tanh, ampy.gelu, ampy.erf, ampy.sigmoid, lambda t: t / 3]
    for f in fns:
        _same_bits(f(a), f(c))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32",
                                   "int64", "uint8"])
def test_transposed_binary_bitwise(dtype, threads, cpu_path):
    x, y, z = _src(TSHAPE, dtype, 2), _src(TSHAPE[::-1], dtype, 3), _src(TSHAPE, dtype, 11)
    r, q = _src((1, 300), dtype, 4), _src((257, 1), dtype, 12)
    ax, ay, az, ar, aq = (ampy.tensor(v) for v in (x, y, z, r, q))
    cx = ampy.tensor(np.ascontiguousarray(x.T))
    cz = ampy.tensor(np.ascontiguousarray(z.T))
    ops = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
           ampy.maximum, lambda a, b: ampy.where(a > b, a, b)]
    if dtype in FLOATS:
        ops += [lambda a, b: a / b, lambda a, b: ampy.add(a, b, alpha=0.75), ampy.atan2]
    for f in ops:
        _same_bits(f(ax.T, ay), f(cx, ay))            # transposed + contiguous
        _same_bits(f(ay, ax.T), f(ay, cx))
        _same_bits(f(ax.T, az.T), f(cx, cz))          # both transposed (reordered)
        _same_bits(f(ax.T, ar), f(cx, ar))            # row broadcast
        _same_bits(f(aq, ax.T), f(aq, cx))            # column broadcast


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_permuted_3d_and_sliced_bitwise(dtype, threads):
    x = _src((33, 65, 47), dtype, 5)
    y = _src((47, 33, 65), dtype, 6)
    ax = ampy.tensor(x)
    for perm in [(2, 0, 1), (1, 2, 0), (2, 1, 0), (0, 2, 1)]:
        cx = ampy.tensor(np.ascontiguousarray(x.transpose(perm)))
        yy = np.ascontiguousarray(y.transpose((0, 1, 2)).reshape(-1)[:cx.numel()]
                                  .reshape(cx.shape))
        b = ampy.tensor(yy)
        _same_bits(ax.permute(*perm) * b, cx * b)
        _same_bits(ax.permute(*perm) + 1, cx + 1)
        _same_bits(ax.permute(*perm).to(ampy.float32), cx.to(ampy.float32))
    # strided (every other column) and then transposed
    s = x[:, ::2, :]
    cs = ampy.tensor(np.ascontiguousarray(s.transpose(2, 1, 0)))
    _same_bits(ax[:, ::2, :].permute(2, 1, 0) - 3, cs - 3)


@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16", "float64", "int64",
                                 "uint8", "bool"])
@pytest.mark.parametrize("dst", ["float32", "float16", "bfloat16", "int32", "bool"])
def test_transposed_cast_bitwise(src, dst, threads, cpu_path):
    x = _src((131, 517), src, 7)
    a, c = ampy.tensor(x).T, ampy.tensor(np.ascontiguousarray(x.T))
    _same_bits(a.to(getattr(ampy, dst)), c.to(getattr(ampy, dst)))
    _same_bits(a.contiguous(), c)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_transposed_inplace_and_out(dtype, threads):
    x, y = _src(TSHAPE, dtype, 8), _src(TSHAPE[::-1], dtype, 9)
    ref = ampy.tensor(np.ascontiguousarray(x.T)) + ampy.tensor(y)
    # in-place on a transposed view (dims reordered: x's own memory order)
    a = ampy.tensor(x)
    a.T.add_(ampy.tensor(y))
    _same_bits(a.T, ref)
    # contiguous destination, transposed source
    b = ampy.tensor(y)
    b.add_(ampy.tensor(x).T)
    _same_bits(b, ampy.tensor(y) + ampy.tensor(np.ascontiguousarray(x.T)))
    # transposed out= (written through the tile buffer)
    o = ampy.empty(TSHAPE, dtype=getattr(ampy, dtype))
    ampy.add(ampy.tensor(np.ascontiguousarray(x.T)), ampy.tensor(y), out=o.T)
    _same_bits(o.T, ref)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_transposed_self_overlap_reads_old_values(dtype, threads):
    # x += x.T overlaps partially: the old x.T is read, like torch's x += x.T.clone()
    x = _src((129, 129), dtype, 10)
    a, t = ampy.tensor(x), torch.tensor(x)
    a.add_(a.T)
    t.add_(t.T.clone())
    assert np.array_equal(a.numpy(), t.numpy())
    a = ampy.tensor(x)
    a.T.mul_(a)  # same memory, different strides
    t = torch.tensor(x)
    t.T.mul_(t.clone())
    assert np.array_equal(a.numpy(), t.numpy())


def test_transposed_int_division_by_zero_raises(threads):
    x = np.arange(300 * 257, dtype=np.int64).reshape(300, 257)
    y = np.ones((257, 300), dtype=np.int64)
    y[200, 3] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ampy.floor_divide(ampy.tensor(x).T, ampy.tensor(y))
