"""clip_grad_norm_ benchmark: ampy's fused multi-tensor norm + scale against
torch.nn.utils.clip_grad_norm_ (its foreach path on the CPU), on 16M gradient
elements in 64 uneven tensors, float32 and bfloat16 grads, 1 and 2 threads.

    python benchmarks/bench_clip.py [--quick]

Reported: the median time per call, GB/s of the bytes clipping must move
(every element read by the norm pass, then read and written by the scale
pass: 3 x the gradient bytes), and torch's time over ampy's. The clip
coefficient is kept below 1 (max_norm small) so both libraries really
scale; the gradients shrink every call, which changes no timing.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ampy  # noqa: E402
import torch  # noqa: E402

from _harness import median_time  # noqa: E402


def sizes(total, n, rng):
    w = rng.uniform(0.2, 1.8, n)
    s = np.maximum((w / w.sum() * total).astype(np.int64), 1)
    s[-1] += total - s.sum()
    return [int(x) for x in s]


def make(total, n, dtype):
    rng = np.random.default_rng(0)
    tp, ap = [], []
    for s in sizes(total, n, rng):
        g = rng.normal(size=s).astype(np.float32)
        t = torch.zeros(s, dtype=getattr(torch, dtype), requires_grad=True)
        t.grad = torch.from_numpy(g).to(t.dtype)
        a = ampy.zeros(s, dtype=getattr(ampy, dtype), requires_grad=True)
        a.grad = ampy.tensor(g).to(a.dtype)
        tp.append(t)
        ap.append(a)
    return tp, ap


def main():
    ap_ = argparse.ArgumentParser()
    ap_.add_argument("--quick", action="store_true")
    args = ap_.parse_args()
    total = (1 << 22) if args.quick else (1 << 24)
    reps = 5 if args.quick else 15
    print(f"clip_grad_norm_, {total / 1e6:.1f}M elements in 64 tensors; machine-shared timings")
    print(f"{'dtype':9s} {'threads':>7s} {'ampy ms':>9s} {'GB/s':>7s} {'torch ms':>9s} "
          f"{'GB/s':>7s} {'torch/ampy':>10s}")
    for dtype in ("float32", "bfloat16"):
        tp, ap = make(total, 64, dtype)
        nbytes = 3 * total * (4 if dtype == "float32" else 2)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            ampy.set_num_threads(threads)
            ta = median_time(lambda: ampy.nn.utils.clip_grad_norm_(ap, 1e-3), reps=reps)
            tt = median_time(lambda: torch.nn.utils.clip_grad_norm_(tp, 1e-3), reps=reps)
            print(f"{dtype:9s} {threads:7d} {ta * 1e3:9.2f} {nbytes / ta / 1e9:7.1f} "
                  f"{tt * 1e3:9.2f} {nbytes / tt / 1e9:7.1f} {tt / ta:10.2f}")


if __name__ == "__main__":
    main()
