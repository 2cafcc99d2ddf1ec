"""Tests of the AMP kernels (ampy.amp.functional): non-finite check + unscale,
loss-scale update, fused SGD/Adam/AdamW with fp32 master weights.

Oracles: torch's own CPU ops (_amp_foreach_non_finite_check_and_unscale_,
_amp_update_scale_, torch.optim with foreach=False), a float64 NumPy
reference for half params with master weights, and the portable C path
against the AVX-512 one. Nothing here times anything.
"""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import ampy
from ampy.amp import functional as F

from _helpers import (NP_DTYPE as NP, bits, requires_cuda, requires_torch_cuda,
                      same_bits_or_both_nan)

torch = pytest.importorskip("torch")


def A(arr):
    """ampy tensor owning a copy of a NumPy array."""
    return ampy.from_numpy(np.ascontiguousarray(arr).copy())


def N(t):
    return np.array(t.numpy(), copy=True)


def T(arr):
    """torch tensor owning a copy of a NumPy array (bfloat16 via its bits)."""
    arr = np.ascontiguousarray(arr).copy()
    if arr.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def TN(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.numpy().copy()


def f32(v):
    return A(np.array([v], np.float32))


# ---- non-finite check + unscale --------------------------------------------------

def _grad_list(rng, n_tensors, plant):
    out = []
    for i in range(n_tensors):
        dt = ["float32", "float16", "bfloat16"][rng.integers(3)]
        n = int(rng.choice([1, 2, 7, 15, 17, 33, 255, 1001, 4099, 70001]))
        a = (rng.standard_normal(n) * 2.0 ** rng.integers(-8, 8)).astype(NP[dt])
        if plant and rng.random() < 0.3:
            where = n - 1 if rng.random() < 0.5 else int(rng.integers(n))
            a[where] = [np.inf, -np.inf, np.nan][rng.integers(3)]
        out.append(a)
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("inv", [1.0, 0.5, 2.0 ** -16, 0.3])
def test_unscale_matches_torch(seed, inv, cpu_path):
    rng = np.random.default_rng(seed)
    arrays = _grad_list(rng, 9, plant=seed % 3 != 0)
    grads = [A(a) for a in arrays]
    found, inv_t = f32(0.0), f32(inv)
    F.non_finite_check_and_unscale_(grads, found, inv_t)
    # torch needs one dtype per call: bucket as GradScaler does
    tg = [T(a) for a in arrays]
    tfound, tinv = torch.zeros(1), torch.full((1,), inv)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        bucket = [g for g in tg if g.dtype == dt]
        if bucket:
            torch._amp_foreach_non_finite_check_and_unscale_(bucket, tfound, tinv)
    for i, (g, t) in enumerate(zip(grads, tg)):
        assert same_bits_or_both_nan(N(g), TN(t)), f"tensor {i}"
    assert float(N(found)[0]) == float(tfound[0])
    expect = any(not np.isfinite(a.astype(np.float32)).all() for a in arrays)
    assert float(N(found)[0]) == (1.0 if expect else 0.0)


def test_unscale_inv_one_writes_nothing_and_keeps_found():
    a = np.array([1.0, np.nan, 3.0], np.float16)
    g = A(a)
    found = f32(1.0)
    F.non_finite_check_and_unscale_([g], found, f32(1.0))
    assert np.array_equal(bits(N(g)), bits(a))
    assert N(found)[0] == 1.0  # never cleared


def test_unscale_flags_overflow_after_unscaling(cpu_path):
    g16 = A(np.array([40000.0, 1.0], np.float16))   # 80000 overflows float16
    g32 = A(np.array([3e38], np.float32))
    found = f32(0.0)
    F.non_finite_check_and_unscale_([g16], found, f32(2.0))
    assert N(found)[0] == 1.0 and np.isinf(N(g16)[0])
    found = f32(0.0)
    F.non_finite_check_and_unscale_([g32], found, f32(4.0))
    assert N(found)[0] == 1.0


def test_unscale_empty_list_and_empty_tensors():
    found = f32(0.0)
    F.non_finite_check_and_unscale_([], found, f32(0.5))
    F.non_finite_check_and_unscale_([A(np.zeros(0, np.float16))], found, f32(0.5))
    assert N(found)[0] == 0.0


def test_unscale_threads_match_single_thread():
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(300_001).astype(np.float16) for _ in range(3)]
    arrays[2][-1] = np.inf
    outs = []
    old = ampy._C.get_num_threads()
    try:
        for nt in (1, 2):
            ampy._C.set_num_threads(nt)
            grads, found = [A(a) for a in arrays], f32(0.0)
            F.non_finite_check_and_unscale_(grads, found, f32(0.125))
            outs.append(([N(g) for g in grads], N(found)))
    finally:
        ampy._C.set_num_threads(old)
    for a, b in zip(outs[0][0], outs[1][0]):
        assert np.array_equal(bits(a), bits(b))
    assert outs[0][1][0] == outs[1][1][0] == 1.0


# ---- loss-scale update --------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_update_scale_matches_torch(seed):
    rng = np.random.default_rng(seed)
    gf, bf = [(2.0, 0.5), (1.7, 0.37), (3.0, 0.9)][seed % 3]
    interval = int([1, 2, 3, 7][seed % 4])
    init = [65536.0, 3e38, 1e-30, 1.0][seed % 4]
    scale, tracker = f32(init), A(np.array([0], np.int32))
    tscale, ttracker = torch.full((1,), init), torch.zeros(1, dtype=torch.int32)
    p = rng.random() * 0.5
    for step in range(3000):
        f = 0.0 if rng.random() > p else (np.nan if rng.random() < 0.1 else 1.0)
        F.update_scale_(scale, tracker, f32(f), gf, bf, interval)
        torch._amp_update_scale_(tscale, ttracker, torch.full((1,), f), gf, bf, interval)
        assert bits(N(scale))[0] == bits(tscale.numpy())[0], step
        assert N(tracker)[0] == int(ttracker[0]), step


def _ref_update(s, t, h, found, gf, bf, gi, hyst, lo, hi):
    """apex update_scale_hysteresis + bounds, in Python."""
    if found:
        h = max(h - 1, 0)
        if hyst > 1 and h > 0:
            return s, 0, h
        s = float(np.float32(max(s * bf, lo) if lo is not None else s * bf))
        return s, 0, h
    t += 1
    if t == gi:
        ns = s * gf
        if hi is not None:
            ns = min(ns, hi)
        if abs(ns) < 3.4028235677973366e38:  # rounds to a finite float32
            s = float(np.float32(ns))
        t = 0
    return s, t, hyst


@pytest.mark.parametrize("hyst,lo,hi", [(1, 1.0, 2.0 ** 20), (2, None, None), (4, 0.25, None)])
def test_update_scale_extras(hyst, lo, hi):
    rng = np.random.default_rng(hyst)
    scale, tracker = f32(1024.0), A(np.array([0], np.int32))
    htracker = A(np.array([hyst], np.int32))
    s, t, h = 1024.0, 0, hyst
    for step in range(2000):
        f = float(rng.random() < 0.4)
        F.update_scale_(scale, tracker, f32(f), 2.0, 0.5, 3, min_scale=lo, max_scale=hi,
                        hysteresis=hyst, hysteresis_tracker=htracker)
        s, t, h = _ref_update(s, t, h, f, 2.0, 0.5, 3, hyst, lo, hi)
        assert float(N(scale)[0]) == s and int(N(tracker)[0]) == t, step
        if hyst > 1:
            assert int(N(htracker)[0]) == h, step


def test_update_scale_hysteresis_two_consecutive():
    scale, tracker, ht = f32(8.0), A(np.array([0], np.int32)), A(np.array([2], np.int32))
    kw = dict(hysteresis=2, hysteresis_tracker=ht)
    F.update_scale_(scale, tracker, f32(1.0), 2.0, 0.5, 100, **kw)
    assert N(scale)[0] == 8.0                      # first overflow tolerated
    F.update_scale_(scale, tracker, f32(0.0), 2.0, 0.5, 100, **kw)
    F.update_scale_(scale, tracker, f32(1.0), 2.0, 0.5, 100, **kw)
    assert N(scale)[0] == 8.0                      # not consecutive: tolerated again
    F.update_scale_(scale, tracker, f32(1.0), 2.0, 0.5, 100, **kw)
    assert N(scale)[0] == 4.0


# ---- optimizers vs torch (float32 params) ----------------------------------------------

SHAPES = [(37,), (16, 9), (1,), (3, 5, 7), (1000,)]


def _init(seed):
    rng = np.random.default_rng(seed)
    return rng, [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


SGD_CONFIGS = [
    dict(lr=0.01),
    dict(lr=0.01, momentum=0.9, dampening=0.1),
    dict(lr=0.02, momentum=0.9, nesterov=True, weight_decay=1e-2),
    dict(lr=0.01, momentum=0.5, weight_decay=1e-3, maximize=True),
]


@pytest.mark.parametrize("cfg", SGD_CONFIGS)
def test_sgd_matches_torch(cfg, cpu_path):
    rng, init = _init(1)
    params = [A(p) for p in init]
    bufs = [None] * len(params)
    tparams = [torch.nn.Parameter(T(p)) for p in init]
    opt = torch.optim.SGD(tparams, foreach=False, **cfg)
    scale = 1024.0
    for _ in range(100):
        grads = [rng.standard_normal(p.shape).astype(np.float32) for p in init]
        for tp, g in zip(tparams, grads):
            tp.grad = T(g)
        opt.step()
        scaled = [A(g * np.float32(scale)) for g in grads]
        assert F.sgd_step_(params, scaled, bufs, inv_scale=f32(1 / scale), **cfg)
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(N(p), TN(tp.detach()), rtol=1e-5, atol=1e-6)
    if cfg.get("momentum"):
        for b, tp in zip(bufs, tparams):
            np.testing.assert_allclose(N(b), TN(opt.state[tp]["momentum_buffer"]),
                                       rtol=1e-5, atol=1e-6)


ADAM_CONFIGS = [
    dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False),
    dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2, amsgrad=False),
    dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=True, maximize=True),
    dict(lr=1e-3, betas=(0.3, 0.9), eps=1e-8, weight_decay=1e-2, amsgrad=True),
]


def _adam_kwargs(cfg, decoupled):
    return dict(lr=cfg["lr"], beta1=cfg["betas"][0], beta2=cfg["betas"][1], eps=cfg["eps"],
                weight_decay=cfg["weight_decay"], amsgrad=cfg["amsgrad"],
                maximize=cfg.get("maximize", False), decoupled_weight_decay=decoupled)


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("cfg", ADAM_CONFIGS)
def test_adam_matches_torch(cfg, decoupled, cpu_path):
    rng, init = _init(2)
    params = [A(p) for p in init]
    m = [A(np.zeros_like(p)) for p in init]
    v = [A(np.zeros_like(p)) for p in init]
    vmax = [A(np.zeros_like(p)) for p in init]
    steps = [f32(0.0) for _ in init]
    tparams = [torch.nn.Parameter(T(p)) for p in init]
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    opt = cls(tparams, foreach=False, **cfg)
    for _ in range(100):
        grads = [rng.standard_normal(p.shape).astype(np.float32) for p in init]
        for tp, g in zip(tparams, grads):
            tp.grad = T(g)
        opt.step()
        assert F.adam_step_(params, [A(g) for g in grads], m, v, vmax, steps,
                            **_adam_kwargs(cfg, decoupled))
    for i, tp in enumerate(tparams):
        st = opt.state[tp]
        np.testing.assert_allclose(N(params[i]), TN(tp.detach()), rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(N(m[i]), TN(st["exp_avg"]), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(N(v[i]), TN(st["exp_avg_sq"]), rtol=1e-5, atol=1e-9)
        assert N(steps[i])[0] == float(st["step"]) == 100.0


# ---- half params + fp32 master weights vs float64 --------------------------------------

def _adam64(p, m, v, vmax, g, t, lr, b1, b2, eps, wd, amsgrad, decoupled):
    if decoupled:
        p = p * (1 - lr * wd)
    elif wd:
        g = g + wd * p
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    vmax = np.maximum(vmax, v) if amsgrad else v
    denom = np.sqrt(vmax) / np.sqrt(1 - b2 ** t) + eps
    return p - lr / (1 - b1 ** t) * m / denom, m, v, vmax


@pytest.mark.parametrize("pdt", ["float16", "bfloat16"])
@pytest.mark.parametrize("gdt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("opt", ["adam", "adamw_amsgrad", "sgd"])
def test_half_params_with_master_vs_float64(pdt, gdt, opt, cpu_path):
    rng = np.random.default_rng(3)
    shapes = [(33,), (8, 17), (1,)]
    master0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    params = [A(x.astype(NP[pdt])) for x in master0]
    masters = [A(x) for x in master0]
    ref = [x.astype(np.float64) for x in master0]
    st = [dict(m=np.zeros(s), v=np.zeros(s), vmax=np.zeros(s), buf=None) for s in shapes]
    m = [A(np.zeros(s, np.float32)) for s in shapes]
    v = [A(np.zeros(s, np.float32)) for s in shapes]
    vmax = [A(np.zeros(s, np.float32)) for s in shapes]
    steps = [f32(0.0) for _ in shapes]
    bufs = [None] * len(shapes)
    scale = 256.0
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.99, 1e-6, 1e-2
    for t in range(1, 101):
        gs = [(rng.standard_normal(s) * scale).astype(NP[gdt]) for s in shapes]
        g64 = [g.astype(np.float64) / scale for g in gs]
        if opt == "sgd":
            F.sgd_step_(params, [A(g) for g in gs], bufs, lr=lr, momentum=0.9, weight_decay=wd,
                        master_params=masters, inv_scale=f32(1 / scale))
            for i in range(len(shapes)):
                g = g64[i] + wd * ref[i]
                st[i]["buf"] = g if st[i]["buf"] is None else 0.9 * st[i]["buf"] + g
                ref[i] = ref[i] - lr * st[i]["buf"]
        else:
            ams = opt == "adamw_amsgrad"
            F.adam_step_(params, [A(g) for g in gs], m, v, vmax, steps, lr=lr, beta1=b1,
                         beta2=b2, eps=eps, weight_decay=wd, amsgrad=ams, maximize=False,
                         decoupled_weight_decay=ams, master_params=masters,
                         inv_scale=f32(1 / scale))
            for i in range(len(shapes)):
                s = st[i]
                ref[i], s["m"], s["v"], s["vmax"] = _adam64(ref[i], s["m"], s["v"], s["vmax"],
                                                            g64[i], t, lr, b1, b2, eps, wd, ams, ams)
    for i in range(len(shapes)):
        w = N(masters[i])
        np.testing.assert_allclose(w, ref[i], rtol=1e-4, atol=1e-5)
        # the model weight is the master rounded once
        assert np.array_equal(bits(N(params[i])), bits(w.astype(NP[pdt])))


# ---- skipped steps -------------------------------------------------------------------

def _snapshot(ts):
    return [None if t is None else bits(N(t)).copy() for t in ts]


@pytest.mark.parametrize("found", [1.0, float("nan"), float("inf")])
def test_skipped_adam_step_changes_nothing(found, cpu_path):
    rng = np.random.default_rng(4)
    params = [A(rng.standard_normal(50).astype(np.float16)), A(rng.standard_normal(7).astype(np.float32))]
    masters = [A(N(params[0]).astype(np.float32)), None]
    grads = [A(rng.standard_normal(50).astype(np.float16)), A(rng.standard_normal(7).astype(np.float32))]
    m = [A(rng.random(50).astype(np.float32)), A(rng.random(7).astype(np.float32))]
    v = [A(rng.random(50).astype(np.float32)), A(rng.random(7).astype(np.float32))]
    vmax = [A(rng.random(50).astype(np.float32)), A(rng.random(7).astype(np.float32))]
    steps = [f32(5.0), f32(9.0)]
    every = params + [masters[0]] + m + v + vmax + steps
    before = _snapshot(every)
    want = [(N(g).astype(np.float32) * np.float32(0.5)).astype(N(g).dtype) for g in grads]
    applied = F.adam_step_(params, grads, m, v, vmax, steps, lr=1e-3, beta1=0.9, beta2=0.999,
                           eps=1e-8, weight_decay=0.1, amsgrad=True, maximize=False,
                           master_params=masters, inv_scale=f32(0.5), found_inf=f32(found))
    assert applied is False
    for a, b in zip(before, _snapshot(every)):
        assert np.array_equal(a, b)
    # only the grads change: unscaled, as torch's unscale_() before a skipped step
    for g, w in zip(grads, want):
        assert np.array_equal(bits(N(g)), bits(w))


def test_skipped_sgd_first_step_keeps_none_buffers(cpu_path):
    p = A(np.ones(5, np.float32))
    g = A(np.full(5, 2.0, np.float32))
    bufs = [None]
    assert F.sgd_step_([p], [g], bufs, lr=0.1, momentum=0.9, dampening=0.5,
                       found_inf=f32(1.0)) is False
    assert bufs == [None] and np.all(N(p) == 1.0)
    # the next applied step is still a first step: buf = grad (no dampening applied)
    assert F.sgd_step_([p], [g], bufs, lr=0.1, momentum=0.9, dampening=0.5, found_inf=f32(0.0))
    assert np.array_equal(N(bufs[0]), np.full(5, 2.0, np.float32))


# ---- portable vs AVX-512, in process and through the environment variable ---------------

def _adam_run(level):
    ampy._C._set_cpu_level(level)
    try:
        rng = np.random.default_rng(7)
        n = 10_007
        p = [A(rng.standard_normal(n).astype(np.float16))]
        mst = [A(N(p[0]).astype(np.float32))]
        st = [A(np.zeros(n, np.float32)) for _ in range(3)]
        steps = [f32(0.0)]
        for _ in range(5):
            g = [A(rng.standard_normal(n).astype(ml_dtypes.bfloat16))]
            F.adam_step_(p, g, [st[0]], [st[1]], [st[2]], steps, lr=1e-2, beta1=0.9,
                         beta2=0.999, eps=1e-8, weight_decay=1e-2, amsgrad=True, maximize=False,
                         decoupled_weight_decay=True, master_params=mst, inv_scale=f32(0.25))
        return [bits(N(x)) for x in p + mst + st]
    finally:
        ampy._C._set_cpu_level(None)


def test_portable_and_simd_paths_agree_bitwise():
    for a, b in zip(_adam_run("portable"), _adam_run(None)):
        assert np.array_equal(a, b)


def test_force_portable_environment_variable():
    code = "import ampy; print(ampy._C.cpu_info()['level'])"
    env = dict(os.environ, AMPY_FORCE_PORTABLE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "portable"


# ---- bad inputs: clear errors, nothing modified --------------------------------------------

def _adam_args():
    p = [A(np.ones(4, np.float32))]
    return dict(params=p, grads=[A(np.ones(4, np.float32))], exp_avgs=[A(np.zeros(4, np.float32))],
                exp_avg_sqs=[A(np.zeros(4, np.float32))], max_exp_avg_sqs=None, steps=[f32(0.0)],
                lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False,
                maximize=False)


ADAM_BAD = [
    (dict(lr=-1.0), ValueError, "Invalid learning rate: -1.0"),
    (dict(lr=float("nan")), ValueError, "Invalid learning rate"),
    (dict(beta1=1.0), ValueError, "Invalid beta parameter at index 0: 1.0"),
    (dict(beta2=-0.5), ValueError, "Invalid beta parameter at index 1: -0.5"),
    (dict(eps=-1e-8), ValueError, "Invalid epsilon value"),
    (dict(weight_decay=-0.1), ValueError, "Invalid weight_decay value: -0.1"),
    (dict(lr="0.1"), TypeError, "'lr'"),
    (dict(grads=[]), ValueError, "'grads' has 0 tensors"),
    (dict(grads=[A(np.ones(5, np.float32))]), ValueError, "grads[0]"),
    (dict(grads=[A(np.ones(4, np.int32))]), TypeError, "grads[0] has dtype int32"),
    (dict(grads=[3.0]), TypeError, "grads[0] must be a Tensor"),
    (dict(grads=A(np.ones(4, np.float32))), TypeError, "'grads'"),
    (dict(exp_avgs=[A(np.zeros(4, np.float16))]), TypeError, "exp_avgs[0] has dtype float16"),
    (dict(exp_avg_sqs=[A(np.zeros(3, np.float32))]), ValueError, "exp_avg_sqs[0]"),
    (dict(steps=[f32(0.0), f32(0.0)]), ValueError, "'steps' has 2 tensors"),
    (dict(steps=[A(np.zeros(2, np.float32))]), ValueError, "steps[0] must be a 1-element"),
    (dict(amsgrad=True), ValueError, "max_exp_avg_sqs"),
    (dict(params=[A(np.ones(4, np.float16))]), ValueError, "master_params[0]"),
    (dict(master_params=[A(np.ones(4, np.float32))]), ValueError, "master_params[0] must be None"),
    (dict(params=[A(np.ones((4, 2), np.float32)).t()]), ValueError, "params[0] is not contiguous"),
    (dict(found_inf=A(np.zeros(2, np.float32))), ValueError, "'found_inf' must be a 1-element"),
    (dict(inv_scale=A(np.ones(1, np.float16))), TypeError, "'inv_scale' must be a float32"),
    (dict(inv_scale=1.0), TypeError, "inv_scale"),
]


@pytest.mark.parametrize("change,exc,msg", ADAM_BAD)
def test_adam_bad_inputs(change, exc, msg):
    kw = _adam_args()
    kw.update(change)
    tensors = [t for k in ("params", "grads", "exp_avgs", "exp_avg_sqs", "steps")
               for t in kw[k] if hasattr(t, "numpy") and t.is_contiguous()]
    before = _snapshot(tensors)
    with pytest.raises(exc) as info:
        F.adam_step_(**kw)
    assert msg in str(info.value), str(info.value)
    for a, b in zip(before, _snapshot(tensors)):
        assert np.array_equal(a, b)


SGD_BAD = [
    (dict(lr=-1.0), ValueError, "Invalid learning rate: -1.0"),
    (dict(momentum=-0.9), ValueError, "Invalid momentum value: -0.9"),
    (dict(weight_decay=-1.0), ValueError, "Invalid weight_decay value: -1.0"),
    (dict(nesterov=True), ValueError, "Nesterov momentum requires a momentum and zero dampening"),
    (dict(nesterov=True, momentum=0.9, dampening=0.1), ValueError, "Nesterov"),
    (dict(momentum=0.9, momentum_buffers=(None,)), TypeError, "momentum_buffers must be a list"),
    (dict(momentum=0.9, momentum_buffers=[A(np.zeros(3, np.float32))]), ValueError,
     "momentum_buffers[0]"),
    (dict(params=[A(np.ones(4, np.uint8))]), TypeError, "params[0] has dtype uint8"),
    (dict(params=[A(np.ones(4, np.float64))]), TypeError, "params[0] has dtype float64"),
]


@pytest.mark.parametrize("change,exc,msg", SGD_BAD)
def test_sgd_bad_inputs(change, exc, msg):
    kw = dict(params=[A(np.ones(4, np.float32))], grads=[A(np.ones(4, np.float32))],
              momentum_buffers=[None], lr=0.1)
    kw.update(change)
    before = _snapshot(kw["params"])
    with pytest.raises(exc) as info:
        F.sgd_step_(**kw)
    assert msg in str(info.value), str(info.value)
    assert all(np.array_equal(a, b) for a, b in zip(before, _snapshot(kw["params"])))


def test_unscale_bad_inputs():
    g = A(np.array([1.0, 2.0], np.float16))
    cases = [
        (([g], f32(0.0), A(np.ones(2, np.float32))), ValueError, "'inv_scale' must be a 1-element"),
        (([g], A(np.zeros(1, np.float16)), f32(0.5)), TypeError, "'found_inf' must be a float32"),
        (([g], A(np.zeros(1, np.int32)), f32(0.5)), TypeError, "'found_inf' must be a float32"),
        (([g, A(np.ones(3, np.int64))], f32(0.0), f32(0.5)), TypeError, "grads[1] has dtype int64"),
        (([g, "x"], f32(0.0), f32(0.5)), TypeError, "grads[1] must be a Tensor"),
        ((g, f32(0.0), f32(0.5)), TypeError, "'grads'"),
    ]
    for args, exc, msg in cases:
        with pytest.raises(exc) as info:
            F.non_finite_check_and_unscale_(*args)
        assert msg in str(info.value), str(info.value)
        assert np.array_equal(N(g), np.array([1.0, 2.0], np.float16))


def test_update_scale_bad_inputs():
    s, t = f32(4.0), A(np.array([0], np.int32))
    cases = [
        (lambda: F.update_scale_(s, A(np.array([0], np.int64)), f32(0), 2.0, 0.5, 10), TypeError,
         "'growth_tracker' must be a int32"),
        (lambda: F.update_scale_(A(np.ones(2, np.float32)), t, f32(0), 2.0, 0.5, 10), ValueError,
         "'scale' must be a 1-element"),
        (lambda: F.update_scale_(s, t, f32(0), 2.0, 0.5, 10, hysteresis=0), ValueError, "hysteresis"),
        (lambda: F.update_scale_(s, t, f32(0), 2.0, 0.5, 10, hysteresis=3), ValueError,
         "hysteresis_tracker"),
        (lambda: F.update_scale_(s, t, f32(1), 2.0, 0.5, 10, min_scale=8.0, max_scale=2.0),
         ValueError, "min_scale"),
        (lambda: F.update_scale_(s, t, f32(0), 2.0, 0.5, 2.5), TypeError, "growth_interval"),
        (lambda: F.update_scale_(s, s, f32(0), 2.0, 0.5, 10), TypeError, "growth_tracker"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc) as info:
            call()
        assert msg in str(info.value), str(info.value)
        assert N(s)[0] == 4.0 and N(t)[0] == 0


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("gdt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("skip", [False, True])
def test_fused_step_writes_unscaled_grads_back(opt, gdt, skip, cpu_path):
    """unscale_grads=True (the default) stores to_dtype(to_f32(g) * inv) into
    grads -- the bits non_finite_check_and_unscale_ leaves -- applied or
    skipped, and gives the same update as unscale_grads=False."""
    rng = np.random.default_rng(21)
    n = 1037
    g0 = (rng.standard_normal(n) * 3000).astype(np.float32)
    p0 = rng.standard_normal(n).astype(np.float32)
    npdt = ml_dtypes.bfloat16 if gdt == "bfloat16" else np.dtype(gdt)
    want = A(g0.astype(npdt))
    F.non_finite_check_and_unscale_([want], f32(0.0), f32(1.0 / 3.0))
    out = {}
    for write in (True, False):
        p, g = A(p0.copy()), A(g0.astype(npdt))
        kw = dict(inv_scale=f32(1.0 / 3.0), found_inf=f32(1.0 if skip else 0.0),
                  unscale_grads=write)
        if opt == "sgd":
            F.sgd_step_([p], [g], [None], lr=0.1, momentum=0.9, **kw)
        else:
            F.adam_step_([p], [g], [A(np.zeros(n, np.float32))], [A(np.zeros(n, np.float32))],
                         None, [f32(0.0)], lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8,
                         weight_decay=0.0, amsgrad=False, maximize=False, **kw)
        out[write] = (bits(N(p)).copy(), bits(N(g)).copy())
    assert np.array_equal(out[True][1], bits(N(want)))
    assert np.array_equal(out[False][1], bits(g0.astype(npdt)))  # False: grads untouched
    assert np.array_equal(out[True][0], out[False][0])
    if skip:
        assert np.array_equal(out[True][0], bits(p0))


# ================================================================ CUDA
# The AMP kernels on a GPU against the CPU's and torch's CUDA ops; skipped without a GPU.

@requires_cuda
@requires_torch_cuda
@pytest.mark.parametrize("inv", [1.0, 0.5, 1.0 / 65536])
def test_cuda_unscale_vs_torch(inv):
    g = torch.Generator(device="cuda").manual_seed(0)
    sizes = [1, 7, 65536, 65537, 300001, 5]
    ts = [torch.randn(s, device="cuda", generator=g) * 100 for s in sizes]
    ts[3][-1] = float("inf")
    halves = [t.half() for t in ts[:3]]
    ref = [t.clone() for t in ts]
    found_t = torch.zeros(1, device="cuda")
    torch._amp_foreach_non_finite_check_and_unscale_(ref, found_t, torch.full((1,), inv,
                                                                               device="cuda"))
    mine = [ampy.from_dlpack(t) for t in ts + halves]
    found = ampy.zeros(1, device="cuda")
    F.non_finite_check_and_unscale_(mine, found, ampy.full((1,), inv).cuda())
    assert found.item() == 1.0 == found_t.item()
    for a, b in zip(ts, ref):
        assert torch.equal(a, b) or torch.equal(a.isnan(), b.isnan())
    clean = [torch.randn(1000, device="cuda", dtype=torch.bfloat16)]
    f2 = ampy.zeros(1, device="cuda")
    F.non_finite_check_and_unscale_([ampy.from_dlpack(clean[0])], f2, ampy.ones(1).cuda())
    assert f2.item() == 0.0


@requires_cuda
def test_cuda_unscale_flags_overflow_after_unscaling():
    x = ampy.full((10,), 60000.0, dtype=ampy.float16).cuda()
    found = ampy.zeros(1, device="cuda")
    F.non_finite_check_and_unscale_([x], found, ampy.full((1,), 4.0).cuda())
    assert found.item() == 1.0


@requires_cuda
@requires_torch_cuda
def test_cuda_update_scale_trajectory_vs_torch():
    rng = np.random.default_rng(3)
    s_t, g_t = torch.full((1,), 65536.0, device="cuda"), torch.zeros(1, dtype=torch.int32,
                                                                      device="cuda")
    s_a, g_a = ampy.full((1,), 65536.0).cuda(), ampy.zeros(1, dtype=ampy.int32).cuda()
    for step in range(300):
        inf = float(rng.random() < 0.2)
        torch._amp_update_scale_(s_t, g_t, torch.full((1,), inf, device="cuda"), 2.0, 0.5, 3)
        F.update_scale_(s_a, g_a, ampy.full((1,), inf).cuda(), 2.0, 0.5, 3)
        assert s_a.item() == s_t.item() and g_a.item() == g_t.item(), step


@requires_cuda
@pytest.mark.parametrize("pdt", [ampy.float32, ampy.float16, ampy.bfloat16])
@pytest.mark.parametrize("decoupled", [False, True])
def test_cuda_adam_matches_cpu_kernel_bitwise(pdt, decoupled):
    sizes = [3, 70000, 129]
    kw = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, amsgrad=False,
              maximize=False, decoupled_weight_decay=decoupled)
    cpu = dict(p=[ampy.randn(s).to(pdt) for s in sizes])
    cpu["g"] = [ampy.randn(s).to(pdt) for s in sizes]
    cpu["m"] = [ampy.zeros(s) for s in sizes]
    cpu["v"] = [ampy.zeros(s) for s in sizes]
    cpu["st"] = [ampy.zeros(1) for _ in sizes]
    cpu["ma"] = [p.float() if pdt is not ampy.float32 else None for p in cpu["p"]]
    gpu = {k: [None if x is None else x.cuda() for x in v] for k, v in cpu.items()}
    inv = ampy.full((1,), 0.5)
    for _ in range(5):
        F.adam_step_(cpu["p"], cpu["g"], cpu["m"], cpu["v"], None, cpu["st"],
                     master_params=cpu["ma"] if pdt is not ampy.float32 else None,
                     inv_scale=inv, **kw)
        F.adam_step_(gpu["p"], gpu["g"], gpu["m"], gpu["v"], None, gpu["st"],
                        master_params=gpu["ma"] if pdt is not ampy.float32 else None,
                        inv_scale=inv.cuda(), **kw)
    for k in ("p", "m", "v", "st"):
        for a, b in zip(cpu[k], gpu[k]):
            np.testing.assert_array_equal(bits(b), bits(a), err_msg=k)


@requires_cuda
def test_cuda_skipped_step_changes_nothing():
    p = ampy.randn(1000).half().cuda()
    ma, g = p.float(), ampy.randn(1000).half().cuda()
    m, v, st = ampy.zeros(1000).cuda(), ampy.zeros(1000).cuda(), ampy.zeros(1).cuda()
    before = [bits(x) for x in (p, ma, m, v, st)]
    F.adam_step_([p], [g], [m], [v], None, [st], lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                    weight_decay=0.0, amsgrad=False, maximize=False, master_params=[ma],
                    found_inf=ampy.ones(1).cuda())
    for b0, x in zip(before, (p, ma, m, v, st)):
        np.testing.assert_array_equal(b0, bits(x))


@requires_cuda
@requires_torch_cuda
def test_cuda_adam_fp32_vs_torch_fused():
    torch.manual_seed(0)
    ps = [torch.randn(s, device="cuda") for s in (10, 100000)]
    ref = [p.clone().requires_grad_(True) for p in ps]
    opt = torch.optim.Adam(ref, lr=1e-2, weight_decay=0.1, fused=True)
    mine = [ampy.from_dlpack(p) for p in ps]
    m = [ampy.zeros(p.numel()).cuda() for p in ps]
    v = [ampy.zeros(p.numel()).cuda() for p in ps]
    st = [ampy.zeros(1).cuda() for _ in ps]
    for _ in range(20):
        grads = [torch.randn_like(p) for p in ps]
        for r, g in zip(ref, grads):
            r.grad = g.clone()
        opt.step()
        F.adam_step_(mine, [ampy.from_dlpack(g) for g in grads], m, v, None, st, lr=1e-2,
                        beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, amsgrad=False,
                        maximize=False)
    for p, r in zip(ps, ref):
        torch.testing.assert_close(p, r.detach(), rtol=1e-5, atol=1e-6)


@requires_cuda
def test_optimizer_and_scaler_use_cuda_amp_kernels():
    p = ampy.randn(1000).cuda()
    g = ampy.randn(1000).cuda()
    m, v = ampy.zeros(1000).cuda(), ampy.zeros(1000).cuda()
    step = ampy.zeros(()).cuda()
    found = ampy.zeros(()).cuda()
    r = F.adam_step_([p], [g], [m], [v], None, [step], lr=1e-3, beta1=0.9, beta2=0.999,
                      eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
                      found_inf=found)
    assert r is None  # the device kernel: no host sync, no "stepped" answer
    assert step.item() == 1.0
