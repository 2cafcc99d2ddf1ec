"""The cnn ops (ampy/nn/_ops_cnn.py, kernels csrc/cnn_*.c) against torch 2.13
CPU: batch_norm, group_norm, max_pool2d, avg_pool2d, adaptive_avg_pool2d,
pad (constant / reflect / replicate / circular) and interpolate (nearest,
bilinear), forward and backward, in float32, float64, bfloat16 and float16,
on every CPU path (the `cpu_path` fixture), with strided inputs.

Tolerances. Bits where ampy's loop is torch's: the pools (a max, or a
window sum in the same order, divided once), padding and nearest
interpolation (copies; their backward adds in the same order), batch
norm's forward (per-channel sums in double, torch's fused x * alpha + beta),
the bilinear forward except float16 (torch's two kernel forms) and, for
half data, every other op (one rounding of a float32 result). Where
torch's kernel sums in an order ampy does not reproduce (its vectorised
reductions in the norm backwards and group norm statistics, the order in
which autograd adds circular padding's wrapped gradients, its float16
bilinear forward and the bilinear backward), the bound is float64 math on
the same values: ampy's error against the float64 result is at most twice
torch's plus 4 epsilons of the result's largest magnitude.
"""
import numpy as np
import pytest

import ampy
import ampy.nn.functional as AF

from _helpers import EPS, TORCH_DTYPE, bits, host_f64

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = (ampy.float32, ampy.float64, ampy.bfloat16, ampy.float16)
HALF = (ampy.bfloat16, ampy.float16)


def _np(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _to_ampy(x, dt, grad=True, layout=None):
    a = ampy.tensor(x).to(dt)
    if layout == "transposed":  # the same values through a non-contiguous view
        a = ampy.tensor(np.ascontiguousarray(np.swapaxes(x, -1, -2))).to(dt).transpose(-1, -2)
        assert not a.is_contiguous()
    return a.requires_grad_() if grad else a


def _to_torch(x, dt, grad=True):
    t = torch.from_numpy(x.copy()).to(TORCH_DTYPE[dt])
    return t.requires_grad_() if grad else t


def _params(fn_a, fn_t, xs, dt, layout=None, seed=7):
    """Run fn on both libraries from the same values; returns (ampy out,
    torch out, ampy grads, torch grads, float64 out, float64 grads)."""
    a_in = [_to_ampy(x, dt, layout=layout if i == 0 else None) for i, x in enumerate(xs)]
    t_in = [_to_torch(x, dt) for x in xs]
    r_in = [torch.from_numpy(x.copy()).to(TORCH_DTYPE[dt]).double().requires_grad_()
            for x in xs]
    ya, yt, yr = fn_a(*a_in), fn_t(*t_in), fn_t(*r_in)
    g = _np(tuple(yt.shape), seed)
    ya.backward(ampy.tensor(g).to(dt))
    yt.backward(_to_torch(g, dt, grad=False))
    yr.backward(torch.from_numpy(g).to(TORCH_DTYPE[dt]).double())
    return (ya, yt, [a.grad for a in a_in], [t.grad for t in t_in], yr,
            [r.grad for r in r_in])


def _same(a, t):
    assert a.dtype is not None and str(a.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_array_equal(bits(a), bits(t))


def _near(a, t, ref, dt):
    """ampy within twice torch's error against float64 plus 4 eps of the scale."""
    a, t, ref = host_f64(a), t.detach().double().numpy(), ref.detach().numpy()
    scale = max(float(np.max(np.abs(ref))), 1e-30) if ref.size else 1.0
    err_a, err_t = np.abs(a - ref), np.abs(t - ref)
    bound = 2 * err_t + 4 * EPS[dt] * scale
    assert np.all(err_a <= bound), float(np.max(err_a - bound))


def _check(fn_a, fn_t, xs, dt, exact_fwd, exact_bwd, layout=None):
    ya, yt, ga, gt, yr, gr = _params(fn_a, fn_t, xs, dt, layout)
    assert ya.dtype is dt and tuple(ya.shape) == tuple(yt.shape)
    (_same if exact_fwd else lambda a, t: _near(a, t, yr, dt))(ya, yt)
    for a, t, r in zip(ga, gt, gr):
        if t is None:
            assert a is None
            continue
        assert a.dtype is dt
        if exact_bwd:
            _same(a, t)
        else:
            _near(a, t, r, dt)


X = (3, 5, 9, 11)

POOL_CASES = {
    "max k3 s2 p1": (lambda M: lambda x: M.nn.functional.max_pool2d(x, 3, 2, 1), True),
    "max k(2,3) dil2 ceil": (lambda M: lambda x: M.nn.functional.max_pool2d(
        x, (2, 3), (1, 2), (1, 1), 2, True), True),
    "max overlapping k3 s1": (lambda M: lambda x: M.nn.functional.max_pool2d(x, 3, 1), True),
    "avg k3 s2 p1": (lambda M: lambda x: M.nn.functional.avg_pool2d(x, 3, 2, 1), True),
    "avg ceil no pad count": (lambda M: lambda x: M.nn.functional.avg_pool2d(
        x, 3, 2, 1, True, False), True),
    "avg divisor 5": (lambda M: lambda x: M.nn.functional.avg_pool2d(
        x, (2, 4), 1, divisor_override=5), True),
    "adaptive (4,5)": (lambda M: lambda x: M.nn.functional.adaptive_avg_pool2d(x, (4, 5)), True),
    "adaptive (None,13)": (lambda M: lambda x: M.nn.functional.adaptive_avg_pool2d(
        x, (None, 13)), True),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_pools_bits_equal_torch(cpu_path, case, dt):
    mk, exact = POOL_CASES[case]
    _check(mk(ampy), mk(torch), [_np(X, 1)], dt, exact, exact)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_adaptive_avg_pool_1x1_is_the_mean(dt):
    """torch computes a 1x1 adaptive pool as mean over the last two dims;
    ampy too (its mean's summation order is its own: float64-refereed)."""
    mk = lambda M: lambda x: M.nn.functional.adaptive_avg_pool2d(x, 1)  # noqa: E731
    _check(mk(ampy), mk(torch), [_np(X, 2)], dt, dt in HALF, True)


def test_max_pool_nan_and_ties_pick_torchs_index():
    x = np.array([[[[1.0, 3.0, 3.0, np.nan], [3.0, 2.0, np.nan, 1.0], [-np.inf, -np.inf, 0, 0],
                    [-np.inf, -np.inf, 0, 0]]]], np.float32)
    ya, ia = AF.max_pool2d(ampy.tensor(x), 2, return_indices=True)
    yt, it = TF.max_pool2d(torch.from_numpy(x), 2, return_indices=True)
    np.testing.assert_array_equal(ia.numpy(), it.numpy())
    np.testing.assert_array_equal(bits(ya), bits(yt))
    assert ia.dtype is ampy.int64


PAD_CASES = {
    "constant 2d": ((2, 3, 1, 4), "constant", True),
    "constant crop": ((-2, 3, 1, -4), "constant", True),
    "constant 3 dims": ((1, 1, 0, 2, 1, 0), "constant", True),
    "reflect 2d": ((2, 3, 1, 4), "reflect", True),
    "reflect 1d": ((4, 1), "reflect", True),
    "replicate 2d": ((2, 3, 1, 4), "replicate", True),
    "replicate 3d": ((1, 2, 0, 1, 2, 1), "replicate", True),
    "circular 2d": ((2, 3, 1, 4), "circular", False),
}


@pytest.mark.parametrize("case", sorted(PAD_CASES))
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_pad_against_torch(cpu_path, case, dt):
    pads, mode, exact_bwd = PAD_CASES[case]
    shape = (2, 3, 6, 7) if len(pads) < 6 or mode == "constant" else (2, 3, 4, 6, 7)
    if mode == "reflect" and len(pads) == 2:
        shape = (2, 3, 7)
    mk = lambda M: lambda x: M.nn.functional.pad(x, pads, mode=mode)  # noqa: E731
    _check(mk(ampy), mk(torch), [_np(shape, 3)], dt, True, exact_bwd)


def test_pad_constant_value():
    x = _np((2, 3, 4), 4)
    _same(AF.pad(ampy.tensor(x), (1, 2), value=-3.5), TF.pad(torch.from_numpy(x), (1, 2),
                                                            value=-3.5))


INTERP_CASES = {
    "nearest x2": (dict(scale_factor=2), True, True),
    "nearest size": (dict(size=(5, 17)), True, True),
    "nearest 0.6": (dict(scale_factor=0.6), True, True),
    "bilinear x1.7": (dict(scale_factor=1.7, mode="bilinear"), True, False),
    "bilinear size": (dict(size=(13, 4), mode="bilinear"), True, False),
    "bilinear align size": (dict(size=(5, 17), mode="bilinear", align_corners=True), True, False),
    "bilinear recompute": (dict(scale_factor=1.3, mode="bilinear",
                                recompute_scale_factor=True), True, False),
}


@pytest.mark.parametrize("case", sorted(INTERP_CASES))
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_interpolate_against_torch(cpu_path, case, dt):
    kw, exact_fwd, exact_bwd = INTERP_CASES[case]
    exact_fwd = exact_fwd and not (kw.get("mode") == "bilinear" and dt is ampy.float16)
    mk = lambda M: lambda x: M.nn.functional.interpolate(x, **kw)  # noqa: E731
    _check(mk(ampy), mk(torch), [_np(X, 5)], dt, exact_fwd, exact_bwd)


def _bn(M, training, rm=None, rv=None):
    def fn(x, w, b):
        return M.nn.functional.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5)
    return fn


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("shape", [(4, 6, 9, 11), (16, 6), (5, 6, 7)], ids=str)
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_batch_norm_against_torch(cpu_path, dt, shape, training):
    """Forward: bits in float32 (torch's double statistics of float values and
    fused affine); halves within 1 ulp of the half result (one rounding of a
    float32 value whose last bit may differ); float64 and (N, C) inputs,
    whose statistics torch sums in its vectorised order, float64-refereed.
    Backward: float64-refereed."""
    pdt = ampy.float64 if dt is ampy.float64 else ampy.float32
    rmn, rvn = _np(6, 8), np.abs(_np(6, 9)) + 0.5
    stats = lambda M, conv: (None, None) if training else (conv(rmn), conv(rvn))  # noqa: E731
    ra = stats(ampy, lambda v: ampy.tensor(v).to(pdt))
    rt = stats(torch, lambda v: torch.from_numpy(v).to(TORCH_DTYPE[pdt]))
    xs = [_np(shape, 10), _np(6, 11), _np(6, 12)]
    a_in = [_to_ampy(xs[0], dt)] + [_to_ampy(v, pdt) for v in xs[1:]]
    t_in = [_to_torch(xs[0], dt)] + [_to_torch(v, pdt) for v in xs[1:]]
    r_in = [torch.from_numpy(v).double().requires_grad_() for v in xs]
    ya, yt = _bn(ampy, training, *ra)(*a_in), _bn(torch, training, *rt)(*t_in)
    rr = tuple(None if v is None else v.double() for v in rt)
    yr = _bn(torch, training, *rr)(*r_in)
    if dt in HALF:
        d = np.abs(host_f64(ya) - yt.detach().double().numpy())
        assert np.all(d <= EPS[dt] * np.abs(yt.detach().double().numpy()) + 1e-6)
    elif dt is ampy.float32 and (len(shape) > 2 or not training):
        _same(ya, yt)
    else:  # float64 sums, and (N, C) inputs, in torch's vectorised order
        _near(ya, yt, yr, dt)
    g = _np(tuple(yt.shape), 13)
    ya.backward(ampy.tensor(g).to(dt))
    yt.backward(_to_torch(g, dt, grad=False))
    yr.backward(torch.from_numpy(g).double())
    for a, t, r, want in zip(a_in, t_in, r_in, (dt, pdt, pdt)):
        assert a.grad.dtype is want
        _near(a.grad, t.grad, r.grad, want if dt not in HALF else dt)


@pytest.mark.parametrize("groups,affine", [(3, True), (1, False), (6, True)])
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_group_norm_against_torch(cpu_path, dt, groups, affine):
    pdt = ampy.float64 if dt is ampy.float64 else ampy.float32
    x, w, b = _np((4, 6, 5, 7), 14), _np(6, 15), _np(6, 16)
    a_in = [_to_ampy(x, dt)] + ([_to_ampy(w, pdt), _to_ampy(b, pdt)] if affine else [None, None])
    t_in = [_to_torch(x, dt)] + ([_to_torch(w, pdt), _to_torch(b, pdt)] if affine else [None] * 2)
    r_in = [torch.from_numpy(v).double().requires_grad_() for v in (x, w, b)]
    if not affine:
        r_in[1:] = [None, None]
    ya, yt = AF.group_norm(a_in[0], groups, *a_in[1:]), TF.group_norm(t_in[0], groups, *t_in[1:])
    yr = TF.group_norm(r_in[0], groups, *r_in[1:])
    _near(ya, yt, yr, dt)
    g = _np(tuple(yt.shape), 17)
    ya.backward(ampy.tensor(g).to(dt))
    yt.backward(_to_torch(g, dt, grad=False))
    yr.backward(torch.from_numpy(g).double())
    for a, t, r in zip(a_in, t_in, r_in):
        if a is not None:
            _near(a.grad, t.grad, r.grad, dt)


@pytest.mark.parametrize("op", ["max", "avg", "adaptive", "reflect", "bilinear", "bn", "gn"])
def test_strided_input_equals_contiguous(op):
    """A transposed (non-contiguous) view gives the contiguous input's bits,
    forward and backward."""
    fns = {"max": lambda x: AF.max_pool2d(x, 3, 2, 1),
           "avg": lambda x: AF.avg_pool2d(x, 2, 1, 1, count_include_pad=False),
           "adaptive": lambda x: AF.adaptive_avg_pool2d(x, (3, 4)),
           "reflect": lambda x: AF.pad(x, (2, 1, 3, 2), mode="reflect"),
           "bilinear": lambda x: AF.interpolate(x, scale_factor=1.5, mode="bilinear"),
           "bn": lambda x: AF.batch_norm(x, None, None, training=True),
           "gn": lambda x: AF.group_norm(x, 5)}
    x = _np(X, 18)
    a, s = _to_ampy(x, ampy.float32), _to_ampy(x, ampy.float32, layout="transposed")
    ya, ys = fns[op](a), fns[op](s)
    _same(ys, ya)
    g = ampy.tensor(_np(tuple(ya.shape), 19))
    ya.backward(g)
    ys.backward(g)
    _same(s.grad, a.grad)


def test_running_stats_trajectory_matches_torch():
    """Five training steps then eval, momentum 0.1 and momentum None
    (cumulative average), float32 running stats compared as bits."""
    for momentum in (0.1, None, 0.7):
        bn_a = ampy.nn.BatchNorm2d(4, momentum=momentum)
        bn_t = torch.nn.BatchNorm2d(4, momentum=momentum)
        for step in range(5):
            x = _np((3, 4, 5, 6), 100 + step) * (step + 1) + step
            ya, yt = bn_a(ampy.tensor(x)), bn_t(torch.from_numpy(x))
            _same(ya, yt)
            for name in ("running_mean", "running_var"):
                np.testing.assert_array_equal(bits(getattr(bn_a, name)),
                                              bits(getattr(bn_t, name)), err_msg=name)
            assert int(bn_a.num_batches_tracked.item()) == int(bn_t.num_batches_tracked) == step + 1
        bn_a.eval()
        bn_t.eval()
        x = _np((2, 4, 5, 6), 200)
        _same(bn_a(ampy.tensor(x)), bn_t(torch.from_numpy(x)))


def test_batch_norm_half_input_float_stats_match_torch():
    """bf16 activations with float32 weights and running stats (what autocast
    hands batch_norm): the output is bf16, the running stats float32, as torch."""
    bn_a, bn_t = ampy.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4)
    x = _np((3, 4, 5, 6), 300)
    for dt in HALF:
        ya, yt = bn_a(ampy.tensor(x).to(dt)), bn_t(torch.from_numpy(x).to(TORCH_DTYPE[dt]))
        assert ya.dtype is dt and bn_a.running_mean.dtype is ampy.float32
        d = np.abs(host_f64(ya) - yt.detach().double().numpy())
        assert np.all(d <= EPS[dt] * np.abs(yt.detach().double().numpy()) + 1e-6)
        np.testing.assert_allclose(bn_a.running_var.numpy(), bn_t.running_var.numpy(),
                                   rtol=1e-6)
