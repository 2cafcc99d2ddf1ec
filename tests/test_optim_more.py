"""ampy.optim's RMSprop, Adagrad and Adadelta side by side with torch.optim
(CPU): trajectories, master weights, state_dict, GradScaler, validation; and
the contract for user-written optimizers (docs/OPTIMIZERS.md).

Tolerance: torch's CPU sqrt of float32 tensors is its vectorised
(Sleef-style) square root, which is not correctly rounded (about 17% of
results differ from IEEE sqrt by 1 ulp on this build), while ampy rounds
correctly; every other operation is the same float32 operation in the same
order (fma where ATen uses fmadd). One ulp of the denominator moves an
update by <= 2^-23 relative, so after 25 steps the weights agree to
25 * 2^-23 * |update| plus the same in the running averages: rtol 2e-6 /
atol 2e-6 on O(1) weights, as tests/test_optim.py uses for Adam."""
import copy

import numpy as np
import pytest

import ampy
from ampy import nn, optim

torch = pytest.importorskip("torch")

CONFIGS = [
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=1e-3, alpha=0.9, eps=1e-6)),
    ("RMSprop", dict(momentum=0.9)),
    ("RMSprop", dict(centered=True)),
    ("RMSprop", dict(centered=True, momentum=0.5, weight_decay=0.1)),
    ("RMSprop", dict(maximize=True, alpha=0.3, weight_decay=0.01)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
    ("Adagrad", dict(maximize=True, eps=1e-6)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.5, weight_decay=0.1)),
    ("Adadelta", dict(maximize=True, eps=1e-3, rho=0.95)),
]
STEPS = 25
SHAPES = [(37, 3), (5,), (1,), (130,)]


def _pair(seed=0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    w0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(STEPS)]
    return ([torch.nn.Parameter(torch.tensor(w)) for w in w0],
            [nn.Parameter(ampy.tensor(w)) for w in w0], grads)


def _close(a, t, tol=2e-6):
    np.testing.assert_allclose(a, t, rtol=tol, atol=tol)


@pytest.mark.parametrize("name,kw", CONFIGS)
def test_trajectory_matches_torch(name, kw, cpu_path):
    tps, aps, grads = _pair()
    to, ao = getattr(torch.optim, name)(tps, **kw), getattr(optim, name)(aps, **kw)
    for gs in grads:
        for tp, ap, g in zip(tps, aps, gs):
            tp.grad, ap.grad = torch.tensor(g), ampy.tensor(g)
        to.step()
        ao.step()
        for tp, ap in zip(tps, aps):
            _close(ap.detach().numpy(), tp.detach().numpy())
    for tp, ap in zip(tps, aps):
        ts, as_ = to.state[tp], ao.state[ap]
        assert set(ts) == set(as_)
        for key in ts:
            _close(as_[key].numpy(), ts[key].numpy(), 1e-5)
        assert as_["step"].shape == () and as_["step"].dtype == ampy.float32


def _run_ampy(name, kw, dtype, grads, scale=None):
    _, aps, _ = _pair()
    aps = [nn.Parameter(p.detach().to(getattr(ampy, dtype))) for p in aps]
    o = getattr(optim, name)(aps, master_weights=True, **kw)
    for gs in grads[:6]:
        for ap, g in zip(aps, gs):
            ap.grad = ampy.tensor(g if scale is None else g * scale).to(getattr(ampy, dtype))
        if scale is None:
            o.step()
        else:
            o.grad_scale = ampy.full((), scale)
            o.found_inf = ampy.zeros(())
            o.step()
            del o.grad_scale, o.found_inf
    return [ap.detach().float().numpy() for ap in aps] + \
        [v.numpy() for ap in aps for v in o.state[ap].values()] + \
        [ap.grad.float().numpy() for ap in aps]


@pytest.mark.parametrize("name,kw", CONFIGS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_every_cpu_path_gives_the_portable_bits(name, kw, dtype, cpu_path):
    """The AVX-512 loop is the portable loop's op sequence: equal bits
    (params, masters, state, written-back grads), also with an inv_scale."""
    _, _, grads = _pair()
    got = _run_ampy(name, kw, dtype, grads, 4.0 if dtype == "float16" else None)
    ampy._C._set_cpu_level("portable")
    try:
        ref = _run_ampy(name, kw, dtype, grads, 4.0 if dtype == "float16" else None)
    finally:
        ampy._C._set_cpu_level(cpu_path)
    for a, r in zip(got, ref):
        np.testing.assert_array_equal(a, r)


@pytest.mark.parametrize("name,kw", [CONFIGS[4], CONFIGS[7], CONFIGS[10]])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_params_with_master_weights_track_torch_fp32(name, kw, dtype):
    """Half params with float32 masters follow torch's float32 run: the
    master to the fp32 tolerance, the param = the master rounded once."""
    tps, aps, grads = _pair(1)
    aps = [nn.Parameter(ampy.tensor(p.detach().numpy()).to(getattr(ampy, dtype))) for p in aps]
    for tp, ap in zip(tps, aps):  # the same start: torch from the rounded values
        tp.data = torch.tensor(ap.detach().float().numpy())
    to = getattr(torch.optim, name)(tps, **kw)
    ao = getattr(optim, name)(aps, master_weights=True, **kw)
    for gs in grads:
        for tp, ap, g in zip(tps, aps, gs):
            tp.grad = torch.tensor(g)
            ap.grad = ampy.tensor(g).to(getattr(ampy, dtype))
            tp.grad = torch.tensor(ap.grad.float().numpy())
        to.step()
        ao.step()
    for tp, ap in zip(tps, aps):
        master = ao.state[ap]["master_param"]
        _close(master.numpy(), tp.detach().numpy(), 1e-5)
        np.testing.assert_array_equal(ap.detach().float().numpy(),
                                      master.to(ap.dtype).float().numpy())
        assert ap.dtype == getattr(ampy, dtype)


@pytest.mark.parametrize("name,kw", [CONFIGS[4], CONFIGS[7], CONFIGS[10]])
def test_state_dict_structure_and_loading_torch_state(name, kw):
    tps, aps, grads = _pair(2)
    to, ao = getattr(torch.optim, name)(tps, **kw), getattr(optim, name)(aps, **kw)
    for gs in grads[:5]:
        for tp, ap, g in zip(tps, aps, gs):
            tp.grad, ap.grad = torch.tensor(g), ampy.tensor(g)
        to.step()
        ao.step()
    tsd, asd = to.state_dict(), ao.state_dict()
    assert [sorted(g) for g in tsd["param_groups"]] == \
        [sorted(k for k in g if k != "master_weights") for g in asd["param_groups"]]
    assert {k: sorted(v) for k, v in tsd["state"].items()} == \
        {k: sorted(v) for k, v in asd["state"].items()}
    # a fresh ampy optimizer resumes from torch's state_dict, another from ampy's
    aps2 = [nn.Parameter(ampy.tensor(tp.detach().numpy())) for tp in tps]
    aps3 = [nn.Parameter(ampy.tensor(tp.detach().numpy())) for tp in tps]
    o2, o3 = getattr(optim, name)(aps2, **kw), getattr(optim, name)(aps3, **kw)
    o2.load_state_dict(copy.deepcopy(tsd))
    o3.load_state_dict(asd)
    for gs in grads[5:10]:
        for tp, a2, a3, g in zip(tps, aps2, aps3, gs):
            tp.grad, a2.grad, a3.grad = torch.tensor(g), ampy.tensor(g), ampy.tensor(g)
        to.step()
        o2.step()
        o3.step()
    for tp, a2, a3 in zip(tps, aps2, aps3):
        _close(a2.detach().numpy(), tp.detach().numpy())
        _close(a3.detach().numpy(), tp.detach().numpy())


def test_adagrad_creates_its_state_at_construction_as_torch():
    tp, ap = torch.nn.Parameter(torch.ones(3)), nn.Parameter(ampy.ones(3))
    to = torch.optim.Adagrad([tp], initial_accumulator_value=0.5)
    ao = optim.Adagrad([ap], initial_accumulator_value=0.5)
    assert sorted(to.state_dict()["state"][0]) == sorted(ao.state_dict()["state"][0])
    np.testing.assert_array_equal(ao.state[ap]["sum"].numpy(), to.state[tp]["sum"].numpy())
    assert float(ao.state[ap]["step"]) == 0.0


@pytest.mark.parametrize("name,kw", [CONFIGS[4], CONFIGS[7], CONFIGS[10]])
def test_grad_scaler_skips_and_unscales(name, kw):
    """fp16 loss scaling: a step with an inf gradient is skipped (nothing but
    the grads changes, and the grads are unscaled), a clean one matches
    torch's unscale + step."""
    tps, aps, grads = _pair(3, [(8,)])
    to, ao = getattr(torch.optim, name)(tps, **kw), getattr(optim, name)(aps, **kw)
    ts = torch.amp.GradScaler("cpu", init_scale=8.0)
    sc = ampy.amp.GradScaler("cpu", init_scale=8.0)
    ts.scale(torch.ones(()))
    sc.scale(ampy.ones(()))
    for k in range(4):
        g = grads[k][0] * 8.0
        if k == 1:
            g = g.copy()
            g[3] = np.inf
        tps[0].grad = torch.tensor(g).to(torch.float16).float()
        aps[0].grad = ampy.tensor(tps[0].grad.numpy())
        before = aps[0].detach().numpy().copy()
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ts.step(to)
            sc.step(ao)
        ts.update()
        sc.update()
        if k == 1:
            np.testing.assert_array_equal(aps[0].detach().numpy(), before)
        _close(aps[0].detach().numpy(), tps[0].detach().numpy())
        np.testing.assert_array_equal(aps[0].grad.numpy(), tps[0].grad.numpy())
        assert sc.get_scale() == ts.get_scale()
    assert float(ao.state[aps[0]]["step"]) == float(to.state[tps[0]]["step"]) == 3.0


BAD = [
    ("RMSprop", dict(lr=-1), "Invalid learning rate: -1"),
    ("RMSprop", dict(eps=-1e-3), "Invalid epsilon value: -0.001"),
    ("RMSprop", dict(momentum=-0.5), "Invalid momentum value: -0.5"),
    ("RMSprop", dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    ("RMSprop", dict(alpha=-0.1), "Invalid alpha value: -0.1"),
    ("Adagrad", dict(lr=-1), "Invalid learning rate: -1"),
    ("Adagrad", dict(lr_decay=-1), "Invalid lr_decay value: -1"),
    ("Adagrad", dict(weight_decay=-2), "Invalid weight_decay value: -2"),
    ("Adagrad", dict(initial_accumulator_value=-1),
     "Invalid initial_accumulator_value value: -1"),
    ("Adagrad", dict(eps=-1), "Invalid epsilon value: -1"),
    ("Adadelta", dict(lr=-1), "Invalid learning rate: -1"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
    ("Adadelta", dict(eps=-1), "Invalid epsilon value: -1"),
    ("Adadelta", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
]


@pytest.mark.parametrize("name,kw,msg", BAD)
def test_bad_hyperparameters_raise_as_torch(name, kw, msg):
    with pytest.raises(ValueError) as t:
        getattr(torch.optim, name)([torch.nn.Parameter(torch.zeros(2))], **kw)
    assert str(t.value) == msg
    p = nn.Parameter(ampy.zeros(2))
    with pytest.raises(ValueError) as a:
        getattr(optim, name)([p], **kw)
    assert str(a.value) == msg
    np.testing.assert_array_equal(p.detach().numpy(), 0.0)


@pytest.mark.parametrize("name,kw", [CONFIGS[4], CONFIGS[7], CONFIGS[10]])
def test_bad_group_hyperparameter_at_step_changes_nothing(name, kw):
    """A group edited to an invalid value raises at step() with torch's
    message; params, grads and state are unchanged."""
    ps = [nn.Parameter(ampy.ones(4)), nn.Parameter(ampy.ones(2))]
    o = getattr(optim, name)([{"params": ps[:1]}, {"params": ps[1:]}], **kw)
    for p in ps:
        p.grad = ampy.full(tuple(p.shape), 0.5)
    o.step()
    snap = [(p.detach().numpy().copy(), p.grad.numpy().copy()) for p in ps]
    state = {k: v.numpy().copy() for k, v in o.state[ps[0]].items()}
    o.param_groups[1]["lr"] = -1.0
    with pytest.raises(ValueError, match="Invalid learning rate: -1.0"):
        o.step()
    for p, (w, g) in zip(ps, snap):
        np.testing.assert_array_equal(p.detach().numpy(), w)
        np.testing.assert_array_equal(p.grad.numpy(), g)
    for k, v in o.state[ps[0]].items():
        np.testing.assert_array_equal(v.numpy(), state[k])


def test_param_groups_options_per_group():
    tps, aps, grads = _pair(4, [(6,), (6,)])
    groups = lambda ps: [{"params": ps[:1], "momentum": 0.9}, {"params": ps[1:],
                                                               "centered": True}]
    to, ao = torch.optim.RMSprop(groups(tps), lr=1e-2), optim.RMSprop(groups(aps), lr=1e-2)
    for gs in grads:
        for tp, ap, g in zip(tps, aps, gs):
            tp.grad, ap.grad = torch.tensor(g), ampy.tensor(g)
        to.step()
        ao.step()
    for tp, ap in zip(tps, aps):
        _close(ap.detach().numpy(), tp.detach().numpy())
        assert set(ao.state[ap]) == set(to.state[tp])


def test_foreach_and_maximize_arguments_accepted():
    p = nn.Parameter(ampy.ones(2))
    optim.RMSprop([p], foreach=False, maximize=True, capturable=False)
    optim.Adagrad([p], foreach=None, maximize=False, fused=None)
    optim.Adadelta([p], foreach=True, capturable=False, maximize=True)


# ------------------------------------------------------- user-written optimizers
class _TorchStyleSGD:
    """The same user code for both libraries: a torch-style custom optimizer."""

    @staticmethod
    def make(lib):
        class MySGD(lib.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))

            def step(self, closure=None):
                loss = None if closure is None else closure()
                with lib.no_grad():
                    for group in self.param_groups:
                        for p in group["params"]:
                            if p.grad is None:
                                continue
                            st = self.state[p]
                            st["n"] = st.get("n", 0) + 1
                            p.add_(p.grad, alpha=-group["lr"])
                return loss
        return MySGD


def test_custom_optimizer_with_grad_scaler_matches_torch():
    """scaler.step(custom) unscales the grads first and skips the step on
    inf/NaN, as torch; the custom step sees unscaled grads."""
    import warnings
    res = {}
    for lib in (torch, ampy):
        p = lib.nn.Parameter(lib.ones(4))
        o = _TorchStyleSGD.make(lib)([p], lr=0.5)
        assert getattr(o, "_step_supports_amp_scaling", False) is False
        sc = lib.amp.GradScaler("cpu", init_scale=4.0)
        sc.scale(lib.ones(()))
        trace = []
        for k in range(3):
            g = np.full(4, 4.0 * (k + 1), np.float32)
            if k == 1:
                g[0] = np.inf
            p.grad = lib.tensor(g)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sc.step(o)
            sc.update()
            trace.append((p.detach().numpy().copy(), p.grad.numpy().copy(), sc.get_scale(),
                          o.state[p].get("n", 0)))
        res[lib] = trace
    for (w1, g1, s1, n1), (w2, g2, s2, n2) in zip(res[torch], res[ampy]):
        np.testing.assert_array_equal(w1, w2)
        np.testing.assert_array_equal(g1, g2)
        assert s1 == s2 and n1 == n2


def test_custom_optimizer_unscale_then_clip_then_step():
    p = nn.Parameter(ampy.ones(3))
    o = _TorchStyleSGD.make(ampy)([p], lr=1.0)
    sc = ampy.amp.GradScaler("cpu", init_scale=2.0)
    sc.scale(ampy.ones(()))
    p.grad = ampy.tensor(np.array([2.0, 4.0, 6.0], np.float32))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sc.unscale_(o)
        np.testing.assert_array_equal(p.grad.numpy(), [1.0, 2.0, 3.0])
        sc.step(o)
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, -1.0, -2.0])
