"""Hostile inputs for GradScaler, the fused optimizers and the lr schedulers
(state after a raise, validation at
the door). Every case checks that the bad input raises a clear Python
exception and that nothing changed: params, grads, optimizer state and
param_groups, the scaler's scale/trackers/stage, the scheduler's epoch.
Where torch defines a working behaviour the case also retries or compares.
"""
import copy
import math

import numpy as np
import pytest
import torch

import ampy
from ampy import nn, optim
from ampy.amp import GradScaler
from ampy.optim import lr_scheduler

from _helpers import bits

pytestmark = [pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved"),
              pytest.mark.filterwarnings("ignore:Detected call of")]

NAN, INF = float("nan"), float("inf")
W = np.array([1.0, -0.5, 0.25, 2.0], np.float32)


def A(t):
    return t.detach().numpy().copy()


def _model(n_groups=3):
    ps = [nn.Parameter(ampy.tensor(W * (i + 1))) for i in range(n_groups)]
    return ps


def _loss(ps, scale=1.0):
    x = ampy.tensor(np.array([0.5, 1.5, -2.0, 0.75], np.float32))
    total = None
    for p in ps:
        t = (p * x).sum() + (p * p).sum() * 0.5
        total = t if total is None else total + t
    return total * scale


def snapshot(opt, ps, scaler=None):
    snap = {"params": [bits(A(p)) for p in ps],
            "grads": [None if p.grad is None else bits(A(p.grad)) for p in ps],
            "state": {i: {k: (bits(A(v)) if hasattr(v, "numpy") else v)
                          for k, v in opt.state[p].items()}
                      for i, p in enumerate(ps) if p in opt.state},
            "groups": [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]}
    if scaler is not None:
        st = scaler._per_optimizer_states.get(id(opt))  # no entry == a fresh READY one
        snap["scaler"] = (scaler.state_dict(),
                          ("READY", []) if st is None else (st["stage"].name,
                                                            sorted(st["found_inf_per_device"])))
    return snap


def same_snapshot(a, b):
    assert a.keys() == b.keys()
    for x, y in zip(a["params"] + a["grads"], b["params"] + b["grads"]):
        assert (x is None and y is None) or np.array_equal(x, y)
    assert a["state"].keys() == b["state"].keys()
    for i in a["state"]:
        assert a["state"][i].keys() == b["state"][i].keys()
        for k in a["state"][i]:
            assert np.array_equal(np.asarray(a["state"][i][k]), np.asarray(b["state"][i][k]))
    assert repr(a["groups"]) == repr(b["groups"])
    assert repr(a.get("scaler")) == repr(b.get("scaler"))


# ------------------------------------------- bad hyper-parameter in one group

BAD_HYPER = {
    "SGD": [("lr", NAN), ("lr", INF), ("lr", -1.0), ("lr", "x"), ("lr", None),
            ("momentum", -1.0), ("momentum", NAN), ("weight_decay", -0.1),
            ("weight_decay", NAN), ("dampening", INF), ("dampening", NAN),
            ("nesterov", True)],
    "Adam": [("lr", NAN), ("lr", INF), ("lr", -1.0), ("lr", "x"), ("eps", -1.0), ("eps", NAN),
             ("eps", INF), ("betas", (1.0, 0.999)), ("betas", (0.9, NAN)),
             ("betas", (-0.1, 0.999)), ("weight_decay", -1.0), ("weight_decay", INF)],
    "AdamW": [("lr", NAN), ("eps", -1.0), ("betas", (0.9, 1.0)), ("weight_decay", NAN)],
}
CASES = [(cls, key, bad, g) for cls, bads in BAD_HYPER.items() for key, bad in bads
         for g in (0, 1, 2)]


def _opt(cls, ps):
    kw = {"lr": 0.1, "momentum": 0.9, "dampening": 0.1} if cls == "SGD" else {"lr": 0.1}
    return getattr(optim, cls)([{"params": [p]} for p in ps], **kw)


def _warm(opt, ps, scaler=None):
    """One clean iteration, so the state exists before the failing one."""
    opt.zero_grad()
    if scaler is None:
        _loss(ps).backward()
        opt.step()
    else:
        scaler.scale(_loss(ps)).backward()
        scaler.step(opt)
        scaler.update()
    opt.zero_grad()


@pytest.mark.parametrize("cls,key,bad,group", CASES)
@pytest.mark.parametrize("with_scaler", [False, True])
def test_bad_hyper_parameter_changes_nothing_then_retry(cls, key, bad, group, with_scaler):
    ps = _model()
    opt = _opt(cls, ps)
    sc = GradScaler("cpu", init_scale=256.0, growth_interval=1) if with_scaler else None
    _warm(opt, ps, sc)
    (sc.scale(_loss(ps)) if sc else _loss(ps)).backward()
    good = opt.param_groups[group][key]
    opt.param_groups[group][key] = bad
    before = snapshot(opt, ps, sc)
    with pytest.raises((ValueError, TypeError)):
        sc.step(opt) if sc else opt.step()
    same_snapshot(before, snapshot(opt, ps, sc))
    opt.param_groups[group][key] = good
    # the retry steps every group exactly once: the same as a clean twin
    twin_ps = _model()
    twin = _opt(cls, twin_ps)
    tsc = GradScaler("cpu", init_scale=256.0, growth_interval=1) if with_scaler else None
    _warm(twin, twin_ps, tsc)
    (tsc.scale(_loss(twin_ps)) if tsc else _loss(twin_ps)).backward()
    for o, s in ((opt, sc), (twin, tsc)):
        if s:
            s.step(o)
            s.update()
        else:
            o.step()
    for p, q in zip(ps, twin_ps):
        assert np.array_equal(bits(A(p)), bits(A(q)))
        assert np.array_equal(bits(A(p.grad)), bits(A(q.grad)))


@pytest.mark.parametrize("cls", ["SGD", "Adam"])
@pytest.mark.parametrize("kind", ["overlapping_param", "float64_param_float32_grad"])
def test_bad_parameter_in_last_group_changes_nothing(cls, kind):
    ps = _model(2)
    bad = (nn.Parameter(ampy.zeros(4, 1).expand(4, 2)) if kind == "overlapping_param"
           else nn.Parameter(ampy.zeros(4, 2, dtype=ampy.float64)))
    opt = _opt(cls, ps)
    _warm(opt, ps)
    _loss(ps).backward()
    opt.add_param_group({"params": [bad]})
    if kind == "overlapping_param":
        bad.grad = ampy.ones(4, 2)
    else:  # past the grad setter's dtype check, which refuses it as torch's does
        bad._grad = ampy.ones(4, 2)
    before = snapshot(opt, ps)
    with pytest.raises((RuntimeError, TypeError)):
        opt.step()
    same_snapshot(before, snapshot(opt, ps))


# --------------------------------------------------------- GradScaler: door

SCALER_ARGS = [
    ("init_scale", [0.0, -1.0, NAN, INF, "x", None, 10 ** 400]),
    ("growth_factor", [1.0, 0.5, NAN, "x", None]),
    ("backoff_factor", [1.0, 0.0, -0.5, NAN, "x"]),
    ("growth_interval", [0, -1, 2 ** 63, 1.5, "x", None, True]),
    ("min_scale", [0.0, -1.0, NAN, INF, "x"]),
    ("max_scale", [0.0, NAN, INF, "x"]),
    ("hysteresis", [0, 2 ** 31, 1.5, "x"]),
]


@pytest.mark.parametrize("arg,bad", [(a, b) for a, bs in SCALER_ARGS for b in bs])
def test_scaler_constructor_refuses(arg, bad):
    with pytest.raises((ValueError, TypeError, AssertionError)):
        GradScaler("cpu", **{arg: bad})


SD_BAD = [
    ("scale", [0.0, -2.0, NAN, INF, "x", None, [1.0]]),
    ("growth_factor", [1.0, NAN, "x"]),
    ("backoff_factor", [1.5, 0.0, NAN, "x"]),
    ("growth_interval", [0, 2 ** 63, 2.5, "x"]),
    ("_growth_tracker", [-1, 2 ** 31, 0.5, "x"]),
    ("min_scale", [NAN, -1.0, INF, "x", 4096.0]),  # 4096 > max_scale below
    ("max_scale", [NAN, 0.0, "x", 1.0]),          # 1.0 < min_scale below
    ("hysteresis", [0, 2 ** 40, "x"]),
    ("_hysteresis_tracker", [-1, 99, "x"]),
]


def _trained_scaler():
    ps = _model(1)
    opt = optim.SGD(ps, lr=0.1)
    sc = GradScaler("cpu", init_scale=1024.0, growth_interval=3, min_scale=2.0,
                    max_scale=2048.0, hysteresis=2)
    _warm(opt, ps, sc)
    return sc, opt, ps


@pytest.mark.parametrize("key,bad", [(k, b) for k, bs in SD_BAD for b in bs])
def test_scaler_load_state_dict_refuses_and_changes_nothing(key, bad):
    sc, opt, ps = _trained_scaler()
    sd = sc.state_dict()
    before = snapshot(opt, ps, sc)
    with pytest.raises((ValueError, TypeError, AssertionError)):
        sc.load_state_dict({**sd, key: bad})
    same_snapshot(before, snapshot(opt, ps, sc))
    _warm(opt, ps, sc)  # update() still works


@pytest.mark.parametrize("sd", [None, [], "x", {}, {"scale": 2.0}])
def test_scaler_load_state_dict_bad_container(sd):
    sc, opt, ps = _trained_scaler()
    before = snapshot(opt, ps, sc)
    with pytest.raises((TypeError, KeyError, RuntimeError)):
        sc.load_state_dict(sd)
    same_snapshot(before, snapshot(opt, ps, sc))


@pytest.mark.parametrize("new_scale", [0.0, -1.0, NAN, INF])
def test_scaler_update_new_scale_refuses(new_scale):
    sc, opt, ps = _trained_scaler()
    sc.scale(_loss(ps)).backward()
    sc.step(opt)
    before = sc.state_dict()
    with pytest.raises(ValueError, match="new_scale"):
        sc.update(new_scale)
    assert sc.state_dict() == before
    sc.update()


@pytest.mark.parametrize("setter,bad", [("set_growth_factor", v) for v in (1.0, NAN, "x")] +
                         [("set_backoff_factor", v) for v in (1.0, 0.0, NAN, "x")] +
                         [("set_growth_interval", v) for v in (0, 2 ** 63, "x", 2.0)])
def test_scaler_setters_refuse(setter, bad):
    sc, opt, ps = _trained_scaler()
    before = sc.state_dict()
    with pytest.raises((ValueError, TypeError, AssertionError)):
        getattr(sc, setter)(bad)
    assert sc.state_dict() == before
    _warm(opt, ps, sc)


def test_scaler_misuse_order_matches_torch_and_changes_nothing():
    msgs = {}
    for lib in (torch, ampy):
        p = lib.nn.Parameter(lib.tensor(W.copy()))
        opt = lib.optim.SGD([p], lr=0.1)
        sc = torch.amp.GradScaler("cpu") if lib is torch else GradScaler("cpu")
        sc.scale((p * p).sum()).backward()
        sc.unscale_(opt)
        out = []
        for call in (lambda: sc.unscale_(opt), lambda: sc.step(opt), lambda: sc.step(opt),
                     lambda: sc.unscale_(opt)):
            try:
                call()
                out.append(None)
            except (RuntimeError, AssertionError) as e:
                out.append(str(e))
        msgs[lib] = out + [A(p).tolist()]
    assert msgs[torch] == msgs[ampy]


# ------------------------------------------------- Optimizer.load_state_dict

def _adam_with_state():
    ps = _model(2)
    opt = optim.Adam([{"params": [ps[0]]}, {"params": [ps[1]]}], lr=0.1, amsgrad=True)
    _warm(opt, ps)
    return opt, ps


def _mutations():
    def drop(key):
        def f(sd):
            del sd["state"][1][key]
        return f

    def setv(key, v):
        def f(sd):
            sd["state"][1][key] = v
        return f

    def groups(f):
        return f
    return {
        "no_step": drop("step"),
        "step_str": setv("step", "x"),
        "step_list": setv("step", [1]),
        "step_two_elems": setv("step", ampy.ones(2)),
        "exp_avg_shape": setv("exp_avg", ampy.zeros(5)),
        "exp_avg_sq_shape": setv("exp_avg_sq", ampy.zeros(2, 2)),
        "entry_not_dict": lambda sd: sd["state"].__setitem__(1, [1, 2]),
        "one_group": lambda sd: sd["param_groups"].pop(),
        "group_size": lambda sd: sd["param_groups"][1]["params"].append(7),
        "no_state_key": lambda sd: sd.pop("state"),
        "not_a_dict": None,
    }


@pytest.mark.parametrize("name", sorted(_mutations()))
def test_optimizer_load_state_dict_refuses_and_changes_nothing(name):
    opt, ps = _adam_with_state()
    sd = opt.state_dict()
    bad = copy.deepcopy({"state": {k: dict(v) for k, v in sd["state"].items()},
                         "param_groups": sd["param_groups"]})
    mutate = _mutations()[name]
    if mutate is None:
        bad = [sd]
    else:
        mutate(bad)
    before = snapshot(opt, ps)
    with pytest.raises((KeyError, TypeError, ValueError)):
        opt.load_state_dict(bad)
    same_snapshot(before, snapshot(opt, ps))
    _loss(ps).backward()
    opt.step()  # still usable


# ---------------------------------------------------------- lr schedulers

def _sched_opt():
    ps = _model(2)
    return optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]]}], lr=0.1)


@pytest.mark.parametrize("kw", [{"step_size": 0}, {"step_size": -1}, {"step_size": 1.5},
                                {"step_size": "x"}, {"step_size": 2, "gamma": "x"},
                                {"step_size": 2, "last_epoch": "x"},
                                {"step_size": 2, "last_epoch": -5}])
def test_steplr_refuses_before_touching_the_groups(kw):
    opt = _sched_opt()
    before = copy.deepcopy([{k: v for k, v in g.items() if k != "params"}
                            for g in opt.param_groups])
    with pytest.raises((ValueError, TypeError)):
        lr_scheduler.StepLR(opt, **kw)
    assert [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups] == before


@pytest.mark.parametrize("result", ["raise", "str", "none"])
def test_lambdalr_step_that_fails_changes_nothing(result):
    opt = _sched_opt()
    bad = [False]

    def f(epoch):
        if not bad[0]:
            return 0.5 ** epoch
        if result == "raise":
            raise RuntimeError("boom")
        return "x" if result == "str" else None

    s = lr_scheduler.LambdaLR(opt, [lambda e: 0.9 ** e, f])
    s.step()
    bad[0] = True
    lrs, epoch = [g["lr"] for g in opt.param_groups], s.last_epoch
    with pytest.raises((RuntimeError, TypeError)):
        s.step()
    assert [g["lr"] for g in opt.param_groups] == lrs and s.last_epoch == epoch
    assert s.get_last_lr() == lrs


@pytest.mark.parametrize("sd", [{"last_epoch": "x"}, {"base_lrs": [0.1]},
                                {"base_lrs": ["a", "b"]}, {"last_epoch": -7}, "x"])
def test_scheduler_load_state_dict_refuses(sd):
    opt = _sched_opt()
    s = lr_scheduler.StepLR(opt, step_size=2)
    s.step()
    before = s.state_dict()
    with pytest.raises((ValueError, TypeError)):
        s.load_state_dict(sd)
    assert s.state_dict() == before
    s.step()


def test_scheduler_state_dict_round_trip_matches_torch():
    res = {}
    for lib in (torch, ampy):
        p = lib.nn.Parameter(lib.ones(1))
        o = lib.optim.SGD([p], lr=0.1)
        s = lib.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)
        for _ in range(3):
            o.step()
            s.step()
        o2 = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=0.1)
        s2 = lib.optim.lr_scheduler.StepLR(o2, step_size=2, gamma=0.5)
        s2.load_state_dict(s.state_dict())
        o2.step()
        s2.step()
        res[lib] = (s2.last_epoch, s2.get_last_lr(), o2.param_groups[0]["lr"])
    assert res[torch][0] == res[ampy][0]
    for a, b in zip(res[torch][1] + [res[torch][2]], res[ampy][1] + [res[ampy][2]]):
        assert math.isclose(a, b, rel_tol=1e-12)


@pytest.mark.parametrize("which", ["params", "grads"])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_functional_step_refuses_a_tensor_listed_twice(which, opt):
    from ampy.amp import functional as F
    p, q = ampy.tensor(W.copy()), ampy.tensor(W.copy())
    g = ampy.tensor(W * 8)
    params, grads = ([p, p], [g, ampy.tensor(W)]) if which == "params" else ([p, q], [g, g])
    before = [bits(A(t)) for t in (p, q, g)]
    with pytest.raises(ValueError, match="same tensor"):
        if opt == "sgd":
            F.sgd_step_(params, grads, None, lr=0.1, inv_scale=ampy.full((), 0.125))
        else:
            F.adam_step_(params, grads, [ampy.zeros(4), ampy.zeros(4)],
                         [ampy.zeros(4), ampy.zeros(4)], None, [ampy.zeros(()), ampy.zeros(())],
                         lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0,
                         amsgrad=False, maximize=False, inv_scale=ampy.full((), 0.125))
    assert all(np.array_equal(x, bits(A(t))) for x, t in zip(before, (p, q, g)))
