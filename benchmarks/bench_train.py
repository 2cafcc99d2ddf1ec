"""Time per training step, ampy vs torch on the same CPU, same model and data.

    python benchmarks/bench_train.py [--repeat 10] [--quick]

Models (issue 4): an MLP (batch 256, 784-1024-1024-10, cross-entropy) and a
transformer block (batch 32, seq 128, d 256, 4 heads: layer_norm, linear,
matmul, softmax, gelu; MSE loss), each trained with AdamW in three modes:
float32, autocast bfloat16, autocast float16 + GradScaler. Prints medians and
the ratio ampy / torch (< 1: ampy is faster). Also the dispatch overhead on
tiny tensors (µs per op), outside and inside an autocast region.

Not a test: nothing here asserts. A mode ampy cannot run yet prints the
missing piece instead of a time.
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ampy  # noqa: E402

try:
    import torch
except ImportError:  # the benchmark still times ampy alone
    torch = None


def median_time(fn, repeat, warmup=2):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


# ------------------------------------------------------------------ models
def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def block(lib, d=256, heads=4):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            dh = d // heads
            qkv = self.qkv(self.ln1(x)).reshape(b, t, 3, heads, dh).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]                       # (b, h, t, dh)
            att = F.softmax(lib.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh)), dim=-1)
            o = lib.matmul(att, v).permute(0, 2, 1, 3).reshape(b, t, d)
            x = x + self.proj(o)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return Block()


def make_step(lib, name, mode):
    """A closure running one training step, from identical weights/data."""
    rng = np.random.default_rng(0)
    if torch is not None:
        torch.manual_seed(0)
        ref = mlp(torch) if name == "mlp" else block(torch)
        state = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    model = mlp(lib) if name == "mlp" else block(lib)
    if torch is not None:
        model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    if name == "mlp":
        x = lib.tensor(rng.standard_normal((256, 784)).astype(np.float32))
        y = lib.tensor(rng.integers(0, 10, 256))
        loss_fn = lib.nn.functional.cross_entropy
    else:
        x = lib.tensor(rng.standard_normal((32, 128, 256)).astype(np.float32))
        y = lib.tensor(rng.standard_normal((32, 128, 256)).astype(np.float32))
        loss_fn = lib.nn.functional.mse_loss
    opt = lib.optim.AdamW(model.parameters(), lr=1e-4)
    enabled = mode != "float32"
    dtype = lib.bfloat16 if mode == "bfloat16" else lib.float16
    scaler = lib.amp.GradScaler("cpu", enabled=(mode == "float16"))

    def step():
        opt.zero_grad()
        with lib.autocast("cpu", dtype=dtype, enabled=enabled):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    return step


def bench_models(repeat, quick):
    print(f"\nTraining step, median of {repeat} (AdamW; threads: ampy "
          f"{ampy.get_num_threads()}, torch {torch.get_num_threads() if torch else '-'})")
    print(f"{'model':<12}{'mode':<18}{'ampy ms':>10}{'torch ms':>10}{'ampy/torch':>12}")
    for name in ("mlp", "block"):
        for mode in ("float32", "bfloat16", "float16"):
            label = {"float32": "float32", "bfloat16": "bf16 autocast",
                     "float16": "fp16 + scaler"}[mode]
            tt = median_time(make_step(torch, name, mode), repeat) if torch else float("nan")
            try:
                ta = median_time(make_step(ampy, name, mode), repeat)
                ratio = f"{ta / tt:10.2f}x"
                ta_s = f"{ta * 1e3:10.1f}"
            except Exception as e:  # noqa: BLE001 (report what ampy lacks, keep going)
                ta_s, ratio = "       n/a", f"  ({type(e).__name__}: {str(e)[:60]})"
            print(f"{name:<12}{label:<18}{ta_s}{tt * 1e3:10.1f}{ratio}")
            if quick:
                break


# ---------------------------------------------------------- dispatch overhead
def bench_dispatch(repeat):
    n = 2000
    print(f"\nDispatch overhead on 8-element tensors, µs per op (median of {repeat} x {n})")
    print(f"{'op':<34}{'ampy':>8}{'torch':>8}{'ratio':>8}")
    cases = [
        ("x.to(float16) (cast)", lambda m, a, w: a.to(m.float16)),
        ("a + b", lambda m, a, w: a + a),
        ("a + b, requires_grad", lambda m, a, w: w + w),
        ("matmul(2x4, 4x2)", lambda m, a, w: m.matmul(a.reshape(2, 4), a.reshape(4, 2))),
    ]
    for region in (False, True):
        for label, fn in cases:
            res = []
            for m in (ampy, torch):
                if m is None:
                    res.append(float("nan"))
                    continue
                a = m.ones(8)
                w = m.ones(8).requires_grad_()
                try:
                    with m.autocast("cpu", dtype=m.float16, enabled=region):
                        fn(m, a, w)

                        def loop():
                            for _ in range(n):
                                fn(m, a, w)
                        res.append(median_time(loop, repeat, warmup=1) / n * 1e6)
                except Exception:  # noqa: BLE001
                    res.append(float("nan"))
            name = label + (" [autocast fp16]" if region else "")
            print(f"{name:<34}{res[0]:8.2f}{res[1]:8.2f}{res[0] / res[1]:8.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="float32 only, fewer repeats")
    args = ap.parse_args(argv)
    repeat = 3 if args.quick else args.repeat
    bench_dispatch(repeat)
    bench_models(repeat, args.quick)


if __name__ == "__main__":
    main()
