"""The conv2d weight gradient (csrc/conv_weight.c, and the shifted-view path
of csrc/conv_weight_x86.c that ungrouped float32 / bfloat16 problems take on
AVX-512 / AVX512-BF16) against torch's float64 on the same values, over the
edges of the flat position layout: channel counts off the 8 x 32 tiles, odd
sizes, 1x1 / 3x3 / 5x5 kernels, padding 0-2 (and more than the kernel),
dilation 2, batch 1, positions running across chunk and image boundaries,
non-contiguous x and dy, inf and NaN; and of its stride phases: strides 2
and 3 (uneven per axis), dilation with stride (every tap in one phase), odd
sizes whose last phase row or column holds no data, a 1x1 input. Every case
runs at every CPU level (the cpu_path fixture).

Bound: each dw element is a sum of K = N * OH * OW products, accumulated in
float32 (float64 for float64) and rounded once, so
    |dw - dw64| <= 2 * K * u * sum|x * dy| + r * |dw64|
with u the accumulation unit (2^-24; 2^-53 for float64) and r the output
rounding (2^-24 float32, 2^-8 bfloat16, 2^-11 float16, 2^-53 float64).
"""
import numpy as np
import pytest
import torch

import ampy
from ampy import _C

from _helpers import conv_geometry, randn_f32

UNIT = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -24,
        "bfloat16": 2.0 ** -24}
ROUND = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -11,
         "bfloat16": 2.0 ** -8}
DTS = ("float32", "bfloat16", "float16", "float64")

CASES = [  # (N, C, H, W, O, (KH, KW), stride, padding, dilation)
    (2, 5, 7, 9, 17, (3, 3), 1, 1, 1),       # C, O off the tiles, odd sizes
    (1, 3, 5, 5, 40, (5, 5), 1, 2, 1),       # batch 1, 5x5, odd C
    (3, 16, 10, 10, 32, (3, 3), 1, 0, 1),    # no padding
    (2, 9, 11, 11, 33, (3, 3), 1, 2, 2),     # dilation 2
    (2, 8, 6, 6, 16, (1, 1), 1, 0, 1),       # pointwise
    (2, 7, 6, 5, 9, (1, 1), 1, 2, 1),        # 1x1 with padding beyond the kernel
    (2, 6, 9, 8, 10, (3, 3), 2, 1, 1),       # stride 2: four phases of x
    (2, 4, 8, 7, 6, (2, 3), 1, (1, 0), 1),   # rectangular kernel, uneven padding
    (1, 5, 1, 13, 3, (1, 3), 1, (0, 1), 1),  # H = 1
    (4, 24, 20, 20, 40, (3, 3), 1, 1, 1),    # many chunks, chunks across images
    (3, 9, 5, 7, 20, (1, 1), 1, 0, 1),       # 1x1 unpadded, odd OH * OW: an image's
                                             # even segment ends in a junk row
    (1, 3, 8, 8, 40, (5, 5), 3, 2, 1),       # stride 3, batch 1
    (2, 33, 9, 8, 10, (3, 3), 2, 1, 2),      # dilation 2 at stride 2: one phase
    (2, 4, 9, 7, 6, (2, 3), (2, 3), (1, 0), 1),  # uneven stride, rectangular kernel
    (3, 9, 5, 7, 20, (1, 1), 2, 0, 1),       # 1x1 / 2: one phase, odd sizes
    (2, 6, 1, 1, 7, (3, 3), 2, 1, 1),        # 1x1 input: phases of padding only
    (2, 8, 6, 6, 16, (3, 3), (3, 2), (0, 4), (2, 1)),  # padding past the kernel
    (3, 9, 6, 6, 33, (2, 2), 2, 0, 1),       # 2x2 / 2: one tap per phase
    (4, 24, 20, 20, 40, (3, 3), 2, 1, 1),    # many chunks at stride 2
    (1, 40, 11, 13, 70, (4, 4), 2, (3, 1), (1, 2)),  # even kernel, mixed padding
    (2, 3, 5, 75, 9, (3, 3), 2, 1, 1),       # phase rows of 37-38: the vector
                                             # deinterleave and its masked tails
    (1, 2, 3, 130, 5, (1, 3), 2, (0, 1), 1), # rows of 65: two bfloat16 vectors and a tail
]


def _inputs(case, dt, seed=0):
    n, c, h, w, o, (kh, kw) = case[:6]
    (sh, sw), (ph, pw), (dh, dw), oh, ow = conv_geometry(case)
    tdt = getattr(torch, dt)
    x = torch.from_numpy(randn_f32((n, c, h, w), seed)).to(tdt)
    g = torch.from_numpy(randn_f32((n, o, oh, ow), seed + 1)).to(tdt)
    geom = (sh, sw, ph, pw, dh, dw, 1)
    return x, g, (o, c, kh, kw), geom


def _torch_dw(x, g, wshape, geom):
    sh, sw, ph, pw, dh, dw, _ = geom
    w = torch.zeros(wshape, dtype=x.dtype)
    return torch.ops.aten.convolution_backward(g, x, w, None, [sh, sw], [ph, pw], [dh, dw],
                                               False, [0, 0], 1, [False, True, False])[1]


def _ampy(t, dt):
    return ampy.tensor(t.double().numpy()).to(getattr(ampy, dt))


def _check(got, x, g, wshape, geom, dt, label):
    ref = _torch_dw(x.double(), g.double(), wshape, geom).numpy()
    bnd = _torch_dw(x.double().abs(), g.double().abs(), wshape, geom).numpy()
    k = g.shape[0] * g.shape[2] * g.shape[3]
    got = np.asarray(got.to(ampy.float64))
    assert got.shape == ref.shape, label
    err = np.abs(got - ref)
    lim = 2 * k * UNIT[dt] * bnd + ROUND[dt] * np.abs(ref)
    assert np.all(err <= lim), (label, float(err.max()), float((err - lim).max()))


@pytest.fixture(params=("auto", "shifted", "im2col"))
def wgrad_path(request):
    """Each weight-gradient path forced (the shifted one where its CPU level
    and the shape allow it), then auto again."""
    _C.conv_wgrad_set_path(request.param)
    yield request.param
    _C.conv_wgrad_set_path("auto")


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_weight_grad_against_float64(cpu_path, wgrad_path, dt, case):
    x, g, wshape, geom = _inputs(case, dt)
    got = _C.conv2d_bwd_weight(_ampy(x, dt), _ampy(g, dt), wshape, geom)
    assert str(got.dtype).endswith(dt)
    _check(got, x, g, wshape, geom, dt, f"{case} {dt}")


@pytest.mark.parametrize("stride", (1, 2))
@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_weight_grad_resnet_shape(cpu_path, dt, stride):
    """A ResNet-like layer (64 channels, 3x3, padding 1; the downsampling one
    at stride 2): many chunks of the flat space, several tiles in each
    direction."""
    case = (4, 64, 14 * stride, 14 * stride, 64 * stride, (3, 3), stride, 1, 1)
    x, g, wshape, geom = _inputs(case, dt, seed=7)
    _check(_C.conv2d_bwd_weight(_ampy(x, dt), _ampy(g, dt), wshape, geom), x, g, wshape,
           geom, dt, dt)


@pytest.mark.parametrize("stride", (1, 2))
@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_weight_grad_views_equal_contiguous(cpu_path, dt, stride):
    """Channels-last and sliced x, and a non-contiguous dy, give the bits of
    their contiguous copies (autograd through F.conv2d)."""
    adt = getattr(ampy, dt)
    w = ampy.tensor(randn_f32((6, 5, 3, 3), 1)).to(adt)
    xs = [ampy.tensor(randn_f32((2, 7, 6, 5), 2)).to(adt).permute(0, 3, 1, 2),
          ampy.tensor(randn_f32((2, 5, 12, 6), 3)).to(adt)[:, :, ::2]]
    for xin in xs:
        a, b = xin.detach().requires_grad_(), xin.contiguous().detach().requires_grad_()
        wa, wb = w.detach().requires_grad_(), w.detach().clone().requires_grad_()
        ya = ampy.nn.functional.conv2d(a, wa, stride=stride, padding=1)
        yb = ampy.nn.functional.conv2d(b, wb, stride=stride, padding=1)
        gbig = ampy.tensor(randn_f32(tuple(ya.shape[:3]) + (2 * ya.shape[3],), 4)).to(adt)
        ya.backward(gbig[..., ::2])
        yb.backward(gbig[..., ::2].contiguous())
        assert np.array_equal(np.asarray(wa.grad.float()), np.asarray(wb.grad.float()))
        x64 = torch.from_numpy(np.asarray(xin.contiguous().double()))
        g64 = torch.from_numpy(np.asarray(gbig[..., ::2].contiguous().double()))
        _check(wa.grad, x64, g64, tuple(w.shape), (stride, stride, 1, 1, 1, 1, 1), dt, "view")


@pytest.mark.parametrize("stride", (1, 2))
@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
@pytest.mark.parametrize("where", ("x_edge", "x_center", "dy"))
def test_weight_grad_inf_nan_as_torch(cpu_path, dt, where, stride):
    """inf / NaN land where torch's do: an inf of x in the last column meets
    no output for some taps (those stay finite). One known difference: an inf
    of dy at output (0, 0) meets the zero padding on the taps with kh == 0 or
    kw == 0; ampy forms those products (0 * inf = NaN, IEEE; both its paths,
    as the im2col path on main), torch 2.13 skips them (finite there)."""
    case = (2, 6, 7, 7, 5, (3, 3), stride, 1, 1)
    x, g, wshape, geom = _inputs(case, dt, seed=3)
    x, g = x.float(), g.float()
    if where == "x_edge":
        x[1, 2, 3, 6] = float("inf")
    elif where == "x_center":
        x[0, 4, 3, 3] = float("nan")
    else:
        g[0, 1, 0, 0] = float("inf")
    tdt = getattr(torch, dt)
    x, g = x.to(tdt), g.to(tdt)
    ref = _torch_dw(x.float(), g.float(), wshape, geom).numpy()
    if where == "dy":
        pad_taps = np.zeros(ref.shape[2:], bool)
        pad_taps[0, :] = pad_taps[:, 0] = True
        assert np.isfinite(ref[1][:, pad_taps]).all()
        ref[1][:, pad_taps] = np.nan
    got = np.asarray(_C.conv2d_bwd_weight(_ampy(x, dt), _ampy(g, dt), wshape,
                                          geom).to(ampy.float32))
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(np.isposinf(got), np.isposinf(ref))
    assert np.array_equal(np.isneginf(got), np.isneginf(ref))
    assert np.isfinite(got).any()


def _at_threads(nt, fn):
    old = ampy.get_num_threads()
    try:
        ampy.set_num_threads(nt)
        return fn()
    finally:
        ampy.set_num_threads(old)


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_weight_grad_threads_repeatable(cpu_path, dt):
    """Each worker zeroes its own tile buffer: calls after one that left
    other sums in the (cached) buffers give the same bits, at 1 and at 2
    threads, and the 2-thread sums (a fixed split, added in thread order)
    stay within the float64 bound."""
    x, g, wshape, geom = _inputs((3, 24, 10, 10, 40, (3, 3), 1, 1, 1), dt, seed=11)
    x2, g2, _, _ = _inputs((3, 24, 10, 10, 40, (3, 3), 1, 1, 1), dt, seed=12)
    args = (_ampy(x, dt), _ampy(g, dt), wshape, geom)
    other = (_ampy(x2, dt), _ampy(g2, dt), wshape, geom)
    for nt in (1, 2):
        runs = [_at_threads(nt, lambda a=a: np.asarray(_C.conv2d_bwd_weight(*a).float()))
                for a in (args, other, args)]
        assert np.array_equal(runs[0].view(np.uint32), runs[2].view(np.uint32)), nt
        _check(ampy.tensor(runs[2]), x, g, wshape, geom, dt, f"{dt} {nt} threads")


def _bias_oracle(dy):
    """float64 sums over images, then positions ascending (a sequential
    cumsum: the kernel's order), per channel."""
    N, O = dy.shape[:2]
    flat = dy.astype(np.float64).transpose(1, 0, 2, 3).reshape(O, -1)
    return np.cumsum(flat, axis=1)[:, -1] if flat.shape[1] else np.zeros(O)


@pytest.mark.parametrize("dt", ("float32", "float64", "bfloat16", "float16"))
@pytest.mark.parametrize("shape", ((3, 7, 5, 5), (2, 13, 17, 19), (1, 4, 1, 1), (2, 9, 0, 3)))
def test_bias_grad_sequential_sum_bits(cpu_path, dt, shape):
    """The bias gradient sums BIAS_LANES channels side by side, each in the
    sequential float64 order: float32 / float64 give the oracle's bits
    (channel counts past and below a multiple of 4, rows past 256
    elements), every dtype the same bits at 1 and 2 threads, and the half
    dtypes the float64 sum within one rounding."""
    dy = np.random.default_rng(5).standard_normal(shape).astype(np.float32) * 3
    a = ampy.tensor(dy).to(getattr(ampy, dt))
    exact = np.asarray(a.to(ampy.float64))
    one = _at_threads(1, lambda: np.asarray(_C.conv_bwd_bias(a).to(ampy.float64)))
    two = _at_threads(2, lambda: np.asarray(_C.conv_bwd_bias(a).to(ampy.float64)))
    assert np.array_equal(one.view(np.uint64), two.view(np.uint64))
    ref = _bias_oracle(exact)
    if dt in ("float32", "float64"):
        want = ref.astype(np.float32).astype(np.float64) if dt == "float32" else ref
        assert np.array_equal(one.view(np.uint64), want.view(np.uint64))
    else:
        assert np.all(np.abs(one - ref) <= ROUND[dt] * np.abs(ref) + 1e-300)
