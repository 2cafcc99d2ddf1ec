"""float64 parameters for ampy.optim.RMSprop, Adagrad and Adadelta against
torch 2.13: 20-step trajectories for every option (foreach None/False/True,
Adagrad's fused flag), state dtypes and keys as torch's, state_dict both
ways, a group mixing float32 and float64 params, GradScaler's skip on a
non-finite gradient, a strided param, and the dtype error.

Bound. ampy runs torch's single-tensor formulas op for op in float64; the
two differ only where one side fuses a multiply-add (torch's vectorised
add(alpha=) / addcmul), one rounding per op. Each step is at most 8 ops per
element, each within u (1 + |w|) after the divisions by sqrt(v) + eps (the
update g / sqrt(v) is bounded by 1 / sqrt(1 - alpha) and so is its error's
growth); over 20 steps |err| <= 64 * 20 u (1 + max|w|), about 1.4e-13. The
same bound covers torch's own foreach trajectory, whose ops differ in the
same way.
"""
import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")

STEPS = 20
U64 = 2.0 ** -53
CONFIGS = {
    "RMSprop": [dict(lr=0.01), dict(lr=0.01, centered=True),
                dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1, maximize=True),
                dict(lr=0.02, alpha=0.9, momentum=0.5, eps=1e-6)],
    "Adagrad": [dict(lr=0.1), dict(lr=0.1, lr_decay=0.01, weight_decay=0.1,
                                   initial_accumulator_value=0.5, maximize=True)],
    "Adadelta": [dict(), dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)],
}
CASES = [(n, i) for n, cs in CONFIGS.items() for i in range(len(cs))]


def _close(a, t, bound_steps=STEPS):
    a = a.detach().numpy() if hasattr(a, "detach") else a
    t = t.detach().numpy()
    assert a.dtype == t.dtype
    bound = 64 * bound_steps * U64 * (1 + np.abs(t).max())
    assert np.abs(a - t).max() <= bound, np.abs(a - t).max()


def _pair(name, cfg, w0s, flags=None, torch_flags=None):
    tps = [torch.nn.Parameter(torch.from_numpy(w.copy())) for w in w0s]
    aps = [ampy.nn.Parameter(ampy.from_numpy(w.copy())) for w in w0s]
    to = getattr(torch.optim, name)(tps, **cfg, **(torch_flags or flags or {}))
    ao = getattr(ampy.optim, name)(aps, **cfg, **(flags or {}))
    return aps, ao, tps, to


def _steps(aps, ao, tps, to, rng, n=STEPS):
    for _ in range(n):
        for a, t in zip(aps, tps):
            g = rng.standard_normal(tuple(t.shape)).astype(t.detach().numpy().dtype)
            t.grad = torch.from_numpy(g.copy())
            a.grad = ampy.from_numpy(g.copy())
        to.step()
        ao.step()


@pytest.mark.parametrize("foreach", [None, False, True])
@pytest.mark.parametrize("name,i", CASES)
def test_trajectory_matches_torch(name, i, foreach):
    rng = np.random.default_rng(i)
    aps, ao, tps, to = _pair(name, CONFIGS[name][i], [rng.standard_normal((7, 5)),
                                                       rng.standard_normal(11)],
                             dict(foreach=foreach))
    _steps(aps, ao, tps, to, rng)
    for a, t in zip(aps, tps):
        assert a.dtype is ampy.float64
        _close(a, t)
        sa, st = ao.state[a], to.state[t]
        assert sorted(sa) == sorted(st)
        for k in st:
            assert str(sa[k].dtype).split(".")[-1] == str(st[k].dtype).split(".")[-1], k
            _close(sa[k], st[k])


@pytest.mark.parametrize("fused", [None, False, True])
def test_adagrad_fused_flag(fused):
    rng = np.random.default_rng(3)
    aps, ao, tps, to = _pair("Adagrad", dict(lr=0.1, lr_decay=0.01), [rng.standard_normal(9)],
                             dict(fused=fused))
    _steps(aps, ao, tps, to, rng)
    _close(aps[0], tps[0])


@pytest.mark.parametrize("name,i", CASES)
def test_state_dict_both_ways(name, i):
    rng = np.random.default_rng(10 + i)
    w0 = [rng.standard_normal((4, 3))]
    aps, ao, tps, to = _pair(name, CONFIGS[name][i], w0)
    _steps(aps, ao, tps, to, rng, 5)
    # torch's state into a fresh ampy optimizer, and ampy's into a fresh torch one
    a2 = [ampy.nn.Parameter(ampy.from_numpy(tps[0].detach().numpy().copy()))]
    o2 = getattr(ampy.optim, name)(a2, **CONFIGS[name][i])
    o2.load_state_dict(to.state_dict())
    st = o2.state[a2[0]]
    for k, v in to.state[tps[0]].items():
        assert st[k].numpy().dtype == v.numpy().dtype, k
        np.testing.assert_array_equal(st[k].numpy(), v.numpy())
    t2 = [torch.nn.Parameter(torch.from_numpy(aps[0].detach().numpy().copy()))]
    tt2 = getattr(torch.optim, name)(t2, **CONFIGS[name][i])
    tt2.load_state_dict({"state": {0: {k: torch.from_numpy(v.numpy().copy())
                                       for k, v in ao.state[aps[0]].items()}},
                         "param_groups": to.state_dict()["param_groups"]})
    _steps(a2, o2, t2, tt2, rng, 5)
    _close(a2[0], t2[0], STEPS + 5)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_group_mixing_float32_and_float64(name):
    rng = np.random.default_rng(20)
    w64, w32 = rng.standard_normal((5, 4)), rng.standard_normal(6).astype(np.float32)
    aps, ao, tps, to = _pair(name, CONFIGS[name][0], [w64, w32])
    _steps(aps, ao, tps, to, rng)
    _close(aps[0], tps[0])
    assert aps[1].dtype is ampy.float32
    # the float32 step is the fused kernel's (tests/test_optim.py holds its bound)
    np.testing.assert_allclose(aps[1].detach().numpy(), tps[1].detach().numpy(), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.filterwarnings("ignore:GradScaler. no float16")
def test_grad_scaler_skips_a_nonfinite_step(name):
    rng = np.random.default_rng(30)
    w0 = rng.standard_normal(8)
    aps, ao, tps, to = _pair(name, CONFIGS[name][0], [w0])
    a_sc = ampy.amp.GradScaler("cpu", init_scale=8.0)
    t_sc = torch.amp.GradScaler("cpu", init_scale=8.0)
    x = rng.standard_normal(8)
    for step in range(6):
        xs = x.copy()
        if step == 2:
            xs[3] = np.inf
        ax, tx = ampy.from_numpy(xs), torch.from_numpy(xs)
        a_sc.scale((aps[0] * ax).sum()).backward()
        t_sc.scale((tps[0] * tx).sum()).backward()
        a_sc.step(ao)
        t_sc.step(to)
        a_sc.update()
        t_sc.update()
        ao.zero_grad()
        to.zero_grad()
        assert a_sc.get_scale() == t_sc.get_scale()
        _close(aps[0], tps[0], 6)
    assert float(ao.state[aps[0]]["step"]) == float(to.state[tps[0]]["step"]) == 5


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_strided_float64_param(name):
    rng = np.random.default_rng(40)
    base = rng.standard_normal((6, 4))
    ta = torch.from_numpy(base.copy()).t()
    aa = ampy.from_numpy(base.copy()).t()
    tp, ap = torch.nn.Parameter(ta), ampy.nn.Parameter(aa)
    assert not ap.is_contiguous()
    to = getattr(torch.optim, name)([tp], **CONFIGS[name][0])
    ao = getattr(ampy.optim, name)([ap], **CONFIGS[name][0])
    _steps([ap], ao, [tp], to, rng, 5)
    _close(ap, tp, 5)


def test_other_dtypes_still_refused_with_the_list():
    p = ampy.nn.Parameter(ampy.zeros(3, dtype=ampy.int64), requires_grad=False)
    with pytest.raises(TypeError, match="float32, float16, bfloat16 or float64"):
        opt = ampy.optim.Adadelta([p])
        p.grad = ampy.zeros(3, dtype=ampy.int64)
        opt.step()
