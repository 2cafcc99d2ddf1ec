"""Tensors beyond 2^31 elements: casts and the finite check / unscale.

int32 index overflow would show up as wrong (or missing) values at and after
element 2^31, or at the end. The sources are NumPy zeros (calloc: pages are
only mapped when touched, so an 8 GB float32 source costs almost no memory)
wrapped zero-copy with ampy.from_numpy; sentinel values (inf, NaN, max finite,
subnormals, -0, ordinary numbers) sit around index 2^31, at the very end and
at a strided sample over the whole range. Results are checked as bits against
NumPy / ml_dtypes conversions of the same values.

- test_huge_half_cast_and_finite (~4.3 GB resident, 20-70 s; runs with
  AMPY_TEST_LONG=1): float16 -> bfloat16 of 2^31 + 17 elements, then
  non_finite_check_and_unscale_ on the 4.3 GB result (check only, then unscale by 0.5), with single non-finite
  values placed at 2^31 + 1 and at the end.
- test_huge_float32_casts (slow, ~9 GB resident; runs with AMPY_TEST_LONG=1):
  float32 -> float16 / bfloat16 and float16 -> float32, a transposed
  (non-contiguous) cast of > 2^31 elements, the multi-tensor check over an
  [fp32, fp16] list whose combined length passes 2^32, and float32 unscale.
Each test is skipped, saying why, when /proc/meminfo's MemAvailable is short.
"""
import gc

import ml_dtypes
import numpy as np
import pytest

import ampy
from ampy.amp import functional as AF

from _helpers import bits, long_run

N = 2 ** 31 + 17
GB = 1 << 30


def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def need_memory(nbytes):
    have = mem_available()
    if have < nbytes:
        pytest.skip(f"needs {nbytes / GB:.1f} GB of free memory (MemAvailable "
                    f"{have / GB:.1f} GB)")


def positions(n):
    """Indices around 2^31 (and 2^31 +- 1 block of 16 / 32 / 64 elements, where
    SIMD bodies and tails meet), the last elements, and a strided sample."""
    near = np.arange(2 ** 31 - 70, 2 ** 31 + 70)
    ends = np.arange(n - 40, n)
    sample = np.arange(5, n, 2 ** 20 + 7)
    p = np.unique(np.concatenate([near, ends, sample, [0, 1, 2 ** 30, 2 ** 32 % n]]))
    return p[p < n]


SENTINELS = [np.inf, -np.inf, np.nan, 65504.0, -65504.0, 6e-8, 1e-5, -0.0, 1.0, -2.5, 3.14159,
             1e30, 3.0e38, 1.5e-40, 0.1, 255.0]


def fill(view, pos, dtype):
    """Writes sentinel values (cycled) at pos; returns them as `dtype`."""
    vals = np.array([SENTINELS[i % len(SENTINELS)] for i in range(len(pos))], np.float64)
    with np.errstate(all="ignore"):
        v = vals.astype(np.float32).astype(dtype)
    view[pos] = v
    return v


def assert_same_bits(got, want, what):
    """Bits equal, except that any NaN may stand for any NaN."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan), f"{what}: NaN positions differ"
    bad = np.nonzero(bits(got)[~nan] != bits(want)[~nan])[0]
    assert bad.size == 0, f"{what}: {bad.size} elements differ, first {got[~nan][bad[:5]]} " \
                          f"!= {want[~nan][bad[:5]]}"


def zero_elsewhere(arr, pos, rng, k=2000):
    """Random elements not in pos are still zero (nothing else was written)."""
    idx = np.setdiff1d(rng.integers(0, arr.size, k), pos)
    assert not np.any(arr[idx].astype(np.float64)), "an element that should be 0 is not"


def finite(tensors, inv):
    found = ampy.zeros(1)
    AF.non_finite_check_and_unscale_(tensors, found, ampy.tensor([inv]))
    return float(found.numpy()[0])


@long_run("~4.3 GB and 20-70 s")
def test_huge_half_cast_and_finite():
    need_memory(int(2.4 * N * 2))  # the 4.3 GB result + room for the source's touched pages
    rng = np.random.default_rng(0)
    pos = positions(N)
    src_np = np.zeros(N, np.float16)
    vals = fill(src_np, pos, np.float16)
    src = ampy.from_numpy(src_np)
    assert src.numel() == N

    out = src.to(ampy.bfloat16)
    assert out.dtype == ampy.bfloat16 and out.shape == (N,)
    o = out.numpy()
    with np.errstate(all="ignore"):
        want = vals.astype(np.float32).astype(ml_dtypes.bfloat16)
    assert_same_bits(o[pos], want, "float16 -> bfloat16")
    zero_elsewhere(o, pos, rng)
    del src, src_np
    gc.collect()

    # check only (inv = 1): the sentinels hold inf/NaN; nothing is written
    before = o[pos].copy()
    assert finite([out], 1.0) == 1.0
    assert_same_bits(o[pos], before, "check-only pass wrote")
    # a single non-finite value just past 2^31, then only at the very end, then none
    o[pos] = 0
    for k in (2 ** 31 + 1, N - 1):
        o[k] = np.inf if k < N - 1 else np.nan
        assert finite([out], 1.0) == 1.0, f"non-finite value at {k} missed"
        o[k] = 0
    assert finite([out], 1.0) == 0.0

    # unscale by 0.5: finite sentinels, each rounded once
    fin = np.isfinite(want.astype(np.float64))
    o[pos[fin]] = want[fin]
    assert finite([out], 0.5) == 0.0
    with np.errstate(all="ignore"):
        want_half = (want[fin].astype(np.float32) * np.float32(0.5)).astype(ml_dtypes.bfloat16)
    assert_same_bits(o[pos[fin]], want_half, "unscale x0.5")
    zero_elsewhere(o, pos, rng)


@long_run("~9 GB and a few minutes")
def test_huge_float32_casts():
    need_memory(int(1.3 * N * 4))  # the largest result (float32) + touched source pages
    rng = np.random.default_rng(1)
    pos = positions(N)
    src_np = np.zeros(N, np.float32)
    vals = fill(src_np, pos, np.float32)
    src = ampy.from_numpy(src_np)
    for dt, npdt in ((ampy.bfloat16, ml_dtypes.bfloat16), (ampy.float16, np.float16)):
        out = src.to(dt)
        o = out.numpy()
        with np.errstate(all="ignore"):
            want = vals.astype(npdt)
        assert_same_bits(o[pos], want, f"float32 -> {dt}")
        zero_elsewhere(o, pos, rng)
        del out, o
        gc.collect()
    del src, src_np
    gc.collect()

    # float16 -> float32 from a lazily zeroed source (only the result is resident)
    h = np.zeros(N, np.float16)
    fill(h, pos, np.float16)
    half = ampy.from_numpy(h)
    back = half.float()
    b = back.numpy()
    assert_same_bits(b[pos], h[pos].astype(np.float32), "float16 -> float32")
    zero_elsewhere(b, pos, rng)

    # the two tensors together pass 2^32 elements: non-finite values found in
    # either, anywhere; then unscale the float32 one by 2^-3
    assert finite([back, half], 1.0) == 1.0
    fin = np.isfinite(h[pos].astype(np.float64))
    b[pos[~fin]] = 0
    h[pos[~fin]] = 0
    assert finite([back, half], 1.0) == 0.0
    for arr, k in ((h, N - 1), (b, 2 ** 31 + 3), (h, 2 ** 31)):
        arr[k] = np.inf
        assert finite([back, half], 1.0) == 1.0, f"inf at {k} missed"
        arr[k] = 0
    bb = b[pos].copy()
    assert finite([back], 0.125) == 0.0
    assert_same_bits(b[pos], bb * np.float32(0.125), "unscale float32")
    zero_elsewhere(b, pos, rng)
    del back, b
    gc.collect()

    # a transposed (non-contiguous) view with > 2^31 elements
    rows, cols = (2 ** 31 + 1) // 3, 3  # 2^31 + 1 = 3 * 715827883
    assert 2 ** 31 < rows * cols <= N
    flat = h[: rows * cols].reshape(rows, cols)
    tb = ampy.from_numpy(flat).T.to(ampy.bfloat16)
    assert tb.shape == (cols, rows)
    tbn = tb.numpy()
    inside = pos[pos < rows * cols]
    i = np.concatenate([inside // cols, rng.integers(0, rows, 3000)])
    j = np.concatenate([inside % cols, rng.integers(0, cols, 3000)])
    assert_same_bits(tbn[j, i], flat[i, j].astype(np.float32).astype(ml_dtypes.bfloat16),
                     "transposed float16 -> bfloat16")
