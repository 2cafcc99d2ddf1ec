"""The cnn functions' and layers' API against torch 2.13: autocast output
dtypes (CPU autocast with bf16 and fp16), bad arguments (torch's exception
type and message, the inputs unchanged after the raise), the layers'
parameters, buffers and state_dict keys, dropout2d, flatten."""
import warnings

import numpy as np
import pytest

import ampy
import ampy.nn.functional as AF

from _helpers import bits

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _x(shape=(2, 3, 6, 7), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _both(fn, x):
    return fn(ampy, ampy.tensor(x)), fn(torch, torch.from_numpy(x.copy()))


def _dt(t):
    return str(t.dtype).split(".")[-1]


# ------------------------------------------------------------------ autocast
AUTOCAST = {
    "batch_norm": lambda M, x: M.nn.functional.batch_norm(
        x, None, None, M.ones(3), M.zeros(3), True),
    "group_norm": lambda M, x: M.nn.functional.group_norm(x, 3, M.ones(3), M.zeros(3)),
    "max_pool2d": lambda M, x: M.nn.functional.max_pool2d(x, 2),
    "avg_pool2d": lambda M, x: M.nn.functional.avg_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda M, x: M.nn.functional.adaptive_avg_pool2d(x, (2, 3)),
    "adaptive 1x1": lambda M, x: M.nn.functional.adaptive_avg_pool2d(x, 1),
    "pad constant": lambda M, x: M.nn.functional.pad(x, (1, 1, 1, 1)),
    "pad reflect": lambda M, x: M.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"),
    "pad replicate": lambda M, x: M.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate"),
    "pad reflect 1d": lambda M, x: M.nn.functional.pad(x[0], (1, 2), mode="reflect"),
    "pad replicate 3d": lambda M, x: M.nn.functional.pad(x, (1, 1, 1, 1, 1, 0),
                                                         mode="replicate"),
    "pad circular": lambda M, x: M.nn.functional.pad(x, (1, 1, 1, 1), mode="circular"),
    "nearest": lambda M, x: M.nn.functional.interpolate(x, scale_factor=2),
    "bilinear": lambda M, x: M.nn.functional.interpolate(x, size=(4, 9), mode="bilinear"),
}


@pytest.mark.parametrize("case", sorted(AUTOCAST))
@pytest.mark.parametrize("ac", ["bfloat16", "float16"])
@pytest.mark.parametrize("src", ["float32", "half"])
def test_autocast_dtypes_match_torch(case, ac, src):
    """torch's CPU lists: reflection/replication pads in float32, the rest
    (batch_norm and group_norm too) in their input's dtype."""
    x = _x()
    a, t = ampy.tensor(x), torch.from_numpy(x)
    if src == "half":
        a, t = a.to(getattr(ampy, ac)), t.to(getattr(torch, ac))
    with ampy.autocast("cpu", dtype=getattr(ampy, ac)):
        ya = AUTOCAST[case](ampy, a)
    with torch.autocast("cpu", dtype=getattr(torch, ac)):
        yt = AUTOCAST[case](torch, t)
    assert _dt(ya) == _dt(yt)


def test_conv_bn_relu_under_autocast_matches_torch_dtypes():
    """bf16 conv output into batch_norm with float32 parameters: a bf16
    output, float32 running stats and parameter gradients."""
    torch.manual_seed(0)
    ct, bt = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
    ca, ba = ampy.nn.Conv2d(3, 4, 3), ampy.nn.BatchNorm2d(4)
    ca.load_state_dict(ct.state_dict())
    x = _x()
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        ya = ampy.nn.functional.relu(ba(ca(ampy.tensor(x))))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = torch.relu(bt(ct(torch.from_numpy(x))))
    assert _dt(ya) == _dt(yt) == "bfloat16"
    ya.float().sum().backward()
    yt.float().sum().backward()
    assert _dt(ba.weight.grad) == _dt(bt.weight.grad) == "float32"
    assert _dt(ba.running_mean) == "float32"


# ------------------------------------------------------------ bad arguments
BAD = {
    "bn train one value": lambda M, x: M.nn.functional.batch_norm(
        x[:1, :, :1, :1].reshape(1, 3), None, None, training=True),
    "bn running_mean size": lambda M, x: M.nn.functional.batch_norm(
        x, M.zeros(4), M.ones(4), training=True),
    "bn eval no stats": lambda M, x: M.nn.functional.batch_norm(x, None, None),
    "bn weight size": lambda M, x: M.nn.functional.batch_norm(
        x, M.zeros(3), M.ones(3), M.ones(4)),
    "bn2d 3d input": lambda M, x: M.nn.BatchNorm2d(3)(x[0]),
    "bn1d 4d input": lambda M, x: M.nn.BatchNorm1d(3)(x),
    "bn integer input": lambda M, x: M.nn.functional.batch_norm(
        x.long(), M.zeros(3), M.ones(3)),
    "gn groups": lambda M, x: M.nn.functional.group_norm(x, 2),
    "gn weight": lambda M, x: M.nn.functional.group_norm(x, 3, M.ones(4)),
    "gn 1d input": lambda M, x: M.nn.functional.group_norm(x[0, 0, 0], 1),
    "max kernel too large": lambda M, x: M.nn.functional.max_pool2d(x, 8),
    "max pad too large": lambda M, x: M.nn.functional.max_pool2d(x, 2, padding=2),
    "max stride zero": lambda M, x: M.nn.functional.max_pool2d(x, 2, stride=0),
    "max kernel 3 ints": lambda M, x: M.nn.functional.max_pool2d(x, (2, 2, 2)),
    "max dilation zero": lambda M, x: M.nn.functional.max_pool2d(x, 2, dilation=0),
    "max 1d input": lambda M, x: M.nn.functional.max_pool2d(x[0, 0, 0], 2),
    "max empty plane": lambda M, x: M.nn.functional.max_pool2d(x[:, :, :0], 2),
    "avg kernel too large": lambda M, x: M.nn.functional.avg_pool2d(x, 8),
    "avg divisor zero": lambda M, x: M.nn.functional.avg_pool2d(x, 2, divisor_override=0),
    "adaptive 1d input": lambda M, x: M.nn.functional.adaptive_avg_pool2d(x[0, 0, 0], 2),
    "adaptive 3 sizes": lambda M, x: M.nn.functional.adaptive_avg_pool2d(x, (1, 2, 3)),
    "pad bad mode": lambda M, x: M.nn.functional.pad(x, (1, 1), mode="bogus"),
    "pad odd length": lambda M, x: M.nn.functional.pad(x, (1, 1, 1)),
    "pad too many": lambda M, x: M.nn.functional.pad(x, (1,) * 10),
    "pad reflect too large": lambda M, x: M.nn.functional.pad(x, (7, 7), mode="reflect"),
    "pad reflect dims": lambda M, x: M.nn.functional.pad(x, (1, 1), mode="reflect"),
    "pad circular wraps": lambda M, x: M.nn.functional.pad(x, (8, 0, 0, 0), mode="circular"),
    "pad replicate value": lambda M, x: M.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate",
                                                            value=2.0),
    "pad crop below zero": lambda M, x: M.nn.functional.pad(x, (-8, 0)),
    "interp size and scale": lambda M, x: M.nn.functional.interpolate(x, size=3,
                                                                      scale_factor=2),
    "interp neither": lambda M, x: M.nn.functional.interpolate(x),
    "interp align nearest": lambda M, x: M.nn.functional.interpolate(
        x, scale_factor=2, align_corners=True),
    "interp bilinear 3d": lambda M, x: M.nn.functional.interpolate(x[0], scale_factor=2,
                                                                   mode="bilinear"),
    "interp zero size": lambda M, x: M.nn.functional.interpolate(x, size=(0, 3)),
    "interp size length": lambda M, x: M.nn.functional.interpolate(x, size=(2, 3, 4)),
    "dropout2d p": lambda M, x: M.nn.functional.dropout2d(x, 1.5),
    "flatten order": lambda M, x: M.flatten(x, 3, 1),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arguments_raise_like_torch(case):
    x = _x()
    a, t = ampy.tensor(x), torch.from_numpy(x.copy())
    before = bits(a)
    with pytest.raises(Exception) as et:
        BAD[case](torch, t)
    with pytest.raises(type(et.value)) as ea:
        BAD[case](ampy, a)
    assert str(ea.value) == str(et.value).replace("torch.Size", "ampy.Size")
    np.testing.assert_array_equal(bits(a), before)


def test_running_stats_unchanged_after_a_raise():
    rm, rv = ampy.zeros(3), ampy.ones(3)
    with pytest.raises(RuntimeError, match="weight should contain 3 elements not 4"):
        AF.batch_norm(ampy.tensor(_x()), rm, rv, ampy.ones(4), training=True)
    assert rm.tolist() == [0.0] * 3 and rv.tolist() == [1.0] * 3


# ------------------------------------------------------------------ layers
def test_batchnorm_module_state_and_options():
    for cls, shape in (("BatchNorm1d", (4, 5)), ("BatchNorm1d", (4, 5, 3)),
                       ("BatchNorm2d", (4, 5, 3, 2))):
        a, t = getattr(ampy.nn, cls)(5), getattr(torch.nn, cls)(5)
        assert list(a.state_dict()) == list(t.state_dict())
        assert [n for n, _ in a.named_buffers()] == [n for n, _ in t.named_buffers()]
        assert a.num_batches_tracked.dtype is ampy.int64 and a.num_batches_tracked.ndim == 0
        x = _x(shape, 1)
        ya, yt = a(ampy.tensor(x)), t(torch.from_numpy(x))
        if len(shape) > 2:
            np.testing.assert_array_equal(bits(ya), bits(yt))
        else:  # (N, C): torch sums the statistics in its vectorised order
            np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
        a.load_state_dict(t.state_dict())
        t.load_state_dict({k: torch.from_numpy(np.array(v.numpy()))
                           for k, v in a.state_dict().items()})
    a, t = ampy.nn.BatchNorm2d(3, affine=False, track_running_stats=False), \
        torch.nn.BatchNorm2d(3, affine=False, track_running_stats=False)
    assert list(a.state_dict()) == list(t.state_dict()) == []
    assert a.weight is None and a.running_mean is None
    x = _x()
    a.eval()
    t.eval()  # no running stats: batch statistics even in eval mode
    np.testing.assert_array_equal(bits(a(ampy.tensor(x))), bits(t(torch.from_numpy(x))))


def test_batchnorm_loads_a_state_dict_without_the_counter():
    t = torch.nn.BatchNorm2d(3)
    sd = {k: v for k, v in t.state_dict().items() if k != "num_batches_tracked"}
    a = ampy.nn.BatchNorm2d(3)
    a.load_state_dict(sd)
    assert int(a.num_batches_tracked.item()) == 0


def test_other_layers_match_torch():
    x = _x((2, 4, 6, 7), 2)
    ya, yt = _both(lambda M, v: M.nn.GroupNorm(2, 4)(v), x)  # (statistics: sum order)
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    layers = [("MaxPool2d", (3, 2, 1)), ("AvgPool2d", (2,)),
              ("AdaptiveAvgPool2d", ((3, 2),)), ("ZeroPad2d", (2,)),
              ("ConstantPad2d", ((1, 2, 0, 1), 3.5)), ("ReflectionPad2d", (2,)),
              ("ReplicationPad2d", ((1, 0, 2, 1),)), ("Upsample", (None, 2, "nearest"))]
    for name, args in layers:
        ya, yt = _both(lambda M, v: getattr(M.nn, name)(*args)(v), x)
        np.testing.assert_array_equal(bits(ya), bits(yt), err_msg=name)
    for name, args in (("ConstantPad1d", (2, 1.0)), ("ReflectionPad1d", (2,)),
                       ("ReplicationPad1d", ((1, 3),))):
        ya, yt = _both(lambda M, v: getattr(M.nn, name)(*args)(v[0]), x)
        np.testing.assert_array_equal(bits(ya), bits(yt), err_msg=name)
    ya, ia = ampy.nn.MaxPool2d(2, return_indices=True)(ampy.tensor(x))
    yt, it = torch.nn.MaxPool2d(2, return_indices=True)(torch.from_numpy(x))
    np.testing.assert_array_equal(ia.numpy(), it.numpy())
    assert [n for n, _ in ampy.nn.GroupNorm(2, 4).named_parameters()] == ["weight", "bias"]


# ------------------------------------------------------------ dropout2d
def test_dropout2d_zeroes_whole_channels_and_scales():
    x = ampy.tensor(np.abs(_x((8, 16, 3, 3), 3)) + 1).requires_grad_()
    y = AF.dropout2d(x, 0.25)
    v = y.detach().numpy()
    zero = (v == 0).all(axis=(2, 3))
    kept = ~zero
    assert 0 < zero.sum() < zero.size
    np.testing.assert_array_equal(v[kept], (x.detach().numpy() * np.float32(1 / 0.75))[kept])
    y.sum().backward()
    g = x.grad.numpy()
    assert (g[zero] == 0).all() and np.allclose(g[kept], 1 / 0.75)
    assert AF.dropout2d(x, 0.5, training=False) is x
    assert (AF.dropout2d(x, 1.0).detach().numpy() == 0).all()
    m = ampy.nn.Dropout2d(0.5)
    m.eval()
    assert m(x) is x


def test_dropout2d_warns_like_torch_for_3d_input():
    x = _x((2, 3, 4))
    with warnings.catch_warnings(record=True) as wa:
        warnings.simplefilter("always")
        AF.dropout2d(ampy.tensor(x), 0.5)
    with warnings.catch_warnings(record=True) as wt:
        warnings.simplefilter("always")
        TF.dropout2d(torch.from_numpy(x), 0.5)
    assert [str(w.message) for w in wa] == [str(w.message) for w in wt]


def test_flatten_function_method_and_module():
    x = _x((2, 3, 4, 5))
    for args in ((), (1,), (1, 2), (-3, -1), (0, 0)):
        ya, yt = _both(lambda M, v: M.flatten(v, *args), x)
        assert tuple(ya.shape) == tuple(yt.shape)
        assert tuple(ampy.tensor(x).flatten(*args).shape) == tuple(yt.shape)
    assert tuple(ampy.nn.Flatten()(ampy.tensor(x)).shape) == (2, 60)


def test_cnn_math_c_unit_test(tmp_path):
    """tests/c/test_cnn_math.c: the window, padding and interpolation index
    formulas every cnn kernel shares (ampy/cnn_math.h)."""
    import os
    import shutil
    import subprocess
    import sysconfig
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cc = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) or shutil.which("gcc")
    assert cc, "no C compiler (the extension needs one too)"
    exe = str(tmp_path / "test_cnn_math")
    r = subprocess.run([cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror",
                        "-I" + os.path.join(here, "csrc", "include"),
                        os.path.join(here, "tests", "c", "test_cnn_math.c"),
                        os.path.join(here, "csrc", "status.c"), "-o", exe, "-lm"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
