"""No leaks: long AMP training of the demo model leaves memory flat.

The demo's MLP (64-256-256-10 on the 8x8 digits, ampy/demo.py's builders) is
trained under AMP -- float16 autocast + GradScaler + SGD(momentum) as the demo
does, and float16 parameters with AdamW float32 master weights -- with an
overflow forced every 97 steps so the skip path runs too. After a warm-up:

- the host allocator's own counters (``ampy._C.alloc_stats()``: allocated
  bytes, live blocks, cached bytes) are identical at every sample;
- resident memory (``/proc/self/statm``) grows by less than a small bound
  (not checked under ASan, whose quarantine holds freed memory);
- ``sys.getrefcount`` of the dtype singletons, the ampy modules, the model,
  its sub-modules and parameters, the optimizer and the scaler is unchanged;
- ``tracemalloc`` sees tensor storage (libampy's allocations are registered in
  their own tracemalloc domain): a loop that deliberately keeps one tensor per
  step alive shows that growth, the training loop shows none.

Default: 1,000 measured steps per set-up (AMPY_TEST_SHORT=1, used by the ASan
run: 300). AMPY_TEST_LONG=1 runs the full 10,000 steps (marked slow) and
prints the numbers.
"""
import gc
import math
import os
import sys
import time
import tracemalloc

import numpy as np
import pytest

import ampy
from ampy import demo

from _helpers import SHORT, long_run

pytestmark = pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved")

ASAN = "asan" in os.environ.get("LD_PRELOAD", "")
PAGE = os.sysconf("SC_PAGE_SIZE")
OVERFLOW_EVERY = 97
RSS_SLACK = 3 << 20     # bytes of RSS growth tolerated after warm-up (allocator noise)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class Trainer:
    """The demo's training step, on a fixed stream of random batches."""

    def __init__(self, setup, history_size=1000, batch=64, seed=0):
        x_tr, y_tr, _, _ = demo.load_digits(seed)
        ampy.manual_seed(seed)
        self.model = demo.make_model(ampy)
        self.half = setup == "fp16-adamw-master"
        if self.half:
            self.model.half()
            self.opt = ampy.optim.AdamW(self.model.parameters(), lr=1e-3, master_weights=True)
            x_tr = x_tr.astype(np.float16)
        else:
            self.opt = ampy.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.scaler = ampy.amp.GradScaler("cpu", growth_interval=50, history_size=history_size)
        self.xs, self.ys = ampy.tensor(x_tr), ampy.tensor(y_tr)
        self.n, self.batch = len(x_tr), batch
        self.rng = np.random.default_rng(seed)
        self.steps = 0
        self.skipped = 0

    def step(self, keep=None):
        idx = ampy.tensor(self.rng.integers(0, self.n, self.batch))
        self.opt.zero_grad()
        with ampy.autocast("cpu", dtype=ampy.float16, enabled=not self.half):
            loss = ampy.nn.functional.cross_entropy(self.model(self.xs[idx]), self.ys[idx])
        if self.steps % OVERFLOW_EVERY == OVERFLOW_EVERY - 1:
            loss = loss * math.inf
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.steps += 1
        if keep is not None:
            keep.append(loss.detach().clone())
        return float(loss.item())

    def watched(self):
        """Objects whose reference counts must not drift."""
        return ([ampy.float16, ampy.bfloat16, ampy.float32, ampy.int64, ampy.bool, ampy, ampy.nn,
                 ampy.optim, ampy.amp, self.model, self.opt, self.scaler]
                + list(self.model.modules()) + list(self.model.parameters()))


def _sample(tr):
    gc.collect()
    s = ampy._C.alloc_stats()
    return {"step": tr.steps, "rss": rss_bytes(), "allocated": s["allocated_bytes"],
            "live_blocks": s["live_blocks"], "cached": s["cached_bytes"],
            "refs": [sys.getrefcount(o) for o in tr.watched()]}


def _run_flat(setup, warmup, measured, every, history_size):
    tr = Trainer(setup, history_size=history_size)
    for _ in range(warmup):
        tr.step()
    base = _sample(tr)
    samples = [base]
    t0 = time.perf_counter()
    while tr.steps < warmup + measured:
        for _ in range(min(every, warmup + measured - tr.steps)):
            loss = tr.step()
        samples.append(_sample(tr))
    dt = time.perf_counter() - t0
    end = samples[-1]
    print(f"\n[{setup}] {warmup} warm-up + {measured} steps, {measured / dt:.0f} steps/s, "
          f"RSS {base['rss'] / 2**20:.1f} -> {end['rss'] / 2**20:.1f} MiB "
          f"(max {max(s['rss'] for s in samples) / 2**20:.1f}), allocator "
          f"{base['allocated']} -> {end['allocated']} bytes in {base['live_blocks']} -> "
          f"{end['live_blocks']} blocks, cached {end['cached']}, last loss {loss:.4f}")
    assert math.isfinite(loss)
    for s in samples[1:]:
        assert s["allocated"] == base["allocated"], f"allocator bytes drift at step {s['step']}"
        assert s["live_blocks"] == base["live_blocks"], f"live blocks drift at step {s['step']}"
        assert s["cached"] <= max(base["cached"], 0) + (1 << 20), \
            f"allocator cache grows at step {s['step']}"
        assert s["refs"] == base["refs"], f"reference counts drift at step {s['step']}: " + str(
            [(i, a, b) for i, (a, b) in enumerate(zip(base["refs"], s["refs"])) if a != b])
    if not ASAN:
        assert end["rss"] - base["rss"] < RSS_SLACK, \
            f"RSS grew {(end['rss'] - base['rss']) / 2**20:.2f} MiB over {measured} steps"
    return samples


SETUPS = ["demo-autocast-sgd", "fp16-adamw-master"]


@pytest.mark.parametrize("setup", SETUPS)
def test_training_memory_flat(setup):
    # history_size bounds GradScaler.history (a deque of per-step scalars);
    # the warm-up must outlast it for the counters to be flat.
    if SHORT:
        _run_flat(setup, warmup=60, measured=300, every=100, history_size=50)
    else:
        _run_flat(setup, warmup=200, measured=1000, every=250, history_size=100)


@long_run("the 10,000-step run")
@pytest.mark.parametrize("setup", SETUPS)
def test_training_memory_flat_10k(setup):
    _run_flat(setup, warmup=1500, measured=8500, every=500, history_size=1000)


def _domain_bytes(snapshot, domain):
    return sum(t.size for t in snapshot.filter_traces(
        [tracemalloc.DomainFilter(True, domain)]).traces)


@pytest.fixture
def traced():
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start(1)
    yield ampy._C.tracemalloc_domain()
    if not was:
        tracemalloc.stop()


def test_tracemalloc_sees_tensor_storage(traced):
    gc.collect()
    before = _domain_bytes(tracemalloc.take_snapshot(), traced)
    keep = [ampy.empty((1000 + i,), dtype=ampy.float32) for i in range(20)]
    grown = _domain_bytes(tracemalloc.take_snapshot(), traced) - before
    want = sum(4 * (1000 + i) for i in range(20))
    assert want <= grown < want + 20 * 256, (grown, want)
    del keep
    gc.collect()
    assert _domain_bytes(tracemalloc.take_snapshot(), traced) == before


def _traced_training(domain, steps, keep=None):
    tr = Trainer("demo-autocast-sgd", history_size=20)
    for _ in range(40):
        tr.step()
    gc.collect()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(steps):
        tr.step(keep)
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tensors = _domain_bytes(snap1, domain) - _domain_bytes(snap0, domain)
    py = sum(t.size for t in snap1.filter_traces([tracemalloc.DomainFilter(True, 0)]).traces) - \
        sum(t.size for t in snap0.filter_traces([tracemalloc.DomainFilter(True, 0)]).traces)
    return tensors, py


def test_tracemalloc_training_loop_flat(traced):
    steps = 100 if SHORT else 200
    tensors, py = _traced_training(traced, steps)
    print(f"\ntracemalloc over {steps} steps: tensor domain {tensors:+d} bytes, "
          f"Python heap {py:+d} bytes")
    assert tensors == 0
    assert py < 64 * 1024      # tracemalloc's own frames and interned objects, not per step


def test_tracemalloc_catches_a_deliberate_leak(traced):
    """The same loop keeping each step's loss alive: tracemalloc shows one
    tensor storage per step in the ampy domain (so the check above can fail)."""
    steps = 50 if SHORT else 80
    keep = []
    tensors, _ = _traced_training(traced, steps, keep)
    assert len(keep) == steps
    assert tensors >= steps * keep[0].element_size() * keep[0].numel()
    del keep
