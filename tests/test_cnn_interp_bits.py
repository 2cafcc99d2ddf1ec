"""Bilinear interpolation forward, float32 and float64, bit for bit against
torch 2.13 CPU on every CPU path (csrc/cnn_interp.c, ampy/cnn_math.h).

torch's CPU kernel has two forms, and ampy follows both:
- outputs with OH + OW <= 128 (and, on one thread, three channels) take
  its channels-last kernel: the four neighbours weighted by lambda
  products, channels in 64-byte vector blocks summed right to left and
  the remaining channels left to right;
- other outputs take its generic kernel: rows first, then columns.
The grid covers both forms, upsampling and downsampling, sizes and scale
factors, align_corners both ways, recompute_scale_factor both ways, one-row
and one-column inputs and outputs, and channel counts around the vector
block. The backward is checked within its bound in test_cnn_ops.py.
"""
import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")

DTYPES = {"float32": (ampy.float32, np.float32, np.uint32),
          "float64": (ampy.float64, np.float64, np.uint64)}

# (input shape, interpolate keywords)
GRID = {
    "down size": ((2, 3, 17, 50), dict(size=(4, 7))),
    "down size wide": ((1, 2, 40, 300), dict(size=(30, 140))),
    "up size": ((2, 3, 8, 9), dict(size=(33, 20))),
    "up size large": ((1, 2, 8, 9), dict(size=(100, 60))),
    "down scale": ((2, 3, 23, 41), dict(scale_factor=0.3)),
    "down scale large": ((1, 2, 300, 200), dict(scale_factor=0.45)),
    "up scale": ((2, 3, 7, 9), dict(scale_factor=2.3)),
    "up scale large": ((1, 2, 30, 41), dict(scale_factor=(3.3, 1.7))),
    "up scale recompute": ((2, 3, 7, 9), dict(scale_factor=2.3, recompute_scale_factor=True)),
    "down scale recompute": ((1, 2, 300, 200),
                             dict(scale_factor=0.45, recompute_scale_factor=True)),
    "one column in": ((2, 3, 17, 1), dict(size=(9, 5))),
    "one column in large": ((1, 2, 8, 1), dict(size=(100, 60))),
    "one row out": ((2, 3, 5, 8), dict(size=(1, 33))),
    "one row out large": ((1, 2, 5, 8), dict(size=(1, 200))),
    "one column out": ((2, 3, 9, 6), dict(size=(13, 1))),
    "identity rows": ((2, 3, 7, 9), dict(size=(7, 40))),
    "vector block": ((2, 16, 9, 7), dict(size=(13, 5))),
    "vector block and tail": ((2, 19, 9, 7), dict(size=(5, 13))),
    "vector blocks": ((1, 35, 6, 5), dict(scale_factor=1.6)),
}


def _run(M, x, kw):
    return M.nn.functional.interpolate(x, mode="bilinear", **kw)


def _same_bits(xn, kw, dt):
    adt, ndt, udt = DTYPES[dt]
    xn = xn.astype(ndt)
    ya = _run(ampy, ampy.tensor(xn), kw).numpy()
    yt = _run(torch, torch.from_numpy(xn), kw).numpy()
    assert ya.shape == yt.shape
    bad = ya.view(udt) != yt.view(udt)
    assert not bad.any(), f"{bad.sum()} of {bad.size} outputs differ from torch's bits"


@pytest.mark.parametrize("align", [False, True], ids=["half_pixel", "align"])
@pytest.mark.parametrize("case", sorted(GRID))
@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_bilinear_forward_bits(cpu_path, dt, case, align):
    shape, kw = GRID[case]
    x = np.random.default_rng(41).standard_normal(shape)
    _same_bits(x, dict(kw, align_corners=align), dt)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_bilinear_forward_bits_one_thread(cpu_path, dt, channels):
    """On one thread torch takes its channels-last form for three channels
    whatever the output size; ampy reads its own thread count for torch's."""
    x = np.random.default_rng(42).standard_normal((2, channels, 20, 30))
    na, nt = ampy.get_num_threads(), torch.get_num_threads()
    ampy.set_num_threads(1)
    torch.set_num_threads(1)
    try:
        for kw in (dict(size=(90, 70)), dict(scale_factor=0.4), dict(size=(9, 20))):
            for align in (False, True):
                _same_bits(x, dict(kw, align_corners=align), dt)
    finally:
        ampy.set_num_threads(na)
        torch.set_num_threads(nt)


@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_bilinear_forward_bits_strided(cpu_path, dt):
    """A non-contiguous input (a transposed view) gives the same bits."""
    adt, ndt, udt = DTYPES[dt]
    xn = np.random.default_rng(43).standard_normal((2, 5, 12, 10)).astype(ndt)
    kw = dict(size=(7, 19), mode="bilinear", align_corners=False)
    ya = ampy.nn.functional.interpolate(ampy.tensor(xn).transpose(2, 3), **kw).numpy()
    yt = torch.nn.functional.interpolate(torch.from_numpy(xn).transpose(2, 3), **kw).numpy()
    assert np.array_equal(ya.view(udt), yt.view(udt))
