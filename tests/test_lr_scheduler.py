"""ampy.optim.lr_scheduler side by side with torch.optim.lr_scheduler:
60-step trajectories of every scheduler (lrs and, for OneCycleLR, momenta
and betas), chained and sequential schedules, state_dict round trips, and
torch's warning when scheduler.step() comes before optimizer.step().
The lrs are Python floats computed by the same float64 formulas in the
same order, so they must be equal to 1e-12 relative."""
import math
import warnings

import numpy as np
import pytest

import ampy
from ampy.optim import lr_scheduler as A

torch = pytest.importorskip("torch")
T = torch.optim.lr_scheduler
N = 60


def _opt(lib, kind="sgd", groups=2):
    ps = [lib.nn.Parameter(lib.ones(2)) for _ in range(groups)]
    gs = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)]
    if kind == "adam":
        return lib.optim.Adam(gs, lr=0.1)
    return lib.optim.SGD(gs, lr=0.1, momentum=0.9)


SCHEDULERS = [
    ("StepLR", dict(step_size=7, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[5, 5, 17, 40], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.93)),
    ("CosineAnnealingLR", dict(T_max=13, eta_min=1e-3)),
    ("CosineAnnealingLR", dict(T_max=25)),
    ("LinearLR", dict(start_factor=0.25, end_factor=0.9, total_iters=20)),
    ("LinearLR", dict()),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=N)),
    ("OneCycleLR", dict(max_lr=[0.5, 2.0], total_steps=N, anneal_strategy="linear",
                        three_phase=True, div_factor=10.0, final_div_factor=100.0)),
    ("OneCycleLR", dict(max_lr=0.3, epochs=6, steps_per_epoch=10, pct_start=0.25,
                        base_momentum=0.8, max_momentum=0.9)),
]


def _lambda(lib):
    return dict(lr_lambda=[lambda e: 0.95 ** e, lambda e: 1.0 / (1 + e)])


def _pairs(kind, make):
    out = []
    for lib, mod in ((torch, T), (ampy, A)):
        o = _opt(lib, kind)
        out.append((o, make(mod, o, lib)))
    return out


def _groups_equal(to, ao, keys=("lr",)):
    for tg, ag in zip(to.param_groups, ao.param_groups):
        for k in keys:
            if k in tg:
                tv, av = tg[k], ag[k]
                if isinstance(tv, tuple):
                    assert len(tv) == len(av)
                    for x, y in zip(tv, av):
                        assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15), (k, tv, av)
                else:
                    assert math.isclose(tv, av, rel_tol=1e-12, abs_tol=1e-15), (k, tv, av)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name,kw", SCHEDULERS + [("LambdaLR", None)])
def test_trajectory_matches_torch(name, kw, kind):
    (to, ts), (ao, as_) = _pairs(kind, lambda mod, o, lib: getattr(mod, name)(
        o, **(kw if kw is not None else _lambda(lib))))
    for _ in range(N if name != "OneCycleLR" else N - 1):
        _groups_equal(to, ao, ("lr", "momentum", "betas"))
        assert np.allclose(ts.get_last_lr(), as_.get_last_lr(), rtol=1e-12, atol=0)
        to.step()
        ao.step()
        ts.step()
        as_.step()
    _groups_equal(to, ao, ("lr", "momentum", "betas", "initial_lr", "max_lr", "min_lr"))


@pytest.mark.parametrize("name,kw", [s for s in SCHEDULERS if s[0] != "OneCycleLR"])
def test_closed_form_step_epoch_matches_torch(name, kw):
    (to, ts), (ao, as_) = _pairs("sgd", lambda mod, o, lib: getattr(mod, name)(o, **kw))
    for e in [3, 10, 4, 27, 13]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ts.step(e)
            as_.step(e)
        _groups_equal(to, ao)
        assert ts.last_epoch == as_.last_epoch


def test_chained_schedulers_match_torch():
    def make(mod, o, lib):
        return [mod.ExponentialLR(o, gamma=0.9), mod.StepLR(o, step_size=4, gamma=0.5),
                mod.CosineAnnealingLR(o, T_max=9)]
    (to, ts), (ao, as_) = _pairs("sgd", make)
    for _ in range(N):
        to.step()
        ao.step()
        for t, a in zip(ts, as_):
            t.step()
            a.step()
        _groups_equal(to, ao)


@pytest.mark.parametrize("milestones", [[5], [10, 30]])
def test_sequential_lr_matches_torch(milestones):
    def make(mod, o, lib):
        scheds = [mod.LinearLR(o, start_factor=0.1, total_iters=5),
                  mod.CosineAnnealingLR(o, T_max=20)]
        if len(milestones) == 2:
            scheds.append(mod.ExponentialLR(o, gamma=0.9))
        return mod.SequentialLR(o, scheds, milestones=milestones)
    (to, ts), (ao, as_) = _pairs("sgd", make)
    _groups_equal(to, ao)
    for _ in range(N):
        to.step()
        ao.step()
        ts.step()
        as_.step()
        _groups_equal(to, ao)
        assert np.allclose(ts.get_last_lr(), as_.get_last_lr(), rtol=1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", factor=0.5, patience=2, cooldown=3),
                                dict(threshold_mode="abs", threshold=0.05, patience=1,
                                     min_lr=[0.02, 0.05]),
                                dict(mode="max", threshold_mode="abs", patience=0, eps=0.1)])
def test_reduce_lr_on_plateau_matches_torch(kw):
    (to, ts), (ao, as_) = _pairs("sgd", lambda mod, o, lib: mod.ReduceLROnPlateau(o, **kw))
    rng = np.random.default_rng(0)
    metrics = np.cumsum(rng.standard_normal(N)) * 0.1 + 5
    for m in metrics:
        to.step()
        ao.step()
        ts.step(float(m))
        as_.step(ampy.tensor(float(m)))
        _groups_equal(to, ao)
        assert ts.num_bad_epochs == as_.num_bad_epochs
        assert ts.cooldown_counter == as_.cooldown_counter
        assert ts.get_last_lr() == pytest.approx(as_.get_last_lr(), rel=1e-12)


@pytest.mark.parametrize("name,kw", SCHEDULERS[:8] + [("LambdaLR", None)])
def test_state_dict_round_trip(name, kw):
    mk = lambda mod, o, lib: getattr(mod, name)(o, **(kw if kw is not None else _lambda(lib)))
    (to, ts), (ao, as_) = _pairs("sgd", mk)
    for _ in range(9):
        ao.step()
        as_.step()
        to.step()
        ts.step()
    sd = as_.state_dict()
    assert "optimizer" not in sd
    assert sorted(sd) == sorted(ts.state_dict())
    # resume both libraries the same way: new optimizer + scheduler, then load
    to2, ao2 = _opt(torch), _opt(ampy)
    to2.load_state_dict(to.state_dict())
    ao2.load_state_dict(ao.state_dict())
    ts2, as2 = mk(T, to2, torch), mk(A, ao2, ampy)
    ts2.load_state_dict(ts.state_dict())
    as2.load_state_dict(sd)
    for _ in range(10):
        to2.step()
        ao2.step()
        ts2.step()
        as2.step()
        _groups_equal(to2, ao2)
    assert as2.last_epoch == ts2.last_epoch


def test_plateau_state_dict_round_trip():
    o = _opt(ampy)
    s = A.ReduceLROnPlateau(o, patience=1)
    for m in [3.0, 3.0, 3.0, 2.0]:
        s.step(m)
    s2 = A.ReduceLROnPlateau(_opt(ampy), patience=1)
    s2.load_state_dict(s.state_dict())
    assert s2.best == 2.0 and s2.num_bad_epochs == s.num_bad_epochs and s2.last_epoch == 4


def _order_warnings(lib, mod, first_step_skipped, scheduler_first):
    p = lib.nn.Parameter(lib.ones(2))
    o = lib.optim.SGD([p], lr=0.1)
    sched = mod.StepLR(o, step_size=2)
    sc = lib.amp.GradScaler("cpu", init_scale=4.0)
    sc.scale(lib.ones(()))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        if scheduler_first:
            sched.step()
        g = np.full(2, np.inf if first_step_skipped else 1.0, np.float32)
        p.grad = lib.tensor(g)
        sc.step(o)
        sc.update()
        sched.step()
    return [str(x.message) for x in w if "lr_scheduler.step()" in str(x.message)]


@pytest.mark.parametrize("skipped,first", [(False, False), (True, False), (False, True)])
def test_step_order_warning_as_torch(skipped, first):
    """The warning fires when the first optimizer step was skipped by the
    scaler (torch never calls it; ampy's fused step skips in its kernel) or
    when the scheduler stepped first; never in the normal order."""
    tw = _order_warnings(torch, T, skipped, first)
    aw = _order_warnings(ampy, A, skipped, first)
    assert tw == aw
    assert bool(aw) == (skipped or first)
    if aw:
        assert aw[0].startswith("Detected call of `lr_scheduler.step()` before "
                                "`optimizer.step()`.")


def test_overridden_step_warning_as_torch():
    msgs = []
    for lib, mod in ((torch, T), (ampy, A)):
        o = _opt(lib)
        s = mod.ExponentialLR(o, gamma=0.5)
        o.step = lambda *a, **k: None
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s.step()
        msgs.append([str(x.message) for x in w])
    assert msgs[0] == msgs[1] and msgs[0][0].startswith("Seems like `optimizer.step()`")


@pytest.mark.parametrize("make,exc", [
    (lambda m, o: m.OneCycleLR(o, max_lr=1.0), ValueError),
    (lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=0), ValueError),
    (lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=2.0), ValueError),
    (lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=5, anneal_strategy="x"), ValueError),
    (lambda m, o: m.OneCycleLR(o, max_lr=[1.0], total_steps=5), ValueError),
    (lambda m, o: m.LinearLR(o, start_factor=0), ValueError),
    (lambda m, o: m.LinearLR(o, end_factor=1.5), ValueError),
    (lambda m, o: m.ReduceLROnPlateau(o, factor=1.0), ValueError),
    (lambda m, o: m.ReduceLROnPlateau(o, mode="x"), ValueError),
    (lambda m, o: m.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError),
    (lambda m, o: m.SequentialLR(o, [], milestones=[]), ValueError),
    (lambda m, o: m.SequentialLR(o, [m.StepLR(o, 2)], milestones=[3]), ValueError),
])
def test_bad_arguments_raise_as_torch(make, exc):
    with pytest.raises(exc) as t:
        make(T, _opt(torch))
    with pytest.raises(exc) as a:
        make(A, _opt(ampy))
    assert str(t.value) == str(a.value)


def test_onecycle_past_total_steps_raises_as_torch():
    for lib, mod in ((torch, T), (ampy, A)):
        o = _opt(lib)
        s = mod.OneCycleLR(o, max_lr=1.0, total_steps=3)
        for _ in range(3):
            o.step()
            s.step()
        with pytest.raises(ValueError, match="Tried to step 4 times"):
            o.step()
            s.step()
