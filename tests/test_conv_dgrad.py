"""The conv2d input gradient (ampy._C.conv2d_bwd_input), and the phase kernel
of csrc/conv_dgrad.c that ungrouped float32 / bfloat16 problems take on
AVX-512 / AVX512-BF16 (strides above 1 with a spatial kernel, small maps),
against torch's float64 on the same values. The edges of the phase
decomposition: strides 2 and 3 (also uneven per axis), odd sizes where the
last phase of a row or column is empty (H or W below the stride), phases
that no tap reaches (a 1x1 or 2x2 kernel at stride 3), padding past the
kernel, dilation with stride, batch 1, a bias (the conv_transpose2d use),
positions and tiles running across images, channel counts off the 32-wide
panels. Every case runs at every CPU level (the cpu_path fixture) and on
every path ("auto", the GEMM paths only, the phase kernel wherever its dtype
and level allow).

Bound: each dx element is a sum of K = O * KH * KW products (float32
accumulation; float64 for float64) plus the bias, rounded once, so
    |dx - dx64| <= 2 * K * u * (sum|w * dy| + |b|) + r * |dx64|
with u the accumulation unit and r the output rounding.
"""
import numpy as np
import pytest
import torch

import ampy
from _helpers import conv_geometry, cpu_level_missing, randn_f32
from ampy import _C

UNIT = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -24,
        "bfloat16": 2.0 ** -24}
ROUND = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -11,
         "bfloat16": 2.0 ** -8}
DTS = ("float32", "bfloat16", "float16", "float64")

CASES = [  # (N, C, H, W, O, (KH, KW), stride, padding, dilation)
    (2, 5, 7, 9, 17, (3, 3), 2, 1, 1),         # odd sizes, C and O off the panels
    (1, 3, 8, 8, 40, (5, 5), 3, 2, 1),         # batch 1, stride 3
    (2, 33, 9, 8, 10, (3, 3), 2, 1, 2),        # dilation 2 with stride 2: one phase of taps
    (2, 4, 9, 7, 6, (2, 3), (2, 3), (1, 0), 1),  # uneven stride, rectangular kernel
    (3, 9, 5, 7, 20, (1, 1), 2, 0, 1),         # 1x1 / 2: three phases without a tap
    (2, 6, 1, 1, 7, (3, 3), 2, 1, 1),          # 1x1 input: the odd phases are empty
    (2, 6, 2, 5, 7, (2, 2), 3, 0, 1),          # 2x2 / 3: a phase row and column without taps
    (2, 8, 6, 6, 16, (3, 3), (3, 2), (0, 4), (2, 1)),  # padding past the kernel
    (1, 40, 11, 13, 70, (4, 4), 2, (3, 1), (1, 2)),    # even kernel, mixed padding
    (3, 24, 14, 14, 48, (3, 3), 2, 1, 1),      # a 7x7 dy: tiles across images
    (2, 16, 7, 7, 32, (3, 3), 1, 1, 1),        # unit stride, a map under 64 positions
    (2, 8, 10, 10, 16, (3, 3), 1, 1, 1),       # unit stride, the forward of the flip
    (2, 8, 7, 7, 16, (3, 3), 1, 3, 1),         # unit stride, padding past the kernel
]


def _inputs(case, dt, seed=0):
    n, c, h, w, o, (kh, kw) = case[:6]
    (sh, sw), (ph, pw), (dh, dw), oh, ow = conv_geometry(case)
    tdt = getattr(torch, dt)
    g = torch.from_numpy(randn_f32((n, o, oh, ow), seed)).to(tdt)
    wt = torch.from_numpy(randn_f32((o, c, kh, kw), seed + 1)).to(tdt)
    b = torch.from_numpy(randn_f32((c,), seed + 2)).to(tdt)
    return g, wt, b, (n, c, h, w), (sh, sw, ph, pw, dh, dw, 1)


def _torch_dx(g, w, b, shape, geom):
    sh, sw, ph, pw, dh, dw, _ = geom
    x = torch.zeros(shape, dtype=g.dtype)
    dx = torch.ops.aten.convolution_backward(g, x, w, None, [sh, sw], [ph, pw], [dh, dw],
                                             False, [0, 0], 1, [True, False, False])[0]
    return dx if b is None else dx + b[None, :, None, None]


def _ampy(t, dt):
    return ampy.tensor(t.double().numpy()).to(getattr(ampy, dt))


def _check(got, g, w, b, shape, geom, dt, label):
    ref = _torch_dx(g.double(), w.double(), None if b is None else b.double(), shape, geom)
    bnd = _torch_dx(g.double().abs(), w.double().abs(), None if b is None else b.double().abs(),
                    shape, geom)
    k = w.shape[0] * w.shape[2] * w.shape[3]
    got = np.asarray(got.to(ampy.float64))
    assert got.shape == tuple(ref.shape), label
    err = np.abs(got - ref.numpy())
    lim = 2 * k * UNIT[dt] * bnd.numpy() + ROUND[dt] * np.abs(ref.numpy())
    assert np.all(err <= lim), (label, float(err.max()), float((err - lim).max()))


@pytest.fixture(params=("auto", "gemm", "phase"))
def dgrad_path(request):
    """Each input-gradient path forced, then auto again."""
    _C.conv_dgrad_set_path(request.param)
    yield request.param
    _C.conv_dgrad_set_path("auto")


def _phase_runs(cpu_path, dt):
    return (dt == "float32" and cpu_path in ("avx512", "avx512bf16", "amx")) or \
        (dt == "bfloat16" and cpu_path == "avx512bf16")


@pytest.mark.parametrize("bias", (False, True))
@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_input_grad_against_float64(cpu_path, dgrad_path, dt, case, bias):
    g, w, b, shape, geom = _inputs(case, dt)
    args = (_ampy(g, dt), _ampy(w, dt), _ampy(b, dt) if bias else None, shape, geom)
    path = _C.conv_dgrad_path(args[0], args[1], shape, geom)
    if dgrad_path == "phase":
        assert (path == "phase") == _phase_runs(cpu_path, dt), path
    elif dgrad_path == "gemm":
        assert path != "phase"
    got = _C.conv2d_bwd_input(*args)
    assert str(got.dtype).endswith(dt)
    _check(got, g, w, b if bias else None, shape, geom, dt, f"{case} {dt} {path}")


def test_phase_path_rule():
    """The auto rule at the AVX-512 level: strided spatial kernels and maps
    under 64 positions take the phase kernel; the 1x1 / 2, the unit-stride
    14x14 and up, float64 and fewer than 32 input channels do not."""
    def path(case, dt):
        g, w, _, shape, geom = _inputs(case, dt)
        return _C.conv_dgrad_path(_ampy(g, dt), _ampy(w, dt), shape, geom)
    if cpu_level_missing("avx512"):
        pytest.skip("the CPU has no AVX-512")
    _C._set_cpu_level("avx512")
    try:
        assert path((1, 32, 14, 14, 16, (3, 3), 2, 1, 1), "float32") == "phase"
        assert path((1, 32, 7, 7, 16, (3, 3), 1, 1, 1), "float32") == "phase"
        assert path((1, 32, 14, 14, 16, (3, 3), 1, 1, 1), "float32") == "as_conv"
        assert path((1, 32, 14, 14, 16, (1, 1), 2, 0, 1), "float32") == "col2im"
        assert path((1, 32, 14, 14, 16, (1, 1), 1, 0, 1), "float32") == "pointwise"
        assert path((1, 32, 14, 14, 16, (3, 3), 2, 1, 1), "float64") == "col2im"
        assert path((1, 3, 14, 14, 16, (7, 7), 2, 3, 1), "float32") == "col2im"
    finally:
        _C._set_cpu_level(None)


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_resnet_strided_shape(cpu_path, dgrad_path, dt):
    """A ResNet-like downsampling layer (64 -> 128 channels, 3x3 / 2): several
    panels, tiles and image blocks."""
    case = (4, 64, 28, 28, 128, (3, 3), 2, 1, 1)
    g, w, b, shape, geom = _inputs(case, dt, seed=5)
    got = _C.conv2d_bwd_input(_ampy(g, dt), _ampy(w, dt), None, shape, geom)
    _check(got, g, w, None, shape, geom, dt, dt)


@pytest.mark.parametrize("case", ((3, 24, 14, 14, 48, (3, 3), 2, 1, 1),
                                  (20, 64, 7, 7, 40, (3, 3), 1, 1, 1)), ids=("s2", "7x7"))
@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_phase_threads_same_bits(cpu_path, dt, case):
    """Each dx element is one register sum in a fixed order, so the phase
    kernel gives the same bits at 1 and 2 threads whichever thread takes
    (or steals) its tile: stride 2, and a 7 x 7 map at unit stride (many
    tiles across images, two panels)."""
    g, w, b, shape, geom = _inputs(case, dt, seed=9)
    args = (_ampy(g, dt), _ampy(w, dt), _ampy(b, dt), shape, geom)
    old = ampy.get_num_threads()
    try:
        ampy.set_num_threads(1)
        one = np.asarray(_C.conv2d_bwd_input(*args).float())
        ampy.set_num_threads(2)
        two = np.asarray(_C.conv2d_bwd_input(*args).float())
    finally:
        ampy.set_num_threads(old)
    assert np.array_equal(one.view(np.uint32), two.view(np.uint32))


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_strided_grad_through_autograd(cpu_path, dt):
    """F.conv2d with stride 2 on a non-contiguous dy and a channels-last x:
    x.grad equals torch's float64 input gradient within the bound."""
    adt = getattr(ampy, dt)
    w = ampy.tensor(randn_f32((12, 10, 3, 3), 1)).to(adt).requires_grad_()
    x = ampy.tensor(randn_f32((2, 9, 11, 10), 2)).to(adt).permute(0, 3, 1, 2).requires_grad_()
    y = ampy.nn.functional.conv2d(x, w, stride=2, padding=1)
    gbig = ampy.tensor(randn_f32(tuple(y.shape[:3]) + (2 * y.shape[3],), 3)).to(adt)
    y.backward(gbig[..., ::2])
    g64 = torch.from_numpy(np.asarray(gbig[..., ::2].contiguous().double()))
    w64 = torch.from_numpy(np.asarray(w.detach().double()))
    _check(x.grad, g64, w64, None, tuple(x.shape), (2, 2, 1, 1, 1, 1, 1), dt, "autograd")


def test_bad_path_name_raises():
    with pytest.raises(ValueError, match="unknown input-gradient path 'fast'"):
        _C.conv_dgrad_set_path("fast")
    _C.conv_dgrad_set_path("auto")
