"""ConstantLR, PolynomialLR, MultiplicativeLR, CosineAnnealingWarmRestarts, CyclicLR and
ChainedScheduler side by side with torch 2.13: 60-step trajectories of lr (and momentum /
beta1 for CyclicLR), closed-form step(epoch), fractional epochs, state_dict round trips, the
errors. The lrs come from the same float64 formulas, so they agree to 1e-12 relative."""
import math
import warnings

import numpy as np
import pytest

import ampy
from ampy.optim import lr_scheduler as A

torch = pytest.importorskip("torch")
T = torch.optim.lr_scheduler
N = 60


def _opt(lib, kind="sgd"):
    ps = [lib.nn.Parameter(lib.ones(2)) for _ in range(2)]
    gs = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)]
    if kind == "adam":
        return lib.optim.Adam(gs, lr=0.1)
    return lib.optim.SGD(gs, lr=0.1, momentum=0.9)


def _pairs(kind, make):
    out = []
    for lib, mod in ((torch, T), (ampy, A)):
        o = _opt(lib, kind)
        out.append((o, make(mod, o, lib)))
    return out


def _same_groups(to, ao, keys=("lr", "momentum", "betas")):
    for tg, ag in zip(to.param_groups, ao.param_groups):
        for k in keys:
            if k not in tg:
                continue
            tv, av = tg[k], ag[k]
            tv, av = (tv, av) if isinstance(tv, tuple) else ((tv,), (av,))
            assert len(tv) == len(av)
            for x, y in zip(tv, av):
                assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15), (k, tg[k], ag[k])


class _Halve:
    """A callable object (its __dict__ is saved in state_dict, as torch does)."""

    def __init__(self):
        self.factor = 0.97

    def __call__(self, e):
        return self.factor


SCHEDULERS = [
    ("ConstantLR", lambda lib: dict(factor=0.5, total_iters=7)),
    ("ConstantLR", lambda lib: dict()),
    ("PolynomialLR", lambda lib: dict(total_iters=25, power=2.0)),
    ("PolynomialLR", lambda lib: dict()),
    ("MultiplicativeLR", lambda lib: dict(lr_lambda=lambda e: 0.95)),
    ("MultiplicativeLR", lambda lib: dict(lr_lambda=[lambda e: 0.9 + 0.001 * e, _Halve()])),
    ("CosineAnnealingWarmRestarts", lambda lib: dict(T_0=7)),
    ("CosineAnnealingWarmRestarts", lambda lib: dict(T_0=5, T_mult=2, eta_min=0.01)),
    ("CyclicLR", lambda lib: dict(base_lr=0.01, max_lr=0.1, step_size_up=6)),
    ("CyclicLR", lambda lib: dict(base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=4,
                                  step_size_down=9, mode="triangular2")),
    ("CyclicLR", lambda lib: dict(base_lr=0.001, max_lr=0.05, step_size_up=5, mode="exp_range",
                                  gamma=0.97, base_momentum=0.7, max_momentum=0.95)),
    ("CyclicLR", lambda lib: dict(base_lr=0.001, max_lr=0.05, step_size_up=3,
                                  scale_fn=lambda x: 1 / (1 + x), scale_mode="iterations",
                                  cycle_momentum=False)),
]


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name,kw", SCHEDULERS)
def test_trajectory_matches_torch(name, kw, kind):
    (to, ts), (ao, as_) = _pairs(kind, lambda mod, o, lib: getattr(mod, name)(o, **kw(lib)))
    for _ in range(N):
        _same_groups(to, ao)
        assert np.allclose(ts.get_last_lr(), as_.get_last_lr(), rtol=1e-12, atol=0)
        to.step(), ao.step()
        ts.step(), as_.step()
    _same_groups(to, ao, ("lr", "momentum", "betas", "initial_lr", "max_momentum",
                          "base_momentum"))
    assert ts.last_epoch == as_.last_epoch


@pytest.mark.parametrize("name,kw", [s for s in SCHEDULERS if s[0] in ("ConstantLR",
                                                                      "PolynomialLR")])
def test_closed_form_step_epoch_matches_torch(name, kw):
    (to, ts), (ao, as_) = _pairs("sgd", lambda mod, o, lib: getattr(mod, name)(o, **kw(lib)))
    for e in [3, 10, 4, 27, 13, 0]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ts.step(e)
            as_.step(e)
        _same_groups(to, ao)


@pytest.mark.parametrize("T_mult", [1, 2, 3])
def test_warm_restarts_fractional_epochs(T_mult):
    (to, ts), (ao, as_) = _pairs("sgd", lambda mod, o, lib: mod.CosineAnnealingWarmRestarts(
        o, T_0=4, T_mult=T_mult, eta_min=0.001))
    iters = 7
    for epoch in range(5):
        for i in range(iters):
            ts.step(epoch + i / iters)
            as_.step(epoch + i / iters)
            _same_groups(to, ao)
            assert (ts.T_cur, ts.T_i, ts.last_epoch) == pytest.approx(
                (as_.T_cur, as_.T_i, as_.last_epoch), rel=1e-12)
    for e in (30.5, 2, 61):
        ts.step(e), as_.step(e)
        _same_groups(to, ao)


def test_chained_scheduler_matches_torch_and_round_trips():
    def make(mod, o, lib):
        return mod.ChainedScheduler([mod.ConstantLR(o, factor=0.1, total_iters=2),
                                     mod.ExponentialLR(o, gamma=0.9)])
    (to, ts), (ao, as_) = _pairs("sgd", make)
    for i in range(N):
        to.step(), ao.step()
        ts.step(), as_.step()
        _same_groups(to, ao)
        assert np.allclose(ts.get_last_lr(), as_.get_last_lr(), rtol=1e-12)
        if i == 20:
            sd = as_.state_dict()
            assert sorted(sd) == sorted(ts.state_dict())
            (_, fresh), = [_pairs("sgd", make)[1]]
            fresh.load_state_dict(sd)
            assert [s.last_epoch for s in fresh._schedulers] == \
                [s.last_epoch for s in as_._schedulers]


@pytest.mark.parametrize("name,kw", SCHEDULERS[::2])
def test_state_dict_keys_and_resume(name, kw):
    (to, ts), (ao, as_) = _pairs("sgd", lambda mod, o, lib: getattr(mod, name)(o, **kw(lib)))
    for _ in range(9):
        to.step(), ao.step(), ts.step(), as_.step()
    st, sa = ts.state_dict(), as_.state_dict()
    assert sorted(st) == sorted(sa)
    ao2 = _opt(ampy)
    s2 = getattr(A, name)(ao2, **kw(ampy))
    s2.load_state_dict(sa)
    ao2.load_state_dict(ao.state_dict())
    for _ in range(9):
        ao.step(), ao2.step(), as_.step(), s2.step()
        _same_groups(ao, ao2)


def test_errors_match_torch():
    for lib, mod in ((torch, T), (ampy, A)):
        o = _opt(lib)
        with pytest.raises(ValueError, match="between 0 and 1"):
            mod.ConstantLR(o, factor=1.5)
        with pytest.raises(ValueError, match="positive integer T_0"):
            mod.CosineAnnealingWarmRestarts(o, T_0=0)
        with pytest.raises(ValueError, match="integer T_mult >= 1"):
            mod.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=0)
        with pytest.raises(ValueError, match="Expected non-negative epoch"):
            mod.CosineAnnealingWarmRestarts(o, T_0=3).step(-1)
        with pytest.raises(ValueError, match="mode is invalid"):
            mod.CyclicLR(o, 0.01, 0.1, mode="nope")
        with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
            mod.MultiplicativeLR(o, [lambda e: 1.0])
        with pytest.raises(TypeError, match="lr_lambda should be a function"):
            mod.MultiplicativeLR(o, 3)
        with pytest.raises(ValueError, match="at least one scheduler"):
            mod.ChainedScheduler([])
        with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
            mod.ChainedScheduler([mod.ReduceLROnPlateau(o)])
        with pytest.raises(ValueError, match="same optimizer"):
            mod.ChainedScheduler([mod.ExponentialLR(o, 0.9), mod.ExponentialLR(_opt(lib), 0.9)])
    o = ampy.optim.Adagrad([ampy.nn.Parameter(ampy.ones(2))], lr=0.1)
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        A.CyclicLR(o, 0.01, 0.1)
    assert o.param_groups[0]["lr"] == 0.1   # nothing changed by the failed construction


def test_step_order_warning_as_torch():
    for lib, mod in ((torch, T), (ampy, A)):
        o = _opt(lib)
        s = mod.PolynomialLR(o, total_iters=4)
        with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
            s.step()
