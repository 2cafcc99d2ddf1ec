"""The patch-row forward of ungrouped convolutions (csrc/conv_patch.c), also
taken by the unit-stride input gradient, at the edges of its layout: batch 1,
odd sizes, channel counts that are not a multiple of the 16-channel tiles of
its channels-last copy, dilation (one copy per tap instead of one per kernel
row), windows wholly in the padding, blocks of patch rows that end inside an
image, and channels-last / sliced views read in place or copied. Numbers are
checked against torch's float64 convolution with test_conv.py's
fp32-accumulation bound; layouts against the contiguous input bit for bit.
"""
import numpy as np
import pytest

import ampy
import ampy.nn.functional as F

from test_conv import DTS, TF, _np, _rand, _sums, check_against_float64, torch

EDGES = [  # (x shape, w shape, kwargs)
    ((1, 5, 7, 9), (3, 5, 3, 3), dict(padding=1)),                          # batch 1, odd
    ((2, 17, 11, 10), (19, 17, 3, 3), dict(stride=2, padding=1)),           # C = 16 + 1
    ((1, 33, 9, 12), (7, 33, 3, 3), dict(padding=2, dilation=2)),           # dilated taps
    ((2, 3, 6, 5), (4, 3, 3, 3), dict(padding=2)),                          # rows in padding
    ((2, 6, 8, 7), (5, 6, 2, 3), dict(stride=(1, 2), padding=(1, 0))),      # rectangular
    ((3, 4, 5, 5), (6, 4, 5, 5), dict()),                                   # one position
    ((2, 9, 7, 7), (4, 9, 1, 1), dict(padding=1)),                          # 1x1, padded
    ((2, 9, 7, 7), (4, 9, 1, 1), dict(stride=2, bias=False)),               # 1x1, strided
    ((2, 5, 1, 13), (3, 5, 1, 3), dict(padding=(0, 1))),                    # H = 1
]


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("xs,ws,kw", EDGES, ids=[str(i) for i in range(len(EDGES))])
def test_patch_edges_against_float64(cpu_path, dt, xs, ws, kw):
    kw = dict(kw)
    bias = kw.pop("bias", True)
    arrays = [_rand(*xs), _rand(*ws, seed=1), _rand(ws[0], seed=2) if bias else None]
    fn = lambda M, x, w, b: M.conv2d(x, w, b, **kw)
    y_t = TF.conv2d(torch.from_numpy(arrays[0]), torch.from_numpy(arrays[1]), None, **kw)
    ks = _sums(arrays[0], arrays[1], y_t, 1)
    check_against_float64(fn, arrays, _rand(*y_t.shape, seed=3), dt, ks, f"{xs} {ws} {kw}")


@pytest.mark.parametrize("dt,n", (("float32", 5), ("bfloat16", 10)))
def test_patch_blocks_end_inside_an_image(dt, n):
    """More patch rows than one block holds (32 MiB of them): the blocks run
    across image boundaries and the result is the whole batch's."""
    arrays = [_rand(n, 128, 40, 40), _rand(16, 128, 3, 3, seed=1) * 0.1, _rand(16, seed=2)]
    fn = lambda M, x, w, b: M.conv2d(x, w, b, padding=1)
    ks = _sums(arrays[0], arrays[1], np.empty((n, 16, 40, 40)), 1)
    check_against_float64(fn, arrays, _rand(n, 16, 40, 40, seed=3), dt, ks, "blocks")


def _views(adt, c):
    base = ampy.tensor(_rand(2, 6, 7, c)).to(adt)
    yield base.permute(0, 3, 1, 2)                                    # channels-last
    yield base.permute(0, 3, 1, 2)[:1]                                # batch 1 of it
    yield ampy.tensor(_rand(2, c, 12, 7, seed=2)).to(adt)[:, :, ::2]  # sliced rows
    yield ampy.tensor(_rand(1, 1, 9, c, seed=5)).to(adt).permute(0, 3, 1, 2)  # H = 1


@pytest.mark.parametrize("dt", ("float32", "bfloat16", "float16"))
@pytest.mark.parametrize("c", (5, 16, 18))
def test_patch_views_equal_contiguous(cpu_path, dt, c):
    """Channels-last inputs (read in place) and other views give the bits of
    their contiguous copies, forward and both gradients."""
    adt = getattr(ampy, dt)
    w = ampy.tensor(_rand(4, c, 3, 3, seed=1)).to(adt)
    for xin in _views(adt, c):
        a, b = xin.detach().requires_grad_(), xin.contiguous().detach().requires_grad_()
        wa, wb = w.detach().requires_grad_(), w.detach().clone().requires_grad_()
        ya = F.conv2d(a, wa, padding=1)
        yb = F.conv2d(b, wb, padding=1)
        assert np.array_equal(_np(ya), _np(yb))
        g = ampy.tensor(_rand(*ya.shape, seed=4)).to(adt)
        ya.backward(g)
        yb.backward(g)
        assert np.array_equal(_np(a.grad), _np(b.grad))
        assert np.array_equal(_np(wa.grad), _np(wb.grad))
