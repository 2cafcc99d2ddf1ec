"""The table and plane paths of the cnn kernels (csrc/cnn_interp.c,
csrc/cnn_pool.c) on the shapes that exercise their edges, against torch
2.13 CPU on every CPU path: bilinear rows whose source columns jump by
more than one (downsampling), one-column and one-row planes and outputs,
outputs wider than one 16-lane block, identity sizes, and pools over
half planes widened once. Tolerances as in test_cnn_ops.py: bits for
the pools and the bilinear forward (float16's forward and every bilinear
backward within the float64-refereed bound; the grid of forward bits is
in test_cnn_interp_bits.py).
"""
import numpy as np
import pytest

import ampy

from test_cnn_ops import DTYPES, _check, _np

torch = pytest.importorskip("torch")

BILINEAR = {
    "down 0.3": ((2, 3, 23, 41), dict(scale_factor=0.3)),
    "down size": ((2, 3, 17, 50), dict(size=(4, 7))),
    "up 3.3 wide": ((1, 2, 5, 13), dict(scale_factor=3.3)),
    "one column in": ((2, 3, 6, 1), dict(size=(9, 20))),
    "one row out": ((2, 3, 6, 9), dict(size=(1, 33), align_corners=True)),
    "identity": ((2, 3, 7, 9), dict(size=(7, 9))),
    "identity rows": ((2, 3, 7, 9), dict(size=(7, 40))),
}


@pytest.mark.parametrize("align", [False, True], ids=["half_pixel", "align"])
@pytest.mark.parametrize("case", sorted(BILINEAR))
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_bilinear_edges_against_torch(cpu_path, case, dt, align):
    shape, kw = BILINEAR[case]
    kw = dict(dict(align_corners=align, mode="bilinear"), **kw)
    mk = lambda M: lambda x: M.nn.functional.interpolate(x, **kw)  # noqa: E731
    _check(mk(ampy), mk(torch), [_np(shape, 31)], dt, dt is not ampy.float16, False)


POOLS = {
    "max 3/2/1": lambda M: lambda x: M.nn.functional.max_pool2d(x, 3, 2, 1),
    "max dilated": lambda M: lambda x: M.nn.functional.max_pool2d(x, (3, 2), 1, 1, (2, 3)),
    "adaptive (7,7)": lambda M: lambda x: M.nn.functional.adaptive_avg_pool2d(x, (7, 7)),
    "adaptive (5,3)": lambda M: lambda x: M.nn.functional.adaptive_avg_pool2d(x, (5, 3)),
}


@pytest.mark.parametrize("case", sorted(POOLS))
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_pool_planes_against_torch(cpu_path, case, dt):
    _check(POOLS[case](ampy), POOLS[case](torch), [_np((3, 4, 15, 29), 32)], dt, True, True)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_max_pool_nan_planes_against_torch(cpu_path, dt):
    """NaN wins its window (the last NaN's index, as torch) on widened planes."""
    x = _np((2, 3, 12, 13), 33)
    x.flat[::5] = np.nan
    fn = lambda M: lambda v: M.nn.functional.max_pool2d(v, 3, 2, 1)  # noqa: E731
    _check(fn(ampy), fn(torch), [x], dt, True, True)


@pytest.mark.parametrize("n", [1, 3, 4, 9])
def test_batch_norm_four_plane_sums_match_torch_bits(cpu_path, n):
    """Batch sizes around the four-planes-at-a-time statistics: float32
    forward bits equal torch's."""
    x = _np((n, 3, 13, 17), 34)
    ya = ampy.nn.functional.batch_norm(ampy.tensor(x), None, None, training=True)
    yt = torch.nn.functional.batch_norm(torch.from_numpy(x), None, None, training=True)
    assert np.array_equal(ya.numpy().view(np.uint32), yt.numpy().view(np.uint32))


@pytest.mark.parametrize("sizes", [(9, 11, 4, 5), (56, 56, 7, 7), (13, 3, 13, 2), (1, 1, 3, 3),
                                   (40, 37, 3, 30)], ids=str)
@pytest.mark.parametrize("dt", [ampy.bfloat16, ampy.float16], ids=str)
def test_adaptive_pool_half_backward_bits(cpu_path, dt, sizes):
    """The half backward rounds every add to the half type as torch does
    (its overlapping windows add in torch's order), through float32 planes:
    bits equal torch's."""
    H, W, OH, OW = sizes
    fn = lambda M: lambda x: M.nn.functional.adaptive_avg_pool2d(x, (OH, OW))  # noqa: E731
    _check(fn(ampy), fn(torch), [_np((2, 3, H, W), 35)], dt, True, True)
