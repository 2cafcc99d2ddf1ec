"""InstanceNorm1d/2d/3d and F.instance_norm, BatchNorm3d, Dropout1d/3d against
torch 2.13 CPU.

instance_norm is torch's reduction to batch_norm over a (1, N*C, ...)
view, so its forward is batch_norm's kernel (bits with torch in float32,
as batch_norm's are) on every CPU path (`cpu_path`); gradients and float64
results are compared with torch's float64 result (ampy's error at most
twice torch's plus a few epsilons). The running stats are torch's batch
average of the per-sample updates: ampy's mean over the batch sums in
another order than torch's vectorised sum, so they are compared within 4
ulps over several training steps. Dropout1d/3d draw their masks from
ampy's generator: the tests check the channel structure, the scale and
the rate, not torch's random bits.
"""
import warnings

import numpy as np
import pytest

import ampy
import ampy.nn.functional as AF

from _helpers import EPS, TORCH_DTYPE, bits

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _x(shape, seed, scale=3.0, shift=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale + shift).astype(
        np.float32)


def _close(got, want, ref, dt, k=4.0):
    """|got - ref| <= 2 |want - ref| + k eps max|ref| (ref: float64 torch)."""
    got, want, ref = (np.asarray(v, dtype=np.float64) for v in (got, want, ref))
    bound = 2 * np.abs(want - ref) + k * EPS[dt] * (np.abs(ref).max() + 1e-30)
    assert np.all(np.abs(got - ref) <= bound), np.abs(got - ref).max()


def _np(t):
    return np.asarray(t.detach().double()) if isinstance(t, ampy.Tensor) else \
        t.detach().double().numpy()


SHAPES = {"InstanceNorm1d": (4, 3, 9), "InstanceNorm2d": (4, 3, 5, 6),
          "InstanceNorm3d": (2, 3, 3, 4, 5)}


@pytest.mark.parametrize("cls", sorted(SHAPES))
@pytest.mark.parametrize("dt", ("float32", "float64", "bfloat16", "float16"))
@pytest.mark.parametrize("affine", (False, True))
def test_training_forward_backward_equal_torch(cpu_path, cls, dt, affine):
    shape = SHAPES[cls]
    x = _x(shape, 1)
    ma = getattr(ampy.nn, cls)(3, affine=affine)
    mt = getattr(torch.nn, cls)(3, affine=affine)
    mr = getattr(torch.nn, cls)(3, affine=affine).double()
    if dt == "float64":  # (float32 parameters with a float64 input raise, in torch too)
        ma, mt = ma.double(), mt.double()
    if affine:
        w, b = _x((3,), 2, 1.0, 0.5), _x((3,), 3, 1.0, 0.0)
        for m, conv in ((ma, ampy.tensor), (mt, torch.tensor), (mr, torch.tensor)):
            with (ampy.no_grad() if m is ma else torch.no_grad()):
                m.weight.copy_(conv(w).to(m.weight.dtype))
                m.bias.copy_(conv(b).to(m.bias.dtype))
    a = ampy.tensor(x).to(getattr(ampy, dt)).requires_grad_()
    t = torch.from_numpy(x).to(TORCH_DTYPE[dt]).requires_grad_()
    r = torch.from_numpy(x).to(TORCH_DTYPE[dt]).double().requires_grad_()
    ya, yt, yr = ma(a), mt(t), mr(r)
    assert ya.dtype.name == str(yt.dtype).split(".")[-1]
    if dt == "float32":
        np.testing.assert_array_equal(bits(ya), bits(yt.detach()))
    _close(_np(ya), _np(yt), _np(yr), dt)
    g = _x(shape, 4, 1.0, 0.0)
    ya.backward(ampy.tensor(g).to(ya.dtype))
    yt.backward(torch.from_numpy(g).to(yt.dtype))
    yr.backward(torch.from_numpy(g).to(TORCH_DTYPE[dt]).double())
    _close(_np(a.grad), _np(t.grad), _np(r.grad), dt, 8.0)
    if affine:
        _close(_np(ma.weight.grad), _np(mt.weight.grad), _np(mr.weight.grad), dt, 8.0)
        _close(_np(ma.bias.grad), _np(mt.bias.grad), _np(mr.bias.grad), dt, 8.0)


def _ulps(a, t, dt):
    """|a - t| in epsilons of the largest running stat (the batch mean's rounding
    scales with the averaged values, not with a small result)."""
    a, t = np.asarray(a, np.float64), t.detach().double().numpy()
    return np.abs(a - t) / (EPS[dt] * max(np.abs(t).max(), 2.0**-10))


@pytest.mark.parametrize("cls", sorted(SHAPES))
@pytest.mark.parametrize("dt", ("float32", "float64"))
@pytest.mark.parametrize("momentum", (0.1, 0.5, None))
def test_running_stats_follow_torch_over_steps(cls, dt, momentum):
    shape = SHAPES[cls]
    kw = dict(affine=True, track_running_stats=True, momentum=momentum)
    ma, mt = getattr(ampy.nn, cls)(3, **kw), getattr(torch.nn, cls)(3, **kw)
    if dt == "float64":
        ma, mt = ma.double(), mt.double()
    for step in range(5):
        x = _x(shape, 10 + step, 2.0 + step, step - 2.0)
        ya = ma(ampy.tensor(x).to(getattr(ampy, dt)))
        yt = mt(torch.from_numpy(x).to(TORCH_DTYPE[dt]))
        _close(_np(ya), _np(yt), _np(yt), dt, 8.0)
        assert _ulps(ma.running_mean, mt.running_mean, dt).max() <= 4
        assert _ulps(ma.running_var, mt.running_var, dt).max() <= 4
        assert int(ma.num_batches_tracked.item()) == int(mt.num_batches_tracked.item()) == 0
    ma.eval(), mt.eval()
    x = _x(shape, 20)
    ya, yt = ma(ampy.tensor(x).to(getattr(ampy, dt))), mt(torch.from_numpy(x).to(
        TORCH_DTYPE[dt]))
    _close(_np(ya), _np(yt), _np(yt), dt, 16.0)
    assert _ulps(ma.running_var, mt.running_var, dt).max() <= 4


def test_functional_eval_with_running_stats_and_unbatched_module():
    x = _x((3, 4, 5), 5)
    rm, rv = _x((3,), 6, 0.5, 0.0), np.abs(_x((3,), 7, 0.5, 1.0))
    ya = AF.instance_norm(ampy.tensor(x)[None], ampy.tensor(rm), ampy.tensor(rv),
                          use_input_stats=False)
    yt = TF.instance_norm(torch.from_numpy(x)[None], torch.from_numpy(rm.copy()),
                          torch.from_numpy(rv.copy()), use_input_stats=False)
    _close(_np(ya), _np(yt), _np(yt), "float32", 4.0)
    ma, mt = ampy.nn.InstanceNorm2d(3), torch.nn.InstanceNorm2d(3)
    ya, yt = ma(ampy.tensor(x)), mt(torch.from_numpy(x))
    assert tuple(ya.shape) == tuple(yt.shape) == (3, 4, 5)
    np.testing.assert_array_equal(bits(ya), bits(yt))


@pytest.mark.parametrize("dt", ("bfloat16", "float16"))
def test_autocast_keeps_the_input_dtype(dt):
    x = _x((2, 3, 4, 5), 8)
    for src in (dt, "float32"):
        with ampy.autocast("cpu", dtype=getattr(ampy, dt)):
            ya = AF.instance_norm(ampy.tensor(x).to(getattr(ampy, src)))
            yb = ampy.nn.BatchNorm3d(3)(ampy.tensor(x[:, :, None]).to(getattr(ampy, src)))
        with torch.autocast("cpu", dtype=TORCH_DTYPE[dt]):
            yt = TF.instance_norm(torch.from_numpy(x).to(TORCH_DTYPE[src]))
            yu = torch.nn.BatchNorm3d(3)(torch.from_numpy(x[:, :, None]).to(TORCH_DTYPE[src]))
        assert ya.dtype.name == str(yt.dtype).split(".")[-1]
        assert yb.dtype.name == str(yu.dtype).split(".")[-1]


ERRORS = [
    (lambda F, T: F.instance_norm(T((2, 3, 1))), None),
    (lambda F, T: F.instance_norm(T((2, 3))), None),
    (lambda F, T: F.instance_norm(T((2, 3, 5)), use_input_stats=False), None),
    (lambda F, T: F.instance_norm(T((2, 3, 5)), T((3,)), use_input_stats=False), None),
    (lambda F, T: F.instance_norm(T((2, 3, 5)), T((4,)), T((4,))), None),
    (lambda F, T: F.instance_norm(T((2, 3, 5)), weight=T((4,))), None),
    (lambda F, T: F.instance_norm(T((2, 3, 5)), T((3,))), None),
    (lambda F, T: F.instance_norm(T((2, 3, 5)), T((3,)), T((3,)), momentum=None), None),
]


def _tensor_maker(lib):
    def make(shape):
        v = _x(shape, 9)
        return ampy.tensor(v) if lib is ampy else torch.from_numpy(v)
    return make


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_functional_errors_are_torch(i):
    fn, _ = ERRORS[i]
    with pytest.raises(Exception) as et:
        fn(TF, _tensor_maker(torch))
    with pytest.raises(Exception) as ea:
        fn(AF, _tensor_maker(ampy))
    assert type(ea.value) is type(et.value)
    msg_t = str(et.value).replace("torch.Size", "ampy.Size")
    assert str(ea.value) in (str(et.value), msg_t)


def test_module_errors_warnings_and_inputs_unchanged():
    for cls, bad in (("InstanceNorm1d", (2, 3, 4, 5)), ("InstanceNorm2d", (2, 3)),
                     ("InstanceNorm3d", (2, 3, 4)), ("BatchNorm3d", (2, 3, 4, 5))):
        xa, xt = ampy.tensor(_x(bad, 1)), torch.from_numpy(_x(bad, 1))
        before = bits(xa)
        with pytest.raises(ValueError) as ea:
            getattr(ampy.nn, cls)(3)(xa)
        with pytest.raises(ValueError) as et:
            getattr(torch.nn, cls)(3)(xt)
        assert str(ea.value) == str(et.value)
        np.testing.assert_array_equal(bits(xa), before)
    with pytest.raises(ValueError) as ea:
        ampy.nn.InstanceNorm2d(4, affine=True)(ampy.tensor(_x((2, 3, 4, 5), 2)))
    with pytest.raises(ValueError) as et:
        torch.nn.InstanceNorm2d(4, affine=True)(torch.from_numpy(_x((2, 3, 4, 5), 2)))
    assert str(ea.value) == str(et.value)
    with warnings.catch_warnings(record=True) as wa:
        warnings.simplefilter("always")
        ampy.nn.InstanceNorm2d(4)(ampy.tensor(_x((2, 3, 4, 5), 2)))
    with warnings.catch_warnings(record=True) as wt:
        warnings.simplefilter("always")
        torch.nn.InstanceNorm2d(4)(torch.from_numpy(_x((2, 3, 4, 5), 2)))
    assert [str(w.message) for w in wa] == [str(w.message) for w in wt]


@pytest.mark.parametrize("cls", ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
                                 "BatchNorm3d"))
@pytest.mark.parametrize("kw", ({}, {"affine": True}, {"track_running_stats": True},
                                {"affine": True, "track_running_stats": True, "bias": False},
                                {"momentum": None, "eps": 1e-3}))
def test_repr_state_dict_and_loading_torch_weights(cls, kw):
    ma, mt = getattr(ampy.nn, cls)(5, **kw), getattr(torch.nn, cls)(5, **kw)
    assert repr(ma) == repr(mt)
    assert list(ma.state_dict()) == list(mt.state_dict())
    for (ka, va), (kt, vt) in zip(ma.state_dict().items(), mt.state_dict().items()):
        assert tuple(va.shape) == tuple(vt.shape) and va.dtype.name == str(vt.dtype)[6:]
    sd = {k: ampy.tensor(v.numpy() + 0.25 if v.is_floating_point() else v.numpy())
          for k, v in mt.state_dict().items()}
    ma.load_state_dict(sd)
    for k, v in ma.state_dict().items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(sd[k]))


def test_instance_norm_refuses_running_stats_it_does_not_track():
    ma = ampy.nn.InstanceNorm2d(3)
    with pytest.raises(RuntimeError, match="Unexpected running stats buffer"):
        ma.load_state_dict({"running_mean": ampy.zeros(3), "running_var": ampy.ones(3)})


def test_batch_norm3d_trains_as_torch(cpu_path):
    ma, mt = ampy.nn.BatchNorm3d(4), torch.nn.BatchNorm3d(4)
    for step in range(4):
        x = _x((3, 4, 3, 4, 5), 30 + step, 1.0 + step, step)
        a, t = ampy.tensor(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
        ya, yt = ma(a), mt(t)
        np.testing.assert_array_equal(bits(ya), bits(yt.detach()))
        g = _x(tuple(x.shape), 40 + step, 1.0, 0.0)
        ya.backward(ampy.tensor(g)), yt.backward(torch.from_numpy(g))
        np.testing.assert_allclose(np.asarray(a.grad), t.grad.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(bits(ma.running_mean), bits(mt.running_mean))
        np.testing.assert_array_equal(bits(ma.running_var), bits(mt.running_var))
    assert int(ma.num_batches_tracked.item()) == 4
    ma.eval(), mt.eval()
    x = _x((2, 4, 3, 4, 5), 50)
    np.testing.assert_array_equal(bits(ma(ampy.tensor(x))), bits(mt(torch.from_numpy(x))))


# ------------------------------------------------------------------ dropout
@pytest.mark.parametrize("name,shape", [("dropout1d", (8, 16, 5)), ("dropout1d", (16, 5)),
                                        ("dropout3d", (4, 16, 2, 3, 4)),
                                        ("dropout3d", (16, 2, 3, 4))])
def test_channel_dropout_zeroes_whole_channels(name, shape):
    x = np.abs(_x(shape, 3)) + 0.5
    y = np.asarray(getattr(AF, name)(ampy.tensor(x), 0.25, True))
    lead = 1 if len(shape) in (2, 4) else 2  # unbatched: channel dim 0
    flat_y = y.reshape(int(np.prod(shape[:lead])), -1)
    flat_x = x.reshape(flat_y.shape)
    kept = flat_y[:, 0] != 0
    assert np.all((flat_y != 0) == kept[:, None])
    np.testing.assert_allclose(flat_y[kept], flat_x[kept] / 0.75, rtol=1e-6)
    assert 0 < kept.sum() < kept.size
    assert np.array_equal(np.asarray(getattr(AF, name)(ampy.tensor(x), 0.25, False)), x)
    assert not np.any(np.asarray(getattr(AF, name)(ampy.tensor(x), 1.0, True)))


def test_channel_dropout_rate_modules_inplace_and_messages():
    x = np.ones((200, 50, 3), np.float32)
    y = np.asarray(ampy.nn.Dropout1d(0.3)(ampy.tensor(x)))
    assert abs((y[:, :, 0] == 0).mean() - 0.3) < 0.02
    a = ampy.tensor(np.ones((4, 6, 2, 2, 2), np.float32))
    out = ampy.nn.Dropout3d(0.5, inplace=True)(a)
    assert out is a or np.shares_memory(np.asarray(out), np.asarray(a))
    assert repr(ampy.nn.Dropout1d(0.2, True)) == repr(torch.nn.Dropout1d(0.2, True))
    assert repr(ampy.nn.Dropout3d()) == repr(torch.nn.Dropout3d())
    for lib, F in ((ampy, AF), (torch, TF)):
        make = _tensor_maker(lib)
        with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but "
                                               "received a 4D input"):
            F.dropout1d(make((2, 3, 4, 5)))
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            F.dropout3d(make((2, 3, 4, 5)), 1.5)
        with pytest.warns(UserWarning, match="dropout3d: Received a 3-D input to dropout3d"):
            F.dropout3d(make((2, 3, 4)), 0.5)
