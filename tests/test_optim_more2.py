"""ampy.optim's Adamax, NAdam, RAdam, Rprop and ASGD side by side with
torch.optim: the same params and grads for 12 steps in float32 (rtol 2e-6,
torch's vectorised sqrt differs by an ulp) and float64 (1e-12), state_dict
keys and values equal to torch's and loadable both ways, a GradScaler step
skipped on an inf grad, and argument checks."""
import numpy as np
import pytest

import ampy
from ampy import optim

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:GradScaler. no float16")

CONFIGS = [
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1)),
    ("Adamax", dict(maximize=True, eps=1e-4)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, betas=(0.9, 0.9))),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True,
                   betas=(0.5, 0.8))),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=4, weight_decay=0.1)),
    ("ASGD", dict(lr=0.05, t0=2, maximize=True, foreach=False)),
]
STEPS = 12
SHAPES = [(3, 4), (5,)]


def _grads(dtype, seed=0):
    rng = np.random.default_rng(seed)
    # grads of varying sign so Rprop's sign logic is exercised
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]


def _run(name, kw, dtype, steps=STEPS):
    rng = np.random.default_rng(1)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    tp = [torch.nn.Parameter(torch.tensor(a)) for a in init]
    ap = [ampy.nn.Parameter(ampy.tensor(a)) for a in init]
    to = getattr(torch.optim, name)([{"params": tp[:1]}, {"params": tp[1:], "lr": 0.02}], **kw)
    ao = getattr(optim, name)([{"params": ap[:1]}, {"params": ap[1:], "lr": 0.02}], **kw)
    for gs in _grads(dtype)[:steps]:
        for p, q, g in zip(tp, ap, gs):
            p.grad = torch.tensor(g)
            q.grad = ampy.tensor(g)
        to.step()
        ao.step()
    return tp, ap, to, ao


def _close(a, t, dtype):
    tol = dict(rtol=2e-6, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a),
                               t.detach().numpy(), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", CONFIGS)
def test_trajectory_and_state(name, kw, dtype):
    tp, ap, to, ao = _run(name, kw, dtype)
    for p, q in zip(tp, ap):
        _close(q, p, dtype)
    tsd, asd = to.state_dict(), ao.state_dict()
    assert set(asd["state"]) == set(tsd["state"])
    for k in tsd["state"]:
        ts, as_ = tsd["state"][k], asd["state"][k]
        assert set(as_) == set(ts)
        for key in ts:
            assert as_[key].dtype.__str__().split(".")[-1] == str(ts[key].dtype).split(".")[-1]
            tol = dict(rtol=2e-6, atol=2e-6) if dtype == np.float32 or ts[key].dtype == \
                torch.float32 else dict(rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(as_[key].numpy(), ts[key].numpy(), **tol)
    for tg, ag in zip(tsd["param_groups"], asd["param_groups"]):
        assert set(ag) == set(tg)
        assert {k: v for k, v in ag.items()} == tg


@pytest.mark.parametrize("name,kw", CONFIGS)
def test_state_dict_both_ways(name, kw):
    """Torch's state loaded into ampy (and ampy's into torch) continues the
    same trajectory."""
    tp, ap, to, ao = _run(name, kw, np.float64, steps=5)
    tsd = to.state_dict()
    conv = {"state": {k: {n: ampy.tensor(v.numpy()) for n, v in s.items()}
                      for k, s in tsd["state"].items()},
            "param_groups": tsd["param_groups"]}
    ao.load_state_dict(conv)
    asd = ao.state_dict()
    back = {"state": {k: {n: torch.tensor(np.asarray(v.numpy())) for n, v in s.items()}
                      for k, s in asd["state"].items()},
            "param_groups": asd["param_groups"]}
    to.load_state_dict(back)
    for gs in _grads(np.float64, seed=7)[:4]:
        for p, q, g in zip(tp, ap, gs):
            p.grad = torch.tensor(g)
            q.grad = ampy.tensor(g)
        to.step()
        ao.step()
    for p, q in zip(tp, ap):
        _close(q, p, np.float64)


@pytest.mark.parametrize("name,kw", CONFIGS[::3])
def test_grad_scaler_skips_inf(name, kw):
    p = ampy.nn.Parameter(ampy.tensor(np.linspace(-1, 1, 6).astype(np.float32)))
    o = getattr(optim, name)([p], **kw)
    scaler = ampy.amp.GradScaler("cpu", init_scale=2.0 ** 4)
    scaler.scale((p * p).sum()).backward()
    scaler.step(o)
    scaler.update()
    before = p.detach().numpy().copy()
    state = {k: v.numpy().copy() for k, v in o.state[p].items()}
    p.grad = None
    scaler.scale((p * p).sum()).backward()
    p.grad = ampy.tensor(np.array([1, np.inf, 0, 0, 0, 0], np.float32))
    scaler.step(o)
    scaler.update()
    np.testing.assert_array_equal(p.detach().numpy(), before)
    for k, v in o.state[p].items():
        np.testing.assert_array_equal(v.numpy(), state[k])
    # and the first (finite) step did unscale: same as torch's plain step on 2*p
    tp = torch.nn.Parameter(torch.tensor(np.linspace(-1, 1, 6).astype(np.float32)))
    to = getattr(torch.optim, name)([tp], **kw)
    tp.grad = 2 * tp.detach()
    to.step()
    np.testing.assert_allclose(before, tp.detach().numpy(), rtol=2e-6, atol=2e-6)


def test_bad_args():
    p = [ampy.nn.Parameter(ampy.ones(2))]
    with pytest.raises(ValueError, match="learning rate"):
        optim.Adamax(p, lr=-1)
    with pytest.raises(ValueError, match="beta"):
        optim.NAdam(p, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="momentum_decay"):
        optim.NAdam(p, momentum_decay=-1)
    with pytest.raises(ValueError, match="weight_decay"):
        optim.RAdam(p, weight_decay=-1)
    with pytest.raises(ValueError, match="eta"):
        optim.Rprop(p, etas=(1.5, 1.2))
    with pytest.raises(ValueError, match="learning rate"):
        optim.ASGD(p, lr=-0.1)
