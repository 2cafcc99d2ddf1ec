"""nn.Conv1d, nn.Conv2d and nn.ConvTranspose2d against torch 2.13: parameter
names and shapes, state_dicts loaded both ways (same outputs), the
initialisation's bounds, repr, constructor errors, padding modes and
ConvTranspose2d's output_size."""
import math

import numpy as np
import pytest

import ampy
import ampy.nn as nn

torch = pytest.importorskip("torch")

CONFIGS = [
    ("Conv2d", (3, 8, 3), dict()),
    ("Conv2d", (4, 6, (3, 2)), dict(stride=2, padding=(1, 0), dilation=(2, 1), groups=2,
                                    bias=False)),
    ("Conv2d", (4, 4, 3), dict(padding="same", groups=4)),
    ("Conv2d", (3, 5, 3), dict(padding=1, padding_mode="reflect")),
    ("Conv2d", (3, 5, 2), dict(padding="same", padding_mode="circular")),
    ("Conv1d", (3, 8, 5), dict(stride=2, padding=2)),
    ("Conv1d", (4, 4, 3), dict(padding=1, padding_mode="replicate", groups=2)),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1)),
    ("ConvTranspose2d", (4, 6, (3, 2)), dict(groups=2, dilation=2, bias=False)),
]
IDS = [f"{n}-{i}" for i, (n, _, _) in enumerate(CONFIGS)]


def _input(name, c):
    shape = (2, c, 7) if name == "Conv1d" else (2, c, 7, 6)
    return np.random.default_rng(5).standard_normal(shape).astype(np.float32)


def _pair(name, args, kw):
    return getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)


def _to_torch_state(sd):
    return {k: torch.from_numpy(np.asarray(v.detach()).copy()) for k, v in sd.items()}


@pytest.mark.parametrize("name,args,kw", CONFIGS, ids=IDS)
def test_parameters_repr_and_state_dict_both_ways(name, args, kw):
    a, t = _pair(name, args, kw)
    assert repr(a) == repr(t)
    sa, st = a.state_dict(), t.state_dict()
    assert list(sa) == list(st)
    assert [tuple(v.shape) for v in sa.values()] == [tuple(v.shape) for v in st.values()]
    x = _input(name, args[0])
    # torch -> ampy
    a.load_state_dict({k: ampy.tensor(v.numpy()) for k, v in st.items()})
    ya, yt = a(ampy.tensor(x)), t(torch.from_numpy(x))
    np.testing.assert_allclose(np.asarray(ya.detach()), yt.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    # ampy -> torch
    a2, t2 = _pair(name, args, kw)
    t2.load_state_dict(_to_torch_state(a2.state_dict()))
    np.testing.assert_allclose(np.asarray(a2(ampy.tensor(x)).detach()),
                               t2(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,args,kw", CONFIGS, ids=IDS)
def test_backward_matches_torch(name, args, kw):
    a, t = _pair(name, args, kw)
    a.load_state_dict({k: ampy.tensor(v.numpy()) for k, v in t.state_dict().items()})
    x = _input(name, args[0])
    xa, xt = ampy.tensor(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
    (a(xa) ** 2).sum().backward()
    (t(xt) ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(xa.grad), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    for (na, pa), (nt, pt) in zip(a.named_parameters(), t.named_parameters()):
        assert na == nt
        np.testing.assert_allclose(np.asarray(pa.grad), pt.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,args", [("Conv2d", (16, 32, 3)), ("Conv1d", (8, 16, 5)),
                                       ("ConvTranspose2d", (16, 8, 3))])
def test_init_bounds_as_torch(name, args):
    """kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
    the weight, the bias the same bound; fan_in = weight.shape[1] * prod(kernel)."""
    ampy.manual_seed(0)
    m = getattr(nn, name)(*args)
    w = np.asarray(m.weight.detach())
    fan_in = w.shape[1] * math.prod(w.shape[2:])
    bound = 1 / math.sqrt(fan_in)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    b = np.asarray(m.bias.detach())
    assert np.abs(b).max() <= bound and b.std() > 0


CTOR_ERRORS = [
    (dict(in_channels=3, out_channels=8, kernel_size=3, groups=2),
     "in_channels must be divisible by groups"),
    (dict(in_channels=4, out_channels=6, kernel_size=3, groups=4),
     "out_channels must be divisible by groups"),
    (dict(in_channels=4, out_channels=6, kernel_size=3, groups=0),
     "groups must be a positive integer"),
    (dict(in_channels=4, out_channels=6, kernel_size=3, padding_mode="foo"),
     "padding_mode must be one of"),
    (dict(in_channels=4, out_channels=6, kernel_size=3, padding="foo"),
     "Invalid padding string 'foo', should be one of {"),
    (dict(in_channels=4, out_channels=6, kernel_size=3, padding="same", stride=2),
     "padding='same' is not supported for strided convolutions"),
]


@pytest.mark.parametrize("cls", ["Conv1d", "Conv2d", "Conv3d"])
@pytest.mark.parametrize("kw,msg", CTOR_ERRORS)
def test_constructor_errors_as_torch(kw, msg, cls):
    with pytest.raises(ValueError) as et:
        getattr(torch.nn, cls)(**kw)
    with pytest.raises(ValueError) as ea:
        getattr(nn, cls)(**kw)
    assert msg in str(et.value) and msg in str(ea.value)


def test_transposed_padding_mode_error():
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported'):
        nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect")


def test_wrong_channels_in_forward_names_the_shapes():
    m = nn.Conv2d(4, 6, 3)
    with pytest.raises(RuntimeError, match=r"weight of size \[6, 4, 3, 3\], expected "
                                           r"input\[2, 3, 10, 10\] to have 4 channels"):
        m(ampy.zeros((2, 3, 10, 10)))


def test_reflect_padding_too_large_raises():
    m = nn.Conv2d(1, 1, 3, padding=3, padding_mode="reflect")
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        m(ampy.zeros((1, 1, 3, 3)))


@pytest.mark.parametrize("size", [(11, 11), (12, 12), (2, 6, 12, 11)])
def test_conv_transpose_output_size(size):
    a, t = _pair("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1))
    a.load_state_dict({k: ampy.tensor(v.numpy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((2, 4, 6, 6)).astype(np.float32)
    ya = a(ampy.tensor(x), output_size=size)
    yt = t(torch.from_numpy(x), output_size=size)
    assert ya.shape == tuple(yt.shape)
    np.testing.assert_allclose(np.asarray(ya.detach()), yt.detach().numpy(), rtol=1e-5,
                               atol=1e-5)


def test_conv_transpose_bad_output_size():
    a = nn.ConvTranspose2d(4, 6, 3, stride=2)
    with pytest.raises(ValueError, match=r"requested an output size of \(30, 30\)"):
        a(ampy.zeros((2, 4, 10, 10)), output_size=(30, 30))


def test_bfloat16_module_and_autocast():
    """A bfloat16 module (dtype=) computes in bfloat16; a float32 module under
    cpu autocast gives bfloat16 outputs and float32 weight gradients."""
    m = nn.Conv2d(3, 4, 3, dtype=ampy.bfloat16)
    assert m.weight.dtype is ampy.bfloat16 and m(ampy.zeros((1, 3, 5, 5),
                                                            dtype=ampy.bfloat16)).dtype is \
        ampy.bfloat16
    m = nn.Conv2d(3, 4, 3)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        y = m(ampy.ones((1, 3, 5, 5)))
    assert y.dtype is ampy.bfloat16
    y.float().sum().backward()
    assert m.weight.grad.dtype is ampy.float32 and m.bias.grad.dtype is ampy.float32
