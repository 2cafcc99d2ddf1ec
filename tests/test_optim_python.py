"""Adamax, NAdam, RAdam, Rprop and ASGD side by side with torch 2.13: the same parameters and
the same gradient sequence, 12 steps, every parameter and state tensor compared (float64
tightly, float32 to a few ulp of the accumulated rounding); hyper-parameter variants
(weight_decay, maximize, decoupled decay, momentum_decay, etas, t0); state_dict keys and
values loading both ways; GradScaler skipping a step whose gradients hold an inf; the
constructor errors."""
import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")

CASES = [
    ("Adamax", {}), ("Adamax", dict(weight_decay=0.1, maximize=True, betas=(0.8, 0.99))),
    ("NAdam", {}), ("NAdam", dict(weight_decay=0.05, momentum_decay=0.01)),
    ("NAdam", dict(weight_decay=0.05, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}), ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, lr=1e-2)),
    ("RAdam", dict(betas=(0.9, 0.5), maximize=True)),     # rho_t > 5 from the start
    ("Rprop", {}), ("Rprop", dict(etas=(0.3, 1.5), step_sizes=(1e-3, 0.05), maximize=True)),
    ("ASGD", {}), ("ASGD", dict(t0=4, lambd=1e-2, alpha=0.5, weight_decay=0.01)),
]
SHAPES = [(3, 4), (5,)]


def _grads(seed, steps):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) * (1 + i % 3) for s in SHAPES] for i in range(steps)]


def _run(lib, name, kw, dtype, steps=12):
    rng = np.random.default_rng(1)
    params = [lib.nn.Parameter(lib.tensor(rng.standard_normal(s)).to(dtype)) for s in SHAPES]
    opt = getattr(lib.optim, name)(params, **kw)
    for gs in _grads(2, steps):
        for p, g in zip(params, gs):
            # a gradient that changes sign often, so Rprop's both branches run
            p.grad = lib.tensor(g).to(dtype)
        opt.step()
    return params, opt


def _np(t):
    return t.detach().to(ampy.float64 if isinstance(t, ampy.Tensor) else torch.float64).numpy()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", CASES)
def test_steps_match_torch(name, kw, dtype):
    tol = 1e-12 if dtype == "float64" else 2e-6
    pa, oa = _run(ampy, name, kw, getattr(ampy, dtype))
    pt, ot = _run(torch, name, kw, getattr(torch, dtype))
    for a, t in zip(pa, pt):
        assert a.dtype.name == str(t.dtype).split(".")[1]
        np.testing.assert_allclose(_np(a), _np(t), rtol=tol, atol=tol)
    for a, t in zip(pa, pt):
        sa, st = oa.state[a], ot.state[t]
        assert sorted(sa) == sorted(st)
        for k in st:
            assert str(sa[k].dtype).split(".")[-1] == str(st[k].dtype).split(".")[-1], k
            np.testing.assert_allclose(_np(sa[k]), _np(st[k]), rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("name,kw", CASES[::2])
def test_state_dict_loads_both_ways(name, kw):
    pa, oa = _run(ampy, name, kw, ampy.float64, steps=5)
    pt, ot = _run(torch, name, kw, torch.float64, steps=5)
    sa, st = oa.state_dict(), ot.state_dict()
    assert sa["param_groups"][0].keys() == st["param_groups"][0].keys()
    assert [sorted(v) for v in sa["state"].values()] == [sorted(v) for v in st["state"].values()]
    # torch's state into a fresh ampy optimizer, then the same next steps in both
    fresh = [ampy.nn.Parameter(ampy.tensor(_np(p))) for p in pt]
    oa2 = getattr(ampy.optim, name)(fresh, **kw)
    oa2.load_state_dict({"param_groups": st["param_groups"],
                         "state": {i: {k: ampy.tensor(v.numpy()) for k, v in s.items()}
                                   for i, s in st["state"].items()}})
    for gs in _grads(5, 3):
        for pa_, pt_, g in zip(fresh, pt, gs):
            pa_.grad, pt_.grad = ampy.tensor(g), torch.tensor(g)
        oa2.step(), ot.step()
    for a, t in zip(fresh, pt):
        np.testing.assert_allclose(_np(a), _np(t), rtol=1e-12, atol=1e-12)


@pytest.mark.filterwarnings("ignore:GradScaler. no float16")
@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam", "Rprop", "ASGD"])
def test_grad_scaler_skips_an_inf_step(name):
    w = ampy.nn.Parameter(ampy.ones(4))
    opt = getattr(ampy.optim, name)([w], lr=0.1)
    scaler = ampy.amp.GradScaler("cpu", init_scale=8.0)
    for bad in (False, True, False):
        loss = (w * ampy.tensor([1.0, 2.0, float("inf") if bad else 3.0, 4.0])).sum()
        before = w.detach().clone()
        state = {k: v.clone() for k, v in opt.state[w].items()}
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if bad:
            np.testing.assert_array_equal(w.detach().numpy(), before.numpy())
            for k, v in state.items():
                np.testing.assert_array_equal(opt.state[w][k].numpy(), v.numpy())
        else:
            assert not np.array_equal(w.detach().numpy(), before.numpy())
            # the step saw unscaled gradients: identical to a plain optimizer's step
        opt.zero_grad()
    assert scaler.get_scale() == 8.0 * 0.5


@pytest.mark.parametrize("name,kw,msg", [
    ("Adamax", dict(lr=-1.0), "Invalid learning rate: -1.0"),
    ("NAdam", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    ("RAdam", dict(eps=-1e-8), "Invalid epsilon value: -1e-08"),
    ("NAdam", dict(momentum_decay=-0.1), "Invalid momentum_decay value: -0.1"),
    ("Rprop", dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
    ("ASGD", dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
])
def test_constructor_errors_match_torch(name, kw, msg):
    for lib in (ampy, torch):
        with pytest.raises(ValueError, match=msg):
            getattr(lib.optim, name)([lib.nn.Parameter(lib.ones(2))], **kw)


def test_bfloat16_params_step_in_their_dtype():
    pa, _ = _run(ampy, "NAdam", {}, ampy.bfloat16, steps=4)
    pt, _ = _run(torch, "NAdam", {}, torch.bfloat16, steps=4)
    for a, t in zip(pa, pt):
        assert a.dtype == ampy.bfloat16
        np.testing.assert_allclose(_np(a), _np(t), rtol=2e-2, atol=2e-2)
