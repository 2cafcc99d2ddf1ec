"""torch's top-level tensor functions of ampy/_tensor_fns.py side by side with torch 2.13:
values, dtypes and shapes (float32, float64, int64; a transposed input), gradients of the
differentiable ones, and the errors."""
import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")


def _pair(shape, dtype="float64", seed=0, transpose=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if dtype == "int64":
        a = (a * 4).round()
    a = a.astype(dtype)
    x, t = ampy.tensor(a), torch.tensor(a)
    if transpose:
        x, t = x.transpose(0, 1), t.transpose(0, 1)
    return x, t


def _same(a, t):
    if isinstance(t, (tuple, list)):
        assert len(a) == len(t)
        for u, v in zip(a, t):
            _same(u, v)
        return
    if isinstance(t, bool):
        assert a is t or a == t
        return
    assert tuple(a.shape) == tuple(t.shape)
    assert a.dtype.name == str(t.dtype).split(".")[1]
    np.testing.assert_array_equal(a.detach().numpy(), t.detach().numpy())


CASES = {
    "squeeze": (lambda m, x: m.squeeze(x.unsqueeze(1)), lambda m, x: m.squeeze(x[:1], 0)),
    "unsqueeze": (lambda m, x: m.unsqueeze(x, -1),),
    "unbind": (lambda m, x: m.unbind(x, 1),),
    "movedim": (lambda m, x: m.movedim(x.reshape(3, 2, 2), 0, -1),
                lambda m, x: m.moveaxis(x.reshape(3, 2, 2), (0, 1), (2, 0))),
    "swapaxes": (lambda m, x: m.swapaxes(x, 0, 1), lambda m, x: m.swapdims(x, 1, 0)),
    "broadcast_to": (lambda m, x: m.broadcast_to(x[:1], (5, 6, 4)),),
    "atleast": (lambda m, x: m.atleast_1d(x[0, 0]), lambda m, x: m.atleast_2d(x[0]),
                lambda m, x: m.atleast_3d(x), lambda m, x: m.atleast_3d(x[0])),
    "stacks": (lambda m, x: m.hstack([x, x]), lambda m, x: m.vstack([x[0], x[1]]),
               lambda m, x: m.dstack([x, x]), lambda m, x: m.column_stack([x[0], x[1]]),
               lambda m, x: m.row_stack([x, x])),
    "flip": (lambda m, x: m.flip(x, [0]), lambda m, x: m.flip(x, (0, -1)),
             lambda m, x: m.fliplr(x), lambda m, x: m.flipud(x), lambda m, x: x.flip(1)),
    "roll": (lambda m, x: m.roll(x, 2), lambda m, x: m.roll(x, -1, 0),
             lambda m, x: m.roll(x, (1, 7), (0, 1)), lambda m, x: x.roll(3, -1)),
    "outer": (lambda m, x: m.outer(x[0], x[1]), lambda m, x: m.ger(x[1], x[2])),
    "meshgrid": (lambda m, x: m.meshgrid(x[0], x[1, :3], indexing="ij"),
                 lambda m, x: m.meshgrid(x[0], x[1, :3], x[2, :2], indexing="xy")),
}


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_torch(name, dtype, transpose):
    shape = (4, 3) if transpose else (3, 4)
    for fn in CASES[name]:
        x, t = _pair(shape, dtype, transpose=transpose)
        _same(fn(ampy, x), fn(torch, t))


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if n not in ("unbind", "meshgrid",
                                                                       "atleast")])
def test_grads_match_torch(name):
    for fn in CASES[name]:
        x, t = _pair((3, 4))
        x.requires_grad_(), t.requires_grad_()
        w = np.random.default_rng(1).standard_normal(fn(torch, t).shape)
        (fn(ampy, x) * ampy.tensor(w)).sum().backward()
        (fn(torch, t) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_isclose_allclose_equal_match_torch():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1e-9, 100.0, 0.0])
    b = np.array([1.0 + 1e-6, np.nan, np.inf, np.inf, 0.0, 100.001, -0.0])
    for kw in ({}, dict(equal_nan=True), dict(rtol=1e-3, atol=0.0), dict(rtol=0.0, atol=0.0)):
        _same(ampy.isclose(ampy.tensor(a), ampy.tensor(b), **kw),
              torch.isclose(torch.tensor(a), torch.tensor(b), **kw))
        assert ampy.allclose(ampy.tensor(a[:1]), ampy.tensor(b[:1]), **kw) == \
            torch.allclose(torch.tensor(a[:1]), torch.tensor(b[:1]), **kw)
    x = ampy.tensor([1, 2, 3])
    assert ampy.equal(x, ampy.tensor([1, 2, 3])) and not ampy.equal(x, ampy.tensor([1, 2]))
    assert x.allclose(x.to(ampy.float32).to(ampy.int64))
    with pytest.raises(RuntimeError, match="did not match"):
        ampy.isclose(ampy.tensor([1.0]), ampy.tensor([1], dtype=ampy.int64))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_nonzero_argwhere_match_torch(dtype):
    a = np.array([[0, 1, 0, 2], [3, 0, 0, 4], [0, 0, 0, 0]]).astype(dtype)
    for fn in (lambda m, x: m.nonzero(x), lambda m, x: m.argwhere(x),
               lambda m, x: m.nonzero(x, as_tuple=True), lambda m, x: x.nonzero(),
               lambda m, x: m.nonzero(x[0]), lambda m, x: m.nonzero(x.T)):
        _same(fn(ampy, ampy.tensor(a)), fn(torch, torch.tensor(a)))


def test_errors_match_torch():
    x, t = _pair((3, 4))
    for lib, y in ((ampy, x), (torch, t)):
        with pytest.raises(RuntimeError, match="appears multiple times"):
            lib.flip(y, [0, 0])
        with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
            lib.roll(y, (1, 2), 0)
        with pytest.raises(RuntimeError, match="Input must be >= 2-d"):
            lib.fliplr(y[0])
        with pytest.raises(RuntimeError, match="indexing must be one of"):
            lib.meshgrid(y[0], indexing="yx")
        with pytest.raises(RuntimeError, match="same number of dims"):
            lib.movedim(y, (0, 1), (1,))
        with pytest.raises(IndexError):
            lib.flip(y, [2])
    before = x.numpy().copy()
    with pytest.raises(RuntimeError):
        ampy.roll(x, (1, 2), 0)
    np.testing.assert_array_equal(x.numpy(), before)


def test_compile_returns_the_model():
    m = ampy.nn.Linear(2, 2)
    assert ampy.compile(m) is m
    assert ampy.compile(m, mode="max-autotune", fullgraph=True) is m

    @ampy.compile(dynamic=True)
    def f(x):
        return x + 1
    assert f(ampy.tensor([1.0])).item() == 2.0
