"""float64 parameters for ampy.optim.SGD, Adam and AdamW against torch 2.13's
single-tensor step (what torch runs for CPU params): trajectories over every
option, on every CPU level, a group mixing float32 and float64 params,
GradScaler's unscale_ / step / skip, state_dict both ways with torch's
dtypes, duplicate and strided params, zero_grad, and bad input.

Bits. SGD's ops (neg, add with alpha, mul_, clone) round as torch's: every
SGD check is a bit check. Adam's ops round as torch's but two: torch's
float64 sqrt is within one ulp, not always correctly rounded (about 1% of
inputs, any tensor size), where ampy's is correctly rounded; torch's addcmul
is one fma, fma(value * t1, t2, self), where ampy's rounds the product
first. Adam's bit checks therefore run torch with those two ops rounded as
ampy rounds them (`_ampy_rounding`: np.sqrt and NumPy's a + (v * b) * c in
float64): everything else, the op order included, is torch's own, and ampy
must equal it to the bit. exp_avg never reads either op: against stock torch
it is bit-equal whenever no L2 weight decay feeds the params back into it.

Bound (stock torch, test_adam_within_bound_of_stock_torch). Per step the two
ops differ by at most one ulp of the sqrt and half an ulp of the addcmul
product, which is at most u * exp_avg_sq (both terms of the sum are >= 0):
exp_avg_sq's relative difference grows by <= 3u a step (that half ulp plus
the two sides rounding the new sum differently). sqrt halves it, the
division, the eps add and addcdiv each round once more, so the update
differs relatively by <= (3k/2 + 6) u at step k. The update is at most 8 lr
(Cauchy-Schwarz: |m| / sqrt(v) <= (1 - beta1) / sqrt(1 - beta2) times
sqrt(sum_j (beta1^2 / beta2)^j), under 8 for these betas), and the final add
may round to the neighbour: <= 2u * max|p| a step. With lr <= 0.05, max|w|
>= 2 and N = 10 steps that is <= 6u * max|w| a step: 6 N u * max|w| holds
the params and, through the same ops, the state (L2 weight decay feeds the
param difference back into the gradient; that case is measured, not
derived). Measured: <= 2u * max|w| after 10 steps at any size, exp_avg_sq
within 6 ulp elementwise (the test allows 3 N).
"""
import contextlib
import warnings

import numpy as np
import pytest

import ampy

from _helpers import UNIT_ROUNDOFF, bits, same_bits, ulp_distance

torch = pytest.importorskip("torch")

STEPS = 8
U = UNIT_ROUNDOFF["float64"]
SGD = [dict(lr=0.1), dict(lr=0.1, momentum=0.9),
       dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
       dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True),
       dict(lr=0.1, weight_decay=0.1, maximize=True)]
# lerp's two branches (1 - beta1 below and at/above 0.5), every flag
ADAM = [dict(lr=0.01), dict(lr=0.02, betas=(0.5, 0.75), eps=1e-3, amsgrad=True),
        dict(lr=0.01, betas=(0.3, 0.9), maximize=True, amsgrad=True),
        dict(lr=0.01, weight_decay=0.1),
        dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.5, amsgrad=True,
             maximize=True)]
CASES = ([("SGD", c) for c in SGD] + [("Adam", c) for c in ADAM]
         + [("AdamW", c) for c in ADAM])
IDS = [f"{n}-{i}" for n, i in zip([n for n, _ in CASES],
                                  list(range(len(SGD))) + list(range(len(ADAM))) * 2)]


# --------------------------------------------------------------- helpers

def _np_sqrt(self):
    return torch.from_numpy(np.asarray(np.sqrt(self.numpy())))


def _np_addcmul_(self, t1, t2, *, value=1):
    return self.copy_(torch.from_numpy(np.asarray(self.numpy() + (value * t1.numpy())
                                                  * t2.numpy())))


@contextlib.contextmanager
def _ampy_rounding(name):
    """torch's Adam with sqrt correctly rounded and addcmul's product rounded
    (ampy's two roundings; see the module docstring); SGD as it is."""
    if name == "SGD":
        yield
        return
    mp = pytest.MonkeyPatch()
    mp.setattr(torch.Tensor, "sqrt", _np_sqrt)
    mp.setattr(torch.Tensor, "addcmul_", _np_addcmul_)
    try:
        yield
    finally:
        mp.undo()


def _twins(name, groups, **flags):
    """groups: [(arrays, options)]: the same params in a torch and an ampy
    optimizer, one param group each."""
    tg = [dict(opts, params=[torch.nn.Parameter(torch.from_numpy(a.copy())) for a in arrays])
          for arrays, opts in groups]
    ag = [dict(opts, params=[ampy.nn.Parameter(ampy.from_numpy(a.copy())) for a in arrays])
          for arrays, opts in groups]
    return (getattr(torch.optim, name)(tg, **flags), getattr(ampy.optim, name)(ag, **flags))


def _params(opt):
    return [p for g in opt.param_groups for p in g["params"]]


def _give_grads(to, ao, rng):
    for t, a in zip(_params(to), _params(ao)):
        shape = tuple(t.shape)
        g = rng.standard_normal(shape) * 10.0 ** rng.integers(-2, 2, shape)
        g = np.asarray(g, t.detach().numpy().dtype)
        t.grad, a.grad = torch.from_numpy(g.copy()), ampy.from_numpy(g.copy())


def _run(name, to, ao, rng, steps=STEPS, patched=True):
    for _ in range(steps):
        _give_grads(to, ao, rng)
        with _ampy_rounding(name) if patched else contextlib.nullcontext():
            to.step()
        ao.step()


def _assert_same(to, ao, only64=False):
    """Params and every state tensor: same keys, dtypes and bits."""
    for t, a in zip(_params(to), _params(ao)):
        if only64 and t.dtype != torch.float64:
            continue
        assert same_bits(a, t)
        st, sa = to.state.get(t, {}), ao.state.get(a, {})
        assert sorted(sa) == sorted(st)
        for k, v in st.items():
            assert same_bits(sa[k], v), k


def _snapshot(opt):
    return [(p.detach().numpy().copy(), {k: v.numpy().copy() for k, v in opt.state[p].items()})
            for p in _params(opt)]


def _same_snapshot(a, b):
    for (pa, sa), (pb, sb) in zip(a, b):
        assert np.array_equal(bits(pa), bits(pb))
        assert sorted(sa) == sorted(sb)
        for k in sa:
            assert np.array_equal(bits(sa[k]), bits(sb[k])), k


def _w(rng, *shape):
    return rng.standard_normal(shape)


# --------------------------------------------------------------- trajectories

@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize("name,cfg", CASES, ids=IDS)
def test_trajectory_bits(name, cfg, foreach, cpu_path):
    rng = np.random.default_rng(len(str(cfg)))
    to, ao = _twins(name, [([_w(rng, 7, 5), _w(rng, 1003), np.array(rng.standard_normal())],
                            cfg)], foreach=foreach)
    _run(name, to, ao, rng)
    _assert_same(to, ao)
    for p in _params(ao):
        assert p.dtype is ampy.float64
        for k, v in ao.state[p].items():
            assert v.dtype is (ampy.float32 if k == "step" else ampy.float64), k


@pytest.mark.parametrize("name,cfg", [c for c in CASES if c[0] != "SGD"],
                         ids=[i for i in IDS if not i.startswith("SGD")])
def test_adam_within_bound_of_stock_torch(name, cfg):
    rng = np.random.default_rng(7)
    to, ao = _twins(name, [([_w(rng, 7, 5), _w(rng, 4000)], cfg)])
    steps = 10
    _run(name, to, ao, rng, steps, patched=False)
    l2 = name == "Adam" and cfg.get("weight_decay", 0) != 0
    for t, a in zip(_params(to), _params(ao)):
        for got, want in [(a, t)] + [(ao.state[a][k], v) for k, v in to.state[t].items()]:
            want = want.detach().numpy()
            got = got.detach().numpy()
            assert got.dtype == want.dtype
            assert np.abs(got - want).max() <= 6 * steps * U * np.abs(want).max()
        assert same_bits(ao.state[a]["step"], to.state[t]["step"])
        if not l2:
            assert same_bits(ao.state[a]["exp_avg"], to.state[t]["exp_avg"])
        assert ulp_distance(ao.state[a]["exp_avg_sq"].numpy(),
                            to.state[t]["exp_avg_sq"].numpy()).max() <= 3 * steps


@pytest.mark.parametrize("name,cfg", [CASES[3], CASES[len(SGD) + 4], CASES[-1]],
                         ids=["SGD", "Adam", "AdamW"])
def test_group_mixing_float32_and_float64(name, cfg):
    """Two groups, each with float32 and float64 params: the float64 ones are
    torch's bits, the float32 ones the bits of the fused kernel alone."""
    rng = np.random.default_rng(11)
    w = [_w(rng, 6, 4), _w(rng, 9).astype(np.float32), _w(rng, 5, 3).astype(np.float32),
         _w(rng, 40)]
    other = dict(cfg, lr=cfg["lr"] / 2)
    to, ao = _twins(name, [([w[0], w[1]], cfg), ([w[2], w[3]], other)])
    t32, a32 = _twins(name, [([w[1]], cfg), ([w[2]], other)])
    for _ in range(STEPS):
        _give_grads(to, ao, rng)
        for src, dst in ((1, 0), (2, 1)):
            _params(a32)[dst].grad = _params(ao)[src].grad.clone()
        with _ampy_rounding(name):
            to.step()
        ao.step()
        a32.step()
    _assert_same(to, ao, only64=True)
    for a, alone in zip(_params(ao)[1:3], _params(a32)):
        assert a.dtype is ampy.float32 and same_bits(a, alone)
        assert sorted(ao.state[a]) == sorted(a32.state[alone])
        for k, v in a32.state[alone].items():
            assert same_bits(ao.state[a][k], v)
    t, a = _params(to)[1], _params(ao)[1]  # and near torch's float32 step
    np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,cfg", [CASES[2], CASES[len(SGD) + 2], CASES[-2]],
                         ids=["SGD", "Adam", "AdamW"])
def test_duplicate_and_strided_params(name, cfg):
    rng = np.random.default_rng(12)
    base = _w(rng, 5, 4)
    tp = torch.nn.Parameter(torch.from_numpy(base.copy()).t())
    ap = ampy.nn.Parameter(ampy.from_numpy(base.copy()).t())
    assert not ap.is_contiguous()
    tq = torch.nn.Parameter(torch.from_numpy(base[0].copy()))
    aq = ampy.nn.Parameter(ampy.from_numpy(base[0].copy()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the duplicate, warned by both
        to = getattr(torch.optim, name)([tp, tq, tq], **cfg)
        ao = getattr(ampy.optim, name)([ap, aq, aq], **cfg)
    for _ in range(STEPS):
        for t, a in ((tp, ap), (tq, aq)):
            g = rng.standard_normal(tuple(t.shape))
            t.grad, a.grad = torch.from_numpy(g.copy()), ampy.from_numpy(g.copy())
        with _ampy_rounding(name):
            to.step()
        ao.step()
    assert not ap.is_contiguous()
    for t, a in ((tp, ap), (tq, aq)):
        assert same_bits(a, t)
        for k, v in to.state[t].items():
            assert same_bits(ao.state[a][k], v), k


# --------------------------------------------------------------- GradScaler

@pytest.mark.parametrize("name,cfg", [CASES[3], CASES[len(SGD) + 1], CASES[-1]],
                         ids=["SGD", "Adam", "AdamW"])
@pytest.mark.filterwarnings("ignore:GradScaler. no float16")
def test_grad_scaler_unscale_step_and_skip(name, cfg):
    """scaler.step, unscale_ then step, and a non-finite gradient: the skipped
    step leaves params and state (step counts, buffers) as they were and the
    grads unscaled, all as torch's."""
    rng = np.random.default_rng(13)
    w = [_w(rng, 6), _w(rng, 3, 2).astype(np.float32)]
    to, ao = _twins(name, [(w, cfg)])
    t_sc = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    a_sc = ampy.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    xs = [rng.standard_normal(tuple(p.shape)).astype(p.detach().numpy().dtype)
          for p in _params(to)]
    for step in range(6):
        skip = step == 3
        before = _snapshot(ao)
        for lib, opt, sc in ((torch, to, t_sc), (ampy, ao, a_sc)):
            loss = 0
            for i, (p, x) in enumerate(zip(_params(opt), xs)):
                x = x.copy()
                if skip and i == 0:
                    x[2] = np.inf
                loss = loss + (p * lib.from_numpy(x)).sum() * (1 + step)
            sc.scale(loss).backward()
            if step % 2:
                sc.unscale_(opt)
            with _ampy_rounding(name) if lib is torch else contextlib.nullcontext():
                sc.step(opt)
            sc.update()
        assert a_sc.get_scale() == t_sc.get_scale()
        t, a = _params(to)[0], _params(ao)[0]
        assert same_bits(a.grad, t.grad)  # unscaled, also on the skipped step
        _assert_same(to, ao, only64=True)
        if skip:
            _same_snapshot(before, _snapshot(ao))
        to.zero_grad()
        ao.zero_grad()
    if name != "SGD":
        assert float(ao.state[a]["step"]) == float(to.state[t]["step"]) == 5


# --------------------------------------------------------------- state_dict

def _torch_state(sd):
    """An ampy state_dict as torch tensors (through NumPy), groups as they are."""
    return {"state": {i: {k: (torch.from_numpy(v.numpy().copy()) if hasattr(v, "numpy") else v)
                          for k, v in st.items()} for i, st in sd["state"].items()},
            "param_groups": sd["param_groups"]}


@pytest.mark.parametrize("name,cfg", CASES, ids=IDS)
def test_state_dict_both_ways(name, cfg):
    rng = np.random.default_rng(14)
    w = [_w(rng, 4, 3), _w(rng, 5)]
    to, ao = _twins(name, [(w, cfg)])
    _run(name, to, ao, rng, 3)
    t2, a2 = _twins(name, [([p.detach().numpy() for p in _params(to)], cfg)])
    a2.load_state_dict(to.state_dict())        # torch's into ampy
    t2.load_state_dict(_torch_state(ao.state_dict()))   # ampy's into torch
    _assert_same(to, a2)
    _assert_same(t2, ao)
    kept = _snapshot(a2)  # copies, also where the dtype stays float64
    for st in to.state.values():
        for v in st.values():
            v.fill_(7)
    _same_snapshot(kept, _snapshot(a2))
    _run(name, t2, a2, rng, 3)
    _assert_same(t2, a2)


@pytest.mark.parametrize("name,cfg", [CASES[1], CASES[len(SGD) + 1], CASES[-1]],
                         ids=["SGD", "Adam", "AdamW"])
def test_loaded_state_takes_the_param_dtype(name, cfg):
    """float32 moments loaded for a float64 param become float64 and float64
    ones for a float32 param float32, as torch's load_state_dict; copies."""
    rng = np.random.default_rng(15)
    w = [_w(rng, 3, 2), _w(rng, 4).astype(np.float32)]
    to, ao = _twins(name, [(w, cfg)])
    _run(name, to, ao, rng, 2)
    sd = to.state_dict()
    for st in sd["state"].values():
        for k, v in list(st.items()):
            if k != "step":
                st[k] = v.to(torch.float32 if v.dtype == torch.float64 else torch.float64)
    t2, a2 = _twins(name, [(w, cfg)])
    t2.load_state_dict(sd)
    a2.load_state_dict(sd)
    for t, a in zip(_params(t2), _params(a2)):
        for k, v in t2.state[t].items():
            got = a2.state[a][k]
            assert str(got.dtype).split(".")[-1] == str(v.dtype).split(".")[-1], k
            assert np.array_equal(got.numpy(), v.numpy())
    kept = _snapshot(a2)  # ampy copies what it loads (torch shares "step" with sd)
    for st in sd["state"].values():
        for v in st.values():
            v.fill_(7)
    _same_snapshot(kept, _snapshot(a2))


# --------------------------------------------------------------- zero_grad, bad input

@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    rng = np.random.default_rng(16)
    to, ao = _twins("Adam", [([_w(rng, 3)], {})])
    _give_grads(to, ao, rng)
    kept = _params(ao)[0].grad
    to.zero_grad(set_to_none=set_to_none)
    ao.zero_grad(set_to_none=set_to_none)
    t, a = _params(to)[0], _params(ao)[0]
    if set_to_none:
        assert a.grad is None and t.grad is None
    else:
        assert a.grad is kept and same_bits(a.grad, t.grad)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_float32_grad_on_a_float64_param_raises(name):
    """torch's grad setter refuses it, and so does ampy's (a RuntimeError in
    its older words); a float32 grad that got past the setter (torch's
    grad_dtype=None, which ampy lacks) is refused by the step before anything
    is written: torch's Adam raises a RuntimeError too (in lerp_), its SGD
    would take it."""
    for lib, msg in ((torch, "gradient with dtype 'float' to a tensor with grad_dtype"),
                     (ampy, "assigned grad has data of a different type")):
        p = lib.nn.Parameter(lib.zeros(3, dtype=lib.float64))
        with pytest.raises(RuntimeError, match=msg):
            p.grad = lib.ones(3, dtype=lib.float32)
        assert p.grad is None
    rng = np.random.default_rng(17)
    cfg = dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.1)
    to, ao = _twins(name, [([_w(rng, 4), _w(rng, 2).astype(np.float32)], cfg),
                           ([_w(rng, 3)], cfg)])
    _run(name, to, ao, rng, 2)
    bad, tbad = _params(ao)[2], _params(to)[2]
    bad._grad = ampy.ones(3)
    before = _snapshot(ao)
    with pytest.raises(RuntimeError, match="gradient of a float64 parameter must be float64"):
        ao.step()
    _same_snapshot(before, _snapshot(ao))
    if name != "SGD":
        tbad.grad_dtype = None
        tbad.grad = torch.ones(3)
        with pytest.raises(RuntimeError, match="expected dtype double"):
            to.step()


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_a_bad_later_group_changes_nothing(name):
    """A tensor lr (refused for every dtype: ampy's steps take a float lr) or a
    NaN lr in group 1 raises before group 0's float64 param is touched."""
    rng = np.random.default_rng(18)
    for bad_lr, exc in ((ampy.tensor(0.01), TypeError), (float("nan"), ValueError)):
        _, ao = _twins(name, [([_w(rng, 4)], {}), ([_w(rng, 3), _w(rng, 2)], {})])
        _, a32 = _twins(name, [([_w(rng, 4).astype(np.float32)], {})])
        for opt in (ao, a32):
            for p in _params(opt):
                p.grad = ampy.ones(tuple(p.shape), dtype=p.dtype)
            opt.param_groups[-1]["lr"] = bad_lr
        before = _snapshot(ao)
        with pytest.raises(exc) as e64:
            ao.step()
        with pytest.raises(exc) as e32:
            a32.step()
        assert str(e64.value) == str(e32.value)
        _same_snapshot(before, _snapshot(ao))
