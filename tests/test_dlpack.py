"""DLPack interop: zero-copy round trips with torch and NumPy, both capsule
versions, lifetimes, and the protocol's error cases; on a GPU, CUDA DLPack and
__cuda_array_interface__ with torch CUDA tensors."""
import gc

import numpy as np
import pytest
import torch
import torch.utils.dlpack

import ampy

from _helpers import HAS_TORCH_CUDA, bits, requires_cuda, requires_torch_cuda

PAIRS = [(ampy.float32, torch.float32), (ampy.float16, torch.float16),
         (ampy.bfloat16, torch.bfloat16), (ampy.float64, torch.float64),
         (ampy.int64, torch.int64), (ampy.int32, torch.int32), (ampy.uint8, torch.uint8),
         (ampy.bool, torch.bool)]


def _src(tdt, shape=(3, 5)):
    g = torch.Generator().manual_seed(0)
    if tdt == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if tdt.is_floating_point:
        return torch.randn(shape, generator=g).to(tdt)
    return torch.randint(0, 100, shape, generator=g).to(tdt)


@pytest.mark.parametrize("adt,tdt", PAIRS, ids=[str(p[1]) for p in PAIRS])
def test_torch_to_ampy_zero_copy(adt, tdt):
    src = _src(tdt)
    a = ampy.from_dlpack(src)
    assert a.dtype is adt and tuple(a.shape) == tuple(src.shape)
    assert a.data_ptr() == src.data_ptr()
    back = torch.from_dlpack(a)
    assert back.data_ptr() == src.data_ptr()
    np.testing.assert_array_equal(bits(back), bits(src))


@pytest.mark.parametrize("adt,tdt", PAIRS, ids=[str(p[1]) for p in PAIRS])
def test_ampy_to_torch_zero_copy(adt, tdt):
    a = ampy.from_dlpack(_src(tdt)).clone()  # memory owned by ampy
    t = torch.from_dlpack(a)
    assert t.dtype == tdt and t.data_ptr() == a.data_ptr()
    np.testing.assert_array_equal(bits(t), bits(torch.from_dlpack(a)))


def test_writes_are_shared_both_ways():
    a = ampy.zeros(4, 3)
    t = torch.from_dlpack(a)
    t[1, 2] = 7.0
    assert a[1, 2].item() == 7.0
    src = torch.zeros(2, 2)
    b = ampy.from_dlpack(src)
    b[0, 1] = 3.0
    assert src[0, 1].item() == 3.0


def test_strided_views_and_offsets():
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    view = base[1:5:2, 3:9].t()  # offset, step, transpose
    a = ampy.from_dlpack(view)
    assert a.stride() == view.stride()
    np.testing.assert_array_equal(a.numpy(), view.numpy())
    t = torch.from_dlpack(ampy.arange(24.0).reshape(4, 6)[1:, ::2].transpose(0, 1))
    np.testing.assert_array_equal(t.numpy(), np.arange(24.0).reshape(4, 6)[1:, ::2].T)


def test_zero_dim_and_empty():
    s = torch.from_dlpack(ampy.tensor(2.5))
    assert s.shape == () and s.item() == 2.5
    e = ampy.from_dlpack(torch.empty(0, 3))
    assert tuple(e.shape) == (0, 3)
    assert torch.from_dlpack(ampy.zeros(0, 4)).shape == (0, 4)


def test_numpy_round_trip():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = ampy.from_dlpack(x)
    assert a.data_ptr() == x.ctypes.data
    y = np.from_dlpack(a)
    assert y.ctypes.data == x.ctypes.data
    np.testing.assert_array_equal(y, x)
    h = ampy.tensor([1.0, -2.0, 65504.0], dtype=ampy.float16)
    np.testing.assert_array_equal(np.from_dlpack(h), np.array([1.0, -2.0, 65504.0], np.float16))


def test_legacy_and_versioned_capsules():
    a = ampy.arange(6.0)
    legacy = a.__dlpack__()
    assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
    assert torch.utils.dlpack.from_dlpack(legacy).tolist() == a.tolist()
    versioned = a.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    assert ampy.from_dlpack(versioned).tolist() == a.tolist()
    cap = torch.utils.dlpack.to_dlpack(torch.ones(3))
    assert ampy.from_dlpack(cap).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(TypeError):  # a capsule is consumed once
        ampy.from_dlpack(cap)


def test_lifetimes():
    t = torch.arange(1000, dtype=torch.float64)
    a = ampy.from_dlpack(t)
    del t
    gc.collect()
    assert a[999].item() == 999.0  # the producer's memory outlives it
    b = ampy.arange(1000, dtype=ampy.float64)
    tb = torch.from_dlpack(b)
    del b
    gc.collect()
    assert tb[999].item() == 999.0
    unused = ampy.ones(3).__dlpack__()  # dropped unconsumed: freed by its destructor
    del unused
    gc.collect()


def test_device_and_errors():
    a = ampy.ones(2)
    assert a.__dlpack_device__() == (1, 0)
    with pytest.raises(RuntimeError, match="require gradient"):
        ampy.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(TypeError):
        ampy.from_dlpack([1, 2, 3])
    c = a.__dlpack__(copy=True)
    assert torch.utils.dlpack.from_dlpack(c).data_ptr() != a.data_ptr()
    assert not hasattr(a, "__cuda_array_interface__")


def test_many_round_trips_do_not_leak():
    import tracemalloc
    x = ampy.ones(1 << 16)
    for _ in range(50):
        torch.from_dlpack(ampy.from_dlpack(torch.from_dlpack(x)))
    gc.collect()
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(200):
        torch.from_dlpack(ampy.from_dlpack(torch.from_dlpack(x)))
    gc.collect()
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap0, "filename"))
    tracemalloc.stop()
    assert grown < 200_000


# ================================================================ CUDA
# DLPack and __cuda_array_interface__ on a GPU against the CPU and torch CUDA tensors;
# skipped without a GPU.

@requires_cuda
@requires_torch_cuda
def test_dlpack_cuda_zero_copy_both_ways():
    t = torch.arange(12.0, device="cuda").reshape(3, 4)
    a = ampy.from_dlpack(t)
    assert a.is_cuda and a.data_ptr() == t.data_ptr()
    back = torch.from_dlpack(a)
    assert back.device.type == "cuda" and back.data_ptr() == t.data_ptr()
    g = ampy.ones(5, device="cuda")
    tg = torch.from_dlpack(g)
    tg.add_(1)
    assert g.tolist() == [2.0] * 5


@requires_cuda
def test_cuda_array_interface():
    g = ampy.arange(6.0).cuda()
    cai = g.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (6,) and cai["typestr"] == "<f4"
    assert cai["data"][0] == g.data_ptr()
    if HAS_TORCH_CUDA:
        assert torch.as_tensor(g, device="cuda").tolist() == g.tolist()
