"""nn.utils.weight_norm / spectral_norm (hook API), nn.utils.parametrize and
nn.utils.parametrizations against torch 2.13: state_dict keys, forward values and grads from
the same weights (and the same power-iteration vectors, copied from torch), the trajectory of
a few SGD steps, removal, and the errors."""
import warnings

import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")

A_NN, T_NN = ampy.nn, torch.nn


def _a(t):
    return ampy.tensor(t.detach().numpy().copy())


def _load(am, tm):
    am.load_state_dict({k: _a(v) for k, v in tm.state_dict().items()})


def _close(a, t, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def _pair(make):
    """The same layer, built by make(nn), in torch and ampy."""
    torch.manual_seed(0)
    return make(A_NN), make(T_NN)


LAYERS = {
    "linear": lambda nn: nn.Linear(5, 4),
    "conv2d": lambda nn: nn.Conv2d(3, 4, 3),
    "convT2d": lambda nn: nn.ConvTranspose2d(3, 4, 3),
}
INPUTS = {"square": (6, 4), "linear": (6, 5), "conv2d": (2, 3, 6, 6), "convT2d": (2, 3, 5, 5)}


def _x(kind, seed=1):
    return np.random.default_rng(seed).standard_normal(INPUTS[kind]).astype(np.float32)


def _train(am, tm, kind, steps=3):
    """A few SGD steps on sum(out^2) in both; the outputs and param grads must agree."""
    ao = ampy.optim.SGD(am.parameters(), lr=0.05)
    to = torch.optim.SGD(tm.parameters(), lr=0.05)
    for s in range(steps):
        x = _x(kind, s)
        ya, yt = am(ampy.tensor(x)), tm(torch.tensor(x))
        _close(ya, yt, 1e-4)
        (ya * ya).sum().backward()
        (yt * yt).sum().backward()
        ga = dict(am.named_parameters())
        for n, p in tm.named_parameters():
            _close(ga[n].grad, p.grad, 1e-4)
        ao.step(), to.step()
        ao.zero_grad(), to.zero_grad()


@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("dim", [0, 1, None, -2])
def test_weight_norm_hook_api(kind, dim):
    am, tm = _pair(LAYERS[kind])
    with pytest.warns(FutureWarning, match="deprecated"):
        A_NN.utils.weight_norm(am, dim=dim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        T_NN.utils.weight_norm(tm, dim=dim)
    assert list(am.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        assert tuple(am.state_dict()[k].shape) == tuple(v.shape), k
    _load(am, tm)
    _train(am, tm, kind)
    A_NN.utils.remove_weight_norm(am)
    T_NN.utils.remove_weight_norm(tm)
    assert list(am.state_dict()) == list(tm.state_dict())
    assert isinstance(am.weight, A_NN.Parameter)
    _close(am.weight, tm.weight, 1e-5)


def test_weight_norm_hook_errors():
    m = A_NN.Linear(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        A_NN.utils.weight_norm(m)
        with pytest.raises(RuntimeError, match="two weight_norm hooks on the same parameter weight"):
            A_NN.utils.weight_norm(m)
        with pytest.raises(ValueError, match="weight_norm of 'bias' not found"):
            A_NN.utils.remove_weight_norm(m, "bias")
        with pytest.raises(AttributeError, match="no parameter 'nope'"):
            A_NN.utils.weight_norm(A_NN.Linear(3, 2), name="nope")


@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("train", [True, False])
def test_spectral_norm_hook_api(kind, train):
    am, tm = _pair(LAYERS[kind])
    A_NN.utils.spectral_norm(am)
    T_NN.utils.spectral_norm(tm)
    assert list(am.state_dict()) == list(tm.state_dict())
    _load(am, tm)                      # the same weight_orig and u, v
    am.train(train), tm.train(train)
    _train(am, tm, kind)
    for b in ("weight_u", "weight_v"):
        _close(getattr(am, b), getattr(tm, b), 1e-5)
    A_NN.utils.remove_spectral_norm(am)
    T_NN.utils.remove_spectral_norm(tm)
    assert list(am.state_dict()) == list(tm.state_dict())
    _close(am.weight, tm.weight, 1e-5)


def test_spectral_norm_hook_errors():
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        A_NN.utils.spectral_norm(A_NN.Linear(3, 2), n_power_iterations=0)
    m = A_NN.utils.spectral_norm(A_NN.Linear(3, 2))
    with pytest.raises(RuntimeError, match="two spectral_norm hooks"):
        A_NN.utils.spectral_norm(m)
    with pytest.raises(ValueError, match="spectral_norm of 'bias' not found"):
        A_NN.utils.remove_spectral_norm(m, "bias")


@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization(kind, dim):
    am, tm = _pair(LAYERS[kind])
    A_NN.utils.parametrizations.weight_norm(am, dim=dim)
    T_NN.utils.parametrizations.weight_norm(tm, dim=dim)
    assert type(am).__name__ == type(tm).__name__
    assert repr(am) == repr(tm)
    assert list(am.state_dict()) == list(tm.state_dict())
    _load(am, tm)
    _train(am, tm, kind)
    A_NN.utils.parametrize.remove_parametrizations(am, "weight")
    T_NN.utils.parametrize.remove_parametrizations(tm, "weight")
    assert type(am) is A_NN.modules.conv.__dict__.get(type(tm).__name__, A_NN.Linear)
    assert list(am.state_dict()) == list(tm.state_dict())
    _close(am.weight, tm.weight, 1e-5)


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_spectral_norm_parametrization(kind):
    am, tm = _pair(LAYERS[kind])
    A_NN.utils.parametrizations.spectral_norm(am)
    T_NN.utils.parametrizations.spectral_norm(tm)
    assert repr(am) == repr(tm)
    assert list(am.state_dict()) == list(tm.state_dict())
    sa = am.state_dict()
    # ampy's own registration ran 15 power iterations: u, v are unit vectors and u^T W v is
    # close to the largest singular value
    w = sa["parametrizations.weight.original"].numpy()
    w = np.moveaxis(w, 1, 0) if kind == "convT2d" else w
    u, v = sa["parametrizations.weight.0._u"].numpy(), sa["parametrizations.weight.0._v"].numpy()
    np.testing.assert_allclose([np.linalg.norm(u), np.linalg.norm(v)], [1, 1], rtol=1e-5)
    sigma = np.linalg.svd(w.reshape(w.shape[0], -1).astype(np.float64), compute_uv=False)[0]
    assert abs(u @ w.reshape(w.shape[0], -1) @ v - sigma) < 0.05 * sigma
    _load(am, tm)
    _train(am, tm, kind)
    am.eval(), tm.eval()
    x = _x(kind, 9)
    _close(am(ampy.tensor(x)), tm(torch.tensor(x)), 1e-4)


class _Symmetric:
    """X -> triu(X) + triu(X, 1)^T, with a right inverse (torch's tutorial example)."""

    @staticmethod
    def make(nn, lib):
        class Symmetric(nn.Module):
            def forward(self, X):
                return X.triu() + X.triu(1).transpose(-1, -2)

            def right_inverse(self, A):
                return A.triu()
        return Symmetric()


def test_register_parametrization_user_module():
    am, tm = _pair(lambda nn: nn.Linear(4, 4))
    _load(am, tm)
    P = A_NN.utils.parametrize
    P.register_parametrization(am, "weight", _Symmetric.make(A_NN, ampy))
    T_NN.utils.parametrize.register_parametrization(tm, "weight", _Symmetric.make(T_NN, torch))
    assert list(am.state_dict()) == list(tm.state_dict())
    _close(am.parametrizations.weight.original, tm.parametrizations.weight.original)
    w = am.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    assert P.is_parametrized(am) and P.is_parametrized(am, "weight")
    assert not P.is_parametrized(am, "bias")
    assert P.type_before_parametrizations(am) is A_NN.Linear
    # assignment goes through right_inverse
    s = np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32)
    s = s + s.T
    am.weight = ampy.tensor(s)
    tm.weight = torch.tensor(s)
    _close(am.weight, tm.weight)
    _close(am.parametrizations.weight.original, tm.parametrizations.weight.original)
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    ya, yt = am(ampy.tensor(x)), tm(torch.tensor(x))
    _close(ya, yt)
    ya.sum().backward(), yt.sum().backward()
    _close(am.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad)
    # cached(): computed once inside the context
    with P.cached():
        assert am.weight is am.weight
    assert am.weight is not am.weight
    P.remove_parametrizations(am, "weight", leave_parametrized=False)
    assert type(am) is A_NN.Linear and not P.is_parametrized(am)
    _close(am.weight, tm.parametrizations.weight.original)


def test_parametrization_keeps_the_parameter_object():
    m = A_NN.Linear(3, 3)
    w = m.weight
    A_NN.utils.parametrize.register_parametrization(m, "weight", _Symmetric.make(A_NN, ampy))
    assert m.parametrizations.weight.original is w   # an optimizer holding w still works
    A_NN.utils.parametrize.remove_parametrizations(m, "weight")
    assert m.weight is w


def test_parametrization_errors():
    P = A_NN.utils.parametrize

    class ToHalf(A_NN.Module):
        def forward(self, X):
            return X.to(ampy.float16)

    class Grow(A_NN.Module):
        def forward(self, X):
            return ampy.cat([X, X])

    m = A_NN.Linear(3, 2)
    before = m.weight.detach().numpy().copy()
    with pytest.raises(ValueError, match="may not change the dtype"):
        P.register_parametrization(m, "weight", ToHalf())
    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(m, "weight", Grow())
    np.testing.assert_array_equal(m.weight.detach().numpy(), before)
    assert not P.is_parametrized(m)
    P.register_parametrization(m, "weight", Grow(), unsafe=True)
    assert tuple(m.weight.shape) == (4, 3)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized"):
        P.register_parametrization(m, "nope", Grow())
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        P.remove_parametrizations(m, "bias")
    wn = A_NN.utils.parametrizations.weight_norm(A_NN.Linear(3, 2))
    with pytest.raises(ValueError, match="sequence of tensors"):
        P.remove_parametrizations(wn, "weight", leave_parametrized=False)
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        import pickle
        pickle.dumps(wn)
    with pytest.raises(IndexError, match="Dimension out of range"):
        A_NN.utils.parametrizations.spectral_norm(A_NN.Linear(3, 2), dim=2)


def test_bias_buffer_and_chained_parametrizations():
    """A 1-d parameter (spectral norm normalizes it) and two parametrizations chained."""
    am, tm = _pair(lambda nn: nn.Linear(4, 4))
    for lib_nn, m in ((A_NN, am), (T_NN, tm)):
        lib_nn.utils.parametrizations.spectral_norm(m, "bias")
    _load(am, tm)
    _close(am.bias, tm.bias)
    P = A_NN.utils.parametrize
    P.register_parametrization(am, "weight", _Symmetric.make(A_NN, ampy))
    P.register_parametrization(am, "weight", _Symmetric.make(A_NN, ampy))
    T_NN.utils.parametrize.register_parametrization(tm, "weight", _Symmetric.make(T_NN, torch))
    T_NN.utils.parametrize.register_parametrization(tm, "weight", _Symmetric.make(T_NN, torch))
    assert list(am.state_dict()) == list(tm.state_dict())
    _load(am, tm)
    _train(am, tm, "square", steps=2)
