"""F.conv3d, F.conv_transpose3d, nn.Conv3d and nn.ConvTranspose3d against
torch 2.13 CPU.

Numbers: forward and the three gradients in every dtype and on every CPU
path within the fp32-accumulation bound of torch's float64 on the same
values (test_conv.py's check: 2*K*2^-24*sum|a*b| plus half an ulp of the
dtype, so a half result must be ONE rounding of a float32 sum; a case whose
depth taps cancel shows a per-tap rounding would break it); float64 and
float32 next to torch's own within 1e-12 / 1e-5. Then strided inputs (the
bits of their contiguous copies), batch 1 and unbatched input, autocast
dtypes, the second derivative, the modules (parameters, repr, state_dicts
both ways, init bounds, padding modes, output_size), torch's messages for
bad arguments with the inputs unchanged, and a small 3-d CNN trained five
steps next to torch."""
import math

import numpy as np
import pytest

import ampy
import ampy.nn.functional as F
from ampy import nn

from _helpers import assert_raises_as_torch, requires_cuda
from test_conv import (DTS, ROUND, TF, _np, _rand, _sums, check_against_float64,
                       check_conv_transpose, torch)

CONV3D = [  # (x shape, w shape, kwargs)
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), dict()),
    ((2, 4, 7, 6, 5), (6, 2, 3, 2, 3), dict(stride=(2, 1, 2), padding=(1, 0, 2),
                                            dilation=(2, 1, 1), groups=2)),
    ((1, 4, 6, 5, 5), (4, 1, 3, 3, 3), dict(padding=1, groups=4)),              # depthwise
    ((2, 3, 6, 5, 7), (4, 3, 2, 3, 2), dict(padding="same", dilation=(2, 1, 3))),  # even k
    ((2, 3, 9, 5, 5), (4, 3, 3, 1, 1), dict(stride=3)),                         # (3, 1, 1)
    ((2, 3, 4, 6, 6), (5, 3, 1, 3, 3), dict(padding=(0, 1, 1))),                # (1, 3, 3)
    ((2, 4, 4, 5, 5), (6, 4, 1, 1, 1), dict(bias=False)),                       # pointwise
    ((1, 2, 5, 5, 4), (3, 2, 3, 3, 3), dict(padding="valid", stride=(1, 2, 1))),
]

CONVT3D = [
    ((2, 4, 3, 4, 5), (4, 3, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 3, 4, 3), (4, 3, 3, 2, 3), dict(padding=1, groups=2, dilation=2)),
    ((1, 3, 3, 4, 4), (3, 2, 1, 1, 1), dict(stride=2)),          # depths no tap reaches
    ((2, 2, 3, 3, 3), (2, 3, 4, 3, 3), dict(stride=(3, 1, 2), output_padding=(2, 0, 1),
                                            dilation=(2, 1, 1))),
    ((2, 6, 4, 3, 3), (6, 1, 3, 3, 3), dict(stride=(2, 2, 1), padding=(2, 1, 1), groups=3,
                                            output_padding=(1, 1, 0))),
    ((2, 4, 3, 4, 4), (4, 3, 2, 2, 2), dict(stride=2)),          # the 3-d U-Net up-step
]


def _case(xs, ws, kw):
    kw = dict(kw)
    bias = kw.pop("bias", True)
    return [_rand(*xs), _rand(*ws, seed=1), _rand(ws[0], seed=2) if bias else None], kw


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("xs,ws,kw", CONV3D, ids=[str(i) for i in range(len(CONV3D))])
def test_conv3d_forward_backward(cpu_path, dt, xs, ws, kw):
    arrays, kw = _case(xs, ws, kw)
    fn = lambda M, x, w, b: M.conv3d(x, w, b, **kw)
    y_t = TF.conv3d(torch.from_numpy(arrays[0]), torch.from_numpy(arrays[1]), None, **kw)
    ks = _sums(arrays[0], arrays[1], y_t, kw.get("groups", 1))
    y, _ = check_against_float64(fn, arrays, _rand(*y_t.shape, seed=3), dt, ks,
                                 f"conv3d {xs} {ws} {kw}")
    assert tuple(y.shape) == tuple(y_t.shape) and y.is_contiguous()


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("xs,ws,kw", CONVT3D, ids=[str(i) for i in range(len(CONVT3D))])
def test_conv_transpose3d_forward_backward(cpu_path, dt, xs, ws, kw):
    check_conv_transpose("conv_transpose3d", dt, xs, ws, kw)


@pytest.mark.parametrize("dt", ("float64", "float32"))
@pytest.mark.parametrize("op,case", [("conv3d", c) for c in (CONV3D[1], CONV3D[3])] +
                         [("conv_transpose3d", c) for c in (CONVT3D[0], CONVT3D[4])])
def test_close_to_torch_same_dtype(dt, op, case):
    """ampy and torch in the same dtype: float64 within 1e-12, float32 1e-5."""
    xs, ws, kw = case
    groups = kw.get("groups", 1)
    nb = ws[0] if op == "conv3d" else ws[1] * groups
    x, w, b = _rand(*xs), _rand(*ws, seed=1), _rand(nb, seed=2)
    xa, wa, ba = (ampy.tensor(v).to(getattr(ampy, dt)).requires_grad_() for v in (x, w, b))
    xt, wt, bt = (torch.from_numpy(v).to(getattr(torch, dt)).requires_grad_()
                  for v in (x, w, b))
    ya, yt = getattr(F, op)(xa, wa, ba, **kw), getattr(TF, op)(xt, wt, bt, **kw)
    assert type(ya.grad_fn).__name__ == ("Conv3dBackward0" if op == "conv3d"
                                         else "ConvTranspose3dBackward0")
    tol = 1e-12 if dt == "float64" else 1e-5
    np.testing.assert_allclose(_np(ya), _np(yt), rtol=tol, atol=tol)
    g = _rand(*yt.shape, seed=3)
    ya.backward(ampy.tensor(g).to(getattr(ampy, dt)))
    yt.backward(torch.from_numpy(g).to(getattr(torch, dt)))
    for a, t in ((xa, xt), (wa, wt), (ba, bt)):
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=tol, atol=tol * 10)


def _cancelling_case():
    """Depth taps that cancel: the input is constant along depth and the
    weight's taps are +v, -v + small, so each tap's 2-d sum is large and the
    output small."""
    x = np.repeat(_rand(2, 4, 1, 6, 6), 4, axis=2) * 8
    v = _rand(3, 4, 1, 3, 3, seed=1)
    w = np.concatenate([v, -v + 0.01 * _rand(3, 4, 1, 3, 3, seed=2)], axis=2)
    return x.astype(np.float32), w.astype(np.float32)


@pytest.mark.parametrize("dt", ("bfloat16", "float16"))
def test_half_is_one_rounding_of_the_float32_sum(cpu_path, dt):
    """The bound of check_against_float64 holds where the depth taps cancel,
    and fails for per-tap conv2d results rounded to dt and then summed (the
    bound can fail)."""
    x, w = _cancelling_case()
    fn = lambda M, x, w, b: M.conv3d(x, w, b)
    y_t = TF.conv3d(torch.from_numpy(x), torch.from_numpy(w))
    ks = _sums(x, w, y_t, 1)
    check_against_float64(fn, [x, w, None], _rand(*y_t.shape, seed=3), dt, ks, "cancel")
    # per-tap rounding, summed in float32 after: outside the bound
    adt = getattr(ampy, dt)
    xr = ampy.tensor(x).to(adt)
    wr = ampy.tensor(w).to(adt)
    taps = [F.conv2d(xr[:, :, k:k + 3].permute(0, 2, 1, 3, 4).reshape(-1, 4, 6, 6),
                     wr[:, :, k]).float() for k in range(2)]
    naive = (taps[0] + taps[1]).reshape(2, 3, 3, 4, 4).permute(0, 2, 1, 3, 4)
    ref = TF.conv3d(torch.from_numpy(x).to(getattr(torch, dt)).double(),
                    torch.from_numpy(w).to(getattr(torch, dt)).double()).numpy()
    absref = TF.conv3d(torch.from_numpy(x).to(getattr(torch, dt)).double().abs(),
                       torch.from_numpy(w).to(getattr(torch, dt)).double().abs()).numpy()
    tol = 2 * ks[0] * 2.0 ** -24 * absref + ROUND[dt] * np.abs(ref)
    naive = np.asarray(naive.to(adt).to(ampy.float64))
    assert np.any(np.abs(naive - ref) > tol)


def _random_case(rng, transposed):
    """A random geometry: groups, kernel, stride, dilation, padding (or
    "same"), output_padding, batch and volume."""
    g, cg, og = int(rng.choice([1, 2, 3])), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    k, s, d, p = (tuple(int(v) for v in rng.integers(lo, hi, 3))
                  for lo, hi in ((1, 4), (1, 4), (1, 3), (0, 3)))
    xs = (int(rng.integers(1, 3)), g * cg) + tuple(int(v) for v in rng.integers(1, 7, 3))
    if transposed:
        opad = tuple(int(rng.integers(0, max(a, b))) for a, b in zip(s, d))
        return xs, (g * cg, og) + k, g * og, dict(stride=s, padding=p, output_padding=opad,
                                                  dilation=d, groups=g)
    if rng.random() < 0.2:
        p, s = "same", 1
    return xs, (g * og, cg) + k, g * og, dict(stride=s, padding=p, dilation=d, groups=g)


@pytest.mark.parametrize("op", ("conv3d", "conv_transpose3d"))
def test_random_geometries_float64(op):
    """60 seeded random geometries: where torch computes, ampy's output shape,
    forward and gradients are torch's within 1e-10 in float64; where torch
    raises, ampy raises too."""
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(60):
        xs, ws, nb, kw = _random_case(rng, op == "conv_transpose3d")
        x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(nb)
        xt, wt, bt = (torch.from_numpy(v).requires_grad_() for v in (x, w, b))
        try:
            yt = getattr(TF, op)(xt, wt, bt, **kw)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                getattr(F, op)(ampy.tensor(x), ampy.tensor(w), ampy.tensor(b), **kw)
            continue
        xa, wa, ba = (ampy.tensor(v).requires_grad_() for v in (x, w, b))
        ya = getattr(F, op)(xa, wa, ba, **kw)
        assert tuple(ya.shape) == tuple(yt.shape), (xs, ws, kw)
        g = rng.standard_normal(tuple(yt.shape))
        yt.backward(torch.from_numpy(g))
        ya.backward(ampy.tensor(g))
        for a, t in ((ya, yt), (xa.grad, xt.grad), (wa.grad, wt.grad), (ba.grad, bt.grad)):
            np.testing.assert_allclose(_np(a), _np(t), rtol=1e-10, atol=1e-10,
                                       err_msg=f"{xs} {ws} {kw}")
        compared += 1
    assert compared >= 30


# ---------------------------------------------------------------- layouts
@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_non_contiguous_inputs(dt):
    """A channels-last input, a sliced input, a permuted weight and a
    non-contiguous output gradient give the bits of their contiguous copies,
    for conv3d and conv_transpose3d."""
    adt = getattr(ampy, dt)
    x_cl = ampy.tensor(_rand(2, 5, 6, 7, 3)).to(adt).permute(0, 4, 1, 2, 3)   # (2, 3, 5, 6, 7)
    x_sl = ampy.tensor(_rand(2, 3, 10, 6, 7, seed=2)).to(adt)[:, :, ::2]      # (2, 3, 5, 6, 7)
    w = ampy.tensor(_rand(3, 4, 3, 3, 3, seed=1)).to(adt).transpose(0, 1)     # (4, 3, 3, 3, 3)
    wt = ampy.tensor(_rand(4, 3, 3, 3, 3, seed=6)).to(adt).transpose(0, 1)    # (3, 4, 3, 3, 3)
    for op, kw, win in (("conv3d", dict(padding=1, stride=(2, 1, 2)), w),
                        ("conv_transpose3d", dict(stride=2, padding=1), wt)):
        for xin in (x_cl, x_sl):
            assert not xin.is_contiguous() and not win.is_contiguous()
            a, b = xin.detach().requires_grad_(), xin.contiguous().detach().requires_grad_()
            wa, wb = win.detach().requires_grad_(), win.contiguous().detach().requires_grad_()
            ya, yb = getattr(F, op)(a, wa, **kw), getattr(F, op)(b, wb, **kw)
            assert np.array_equal(_np(ya), _np(yb))
            g = ampy.tensor(_rand(*ya.shape[::-1], seed=4)).to(adt).permute(4, 3, 2, 1, 0)
            ya.backward(g)
            yb.backward(g.contiguous())
            assert np.array_equal(_np(a.grad), _np(b.grad))
            assert np.array_equal(_np(wa.grad), _np(wb.grad))
            xt = torch.from_numpy(np.ascontiguousarray(_np(xin))).float()
            wt = torch.from_numpy(np.ascontiguousarray(_np(win))).float()
            ref = getattr(TF, op)(xt, wt, **kw).numpy()
            tol = max(ROUND[dt] * 4, 1e-5)
            np.testing.assert_allclose(_np(ya), ref, rtol=tol, atol=tol * 4)


@pytest.mark.parametrize("op", ("conv3d", "conv_transpose3d"))
def test_unbatched_and_batch_1(op):
    x, w = _rand(3, 4, 5, 6), _rand(3, 3, 3, 3, 3, seed=1)
    kw = dict(padding=1) if op == "conv3d" else dict(stride=2, output_padding=1)
    for xs in (x, x[None]):
        xa = ampy.tensor(np.ascontiguousarray(xs)).requires_grad_()
        xt = torch.from_numpy(np.ascontiguousarray(xs)).requires_grad_()
        ya = getattr(F, op)(xa, ampy.tensor(w), **kw)
        yt = getattr(TF, op)(xt, torch.from_numpy(w), **kw)
        assert tuple(ya.shape) == tuple(yt.shape)
        np.testing.assert_allclose(_np(ya), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        ya.sum().backward()
        yt.sum().backward()
        assert tuple(xa.grad.shape) == tuple(xs.shape)
        np.testing.assert_allclose(_np(xa.grad), xt.grad.numpy(), rtol=1e-5, atol=1e-4)


def test_empty_batch():
    w = _rand(4, 3, 3, 3, 3, seed=1)
    y = F.conv3d(ampy.zeros((0, 3, 5, 5, 5)), ampy.tensor(w), padding=1)
    assert tuple(y.shape) == tuple(TF.conv3d(torch.zeros(0, 3, 5, 5, 5), torch.from_numpy(w),
                                             padding=1).shape)


# -------------------------------------------------------------- autocast
@pytest.mark.parametrize("ac", ("bfloat16", "float16"))
@pytest.mark.parametrize("op", ("conv3d", "conv_transpose3d"))
def test_autocast_dtypes_match_torch(ac, op):
    """On torch's cpu lower-precision list: float32 input and weight run in the
    autocast dtype; the float32 leaves get float32 gradients."""
    ws = (4, 3, 3, 3, 3) if op == "conv3d" else (3, 4, 3, 3, 3)
    x, w, b = _rand(2, 3, 4, 5, 5), _rand(*ws, seed=1), _rand(4, seed=2)
    xa, wa, ba = (ampy.tensor(v).requires_grad_() for v in (x, w, b))
    xt, wt, bt = (torch.from_numpy(v).requires_grad_() for v in (x, w, b))
    with ampy.autocast("cpu", dtype=getattr(ampy, ac)):
        ya = getattr(F, op)(xa, wa, ba, padding=1)
    with torch.autocast("cpu", dtype=getattr(torch, ac)):
        yt = getattr(TF, op)(xt, wt, bt, padding=1)
    assert str(ya.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1] == ac
    # against float64 on the autocast-rounded values (torch's own float16
    # conv_transpose3d on the CPU is off by ~0.04 here; ampy's is one rounding)
    r = [torch.from_numpy(v).to(getattr(torch, ac)).double() for v in (x, w, b)]
    ref = getattr(TF, op)(*r, padding=1).numpy()
    absref = getattr(TF, op)(*(t.abs() for t in r), padding=1).numpy()
    err = np.abs(_np(ya) - ref)
    assert np.all(err <= 2 * 81 * 2.0 ** -24 * absref + ROUND[ac] * np.abs(ref)), err.max()
    ya.float().sum().backward()
    yt.float().sum().backward()
    for a, t in ((xa, xt), (wa, wt), (ba, bt)):
        assert a.grad.dtype is ampy.float32 and t.grad.dtype is torch.float32
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=0.05, atol=0.1)


def test_autocast_float64_input_stays_float64():
    """torch's lower_precision_fp casts only float32 (and half) inputs."""
    x, w = _rand(1, 2, 4, 4, 4), _rand(3, 2, 3, 3, 3, seed=1)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        ya = F.conv3d(ampy.tensor(x).double(), ampy.tensor(w).double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = TF.conv3d(torch.from_numpy(x).double(), torch.from_numpy(w).double())
    assert str(ya.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1]


# ------------------------------------------------------- second derivative
@pytest.mark.parametrize("op,xs,ws,kw", [
    ("conv3d", (2, 4, 5, 4, 4), (6, 2, 3, 2, 3), dict(stride=(2, 1, 1), padding=1,
                                                      dilation=(1, 1, 2), groups=2)),
    ("conv3d", (1, 2, 4, 4, 5), (3, 2, 2, 3, 2), dict(padding="same")),
    ("conv_transpose3d", (2, 4, 3, 3, 2), (4, 3, 3, 2, 3), dict(stride=2, padding=1,
                                                                output_padding=1, groups=2)),
])
def test_second_derivative_matches_torch(op, xs, ws, kw):
    x, w = _rand(*xs), _rand(*ws, seed=1)
    outs = []
    for M, lib in ((F, ampy), (TF, torch)):
        mk = ((lambda v: ampy.tensor(v).double().requires_grad_()) if lib is ampy else
              (lambda v: torch.from_numpy(v).double().requires_grad_()))
        xx, ww = mk(x), mk(w)
        y = getattr(M, op)(xx, ww, **kw)
        gx, gw = lib.autograd.grad((y * y).sum(), [xx, ww], create_graph=True)
        hx, hw = lib.autograd.grad((gx * gx).sum() + gw.sum(), [xx, ww])
        outs.append([_np(t) for t in (gx, gw, hx, hw)])
    for a, t in zip(*outs):
        np.testing.assert_allclose(a, t, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- modules
MODULES = [
    ("Conv3d", (3, 6, 3), dict()),
    ("Conv3d", (4, 6, (1, 3, 3)), dict(stride=(1, 2, 2), padding=(0, 1, 1), groups=2,
                                       bias=False)),
    ("Conv3d", (4, 4, 3), dict(padding="same", groups=4, dilation=(2, 1, 1))),
    ("Conv3d", (3, 5, 3), dict(padding=1, padding_mode="reflect")),
    ("Conv3d", (3, 5, (3, 2, 3)), dict(padding=(1, 1, 2), padding_mode="replicate")),
    ("Conv3d", (2, 4, 2), dict(padding="same", padding_mode="circular")),
    ("ConvTranspose3d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1)),
    ("ConvTranspose3d", (4, 6, (3, 2, 2)), dict(groups=2, dilation=2, bias=False)),
    ("ConvTranspose3d", (4, 2, 2), dict(stride=2)),
]
MIDS = [f"{n}-{i}" for i, (n, _, _) in enumerate(MODULES)]


def _minput(c, seed=5):
    return np.random.default_rng(seed).standard_normal((2, c, 4, 5, 6)).astype(np.float32)


def _to_torch_state(sd):
    return {k: torch.from_numpy(np.asarray(v.detach()).copy()) for k, v in sd.items()}


@pytest.mark.parametrize("name,args,kw", MODULES, ids=MIDS)
def test_module_state_dict_both_ways_and_repr(name, args, kw):
    a, t = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(a) == repr(t)
    sa, st = a.state_dict(), t.state_dict()
    assert list(sa) == list(st)
    assert [tuple(v.shape) for v in sa.values()] == [tuple(v.shape) for v in st.values()]
    x = _minput(args[0])
    a.load_state_dict({k: ampy.tensor(v.numpy()) for k, v in st.items()})     # torch -> ampy
    xa, xt = ampy.tensor(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
    ya, yt = a(xa), t(xt)
    np.testing.assert_allclose(_np(ya), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    (ya ** 2).sum().backward()
    (yt ** 2).sum().backward()
    np.testing.assert_allclose(_np(xa.grad), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    for (na, pa), (nt, pt) in zip(a.named_parameters(), t.named_parameters()):
        assert na == nt
        np.testing.assert_allclose(_np(pa.grad), pt.grad.numpy(), rtol=1e-4, atol=1e-3)
    a2, t2 = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    t2.load_state_dict(_to_torch_state(a2.state_dict()))                      # ampy -> torch
    np.testing.assert_allclose(_np(a2(ampy.tensor(x))), t2(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,args", [("Conv3d", (8, 16, 3)), ("ConvTranspose3d", (8, 4, 3))])
def test_init_bounds_as_torch(name, args):
    """kaiming_uniform_(a=sqrt(5)): weight and bias U(-1/sqrt(fan_in), ...)
    with fan_in = weight.shape[1] * prod(kernel), as torch."""
    ampy.manual_seed(0)
    m = getattr(nn, name)(*args)
    w = np.asarray(m.weight.detach())
    assert w.shape == tuple(getattr(torch.nn, name)(*args).weight.shape)
    bound = 1 / math.sqrt(w.shape[1] * math.prod(w.shape[2:]))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    b = np.asarray(m.bias.detach())
    assert np.abs(b).max() <= bound and b.std() > 0


def test_module_dtype_and_unbatched():
    m = nn.Conv3d(2, 3, 3, padding=1, dtype=ampy.bfloat16)
    assert m.weight.dtype is ampy.bfloat16
    y = m(ampy.tensor(_rand(2, 4, 4, 4)).to(ampy.bfloat16))
    assert tuple(y.shape) == (3, 4, 4, 4) and y.dtype is ampy.bfloat16


@pytest.mark.parametrize("size", [[7, 9, 11], [8, 10, 12], [2, 6, 8, 9, 12], (6, 7, 9, 11)])
def test_conv_transpose3d_output_size(size):
    t = torch.nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1)
    a = nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1)
    a.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    x = _minput(4)
    xa, xt = ampy.tensor(x), torch.from_numpy(x)
    if len(size) == 4:  # unbatched input with a (C, D, H, W) output_size
        xa, xt = xa[0], xt[0]
    ya, yt = a(xa, output_size=size), t(xt, output_size=size)
    assert tuple(ya.shape) == tuple(yt.shape)
    np.testing.assert_allclose(_np(ya), yt.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_conv_transpose3d_bad_output_size_and_padding_mode():
    t, a = torch.nn.ConvTranspose3d(4, 6, 3, stride=2), nn.ConvTranspose3d(4, 6, 3, stride=2)
    x = _minput(4)
    for size, msg in (([20, 9, 11], "requested an output size of"),
                      ([1, 2, 3, 4], "ConvTranspose3D: for 5D input, output_size must have 3 "
                                     "or 5 elements (got 4)")):
        with pytest.raises(ValueError) as et:
            t(torch.from_numpy(x), output_size=size)
        with pytest.raises(ValueError) as ea:
            a(ampy.tensor(x), output_size=size)
        assert msg in str(et.value) and msg in str(ea.value)
    with pytest.raises(ValueError) as et:
        torch.nn.ConvTranspose3d(4, 6, 3, padding_mode="reflect")
    with pytest.raises(ValueError) as ea:
        nn.ConvTranspose3d(4, 6, 3, padding_mode="reflect")
    assert str(et.value) == str(ea.value)


# the modules' constructor errors: test_conv_modules.py's test_constructor_errors_as_torch


def test_reflect_padding_too_large_raises_as_torch():
    t = torch.nn.Conv3d(1, 1, 3, padding=3, padding_mode="reflect")
    a = nn.Conv3d(1, 1, 3, padding=3, padding_mode="reflect")
    x = np.zeros((1, 1, 3, 3, 3), np.float32)
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        t(torch.from_numpy(x))
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        a(ampy.tensor(x))


# ---------------------------------------------------------------- errors
BAD = [  # (fn, exception, message fragment); each raises in torch too
    (lambda M, t: M.conv3d(t(5, 6, 7), t(6, 4, 3, 3, 3)), RuntimeError,
     "Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of size: "
     "[5, 6, 7]"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 3, 3, 3, 3)), RuntimeError,
     "Given groups=1, weight of size [6, 3, 3, 3, 3], expected input[2, 4, 5, 6, 7] to have 3 "
     "channels, but got 4 channels instead"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 2, 3, 3, 3), groups=3), RuntimeError,
     "Given groups=3, weight of size [6, 2, 3, 3, 3], expected input[2, 4, 5, 6, 7] to have 6 "
     "channels, but got 4 channels instead"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 4, 3, 3, 3), groups=4), RuntimeError,
     "expected weight to be divisible by 4 at dimension 0"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 4, 7, 3, 3)), RuntimeError,
     "Calculated padded input size per channel: (5 x 6 x 7). Kernel size: (7 x 3 x 3). Kernel "
     "size can't be greater than actual input size"),
    (lambda M, t: M.conv3d(t(1, 2, 3, 3, 3), t(2, 2, 2, 2, 2), dilation=(3, 1, 1)),
     RuntimeError, "Kernel size: (4 x 2 x 2)."),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 4, 3, 3, 3), padding="foo"), RuntimeError,
     "Invalid padding string: 'foo'"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 4, 3, 3, 3), padding="same", stride=2),
     RuntimeError, "padding='same' is not supported for strided convolutions"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 4, 3, 3, 3), stride=(1, 2)), RuntimeError,
     "expected stride to be a single integer value or a list of 3 values"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 4, 3, 3, 3), padding=-1), RuntimeError,
     "negative padding is not supported"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 4, 3, 3, 3), stride=0), RuntimeError,
     "non-positive stride is not supported"),
    (lambda M, t: M.conv3d(t(2, 4, 5, 6, 7), t(6, 4, 3, 3, 3), t(5)), RuntimeError,
     "Given weight of size [6, 4, 3, 3, 3], expected bias to be 1-dimensional with 6 elements, "
     "but got bias of size [5] instead"),
    (lambda M, t: M.conv_transpose3d(t(2, 3, 4, 4, 4), t(4, 2, 3, 3, 3)), RuntimeError,
     "Given transposed=1, weight of size [4, 2, 3, 3, 3], expected input[2, 3, 4, 4, 4] to "
     "have 4 channels, but got 3 channels instead"),
    (lambda M, t: M.conv_transpose3d(t(2, 4, 5, 6, 7), t(4, 2, 3, 3, 3), stride=2,
                                     output_padding=(1, 2, 3)), RuntimeError,
     "output padding must be smaller than either stride or dilation, but got "
     "output_padding_depth: 1 output_padding_height: 2 output_padding_width: 3 stride_depth: 2 "
     "stride_height: 2 stride_width: 2 dilation_depth: 1 dilation_height: 1 dilation_width: 1"),
    (lambda M, t: M.conv_transpose3d(t(2, 4, 5, 6, 7), t(4, 2, 3, 3, 3), padding="same"),
     TypeError, "conv_transpose3d(): argument 'padding' must be tuple of ints, not str"),
    (lambda M, t: M.conv_transpose3d(t(5, 6, 7), t(4, 2, 3, 3, 3)), RuntimeError,
     "Expected 4D (unbatched) or 5D (batched) input to conv_transpose3d, but got input of "
     "size: [5, 6, 7]"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments_raise_as_torch(i):
    assert_raises_as_torch(BAD[i], F, TF, _rand)


def test_wrong_channels_in_module_forward():
    m, t = nn.Conv3d(4, 6, 3), torch.nn.Conv3d(4, 6, 3)
    x = np.zeros((2, 3, 5, 5, 5), np.float32)
    with pytest.raises(RuntimeError) as et:
        t(torch.from_numpy(x))
    with pytest.raises(RuntimeError) as ea:
        m(ampy.tensor(x))
    assert str(ea.value) == str(et.value)


def test_dtype_mismatch_raises():
    x, w = ampy.tensor(_rand(1, 2, 4, 4, 4)), ampy.tensor(_rand(3, 2, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"Input type \(float\) and weight type \(double\)"):
        F.conv3d(x, w.double())
    with pytest.raises(RuntimeError, match=r"Input type \(float\) and bias type \(double\)"):
        F.conv_transpose3d(x, ampy.tensor(_rand(2, 3, 3, 3, 3)), ampy.zeros(3).double())


# ------------------------------------------------------- a small 3-d CNN
def _cnn(lib):
    nn_ = lib.nn
    return nn_.Sequential(nn_.Conv3d(2, 6, 3, padding=1), nn_.ReLU(),
                          nn_.Conv3d(6, 8, (1, 3, 3), stride=2, padding=(0, 1, 1)), nn_.ReLU(),
                          nn_.ConvTranspose3d(8, 4, 2, stride=2), nn_.ReLU(),
                          nn_.Conv3d(4, 1, 1))


def test_small_3d_cnn_trains_as_torch():
    """Five SGD steps from the same initial weights on the same data: the
    losses and the final parameters match torch's."""
    torch.manual_seed(0)
    tm = _cnn(torch)
    am = _cnn(ampy)
    am.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 4, 6, 6)).astype(np.float32)
    target = rng.standard_normal((2, 1, 4, 6, 6)).astype(np.float32)
    topt = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    aopt = ampy.optim.SGD(am.parameters(), lr=0.05, momentum=0.9)
    la, lt = [], []
    for _ in range(5):
        topt.zero_grad()
        aopt.zero_grad()
        loss_t = TF.mse_loss(tm(torch.from_numpy(x)), torch.from_numpy(target))
        loss_a = F.mse_loss(am(ampy.tensor(x)), ampy.tensor(target))
        loss_t.backward()
        loss_a.backward()
        topt.step()
        aopt.step()
        lt.append(loss_t.item())
        la.append(loss_a.item())
    assert lt[-1] < lt[0]
    np.testing.assert_allclose(la, lt, rtol=1e-5, atol=1e-6)
    for (na, pa), (nt, pt) in zip(am.named_parameters(), tm.named_parameters()):
        assert na == nt
        np.testing.assert_allclose(_np(pa), pt.detach().numpy(), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- GPU
@requires_cuda
@pytest.mark.parametrize("dt", ("float32", "bfloat16", "float16"))
@pytest.mark.parametrize("op,case", [("conv3d", CONV3D[1]), ("conv_transpose3d", CONVT3D[0]),
                                     ("conv_transpose3d", CONVT3D[2])])
def test_cuda_equals_the_cpu(dt, op, case):
    xs, ws, kw = case
    nb = ws[0] if op == "conv3d" else ws[1] * kw.get("groups", 1)
    arrays = [_rand(*xs), _rand(*ws, seed=1), _rand(nb, seed=2)]
    adt = getattr(ampy, dt)
    cpu = [ampy.tensor(a).to(adt).requires_grad_() for a in arrays]
    gpu = [ampy.tensor(a).to(adt).cuda().detach().requires_grad_() for a in arrays]
    yc, yg = getattr(F, op)(*cpu, **kw), getattr(F, op)(*gpu, **kw)
    assert yg.is_cuda
    g = ampy.tensor(_rand(*yc.shape, seed=3)).to(adt)
    yc.backward(g)
    yg.backward(g.cuda())
    tol = 1e-4 if dt == "float32" else 2 * ROUND[dt]
    for a, b in [(yc, yg)] + [(c.grad, d.grad) for c, d in zip(cpu, gpu)]:
        np.testing.assert_allclose(_np(a), _np(b.cpu()), rtol=tol, atol=tol * 4)
