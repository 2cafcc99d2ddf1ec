"""The demo's training runs: one CharGPT trained four ways from the same
initial weights on the same batches, measured honestly.

Modes: float32; bfloat16 autocast; float16 autocast + GradScaler; float16
autocast without loss scaling. Every run records per-step loss, time, the
loss scale used and whether the step was skipped; with ampy, the allocator's
bytes held by the forward pass (the activations autograd saves) and the peak
of the step. On a few probe steps it also computes a float32 reference
gradient at the same weights and batch, and counts, per layer group, the
gradient elements that are nonzero in float32 but exactly zero in the run's
own (unscaled) gradient: the share that flushed to zero in half precision.
"""
import time
from dataclasses import dataclass, field

import numpy as np

from . import _demo_model


@dataclass(frozen=True)
class Mode:
    name: str
    dtype: str = None       # autocast dtype name, None: float32 without autocast
    scaler: bool = False


MODES = (Mode("float32"), Mode("bf16 autocast", "bfloat16"),
         Mode("fp16 + GradScaler", "float16", True), Mode("fp16, no scaler", "float16"))


@dataclass
class Config:
    steps: int = 120
    batch: int = 32
    T: int = 64
    d: int = 128
    n_layer: int = 2
    n_head: int = 4
    lr: float = 3e-3
    seed: int = 0
    probes: int = 6               # probe steps (evenly spaced, the last one included)
    init_scale: float = 2.0 ** 16
    growth_interval: int = 50
    eval_batches: int = 4

    def probe_steps(self):
        n = min(self.probes, self.steps)
        if n <= 0:
            return []
        return sorted({int(round(s)) for s in np.linspace(0, self.steps - 1, n)})


@dataclass
class Result:
    mode: Mode
    losses: list = field(default_factory=list)
    step_times: list = field(default_factory=list)
    scales: list = field(default_factory=list)      # scale used by each step (1.0: none)
    skipped: list = field(default_factory=list)
    final_scale: float = None
    act_bytes: int = None                           # held after forward (median over steps)
    peak_bytes: int = None                          # peak of the step above the step's start
    probes: list = field(default_factory=list)      # [(step, {group: (zeros, nonzero)})]
    act_probes: list = field(default_factory=list)  # the same for activation gradients
    val_loss: float = float("nan")
    val_acc: float = float("nan")

    @property
    def step_time(self):
        t = self.step_times[2:] if len(self.step_times) > 4 else self.step_times
        return float(np.median(t)) if t else float("nan")

    @property
    def final_loss(self):
        tail = self.losses[-max(1, len(self.losses) // 10):]
        return float(np.mean(tail))

    def underflow(self, kind="param"):
        """{group: share} over every probe (sum of zeros / sum of nonzero) of
        the parameter ("param") or activation ("act") gradients."""
        tot = {}
        for _, counts in (self.probes if kind == "param" else self.act_probes):
            for g, (z, n) in counts.items():
                a = tot.setdefault(g, [0, 0])
                a[0] += z
                a[1] += n
        return {g: (z / n if n else 0.0) for g, (z, n) in tot.items()}

    def underflow_total(self, kind="param"):
        probes = self.probes if kind == "param" else self.act_probes
        z = sum(c[0] for _, counts in probes for c in counts.values())
        n = sum(c[1] for _, counts in probes for c in counts.values())
        return z / n if n else float("nan")


def flushed_counts(grads, ref, groups):
    """{group: (elements exactly 0 in ``grads`` where ``ref`` is nonzero,
    elements nonzero in ``ref``)} for NumPy gradients keyed by name."""
    out = {}
    for g, names in groups.items():
        z = n = 0
        for name in names:
            r = ref[name] != 0
            n += int(r.sum())
            z += int(((grads[name] == 0) & r).sum())
        out[g] = (z, n)
    return out


class _Mem:
    """ampy's allocator counters (ampy.memory_stats); inert for other libraries."""

    def __init__(self, lib):
        self.on = hasattr(lib, "memory_stats") and hasattr(lib, "reset_peak_memory_stats")
        self.lib = lib

    def start(self):
        if not self.on:
            return 0
        self.lib.reset_peak_memory_stats()
        return self.lib.memory_allocated()

    def now(self):
        return self.lib.memory_allocated() if self.on else 0

    def peak(self):
        return self.lib.max_memory_allocated() if self.on else 0


def _loss(lib, model, x, y, mode):
    half = getattr(lib, mode.dtype) if mode.dtype else lib.float16
    with lib.autocast("cpu", dtype=half, enabled=mode.dtype is not None):
        logits = model(x)
        return lib.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                               y.reshape(-1))


def _grads(model, taps):
    params = {n: p.grad.detach().float().numpy().copy() for n, p in model.named_parameters()
              if p.grad is not None}
    acts = {n: t.grad.detach().float().numpy().copy() for n, t in taps.items()}
    return params, acts


def _run_grads(lib, model, x, y, mode, scale):
    taps = {}
    model.set_taps(taps)
    try:
        loss = _loss(lib, model, x, y, mode)
        (loss * scale if scale != 1.0 else loss).backward()
    finally:
        model.set_taps(None)
    return _grads(model, taps)


def _probe(lib, model, opt, scaler, x, y, mode, groups):
    """The run's own gradient of this batch (unscaled) against a float32
    reference at the same weights; leaves the parameters untouched and no
    gradient behind."""
    opt.zero_grad(set_to_none=True)
    ref, ref_act = _run_grads(lib, model, x, y, Mode("float32"), 1.0)
    opt.zero_grad(set_to_none=True)
    scale = scaler.get_scale() if mode.scaler else 1.0
    got, got_act = _run_grads(lib, model, x, y, mode, scale)
    opt.zero_grad(set_to_none=True)
    if not all(np.isfinite(g).all() for g in list(got.values()) + list(got_act.values())):
        return None  # an overflowing step: the scaler skips it, nothing to count
    act_groups = {}
    for n in ref_act:
        act_groups.setdefault(_demo_model.group_of(n), []).append(n)
    return flushed_counts(got, ref, groups), flushed_counts(got_act, ref_act, act_groups)


def _evaluate(lib, model, data, cfg):
    rng = np.random.default_rng(cfg.seed + 12345)
    losses, accs = [], []
    with lib.no_grad():
        for _ in range(cfg.eval_batches):
            x, y = data.batch(rng, cfg.batch, cfg.T, "val")
            logits = model(lib.tensor(x))
            flat = logits.reshape(-1, logits.shape[-1])
            losses.append(float(lib.nn.functional.cross_entropy(flat, lib.tensor(y).reshape(-1))))
            accs.append(float((flat.argmax(-1).numpy() == y.reshape(-1)).mean()))
    return float(np.mean(losses)), float(np.mean(accs))


def train(lib, data, cfg, mode, progress=None):
    """One run of ``mode``; returns a Result. ``progress(step, loss)`` is
    called after every step."""
    model = _demo_model.build(lib, data.vocab, d=cfg.d, n_layer=cfg.n_layer, n_head=cfg.n_head,
                              T=cfg.T, seed=cfg.seed)
    groups = _demo_model.layer_groups(model)
    opt = lib.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    scaler = lib.amp.GradScaler("cpu", init_scale=cfg.init_scale,
                                growth_interval=cfg.growth_interval, enabled=mode.scaler)
    rng = np.random.default_rng(cfg.seed)  # the same batches for every mode
    probe_at = set(cfg.probe_steps()) if mode.dtype == "float16" else set()
    mem, res = _Mem(lib), Result(mode)
    acts, peaks = [], []
    for step in range(cfg.steps):
        xn, yn = data.batch(rng, cfg.batch, cfg.T)
        x, y = lib.tensor(xn), lib.tensor(yn)
        if step in probe_at:
            counts = _probe(lib, model, opt, scaler, x, y, mode, groups)
            if counts is not None:
                res.probes.append((step, counts[0]))
                res.act_probes.append((step, counts[1]))
        scale = scaler.get_scale() if mode.scaler else 1.0
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        base = mem.start()
        loss = _loss(lib, model, x, y, mode)
        acts.append(mem.now() - base)
        scaler.scale(loss).backward()
        peaks.append(mem.peak() - base)
        scaler.step(opt)
        scaler.update()
        lv = float(loss.item())
        res.step_times.append(time.perf_counter() - t0)
        res.losses.append(lv)
        res.scales.append(scale)
        res.skipped.append(bool(mode.scaler and scaler.get_scale() < scale))
        if progress is not None:
            progress(step, lv)
    res.final_scale = scaler.get_scale() if mode.scaler else None
    if mem.on:
        res.act_bytes, res.peak_bytes = int(np.median(acts)), int(max(peaks))
    res.val_loss, res.val_acc = _evaluate(lib, model, data, cfg)
    return res
