"""hardswish, the op added through docs/ADDING_AN_OP.md: nn.functional.hardswish
(in place too) and nn.Hardswish against torch 2.13 CPU, bit for bit, forward and
backward, in every float dtype, on every CPU path; its autocast behaviour (not
on torch's lists: it runs in its input's dtype), strided inputs, bad inputs,
and the GPU against the CPU where a GPU exists."""
import numpy as np
import pytest

import ampy
from ampy import _dispatch

from _helpers import (FLOAT_DTYPES, HALF_DTYPES, TORCH_DTYPE, bits, requires_cuda,
                      same_bits_or_both_nan)

torch = pytest.importorskip("torch")


def _inputs(n=4096, seed=0):
    """Every kink and special value, then a dense sweep over [-8, 8] and wide values."""
    rng = np.random.default_rng(seed)
    special = [-3.0, 3.0, -0.0, 0.0, np.inf, -np.inf, np.nan, -3.0000002, -2.9999998,
               2.9999998, 3.0000002, 1e38, -1e38, 6e37, 1e-40, -1e-40, 65504.0, -65504.0]
    return np.concatenate([special, np.linspace(-8, 8, n), rng.standard_normal(n) * 1e4]
                          ).astype(np.float32)


def _pair(x, dt, requires_grad=False):
    a = ampy.tensor(x).to(dt)
    t = torch.from_numpy(x.copy()).to(TORCH_DTYPE[dt])
    if requires_grad:
        a.requires_grad_()
        t.requires_grad_()
    return a, t


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_forward_bits_equal_torch(cpu_path, dt):
    a, t = _pair(_inputs(), dt)
    assert same_bits_or_both_nan(ampy.nn.functional.hardswish(a),
                                 torch.nn.functional.hardswish(t))


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_backward_bits_equal_torch(cpu_path, dt):
    x = _inputs(seed=1)
    x = x[~np.isnan(x)]  # (NaN: see test_backward_of_nan_is_nan)
    g = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
    a, t = _pair(x, dt, requires_grad=True)
    ampy.nn.functional.hardswish(a).backward(ampy.tensor(g).to(dt))
    torch.nn.functional.hardswish(t).backward(torch.from_numpy(g).to(TORCH_DTYPE[dt]))
    assert type(a.grad) is ampy.Tensor and a.grad.dtype is dt
    assert same_bits_or_both_nan(a.grad, t.grad)


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_backward_of_nan_is_nan(dt):
    """torch's gradient at a NaN input depends on where the element sits (its
    vectorised float kernel gives NaN, its scalar tail and bfloat16 kernel the
    incoming gradient); ampy gives NaN everywhere, as torch does for the
    elements of a float32 tensor of 64 NaNs outside the tail."""
    x = np.full(64, np.nan, np.float32)
    a, t = _pair(x, dt, requires_grad=True)
    ampy.nn.functional.hardswish(a).sum().backward()
    assert np.isnan(a.grad.float().numpy()).all()
    if dt is ampy.float32:
        torch.nn.functional.hardswish(t).sum().backward()
        assert np.isnan(t.grad[:32].numpy()).all()


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_inplace_and_module_equal_torch(dt):
    x = _inputs(512, seed=3)
    a, t = _pair(x, dt)
    out = ampy.nn.functional.hardswish(a, inplace=True)
    torch.nn.functional.hardswish(t, inplace=True)
    assert out is a and same_bits_or_both_nan(a, t)
    b, u = _pair(x, dt)
    assert same_bits_or_both_nan(ampy.nn.Hardswish()(b), torch.nn.Hardswish()(u))
    assert repr(ampy.nn.Hardswish(inplace=True)) == repr(torch.nn.Hardswish(inplace=True))


def test_second_derivative_equals_torch():
    x = _inputs(256, seed=4)[18:].astype(np.float64)  # finite, away from the kinks
    a = ampy.tensor(x, requires_grad=True)
    t = torch.from_numpy(x.copy()).requires_grad_()
    (ga,) = ampy.autograd.grad(ampy.nn.functional.hardswish(a).sum(), a, create_graph=True)
    (gt,) = torch.autograd.grad(torch.nn.functional.hardswish(t).sum(), t, create_graph=True)
    (gga,) = ampy.autograd.grad((ga * ga).sum(), a)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), t)
    np.testing.assert_allclose(ga.detach().numpy(), gt.detach().numpy(), rtol=1e-15, atol=0)
    np.testing.assert_allclose(gga.numpy(), ggt.numpy(), rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("dt", HALF_DTYPES, ids=str)
def test_autocast_keeps_the_input_dtype(dt):
    """hardswish is on none of torch's autocast lists: it runs as it comes."""
    assert _dispatch.get_op("hardswish").policy == {}
    x = _inputs(64)
    for ac_dt in HALF_DTYPES:
        a, t = _pair(x, dt)
        with ampy.autocast("cpu", dtype=ac_dt):
            ya = ampy.nn.functional.hardswish(a)
        with torch.autocast("cpu", dtype=TORCH_DTYPE[ac_dt]):
            yt = torch.nn.functional.hardswish(t)
        assert ya.dtype is dt and yt.dtype == TORCH_DTYPE[dt]
        assert same_bits_or_both_nan(ya, yt)


@pytest.mark.parametrize("layout", ["transposed", "stepped", "expanded"])
def test_strided_inputs_equal_torch(layout):
    x = _inputs(0)[:18].reshape(3, 6)
    x = np.concatenate([x, np.linspace(-5, 5, 18, dtype=np.float32).reshape(3, 6)])
    a, t = _pair(x, ampy.float32)
    view = {"transposed": lambda m: m.T, "stepped": lambda m: m[::2, 1::2],
            "expanded": lambda m: m[:1].expand(4, 6)}[layout]
    assert same_bits_or_both_nan(ampy.nn.functional.hardswish(view(a)),
                                 torch.nn.functional.hardswish(view(t)))


@pytest.mark.parametrize("dt", [ampy.int64, ampy.int32, ampy.uint8, ampy.bool], ids=str)
def test_integer_input_raises_as_torch_and_changes_nothing(dt):
    a = ampy.tensor([1, 0, 1]).to(dt)
    t = torch.tensor([1, 0, 1]).to(TORCH_DTYPE[dt])
    before = bits(a)
    with pytest.raises(NotImplementedError) as ea:
        ampy.nn.functional.hardswish(a, inplace=True)
    with pytest.raises(NotImplementedError) as et:
        torch.nn.functional.hardswish(t)
    assert "hardswish" in str(ea.value) and "not implemented for" in str(et.value)
    assert str(ea.value).split("'")[-2] == str(et.value).split("'")[-2]  # 'Long', 'Bool', ...
    np.testing.assert_array_equal(bits(a), before)


def test_inplace_on_read_only_memory_raises_and_writes_nothing():
    x = np.linspace(-5, 5, 12, dtype=np.float32)
    x.flags.writeable = False
    a = ampy.from_numpy(x)
    before = bits(x)
    with pytest.raises(RuntimeError):
        ampy.nn.functional.hardswish(a, inplace=True)
    np.testing.assert_array_equal(bits(x), before)


def test_not_a_tensor_raises_type_error():
    with pytest.raises(TypeError):
        ampy.nn.functional.hardswish("x")


def test_declared_once_with_its_rule():
    op = _dispatch.get_op("hardswish")
    assert op.backward is not None and op.devices == ("cpu", "cuda")
    assert "ampy.nn.functional.hardswish" in op.names
    assert _dispatch.get_op("hardswish_").backward is not None  # the in-place variant's rule


@requires_cuda
@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_cuda_equals_the_cpu(dt):
    x = _inputs(seed=5)
    a = ampy.tensor(x).to(dt)
    got = ampy.nn.functional.hardswish(a.cuda()).cpu()
    assert same_bits_or_both_nan(got, ampy.nn.functional.hardswish(a))
