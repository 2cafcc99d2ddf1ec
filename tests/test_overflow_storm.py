"""Overflow storms: training survives bursts of inf/NaN gradients.

A small MLP is trained with GradScaler while whole storms of overflows are
forced: 20 consecutive overflowing steps, then recovery, then interleaved
bursts drawn by a seeded RNG. Three ways of forcing one: ``loss * inf`` (every
gradient inf/NaN), a NaN written into one element of one gradient, an +inf
written into one element of another. Four set-ups: float16 parameters with
float32 master weights (SGD momentum, AdamW) and float32 parameters under
float16 autocast (SGD momentum, AdamW, optionally with an explicit
``scaler.unscale_`` before ``step`` as for gradient clipping).

Checked at every step, against oracles that do not use ampy:

- whether the step overflowed is decided independently (NumPy looks at every
  gradient after backward); every forced step is among them;
- a skipped step leaves parameters, master weights, moments and step counts
  bit-identical (their bytes are compared); an applied step changes them, and
  Adam's step count equals the number of applied steps;
- the scale and growth tracker equal, bit for bit, those of
  ``torch.amp.GradScaler`` fed the same overflow sequence side by side, and a
  float64 re-statement of the rule (for the min_scale / max_scale /
  hysteresis extras, which torch lacks);
- ``scaler.last_step_skipped`` is right; no inf/NaN ever reaches a parameter
  or a master weight; the scale backs off during a storm and grows again
  after ``growth_interval`` clean steps.
"""
import math

import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved")

D_IN, D_HID, N_CLS, BATCH = 8, 16, 4, 12
INIT_SCALE, GROWTH_INTERVAL = 1024.0, 4


def _schedule(n_steps=96, seed=0):
    """{step: how} for the forced overflows: steps 3..22 all overflow (a storm
    of 20), 23..42 are clean (recovery: the scale grows again), then bursts of
    1-6 overflows separated by 1-6 clean steps."""
    modes = ("loss_inf", "grad_nan", "grad_inf")
    forced = {s: modes[s % 3] for s in range(3, 23)}
    rng = np.random.default_rng(seed)
    s = 43
    while s < n_steps:
        burst = int(rng.integers(1, 7))
        for k in range(burst):
            if s + k < n_steps:
                forced[s + k] = modes[int(rng.integers(0, 3))]
        s += burst + int(rng.integers(1, 7))
    return forced


def _data(n_steps, half_inputs):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((D_IN, N_CLS))
    out = []
    for _ in range(n_steps):
        x = rng.standard_normal((BATCH, D_IN)).astype(np.float32)
        y = np.argmax(x @ w, 1).astype(np.int64)
        out.append((x.astype(np.float16) if half_inputs else x, y))
    return out


def _model(half):
    nn = ampy.nn
    ampy.manual_seed(0)
    m = nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_HID), nn.ReLU(),
                      nn.Linear(D_HID, N_CLS))
    return m.half() if half else m


def _opt(name, params, master):
    kw = {"master_weights": True} if master else {}
    if name == "sgd":
        return ampy.optim.SGD(params, lr=0.05, momentum=0.9, **kw)
    return ampy.optim.AdamW(params, lr=1e-2, **kw)


def _bytes(t):
    return t.detach().numpy().tobytes()


def _snapshot(model, opt):
    params = [_bytes(p) for p in model.parameters()]
    state = {}
    for i, p in enumerate(model.parameters()):
        for k, v in opt.state.get(p, {}).items():
            state[(i, k)] = _bytes(v) if isinstance(v, ampy.Tensor) else v
    return params, state


def _all_finite(model, opt):
    for p in model.parameters():
        if not np.isfinite(p.detach().numpy().astype(np.float32)).all():
            return False
        m = opt.state.get(p, {}).get("master_param")
        if m is not None and not np.isfinite(m.numpy()).all():
            return False
    return True


def _grads_overflow(model):
    """Independent found_inf: does any gradient hold inf or NaN (NumPy)?"""
    return any(not np.isfinite(p.grad.numpy().astype(np.float32)).all()
               for p in model.parameters() if p.grad is not None)


def _poke(model, how):
    """Write a NaN / +inf into one gradient element, in place (the numpy view
    shares the gradient's memory)."""
    params = list(model.parameters())
    if how == "grad_nan":
        params[0].grad.numpy().reshape(-1)[5] = np.nan
    elif how == "grad_inf":
        params[-1].grad.numpy().reshape(-1)[1] = np.inf


class _Oracle:
    """The loss-scale rule restated in float64 with one rounding to float32,
    from csrc/include/ampy/scaler.h's contract (torch's rule plus the
    min_scale / max_scale / consecutive-hysteresis extras)."""

    def __init__(self, scale, growth=2.0, backoff=0.5, interval=GROWTH_INTERVAL, min_scale=None,
                 max_scale=None, hysteresis=1):
        self.scale = np.float32(scale)
        self.tracker = 0
        self.g, self.b, self.interval = growth, backoff, interval
        self.lo, self.hi, self.hyst = min_scale, max_scale, hysteresis
        self.htracker = hysteresis

    def update(self, found):
        if found:
            if self.hyst > 1:
                self.htracker = max(self.htracker - 1, 0)
                if self.htracker > 0:
                    self.tracker = 0
                    return
            s = float(self.scale) * self.b
            if self.lo is not None and s < self.lo:
                s = self.lo
            self.scale = np.float32(s)
            self.tracker = 0
            return
        if self.tracker + 1 == self.interval:
            g = float(self.scale) * self.g
            if self.hi is not None and g > self.hi:
                g = self.hi
            if math.isfinite(np.float32(g)):
                self.scale = np.float32(g)
            self.tracker = 0
        else:
            self.tracker += 1
        if self.hyst > 1:
            self.htracker = self.hyst


class _TorchScaler:
    """torch.amp.GradScaler on the CPU driven by a given overflow sequence:
    one parameter whose gradient is set to inf (overflow) or 0 each step."""

    def __init__(self, **kw):
        self.p = torch.zeros(1, requires_grad=True)
        self.opt = torch.optim.SGD([self.p], lr=0.1)
        self.scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE,
                                           growth_interval=GROWTH_INTERVAL, **kw)

    def step(self, found):
        self.opt.zero_grad()
        self.scaler.scale(self.p.sum()).backward()
        self.p.grad.fill_(math.inf if found else 0.0)
        self.scaler.step(self.opt)
        self.scaler.update()
        return self.scaler._scale.numpy().tobytes(), int(self.scaler._growth_tracker.item())


def _train_storm(setup, opt_name, *, explicit_unscale=False, scaler_kw=None, n_steps=96,
                 torch_side_by_side=True):
    """Run the storm; returns per-step records. Asserts every invariant."""
    half_params = setup == "fp16-master"
    model = _model(half_params)
    opt = _opt(opt_name, model.parameters(), master=half_params)
    scaler_kw = dict(scaler_kw or {})
    scaler = ampy.amp.GradScaler("cpu", init_scale=INIT_SCALE, growth_interval=GROWTH_INTERVAL,
                                 **scaler_kw)
    names = {"growth_factor": "growth", "backoff_factor": "backoff"}
    oracle = _Oracle(INIT_SCALE, **{names.get(k, k): v for k, v in scaler_kw.items()})
    peer = _TorchScaler() if torch_side_by_side else None
    forced = _schedule(n_steps)
    data = _data(n_steps, half_params)
    applied = 0
    log = []
    for step, (xn, yn) in enumerate(data):
        x, y = ampy.tensor(xn), ampy.tensor(yn)
        opt.zero_grad()
        with ampy.autocast("cpu", dtype=ampy.float16, enabled=not half_params):
            loss = ampy.nn.functional.cross_entropy(model(x), y)
        if forced.get(step) == "loss_inf":
            loss = loss * math.inf
        scaler.scale(loss).backward()
        _poke(model, forced.get(step))
        found = _grads_overflow(model)
        if step in forced:
            assert found, f"step {step}: forced {forced[step]} produced no inf/NaN gradient"
        before = _snapshot(model, opt)
        if explicit_unscale:
            scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        after = _snapshot(model, opt)

        assert scaler.last_step_skipped is found, f"step {step}: last_step_skipped wrong"
        if found:
            assert after[0] == before[0], f"step {step}: a skipped step changed a parameter"
            changed = [k for k in before[1] if before[1][k] != after[1].get(k)]
            assert not changed, f"step {step}: a skipped step changed optimizer state {changed}"
        else:
            applied += 1
            assert after[0] != before[0] or after[1] != before[1], \
                f"step {step}: an applied step changed nothing"
        if opt_name == "adamw":
            for p in model.parameters():
                assert float(opt.state[p]["step"].item()) == applied, f"step {step}: step count"
        assert _all_finite(model, opt), f"step {step}: inf/NaN reached a parameter or master"

        oracle.update(found)
        got = scaler._scale.numpy().tobytes()
        assert got == oracle.scale.tobytes(), \
            f"step {step}: scale {scaler.get_scale()} != oracle {float(oracle.scale)}"
        assert scaler._get_growth_tracker() == oracle.tracker, f"step {step}: growth tracker"
        if scaler_kw.get("hysteresis", 1) > 1:
            assert int(scaler._hysteresis_tracker.item()) == oracle.htracker
        if peer is not None:
            t_scale, t_tracker = peer.step(found)
            assert got == t_scale, f"step {step}: scale differs from torch.amp.GradScaler"
            assert scaler._get_growth_tracker() == t_tracker, f"step {step}: torch tracker"
        log.append((step, found, scaler.get_scale()))
    return log, forced


SETUPS = [("fp16-master", "sgd", False), ("fp16-master", "adamw", False),
          ("autocast", "sgd", False), ("autocast", "adamw", False),
          ("autocast", "sgd", True), ("autocast", "adamw", True)]


@pytest.mark.parametrize("setup,opt_name,explicit_unscale", SETUPS,
                         ids=[f"{s}-{o}{'-unscale_' if u else ''}" for s, o, u in SETUPS])
def test_storm_torch_rule(setup, opt_name, explicit_unscale):
    log, forced = _train_storm(setup, opt_name, explicit_unscale=explicit_unscale)
    scales = {s: sc for s, _, sc in log}
    assert sum(f for _, f, _ in log) >= len(forced) >= 40
    # 20 consecutive backoffs (at least -- natural overflows only add)
    assert scales[22] <= INIT_SCALE * 0.5 ** 20
    # ... then recovery: 20 clean steps with growth_interval 4 grow it again
    clean = [s for s in range(23, 43) if not log[s][1]]
    assert len(clean) >= 12
    assert scales[42] >= scales[22] * 2 ** 3


EXTRAS = [dict(hysteresis=3), dict(min_scale=0.25, max_scale=4096.0),
          dict(hysteresis=2, min_scale=1.0, max_scale=2048.0, backoff_factor=0.25,
               growth_factor=4.0)]


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
@pytest.mark.parametrize("setup,opt_name", [("fp16-master", "adamw"), ("autocast", "sgd")])
def test_storm_extras(setup, opt_name, extra):
    kw = dict(extra)
    log = _train_storm_extra(setup, opt_name, kw)
    scales = [sc for _, _, sc in log]
    if "min_scale" in kw:
        assert min(scales) == kw["min_scale"]      # the 20-overflow storm hit the floor
    if "max_scale" in kw:
        assert max(scales) <= kw["max_scale"]


def _train_storm_extra(setup, opt_name, scaler_kw):
    return _train_storm(setup, opt_name, scaler_kw=scaler_kw, torch_side_by_side=False)[0]


def test_hysteresis_delays_backoff():
    """With hysteresis=3 the first two overflows of a burst keep the scale;
    the third backs off (and every one of them is still skipped)."""
    log = _train_storm_extra("autocast", "sgd", {"hysteresis": 3})
    found = {s for s, f, _ in log if f}
    sc = {s: v for s, _, v in log}
    assert 2 not in found and {3, 4, 5, 6} <= found
    assert sc[2] == sc[3] == sc[4]          # overflows 1 and 2 of the burst: no backoff
    assert sc[5] == sc[4] * 0.5             # the third backs off ...
    assert sc[6] == sc[5] * 0.5             # ... and so does every further one


def test_storm_torch_peer_reference():
    """Sanity of the side-by-side peer itself: torch's scale after a 20-overflow
    storm is exactly init * 0.5**20 and after growth_interval clean steps
    doubles (so comparing against it is meaningful)."""
    peer = _TorchScaler()
    for _ in range(20):
        raw, tracker = peer.step(True)
    assert np.frombuffer(raw, np.float32)[0] == np.float32(INIT_SCALE * 0.5 ** 20)
    for _ in range(GROWTH_INTERVAL):
        raw, tracker = peer.step(False)
    assert np.frombuffer(raw, np.float32)[0] == np.float32(INIT_SCALE * 0.5 ** 19)
    assert tracker == 0
