"""conv1d, conv2d, conv_transpose2d and nn.Conv1d/Conv2d/ConvTranspose2d
against torch 2.13 CPU.

Numbers: ampy's result is compared with torch's float64 convolution of the
same (already rounded) values. The bound is what fp32 accumulation allows:
each output is a sum of K products, so |ampy - exact| <= c * K * 2^-24 *
sum|a*b| + the final rounding of the result (half an ulp of its dtype);
sum|a*b| is torch's float64 convolution (and backward) of |x|, |w|, |g|. K
is the longest sum of the output (forward: C/groups*kH*kW, input gradient:
O/groups*kH*kW, weight gradient: N*oH*oW, bias gradient: N*oH*oW). c = 2
leaves room for the blocked sum order. float64 uses 2^-53. torch's own
float32/float64 results are checked against the same bound, and ampy's
against torch's with twice it.
"""
import math

import numpy as np
import pytest

import ampy
import ampy.nn.functional as F

from _helpers import assert_raises_as_torch, requires_cuda

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTS = ("float32", "float64", "float16", "bfloat16")
UNIT = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -24,
        "bfloat16": 2.0 ** -24}
ROUND = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -11,
         "bfloat16": 2.0 ** -8}


def _rounded(a, dt):
    """a (float32 ndarray) rounded to dt, as float64."""
    return torch.from_numpy(a).to(getattr(torch, dt)).double()


def _np(t):
    if isinstance(t, ampy.Tensor):
        return np.asarray(t.detach().to(ampy.float64))
    return t.detach().double().numpy()


def _run_ampy(fn, dt, arrays, g, grad=True):
    ts = [None if a is None else ampy.tensor(_rounded(a, dt).numpy()).to(getattr(ampy, dt))
          for a in arrays]
    for t in ts:
        if t is not None and grad:
            t.requires_grad_()
    y = fn(F, *ts)
    if not grad:
        return y, []
    y.backward(ampy.tensor(_rounded(g, dt).numpy()).to(getattr(ampy, dt)))
    return y, [None if t is None else t.grad for t in ts]


def _run_torch(fn, arrays, g, dt, absolute=False, tdt=torch.float64):
    ts = []
    for a in arrays:
        if a is None:
            ts.append(None)
            continue
        v = _rounded(a, dt)
        v = v.abs() if absolute else v
        ts.append(v.to(tdt).requires_grad_())
    y = fn(TF, *ts)
    gg = _rounded(g, dt)
    y.backward((gg.abs() if absolute else gg).to(tdt))
    return y, [None if t is None else t.grad for t in ts]


def _sums(x, w, y, groups, transposed=False):
    """The K of each result: (forward, input grad, weight grad, bias grad)."""
    k = math.prod(w.shape[2:])
    pos = math.prod(y.shape[2:]) * y.shape[0]
    if transposed:
        return (w.shape[0] // groups * k, w.shape[1] * k, x.shape[0] * math.prod(x.shape[2:]),
                pos)
    return w.shape[1] * k, w.shape[0] // groups * k, pos, pos


def check_against_float64(fn, arrays, g, dt, ks, label=""):
    """ampy's forward and gradients within the fp32-accumulation bound of
    torch's float64 on the same values; returns ampy's (y, grads)."""
    y, grads = _run_ampy(fn, dt, arrays, g)
    ref_y, ref_g = _run_torch(fn, arrays, g, dt)
    abs_y, abs_g = _run_torch(fn, arrays, g, dt, absolute=True)
    outs = [(y, ref_y, abs_y, ks[0], "output")]
    names = ("input", "weight", "bias")
    for i, (a, r, s) in enumerate(zip(grads, ref_g, abs_g)):
        if r is not None:
            outs.append((a, r, s, ks[min(i + 1, 3)], f"grad {names[i]}"))
    for got, ref, bound, k, what in outs:
        assert got is not None and str(got.dtype).endswith(dt), (label, what, got)
        ref, bound = _np(ref), _np(bound)
        tol = 2 * k * UNIT[dt] * bound + ROUND[dt] * np.abs(ref) + 1e-300
        err = np.abs(_np(got) - ref)
        assert got.shape == ref.shape, (label, what)
        assert np.all(err <= tol), f"{label} {what} {dt}: max err {err.max()} tol {tol.max()}"
    return y, grads


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------ conv2d
CONV2D = [  # (x shape, w shape, kwargs)
    ((2, 3, 9, 8), (4, 3, 3, 3), dict()),
    ((2, 4, 9, 9), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    ((2, 4, 7, 6), (4, 1, 3, 3), dict(padding=1, groups=4)),                # depthwise
    ((1, 4, 9, 8), (5, 4, 2, 3), dict(padding="same", dilation=2)),         # even kernel
    ((2, 4, 9, 9), (6, 4, 1, 1), dict()),                                   # pointwise
    ((2, 4, 9, 9), (6, 4, 1, 1), dict(stride=2)),                           # downsample
    ((2, 3, 10, 7), (4, 3, 3, 2), dict(stride=(2, 1), padding=(2, 0), dilation=(1, 3))),
    ((2, 3, 6, 6), (4, 3, 3, 3), dict(padding="valid", bias=False)),
]


def _conv2d_case(xs, ws, kw):
    kw = dict(kw)
    bias = kw.pop("bias", True)
    arrays = [_rand(*xs), _rand(*ws, seed=1), _rand(ws[0], seed=2) if bias else None]
    return arrays, kw


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("xs,ws,kw", CONV2D, ids=[str(i) for i in range(len(CONV2D))])
def test_conv2d_forward_backward(cpu_path, dt, xs, ws, kw):
    arrays, kw = _conv2d_case(xs, ws, kw)
    fn = lambda M, x, w, b: M.conv2d(x, w, b, **kw)
    y_t = TF.conv2d(torch.from_numpy(arrays[0]), torch.from_numpy(arrays[1]), None, **kw)
    g = _rand(*y_t.shape, seed=3)
    ks = _sums(arrays[0], arrays[1], y_t, kw.get("groups", 1))
    check_against_float64(fn, arrays, g, dt, ks, f"conv2d {xs} {ws} {kw}")


@pytest.mark.parametrize("dt", ("float32", "float64"))
def test_conv2d_close_to_torch_same_dtype(dt):
    """float32/float64: ampy and torch (oneDNN) agree within twice the bound."""
    arrays, kw = _conv2d_case(*CONV2D[1])
    fn = lambda M, x, w, b: M.conv2d(x, w, b, **kw)
    y, grads = _run_ampy(fn, dt, arrays, _rand(2, 6, 5, 5, seed=3))
    tdt = getattr(torch, dt)
    yt, gt = _run_torch(fn, arrays, _rand(2, 6, 5, 5, seed=3), dt, tdt=tdt)
    rtol = 1e-5 if dt == "float32" else 1e-12
    np.testing.assert_allclose(_np(y), _np(yt), rtol=rtol, atol=rtol)
    for a, t in zip(grads, gt):
        np.testing.assert_allclose(_np(a), _np(t), rtol=rtol, atol=rtol * 10)


# ------------------------------------------------------------ conv1d / transposed
CONV1D = [((2, 3, 11), (4, 3, 3), dict()),
          ((2, 4, 12), (6, 2, 4), dict(stride=3, padding=2, groups=2, dilation=2)),
          ((1, 3, 9), (3, 3, 4), dict(padding="same"))]


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("xs,ws,kw", CONV1D, ids=[str(i) for i in range(len(CONV1D))])
def test_conv1d_forward_backward(cpu_path, dt, xs, ws, kw):
    arrays = [_rand(*xs), _rand(*ws, seed=1), _rand(ws[0], seed=2)]
    fn = lambda M, x, w, b: M.conv1d(x, w, b, **kw)
    y_t = TF.conv1d(torch.from_numpy(arrays[0]), torch.from_numpy(arrays[1]), None, **kw)
    ks = _sums(arrays[0], arrays[1], y_t, kw.get("groups", 1))
    check_against_float64(fn, arrays, _rand(*y_t.shape, seed=3), dt, ks, f"conv1d {kw}")


CONVT = [((2, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
         ((2, 4, 5, 4), (4, 3, 3, 2), dict(padding=1, groups=2, dilation=2)),
         ((1, 3, 4, 4), (3, 2, 1, 1), dict(stride=2)),
         ((2, 2, 3, 3), (2, 3, 3, 3), dict(stride=(1, 3), output_padding=(0, 2)))]


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("xs,ws,kw", CONVT, ids=[str(i) for i in range(len(CONVT))])
def test_conv_transpose2d_forward_backward(cpu_path, dt, xs, ws, kw):
    check_conv_transpose("conv_transpose2d", dt, xs, ws, kw)


def check_conv_transpose(name, dt, xs, ws, kw):
    """F.<name> forward and backward in dt against float64 within the sums' bound; the
    output shape equals torch's."""
    groups = kw.get("groups", 1)
    arrays = [_rand(*xs), _rand(*ws, seed=1), _rand(ws[1] * groups, seed=2)]
    fn = lambda M, x, w, b: getattr(M, name)(x, w, b, **kw)
    y_t = getattr(TF, name)(torch.from_numpy(arrays[0]), torch.from_numpy(arrays[1]), **kw)
    ks = _sums(arrays[0], arrays[1], y_t, groups, transposed=True)
    y, _ = check_against_float64(fn, arrays, _rand(*y_t.shape, seed=3), dt, ks, f"{name} {kw}")
    assert tuple(y.shape) == tuple(y_t.shape)


# --------------------------------------------------------------- ResNet-18 shapes
RESNET18 = [  # (C_in, H, C_out, k, stride, padding): its distinct conv layers at 224x224
    (3, 224, 64, 7, 2, 3), (64, 56, 64, 3, 1, 1), (64, 56, 128, 3, 2, 1),
    (64, 56, 128, 1, 2, 0), (128, 28, 128, 3, 1, 1), (128, 28, 256, 3, 2, 1),
    (256, 14, 256, 3, 1, 1), (256, 14, 512, 3, 2, 1), (512, 7, 512, 3, 1, 1),
]


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
@pytest.mark.parametrize("layer", RESNET18, ids=[f"{c}x{h}-{o}k{k}s{s}" for c, h, o, k, s, _
                                                 in RESNET18])
def test_resnet18_layer_shapes(dt, layer):
    c, h, o, k, s, p = layer
    arrays = [_rand(2, c, h, h), _rand(o, c, k, k, seed=1) * 0.1, None]
    fn = lambda M, x, w, b: M.conv2d(x, w, b, stride=s, padding=p)
    oh = (h + 2 * p - k) // s + 1
    ks = _sums(arrays[0], arrays[1], np.empty((2, o, oh, oh)), 1)
    check_against_float64(fn, arrays, _rand(2, o, oh, oh, seed=3), dt, ks, str(layer))


def test_batch_walked_in_blocks():
    """A batch whose column buffer exceeds the per-block bound (32 MiB) is
    walked in several blocks; the result is the whole batch's."""
    arrays = [_rand(6, 64, 56, 56), _rand(16, 64, 3, 3, seed=1) * 0.1, _rand(16, seed=2)]
    fn = lambda M, x, w, b: M.conv2d(x, w, b, padding=1)
    ks = _sums(arrays[0], arrays[1], np.empty((6, 16, 56, 56)), 1)
    check_against_float64(fn, arrays, _rand(6, 16, 56, 56, seed=3), "float32", ks, "blocks")


# ------------------------------------------------------------- layouts
@pytest.mark.parametrize("k", (3, 1))
@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_non_contiguous_inputs(dt, k):
    """A channels-last input (a permuted view), a transposed weight view, a
    sliced input and a non-contiguous incoming gradient give the results of
    their contiguous copies."""
    adt = getattr(ampy, dt)
    x = ampy.tensor(_rand(2, 6, 7, 3)).to(adt).permute(0, 3, 1, 2)   # (2, 3, 6, 7)
    w = ampy.tensor(_rand(3, 4, k, k, seed=1)).to(adt).transpose(0, 1)  # (4, 3, k, k)
    pad, stride = (1, (1, 2)) if k == 3 else (0, 1)  # (1x1: x is read in place as the GEMM's B)
    xs = ampy.tensor(_rand(2, 3, 12, 7, seed=2)).to(adt)[:, :, ::2]
    for xin in (x, xs):
        a, b = xin.detach().requires_grad_(), xin.contiguous().detach().requires_grad_()
        wa, wb = w.detach().requires_grad_(), w.contiguous().detach().requires_grad_()
        ya = F.conv2d(a, wa, padding=pad, stride=stride)
        yb = F.conv2d(b, wb, padding=pad, stride=stride)
        assert np.array_equal(_np(ya), _np(yb))
        g = ampy.tensor(_rand(*ya.shape[::-1], seed=4)).to(adt).permute(3, 2, 1, 0)
        ya.backward(g)
        yb.backward(g.contiguous())
        assert np.array_equal(_np(a.grad), _np(b.grad))
        assert np.array_equal(_np(wa.grad), _np(wb.grad))


def test_unbatched_input():
    x, w = _rand(3, 8, 8), _rand(4, 3, 3, 3, seed=1)
    y = F.conv2d(ampy.tensor(x), ampy.tensor(w), padding=1)
    yt = TF.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1)
    assert y.shape == tuple(yt.shape)
    np.testing.assert_allclose(_np(y), yt.numpy(), rtol=1e-5, atol=1e-5)
    x1, w1 = np.ascontiguousarray(x[:, 0]), np.ascontiguousarray(w[:, :, 0])
    y1 = F.conv1d(ampy.tensor(x1), ampy.tensor(w1))
    y1t = TF.conv1d(torch.from_numpy(x1), torch.from_numpy(w1))
    assert y1.shape == tuple(y1t.shape)
    np.testing.assert_allclose(_np(y1), y1t.numpy(), rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------- autocast
@pytest.mark.parametrize("ac", ("bfloat16", "float16"))
@pytest.mark.parametrize("op", ("conv1d", "conv2d", "conv_transpose2d"))
def test_autocast_dtypes_match_torch(ac, op):
    """Convolutions are on torch's lower-precision list on cpu: a float32
    input and weight run in the autocast dtype; the float32 parameters get
    float32 gradients."""
    shapes = {"conv1d": ((2, 3, 8), (4, 3, 3), 4), "conv2d": ((2, 3, 6, 6), (4, 3, 3, 3), 4),
              "conv_transpose2d": ((2, 3, 5, 5), (3, 4, 3, 3), 4)}[op]
    x, w, b = _rand(*shapes[0]), _rand(*shapes[1], seed=1), _rand(shapes[2], seed=2)
    xa, wa, ba = (ampy.tensor(v).requires_grad_() for v in (x, w, b))
    xt, wt, bt = (torch.from_numpy(v).requires_grad_() for v in (x, w, b))
    with ampy.autocast("cpu", dtype=getattr(ampy, ac)):
        ya = getattr(F, op)(xa, wa, ba)
    with torch.autocast("cpu", dtype=getattr(torch, ac)):
        yt = getattr(TF, op)(xt, wt, bt)
    assert str(ya.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1] == ac
    np.testing.assert_allclose(_np(ya), _np(yt), rtol=ROUND[ac] * 4, atol=ROUND[ac] * 4)
    ya.float().sum().backward()
    yt.float().sum().backward()
    for a, t in ((xa, xt), (wa, wt), (ba, bt)):
        assert a.grad.dtype is ampy.float32 and t.grad.dtype is torch.float32
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=0.05, atol=0.05)


# ---------------------------------------------------------------- errors
def _x(*s):
    return ampy.tensor(_rand(*s))


BAD = [  # (fn, exception, message fragment); each raises in torch too
    (lambda M, t: M.conv2d(t(2, 3), t(8, 3, 3, 3)), RuntimeError,
     "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [2, 3]"),
    (lambda M, t: M.conv2d(t(2, 3, 10, 10), t(8, 4, 3, 3)), RuntimeError,
     "Given groups=1, weight of size [8, 4, 3, 3], expected input[2, 3, 10, 10] to have 4 "
     "channels, but got 3 channels instead"),
    (lambda M, t: M.conv2d(t(2, 4, 10, 10), t(6, 2, 3, 3), groups=4), RuntimeError,
     "expected weight to be divisible by 4 at dimension 0"),
    (lambda M, t: M.conv2d(t(1, 3, 2, 2), t(8, 3, 3, 3)), RuntimeError,
     "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size "
     "can't be greater than actual input size"),
    (lambda M, t: M.conv1d(t(2, 3, 2), t(8, 3, 3)), RuntimeError,
     "Calculated padded input size per channel: (2). Kernel size: (3)."),
    (lambda M, t: M.conv2d(t(2, 3, 8, 8), t(8, 3, 3, 3), padding="foo"), RuntimeError,
     "Invalid padding string: 'foo'"),
    (lambda M, t: M.conv2d(t(2, 3, 8, 8), t(8, 3, 3, 3), padding="same", stride=2),
     RuntimeError, "padding='same' is not supported for strided convolutions"),
    (lambda M, t: M.conv2d(t(2, 3, 8, 8), t(8, 3, 3, 3), padding=-1), RuntimeError,
     "negative padding is not supported"),
    (lambda M, t: M.conv2d(t(2, 3, 8, 8), t(8, 3, 3, 3), stride=0), RuntimeError,
     "non-positive stride is not supported"),
    (lambda M, t: M.conv2d(t(2, 3, 8, 8), t(8, 3, 3, 3), dilation=0), RuntimeError,
     "non-positive dilation is not supported"),
    (lambda M, t: M.conv2d(t(2, 3, 8, 8), t(8, 3, 3, 3), groups=0), RuntimeError,
     "non-positive groups is not supported"),
    (lambda M, t: M.conv2d(t(2, 3, 8, 8), t(8, 3, 3, 3), stride=(1, 2, 3)), RuntimeError,
     "expected stride to be a single integer value or a list of 2 values"),
    (lambda M, t: M.conv2d(t(2, 3, 8, 8), t(8, 3, 3, 3), t(7)), RuntimeError,
     "expected bias to be 1-dimensional with 8 elements, but got bias of size [7] instead"),
    (lambda M, t: M.conv_transpose2d(t(2, 3, 8, 8), t(4, 8, 3, 3)), RuntimeError,
     "Given transposed=1, weight of size [4, 8, 3, 3], expected input[2, 3, 8, 8] to have 4 "
     "channels, but got 3 channels instead"),
    (lambda M, t: M.conv_transpose2d(t(2, 3, 8, 8), t(3, 8, 3, 3), stride=2, output_padding=2),
     RuntimeError, "output padding must be smaller than either stride or dilation"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments_raise_as_torch(i):
    assert_raises_as_torch(BAD[i], F, TF, _rand)


def test_dtype_mismatch_raises():
    with pytest.raises(RuntimeError, match=r"Input type \(float\) and weight type \(double\)"):
        F.conv2d(_x(1, 3, 5, 5), _x(2, 3, 3, 3).double())
    with pytest.raises(RuntimeError, match=r"Input type \(float\) and bias type \(double\)"):
        F.conv2d(_x(1, 3, 5, 5), _x(2, 3, 3, 3), _x(2).double())
    with pytest.raises(TypeError, match="argument 'input'"):
        F.conv2d(np.zeros((1, 3, 5, 5)), _x(2, 3, 3, 3))


@requires_cuda
@pytest.mark.parametrize("dt", ("float32", "bfloat16", "float16"))
def test_cuda_equals_the_cpu(dt):
    arrays, kw = _conv2d_case(*CONV2D[1])
    fn = lambda M, x, w, b: M.conv2d(x, w, b, **kw)
    adt = getattr(ampy, dt)
    cpu = [ampy.tensor(a).to(adt).requires_grad_() for a in arrays]
    gpu = [ampy.tensor(a).to(adt).cuda().detach().requires_grad_() for a in arrays]
    yc, yg = fn(F, *cpu), fn(F, *gpu)
    g = ampy.tensor(_rand(*yc.shape, seed=3)).to(adt)
    yc.backward(g)
    yg.backward(g.cuda())
    tol = 1e-4 if dt == "float32" else 2 * ROUND[dt]
    for a, b in [(yc, yg)] + [(c.grad, d.grad) for c, d in zip(cpu, gpu)]:
        np.testing.assert_allclose(_np(a), _np(b.cpu()), rtol=tol, atol=tol)


def test_conv_math_c_unit_test(tmp_path):
    """tests/c/test_conv_math.c: the index arithmetic and the geometry check
    that the CPU kernel and its CUDA twin share (ampy/conv_math.h)."""
    import os
    import shutil
    import subprocess
    import sysconfig
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cc = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) or shutil.which("gcc")
    assert cc, "no C compiler (the extension needs one too)"
    exe = str(tmp_path / "test_conv_math")
    r = subprocess.run([cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror",
                        "-I" + os.path.join(here, "csrc", "include"),
                        os.path.join(here, "tests", "c", "test_conv_math.c"),
                        os.path.join(here, "csrc", "status.c"), "-o", exe],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
