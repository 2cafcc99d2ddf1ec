"""The direct (implicit-GEMM) conv2d forward (csrc/conv_direct.c) on the
shapes that reach its edges, on every CPU path (the cpu_path fixture: the
direct kernel runs at the AVX-512 level for float32 and at AVX512-BF16 for
bfloat16; the other levels take the patch-row GEMM, so the same cases check
the fallback): output channels past one 32-wide panel and a ragged last
panel, odd channel counts (bfloat16 channel pairs), more than 64 channels
(a channel-blocked kernel's second block), rows 256 bytes apart (a padded
row gap), weights past 384 KiB (panel-major work items), a short last
14-row tile, many chunks of tiles, fewer than 64 output positions (a
minimum-size rule's fallback), stride, dilation, asymmetric padding, a
kernel larger than the input, a batch walked in several padded blocks, and
non-contiguous inputs. Forward and gradients (the unit-stride input
gradient is this forward through bwd_input_as_conv) within test_conv's
float64 bound; integer-valued data (every float32 sum exact) gives torch's
float64 result rounded once to the dtype, bias included (compared as
float64 values, which hold both dtypes exactly).
"""
import numpy as np
import pytest

import ampy
import ampy.nn.functional as F

from test_conv import _np, _rand, _run_ampy, _sums, check_against_float64

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DIRECT = {  # name: (x shape, w shape, kwargs)
    "two panels, odd C": ((2, 5, 13, 11), (40, 5, 3, 3), dict(padding=1)),
    "stride dilation": ((1, 6, 15, 17), (33, 6, 3, 3), dict(stride=2, padding=2, dilation=2)),
    "channel blocks": ((1, 130, 8, 8), (8, 130, 3, 3), dict(padding=1)),
    "f32 row gap": ((1, 64, 9, 9), (16, 64, 3, 3), dict(padding=1)),
    "bf16 row gap": ((1, 128, 10, 10), (16, 128, 3, 3), dict(padding=(0, 1))),
    "panel-major": ((1, 256, 8, 8), (96, 256, 3, 3), dict(padding=1, bias=False)),
    "short last tile": ((3, 3, 5, 14), (7, 3, 1, 2), dict()),
    "few positions": ((3, 3, 2, 3), (7, 3, 1, 2), dict()),
    "many chunks": ((1, 4, 40, 37), (5, 4, 3, 3), dict(padding=1)),
    "kernel > input": ((1, 2, 8, 8), (3, 2, 9, 9), dict(padding=4)),
    "same, even kernel": ((1, 3, 8, 9), (4, 3, 4, 2), dict(padding="same")),
    "stride (1, 3)": ((2, 7, 9, 22), (9, 7, 2, 3), dict(stride=(1, 3), padding=(1, 0))),
    # tiles of 14 rows run across images: 49 positions (3.5 tiles) per image
    "tiles across images": ((5, 16, 7, 7), (40, 16, 3, 3), dict(padding=1)),
    # 105 tiles dealt to 14 chunks of 7 or 8 (not 13 of 8 and one of 1)
    "tiles dealt evenly": ((30, 24, 7, 7), (40, 24, 3, 3), dict(padding=1)),
    "1 position, 70 images": ((70, 3, 1, 1), (5, 3, 3, 3), dict(padding=1)),
    "63 positions, batch 1": ((1, 5, 7, 9), (6, 5, 3, 3), dict(padding=1)),  # below the rule
    # the padded copy's 16 x 16 transposes: full blocks and both tails
    "transpose tails": ((2, 35, 6, 40), (4, 35, 3, 3), dict(padding=1)),
    # a strided 1x1 is the unit-stride 1x1 of x[::sh, ::sw] (column stride 2 or 3)
    "1x1 stride 2": ((3, 20, 13, 11), (17, 20, 1, 1), dict(stride=2)),
    "1x1 stride 2 wide": ((2, 17, 9, 70), (5, 17, 1, 1), dict(stride=2)),
    "1x1 stride (2, 3)": ((2, 33, 40, 37), (9, 33, 1, 1), dict(stride=(2, 3))),
    "1x1 stride 2 padded": ((2, 9, 16, 15), (7, 9, 1, 1), dict(stride=2, padding=1)),
}


def _case(xs, ws, kw, scale=1.0):
    kw = dict(kw)
    bias = kw.pop("bias", True)
    return [_rand(*xs), _rand(*ws, seed=1) * scale, _rand(ws[0], seed=2) if bias else None], kw


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
@pytest.mark.parametrize("name", sorted(DIRECT))
def test_direct_shapes_against_float64(cpu_path, dt, name):
    xs, ws, kw = DIRECT[name]
    arrays, kw = _case(xs, ws, kw, 0.2)
    fn = lambda M, x, w, b: M.conv2d(x, w, b, **kw)  # noqa: E731
    y_t = TF.conv2d(torch.from_numpy(arrays[0]), torch.from_numpy(arrays[1]), None, **kw)
    ks = _sums(arrays[0], arrays[1], y_t, 1)
    check_against_float64(fn, arrays, _rand(*y_t.shape, seed=3), dt, ks, name)


def _ints(shape, seed, lo=-8, hi=8):
    return np.random.default_rng(seed).integers(lo, hi + 1, shape).astype(np.float32)


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
@pytest.mark.parametrize("name", sorted(DIRECT))
def test_direct_exact_sums_round_once(cpu_path, dt, name):
    """Integer data, bias in quarters: every float32 partial sum is exact, so
    the output is the float64 result (bias included) rounded once to dt."""
    xs, ws, kw = DIRECT[name]
    kw = dict(kw)
    bias = _ints(ws[0], 2, -400, 400) / 4 if kw.pop("bias", True) else None
    x, w = _ints(xs, 0), _ints(ws, 1)
    tdt, adt = getattr(torch, dt), getattr(ampy, dt)
    tb = None if bias is None else torch.from_numpy(bias).to(tdt).double()  # bias as dt holds it
    ref = TF.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), tb, **kw)
    assert ref.abs().max() < 2 ** 24
    got = F.conv2d(ampy.tensor(x).to(adt), ampy.tensor(w).to(adt),
                   None if bias is None else ampy.tensor(bias).to(adt), **kw)
    # float64 holds every float32 / bfloat16 exactly: equal values, equal bits (no zeros' sign
    # at stake: the sums are exact)
    assert np.array_equal(_np(got), ref.to(tdt).double().numpy()), name


def test_direct_batch_in_padded_blocks(cpu_path):
    """5 images of a 332x332x8 float32 padded copy (3.5 MB each) exceed the
    2 MB block: one block per image; the result is the whole batch's."""
    arrays, kw = _case((5, 8, 330, 330), (4, 8, 3, 3), dict(padding=1), 0.2)
    fn = lambda M, x, w, b: M.conv2d(x, w, b, **kw)  # noqa: E731
    y, _ = _run_ampy(fn, "float32", arrays, None, grad=False)
    ref = TF.conv2d(*[torch.from_numpy(a).double() for a in arrays], **kw)
    bound = TF.conv2d(*[torch.from_numpy(a).double().abs() for a in arrays], **kw)
    err = np.abs(_np(y) - ref.numpy())
    assert np.all(err <= 2 * 72 * 2.0 ** -24 * bound.numpy() + 2.0 ** -24 * ref.abs().numpy())


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_direct_non_contiguous_inputs(cpu_path, dt):
    """A channels-last view, a row-sliced view and a transposed weight give
    the bits of their contiguous copies (forward and gradients)."""
    adt = getattr(ampy, dt)
    x = ampy.tensor(_rand(2, 9, 11, 37)).to(adt).permute(0, 3, 1, 2)       # (2, 37, 9, 11)
    xs = ampy.tensor(_rand(2, 37, 18, 11, seed=2)).to(adt)[:, :, ::2]
    w = ampy.tensor(_rand(37, 35, 3, 3, seed=1) * 0.2).to(adt).transpose(0, 1)
    b = ampy.tensor(_rand(35, seed=5)).to(adt)
    for xin in (x, xs):
        a, c = xin.detach().requires_grad_(), xin.contiguous().detach().requires_grad_()
        ya = F.conv2d(a, w, b, padding=1)
        yc = F.conv2d(c, w.contiguous(), b, padding=1)
        assert np.array_equal(_np(ya), _np(yc))
        g = ampy.tensor(_rand(*ya.shape, seed=4)).to(adt)
        ya.backward(g)
        yc.backward(g)
        assert np.array_equal(_np(a.grad), _np(c.grad))


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_direct_tiles_across_padded_blocks(cpu_path, dt):
    """A 7x7 output in padded blocks of several images whose tiles straddle
    image boundaries (51 images of 9x9x512 bfloat16 / float32 padded copies:
    several 2 MB blocks, a ragged last one) gives torch's float64 result
    within the bound."""
    arrays, kw = _case((51, 512, 7, 7), (33, 512, 3, 3), dict(padding=1), 0.05)
    fn = lambda M, x, w, b: M.conv2d(x, w, b, **kw)  # noqa: E731
    y, _ = _run_ampy(fn, dt, arrays, None, grad=False)
    xs = [torch.from_numpy(a).to(getattr(torch, dt)).double() for a in arrays]
    ref = TF.conv2d(*xs, **kw)
    bound = TF.conv2d(*[a.abs() for a in xs], **kw)
    unit = 2.0 ** -24 if dt == "float32" else 2.0 ** -8
    err = np.abs(_np(y) - ref.numpy())
    assert np.all(err <= 2 * 4608 * 2.0 ** -24 * bound.numpy() + unit * ref.abs().numpy())


@pytest.mark.parametrize("dt", ("float32", "bfloat16", "float64"))
@pytest.mark.parametrize("groups", (1, 3))
def test_strided_1x1_views_give_the_contiguous_bits(cpu_path, dt, groups):
    """A strided 1x1 convolution (run as the 1x1 of x[::sh, ::sw]) on a
    column-sliced view, a channels-last view and a row-sliced view gives the
    bits of its contiguous copy, forward and gradients, ungrouped and grouped
    (the unfold path), in float64 too."""
    adt = getattr(ampy, dt)
    views = (ampy.tensor(_rand(2, 12, 9, 46)).to(adt)[..., ::2],                 # (2, 12, 9, 23)
             ampy.tensor(_rand(2, 9, 23, 12, seed=2)).to(adt).permute(0, 3, 1, 2),
             ampy.tensor(_rand(2, 12, 18, 23, seed=3)).to(adt)[:, :, ::2])
    w = ampy.tensor(_rand(6, 12 // groups, 1, 1, seed=1) * 0.3).to(adt)
    for xin in views:
        a, c = xin.detach().requires_grad_(), xin.contiguous().detach().requires_grad_()
        ya = F.conv2d(a, w, None, stride=(2, 3), groups=groups)
        yc = F.conv2d(c, w, None, stride=(2, 3), groups=groups)
        assert tuple(ya.shape) == (2, 6, 5, 8)
        assert np.array_equal(_np(ya), _np(yc))
        ref = TF.conv2d(torch.from_numpy(_np(c)), torch.from_numpy(_np(w)), None, stride=(2, 3),
                        groups=groups)
        k = 12 // groups
        unit = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -8, "float64": 2.0 ** -53}[dt]
        bound = TF.conv2d(torch.from_numpy(np.abs(_np(c))), torch.from_numpy(np.abs(_np(w))),
                          None, stride=(2, 3), groups=groups).numpy()
        acc = 2.0 ** -53 if dt == "float64" else 2.0 ** -24
        assert np.all(np.abs(_np(ya) - ref.numpy()) <= 2 * k * acc * bound
                      + unit * np.abs(ref.numpy()))
        g = ampy.tensor(_rand(*ya.shape, seed=4)).to(adt)
        ya.backward(g)
        yc.backward(g)
        assert np.array_equal(_np(a.grad), _np(c.grad))


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
@pytest.mark.parametrize("groups", (1, 2))
def test_direct_threads_same_bits(cpu_path, dt, groups):
    """Each output is one register sum in a fixed order whichever thread
    and chunk its tile falls in: the forward (tiles dealt evenly to the
    chunks; float32 in two padded blocks of 25 and 5 images) and the unit-stride input gradient (the
    flipped kernel built over the pool, then this forward) give the same
    bits at 1 and 2 threads."""
    adt = getattr(ampy, dt)
    xs, ws = (30, 256, 7, 7), (48, 256 // groups, 3, 3)
    x = ampy.tensor(_rand(*xs)).to(adt)
    w = ampy.tensor(_rand(*ws, seed=1) * 0.1).to(adt)
    b = ampy.tensor(_rand(ws[0], seed=2)).to(adt)
    g = ampy.tensor(_rand(30, 48, 7, 7, seed=3)).to(adt)
    geom = (1, 1, 1, 1, 1, 1, groups)
    got = {}
    old = ampy.get_num_threads()
    try:
        for nt in (1, 2):
            ampy.set_num_threads(nt)
            y = ampy._C.conv2d_fwd(x, w, b, (7, 7), geom)
            dx = ampy._C.conv2d_bwd_input(g, w, None, xs, geom)
            got[nt] = [np.asarray(t.float()).view(np.uint32) for t in (y, dx)]
    finally:
        ampy.set_num_threads(old)
    for a, c, what in zip(got[1], got[2], ("forward", "input gradient")):
        assert np.array_equal(a, c), what
