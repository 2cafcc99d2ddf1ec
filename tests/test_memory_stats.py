"""ampy.memory_stats() and friends: the host allocator's counters (csrc/alloc.c)
against allocations of known size."""
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import ampy


def _settle():
    gc.collect()
    return ampy.memory_allocated()


@pytest.mark.parametrize("shape,dtype,nbytes", [((1000,), ampy.float32, 4000),
                                                ((3, 7), ampy.float16, 42),
                                                ((1 << 19,), ampy.float64, 1 << 22),  # cached size
                                                ((5,), ampy.int64, 40)])
def test_allocated_counts_the_requested_bytes(shape, dtype, nbytes):
    base = _settle()
    ampy.reset_peak_memory_stats()
    assert ampy.max_memory_allocated() == base
    t = ampy.empty(shape, dtype=dtype)
    assert t.numel() * t.element_size() == nbytes
    assert ampy.memory_allocated() - base == nbytes
    assert ampy.max_memory_allocated() - base == nbytes
    s = ampy.memory_stats()
    assert s["allocated_bytes"] == base + nbytes and s["peak_allocated_bytes"] == base + nbytes
    del t
    assert _settle() == base
    assert ampy.max_memory_allocated() - base == nbytes  # the peak stays until a reset
    ampy.reset_peak_memory_stats()
    assert ampy.max_memory_allocated() == base


def test_peak_of_a_sequence():
    base = _settle()
    ampy.reset_peak_memory_stats()
    a = ampy.empty(4096)                      # 16 KiB
    b = ampy.empty(1024, dtype=ampy.float16)  # 2 KiB
    assert ampy.memory_allocated() - base == 16384 + 2048
    v = a.t()                                 # a view: no storage
    assert ampy.memory_allocated() - base == 16384 + 2048
    del a, v
    _settle()
    c = ampy.empty(512)                       # 2 KiB: the peak stays at a + b
    assert ampy.memory_allocated() - base == 2048 + 2048
    assert ampy.max_memory_allocated() - base == 16384 + 2048
    del b, c
    assert _settle() == base


def test_large_blocks_are_cached_and_reused():
    base = _settle()
    n = 3 << 20  # 12 MiB of float32: over the cache threshold
    t = ampy.empty(n)
    addr = t.data_ptr() if hasattr(t, "data_ptr") else None
    del t
    assert _settle() == base
    assert ampy.memory_cached() >= 4 * n
    hits = ampy.memory_stats()["cache_hits"]
    t = ampy.empty(n)
    assert ampy.memory_stats()["cache_hits"] == hits + 1
    if addr is not None:
        assert t.data_ptr() == addr
    del t
    _settle()


def test_stats_keys_and_types():
    s = ampy.memory_stats()
    assert set(s) == {"allocated_bytes", "peak_allocated_bytes", "cached_bytes", "live_blocks",
                      "cache_hits", "cache_misses"}
    assert all(isinstance(v, int) and v >= 0 for v in s.values())
    for name in ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_cached",
                 "reset_peak_memory_stats"):
        assert name in ampy.__all__


def test_numpy_interop_does_not_confuse_the_counters():
    base = _settle()
    arr = np.ones(1000, np.float32)
    x = ampy.from_numpy(arr)  # shares NumPy's memory: no ampy storage
    assert ampy.memory_allocated() == base
    y = x + 1                 # a new ampy storage
    assert ampy.memory_allocated() - base == 4000
    z = y.numpy()             # a view of y's storage
    del x, y
    assert ampy.memory_allocated() - base == 4000  # z keeps it alive
    del z
    assert _settle() == base


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="transparent huge pages: Linux")
def test_blocks_of_2_mib_or_more_start_on_a_huge_page_boundary():
    """Large blocks are 2 MiB aligned (so that MADV_HUGEPAGE can back them
    with huge pages); smaller ones keep the 64-byte alignment; the data and
    the counters are as for any block."""
    big = ampy.empty(1 << 20)  # 4 MiB of float32
    assert big.data_ptr() % (2 << 20) == 0
    big.fill_(3.0)
    assert float(big.sum()) == 3.0 * (1 << 20)
    small = ampy.empty(1000)
    assert small.data_ptr() % 64 == 0
    del big, small


def test_huge_pages_can_be_turned_off():
    """AMPY_NO_HUGEPAGES=1: no 2 MiB alignment asked for (a fresh process)."""
    code = ("import ampy; ampy.empty_cache() if hasattr(ampy, 'empty_cache') else None; "
            "ts = [ampy.empty((1 << 20) + 16 * i) for i in range(8)]; "
            "print(sum(t.data_ptr() % (2 << 20) != 0 for t in ts))")
    env = dict(os.environ, AMPY_NO_HUGEPAGES="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert int(out.stdout.strip()) > 0
