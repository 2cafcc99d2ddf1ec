"""F.conv_transpose1d and nn.ConvTranspose1d against torch 2.13 CPU: forward
and the three gradients within the fp32-accumulation bound of torch's
float64 (test_conv.py's check) in every dtype and on every CPU path, strided
inputs, unbatched input, autocast dtypes, the second derivative, the
module's parameters / output_size, and bad arguments (torch's messages,
inputs unchanged after the raise)."""
import numpy as np
import pytest

import ampy
import ampy.nn.functional as F
from ampy import nn

from _helpers import assert_raises_as_torch, requires_cuda
from test_conv import (DTS, ROUND, TF, _np, _rand,
                       check_conv_transpose, torch)

CONVT1 = [((2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
          ((2, 4, 6), (4, 3, 2), dict(padding=1, groups=2, dilation=2)),
          ((1, 3, 5), (3, 2, 1), dict(stride=2)),
          ((2, 2, 5), (2, 3, 3), dict(stride=3, output_padding=2, dilation=2)),
          ((2, 6, 9), (6, 1, 4), dict(stride=2, padding=2, groups=3, output_padding=1))]


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("xs,ws,kw", CONVT1, ids=[str(i) for i in range(len(CONVT1))])
def test_conv_transpose1d_forward_backward(cpu_path, dt, xs, ws, kw):
    check_conv_transpose("conv_transpose1d", dt, xs, ws, kw)


def test_float64_equals_torch_and_grad_fn_name():
    x, w, b = _rand(2, 4, 7), _rand(4, 3, 3, seed=1), _rand(6, seed=2)
    kw = dict(stride=2, padding=1, output_padding=1, groups=2)
    xa, wa, ba = (ampy.tensor(v).double().requires_grad_() for v in (x, w, b))
    xt, wt, bt = (torch.from_numpy(v).double().requires_grad_() for v in (x, w, b))
    ya, yt = F.conv_transpose1d(xa, wa, ba, **kw), TF.conv_transpose1d(xt, wt, bt, **kw)
    assert type(ya.grad_fn).__name__ == "ConvTranspose1dBackward0"  # torch: ConvolutionBackward0
    np.testing.assert_allclose(_np(ya), _np(yt), rtol=1e-12, atol=1e-12)
    g = _rand(*yt.shape, seed=3)
    ya.backward(ampy.tensor(g).double())
    yt.backward(torch.from_numpy(g).double())
    for a, t in ((xa, xt), (wa, wt), (ba, bt)):
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_strided_inputs(dt):
    """A transposed (non-contiguous) input and weight and an offset view give
    the contiguous result."""
    xbig, wbig = _rand(2, 9, 4), _rand(3, 4, 5, seed=1)
    d = getattr(ampy, dt)
    xa = ampy.tensor(xbig).to(d).transpose(1, 2)[:, :, 1:8]        # (2, 4, 7), strided
    wa = ampy.tensor(wbig).to(d).transpose(0, 1)[:, :, 1:4]        # (4, 3, 3), strided
    assert not xa.is_contiguous() and not wa.is_contiguous()
    y = F.conv_transpose1d(xa, wa, stride=2, padding=1)
    yc = F.conv_transpose1d(xa.contiguous(), wa.contiguous(), stride=2, padding=1)
    assert np.array_equal(_np(y), _np(yc))
    xt = torch.from_numpy(np.ascontiguousarray(_np(xa))).float()
    wt = torch.from_numpy(np.ascontiguousarray(_np(wa))).float()
    ref = TF.conv_transpose1d(xt, wt, stride=2, padding=1).numpy()
    np.testing.assert_allclose(_np(y), ref, rtol=ROUND[dt] * 4, atol=ROUND[dt] * 8)


def test_unbatched_input():
    x, w = _rand(4, 6), _rand(4, 3, 3, seed=1)
    ya = F.conv_transpose1d(ampy.tensor(x), ampy.tensor(w), stride=2)
    yt = TF.conv_transpose1d(torch.from_numpy(x), torch.from_numpy(w), stride=2)
    assert tuple(ya.shape) == tuple(yt.shape)
    np.testing.assert_allclose(_np(ya), yt.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ac", ("bfloat16", "float16"))
def test_autocast_dtypes_match_torch(ac):
    """On torch's cpu lower-precision list: float32 input and weight run in
    the autocast dtype; the float32 leaves get float32 gradients."""
    x, w, b = _rand(2, 3, 5), _rand(3, 4, 3, seed=1), _rand(4, seed=2)
    xa, wa, ba = (ampy.tensor(v).requires_grad_() for v in (x, w, b))
    xt, wt, bt = (torch.from_numpy(v).requires_grad_() for v in (x, w, b))
    with ampy.autocast("cpu", dtype=getattr(ampy, ac)):
        ya = F.conv_transpose1d(xa, wa, ba, stride=2)
    with torch.autocast("cpu", dtype=getattr(torch, ac)):
        yt = TF.conv_transpose1d(xt, wt, bt, stride=2)
    assert str(ya.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1] == ac
    np.testing.assert_allclose(_np(ya), _np(yt), rtol=ROUND[ac] * 4, atol=ROUND[ac] * 4)
    ya.float().sum().backward()
    yt.float().sum().backward()
    for a, t in ((xa, xt), (wa, wt), (ba, bt)):
        assert a.grad.dtype is ampy.float32 and t.grad.dtype is torch.float32
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=0.05, atol=0.05)


def test_second_derivative_matches_torch():
    x, w = _rand(2, 4, 5), _rand(4, 3, 3, seed=1)
    kw = dict(stride=2, padding=1, output_padding=1, groups=2)
    outs = []
    for M, mk in ((F, lambda v: ampy.tensor(v).double().requires_grad_()),
                  (TF, lambda v: torch.from_numpy(v).double().requires_grad_())):
        xx, ww = mk(x), mk(w)
        y = M.conv_transpose1d(xx, ww, **kw)
        gx, = (ampy if M is F else torch).autograd.grad((y * y).sum(), [xx], create_graph=True)
        gw, = (ampy if M is F else torch).autograd.grad(gx.sum(), [ww])
        outs.append((_np(gx), _np(gw)))
    for a, t in zip(*outs):
        np.testing.assert_allclose(a, t, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- module
def _pair(args, kw):
    t = torch.nn.ConvTranspose1d(*args, **kw)
    a = nn.ConvTranspose1d(*args, **kw)
    a.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return a, t


@pytest.mark.parametrize("args,kw", [((4, 6, 3), dict(stride=2, padding=1, output_padding=1)),
                                     ((4, 6, 2), dict(groups=2, dilation=2, bias=False))])
def test_module_matches_torch(args, kw):
    a, t = _pair(args, kw)
    assert repr(a) == repr(t)
    assert {k: tuple(v.shape) for k, v in a.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in t.state_dict().items()}
    x = _rand(2, 4, 6)
    xa, xt = ampy.tensor(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
    ya, yt = a(xa), t(xt)
    np.testing.assert_allclose(_np(ya), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    ya.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(_np(xa.grad), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(a.weight.grad), t.weight.grad.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("size", [[11], [12], [2, 6, 12], (6, 12)])
def test_module_output_size(size):
    a, t = _pair((4, 6, 3), dict(stride=2))
    x = _rand(2, 4, 5)
    xa, xt = ampy.tensor(x), torch.from_numpy(x)
    if len(size) == 2:  # unbatched input: (C, L) with a (C, L) output_size
        xa, xt = xa[0], xt[0]
    ya, yt = a(xa, output_size=size), t(xt, output_size=size)
    assert tuple(ya.shape) == tuple(yt.shape)
    np.testing.assert_allclose(_np(ya), yt.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_module_bad_output_size_and_padding_mode():
    a, t = _pair((4, 6, 3), dict(stride=2))
    x = _rand(2, 4, 5)
    for size, msg in (([20], "requested an output size of"),
                      ([1, 2, 3, 4], "ConvTranspose1D: for 3D input, output_size must have 1 "
                                     "or 3 elements (got 4)")):
        with pytest.raises(ValueError) as et:
            t(torch.from_numpy(x), output_size=size)
        with pytest.raises(ValueError) as ea:
            a(ampy.tensor(x), output_size=size)
        assert msg in str(et.value) and msg in str(ea.value)
    for M in (torch.nn, nn):
        with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for '
                                             'ConvTranspose1d'):
            M.ConvTranspose1d(4, 6, 3, padding_mode="reflect")


# ---------------------------------------------------------------- errors
BAD = [  # (fn, exception, message fragment); each raises in torch too
    (lambda M, t: M.conv_transpose1d(t(2, 3, 5), t(4, 3, 3)), RuntimeError,
     "Given transposed=1, weight of size [4, 3, 3], expected input[2, 3, 5] to have 4 "
     "channels, but got 3 channels instead"),
    (lambda M, t: M.conv_transpose1d(t(2, 4, 5), t(4, 3, 3), stride=2, output_padding=2),
     RuntimeError, "output padding must be smaller than either stride or dilation, but got "
     "output_padding_height: 0 output_padding_width: 2 stride_height: 1 stride_width: 2"),
    (lambda M, t: M.conv_transpose1d(t(2, 4, 5), t(4, 3, 3), output_padding=-1), RuntimeError,
     "negative output_padding is not supported"),
    (lambda M, t: M.conv_transpose1d(t(2, 4, 5), t(4, 3, 3), groups=3), RuntimeError,
     "expected weight to be divisible by 3 at dimension 0"),
    (lambda M, t: M.conv_transpose1d(t(2, 4, 5), t(4, 3, 3), stride=0), RuntimeError,
     "non-positive stride is not supported"),
    (lambda M, t: M.conv_transpose1d(t(2, 4, 5), t(4, 3, 3), padding="same"), TypeError,
     "conv_transpose1d(): argument 'padding' must be tuple of ints, not str"),
    (lambda M, t: M.conv_transpose1d(t(4, 5, 2, 2), t(4, 3, 3)), RuntimeError,
     "Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d"),
    (lambda M, t: M.conv_transpose1d(t(2, 4, 5), t(4, 3, 3), t(4)), RuntimeError,
     "expected bias to be 1-dimensional with 3 elements"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments_raise_as_torch(i):
    assert_raises_as_torch(BAD[i], F, TF, _rand)


@requires_cuda
@pytest.mark.parametrize("dt", ("float32", "bfloat16", "float16"))
def test_cuda_equals_the_cpu(dt):
    xs, ws, kw = CONVT1[0]
    arrays = [_rand(*xs), _rand(*ws, seed=1), _rand(ws[1], seed=2)]
    adt = getattr(ampy, dt)
    cpu = [ampy.tensor(a).to(adt).requires_grad_() for a in arrays]
    gpu = [ampy.tensor(a).to(adt).cuda().detach().requires_grad_() for a in arrays]
    yc, yg = F.conv_transpose1d(*cpu, **kw), F.conv_transpose1d(*gpu, **kw)
    g = ampy.tensor(_rand(*yc.shape, seed=3)).to(adt)
    yc.backward(g)
    yg.backward(g.cuda())
    tol = 1e-4 if dt == "float32" else 2 * ROUND[dt]
    for a, b in [(yc, yg)] + [(c.grad, d.grad) for c, d in zip(cpu, gpu)]:
        np.testing.assert_allclose(_np(a), _np(b.cpu()), rtol=tol, atol=tol)
