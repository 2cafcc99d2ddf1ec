"""The CUDA twins of the CNN ops (cuda/cnn_norm.cu, cnn_pool.cu,
cnn_resample.cu): forward and backward on the GPU against the same op on the
CPU (itself tested against torch in test_cnn_ops.py), float32 / float16 /
bfloat16 / float64. These need a GPU (requires_cuda: skipped without one).

What is exact and what is bounded (ampy/cnn_cuda.h):
- every forward of the pools, padding and interpolation, and the
  avg_pool2d / adaptive_avg_pool2d backwards, compute each element with the
  CPU's functions in the CPU's order: the same bits;
- max_pool2d, padding and interpolation backwards sum with atomicAdd in
  float32 (float64 for float64) and round once: for m contributions to one
  element the float32 sums differ by at most m float32 ulps of the sum of
  magnitudes, and the CPU's per-add half rounding by at most m half ulps:
  the bound below is m * ROUND[dt] relative to sum |terms|;
- the norm statistics are double sums in another order, so the float32
  mean / invstd may differ by one float32 rounding: outputs within 4
  ulps of their dtype relative to the largest magnitude of the row.

The host side of the same code (the shared functions, and each gather and
the sort network replayed on the host against the CPU kernels) runs here
too: test_cuda_twin_math_c_unit_test.
"""
import os
import shutil
import subprocess
import sysconfig

import numpy as np
import pytest

import ampy
import ampy.nn.functional as F

from _helpers import AMPY_DTYPE, FLOAT_NAMES, assert_same_bits, host_f64, requires_cuda

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUND = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -11,
         "bfloat16": 2.0 ** -8}


def _x(shape, dt, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape) * 2.0
    return ampy.tensor(a).to(AMPY_DTYPE[dt])


def _pair(shape, dt, seed=0):
    """The same leaf on the CPU and on the GPU."""
    x = _x(shape, dt, seed)
    return x.clone().requires_grad_(), x.cuda().detach().requires_grad_()


def _run(fn, shape, dt, seed=0):
    """fn on the CPU and the GPU, backward with the same gradient: the two
    outputs and the two input gradients."""
    xc, xg = _pair(shape, dt, seed)
    yc, yg = fn(xc), fn(xg)
    g = _x(tuple(yc.shape), dt, seed + 1)
    yc.backward(g)
    yg.backward(g.cuda())
    return yc, yg.cpu(), xc.grad, xg.grad.cpu()


def _close(got, want, dt, m):
    """|got - want| <= m * ROUND[dt] * (|want| + 1)  (m contributions each)."""
    a, b = host_f64(got), host_f64(want)
    np.testing.assert_allclose(a, b, rtol=m * ROUND[dt] * 4, atol=m * ROUND[dt] * 4 * 8)


# ---------------------------------------------------------------- pools
POOLS = [
    ("max", lambda x: F.max_pool2d(x, 3, 2, 1), 4),
    ("max_dilated", lambda x: F.max_pool2d(x, 2, 1, 0, dilation=2, ceil_mode=True), 4),
    ("avg", lambda x: F.avg_pool2d(x, 3, 2, 1), 0),
    ("avg_excl", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), 0),
    ("avg_div", lambda x: F.avg_pool2d(x, 2, 1, 0, divisor_override=3), 0),
    ("adaptive", lambda x: F.adaptive_avg_pool2d(x, (3, 5)), 0),
    ("adaptive_up", lambda x: F.adaptive_avg_pool2d(x, (11, 13)), 0),
]


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_NAMES)
@pytest.mark.parametrize("name, fn, m", POOLS, ids=[p[0] for p in POOLS])
def test_pools_on_cuda_equal_the_cpu(name, fn, m, dt):
    yc, yg, gc, gg = _run(fn, (2, 3, 9, 8), dt)
    assert_same_bits(yg, yc)
    if m == 0:  # the gathering backwards: the CPU's bits
        assert_same_bits(gg, gc)
    else:
        _close(gg, gc, dt, m)


@requires_cuda
def test_max_pool_indices_and_strided_input():
    x = _x((2, 4, 10, 12), "float32").transpose(2, 3)
    yc, ic = F.max_pool2d(x, 2, return_indices=True)
    yg, ig = F.max_pool2d(x.cuda(), 2, return_indices=True)
    assert_same_bits(yg.cpu(), yc)
    np.testing.assert_array_equal(ig.cpu().numpy(), ic.numpy())


# ---------------------------------------------------------------- padding
PADS = [("constant", "constant", (1, 2, 0, 3), 1),
        ("constant_crop", "constant", (-1, 2, 1, -2), 1),
        ("reflect", "reflect", (2, 3, 1, 2), 2), ("replicate", "replicate", (3, 1, 2, 4), 5),
        ("circular", "circular", (2, 3, 1, 2), 2), ("reflect1d", "reflect", (3, 2), 2),
        ("replicate3d", "replicate", (1, 2, 1, 0, 2, 1), 3)]


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_NAMES)
@pytest.mark.parametrize("name, mode, pads, m", PADS, ids=[p[0] for p in PADS])
def test_pads_on_cuda_equal_the_cpu(name, mode, pads, m, dt):
    shape = {2: (2, 3, 7), 4: (2, 3, 6, 7), 6: (1, 2, 4, 5, 6)}[len(pads)]
    kw = {"value": 0.5} if mode == "constant" else {}
    yc, yg, gc, gg = _run(lambda x: F.pad(x, pads, mode=mode, **kw), shape, dt)
    assert_same_bits(yg, yc)
    _close(gg, gc, dt, m)


# ---------------------------------------------------------------- interpolation
INTERP = [("nearest", dict(size=(13, 7), mode="nearest"), 2),
          ("nearest_x2", dict(scale_factor=2, mode="nearest"), 4),
          ("bilinear", dict(size=(11, 17), mode="bilinear"), 8),
          ("bilinear_align", dict(scale_factor=1.7, mode="bilinear", align_corners=True), 8),
          ("bilinear_down", dict(size=(4, 3), mode="bilinear"), 8)]


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_NAMES)
@pytest.mark.parametrize("name, kw, m", INTERP, ids=[p[0] for p in INTERP])
def test_interpolate_on_cuda_equals_the_cpu(name, kw, m, dt):
    yc, yg, gc, gg = _run(lambda x: F.interpolate(x, **kw), (2, 3, 6, 8), dt)
    assert_same_bits(yg, yc)
    _close(gg, gc, dt, m)


# ---------------------------------------------------------------- norms
def _norm_close(got, want, dt):
    a, b = host_f64(got), host_f64(want)
    scale = np.max(np.abs(b)) + 1.0
    np.testing.assert_allclose(a, b, rtol=4 * ROUND[dt], atol=4 * ROUND[dt] * scale
                               + (1e-5 if dt == "float32" else 0.0))


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_NAMES)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_on_cuda_equals_the_cpu(dt, training):
    pdt = ampy.float64 if dt == "float64" else ampy.float32
    C = 5
    rng = np.random.default_rng(4)
    w0, b0 = rng.standard_normal(C), rng.standard_normal(C)
    rm0, rv0 = rng.standard_normal(C), rng.random(C) + 0.5
    outs = {}
    for dev in ("cpu", "cuda"):
        x = _x((4, C, 6, 7), dt).to(dev).requires_grad_()
        w = ampy.tensor(w0).to(pdt).to(dev).requires_grad_()
        b = ampy.tensor(b0).to(pdt).to(dev).requires_grad_()
        rm, rv = ampy.tensor(rm0).to(pdt).to(dev), ampy.tensor(rv0).to(pdt).to(dev)
        y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.3, eps=1e-4)
        y.backward(_x(tuple(y.shape), dt, 1).to(dev))
        outs[dev] = [t.detach().cpu() for t in (y, x.grad, w.grad, b.grad, rm, rv)]
    for got, want in zip(outs["cuda"], outs["cpu"]):
        _norm_close(got, want, dt)


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_NAMES)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_on_cuda_equals_the_cpu(dt, affine):
    pdt = ampy.float64 if dt == "float64" else ampy.float32
    C, G = 6, 3
    rng = np.random.default_rng(5)
    w0, b0 = rng.standard_normal(C), rng.standard_normal(C)
    outs = {}
    for dev in ("cpu", "cuda"):
        x = _x((3, C, 5, 4), dt).to(dev).requires_grad_()
        w = ampy.tensor(w0).to(pdt).to(dev).requires_grad_() if affine else None
        b = ampy.tensor(b0).to(pdt).to(dev).requires_grad_() if affine else None
        y = F.group_norm(x, G, w, b, eps=1e-5)
        y.backward(_x(tuple(y.shape), dt, 1).to(dev))
        outs[dev] = [t.detach().cpu() for t in (y, x.grad) + ((w.grad, b.grad) if affine else ())]
    for got, want in zip(outs["cuda"], outs["cpu"]):
        _norm_close(got, want, dt)


@requires_cuda
def test_batchnorm_module_trains_on_cuda():
    """BatchNorm2d's running stats and num_batches_tracked on the device."""
    m_cpu, m_gpu = ampy.nn.BatchNorm2d(3), ampy.nn.BatchNorm2d(3).cuda()
    for step in range(3):
        x = _x((4, 3, 5, 5), "float32", step)
        m_cpu(x), m_gpu(x.cuda())
    for k, v in m_cpu.state_dict().items():
        _norm_close(m_gpu.state_dict()[k].cpu(), v, "float32")


# ---------------------------------------------------------------- the host side
def test_cuda_twin_math_c_unit_test(tmp_path):
    """tests/c/test_cuda_twin_math.c: the shared functions the CUDA kernels
    are made of give the CPU kernels' bits (gathers, windows, sort order)."""
    cc = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) or shutil.which("gcc")
    assert cc, "no C compiler (the extension needs one too)"
    exe = str(tmp_path / "test_cuda_twin_math")
    src = [os.path.join(HERE, "tests", "c", "test_cuda_twin_math.c")]
    src += [os.path.join(HERE, "csrc", f) for f in ("cnn_pool.c", "cnn_pool_max.c", "sort.c",
                                                    "parallel.c", "status.c", "cpu.c",
                                                    "cast_x86.c")]
    r = subprocess.run([cc, "-std=c11", "-O1", "-fno-math-errno", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-Werror",
                        "-I" + os.path.join(HERE, "csrc", "include")] + src
                       + ["-o", exe, "-lm", "-lpthread"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert " 0 failures" in r.stdout
