"""The tensor ops of GPT-style code, ampy vs torch at GPT-like sizes:

- topk(logits, 200) over a 50257-word vocabulary (top-k sampling), 8 rows;
- sort(logits, descending=True) of the same rows (top-p sampling);
- gather of the target logit per row (8 rows, one index each) and of a
  [4096, 1024] tensor along dim 1 (64 indices per row);
- masked_fill of a causal [8, 12, 256, 256] score tensor with -inf;
- tril of a [1024, 1024] mask; scatter_add of [4096, 64] into [4096, 1024].

    python benchmarks/bench_tensor_ops.py [--repeat 15] [--threads 1,2] [--dtype float32] [--clock wall|cpu]

ampy and torch calls alternate and are timed by wall clock (the ops may use
the thread pool), or with --clock cpu by the calling thread's CPU time (for
1-thread runs on a loaded machine); prints per op the medians in ms and the median per-pair
ratio ampy / torch (< 1: ampy is faster). Not a test: nothing here asserts.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ampy  # noqa: E402
import torch  # noqa: E402

V = 50257


def _pair(a, dt):
    # torch's tensor is a clone in torch's own memory: a numpy buffer is
    # backed by huge pages (numpy madvises them), which neither library's
    # allocator asks for, and would time memory placement, not the op
    return (ampy.tensor(a).to(getattr(ampy, dt)),
            torch.from_numpy(a.copy()).to(getattr(torch, dt)).clone())


def cases(dt, rng):
    logits = rng.standard_normal((8, V)).astype(np.float32)
    la, lt = _pair(logits, dt)
    big = rng.standard_normal((4096, 1024)).astype(np.float32)
    ba, bt = _pair(big, dt)
    gi = rng.integers(0, 1024, size=(4096, 64))
    gia, git = ampy.tensor(gi), torch.tensor(gi)
    src = rng.standard_normal((4096, 64)).astype(np.float32)
    sa, st = _pair(src, dt)
    tgt = rng.integers(0, V, size=(8, 1))
    ta_, tt_ = ampy.tensor(tgt), torch.tensor(tgt)
    att = rng.standard_normal((8, 12, 256, 256)).astype(np.float32)
    aa, at = _pair(att, dt)
    mask = np.triu(np.ones((256, 256), bool), 1)
    ma, mt = ampy.tensor(mask), torch.tensor(mask)
    sq = rng.standard_normal((1024, 1024)).astype(np.float32)
    qa, qt = _pair(sq, dt)
    return [
        ("topk 8x50257 k=200", lambda: la.topk(200), lambda: lt.topk(200)),
        ("sort 8x50257 desc", lambda: la.sort(descending=True),
         lambda: lt.sort(descending=True)),
        ("gather 8x50257 -> 8x1", lambda: la.gather(1, ta_), lambda: lt.gather(1, tt_)),
        ("gather 4096x1024 -> x64", lambda: ba.gather(1, gia), lambda: bt.gather(1, git)),
        ("scatter_add x64 -> 4096x1024", lambda: ba.scatter_add(1, gia, sa),
         lambda: bt.scatter_add(1, git, st)),
        ("masked_fill 8x12x256x256", lambda: aa.masked_fill(ma, float("-inf")),
         lambda: at.masked_fill(mt, float("-inf"))),
        ("tril 1024x1024", lambda: qa.tril(), lambda: qt.tril()),
    ]


def bench(name, fa, ft, repeat, clock=time.perf_counter):
    fa(), ft()
    ta, tt, r = [], [], []
    for _ in range(repeat):
        t0 = clock()
        fa()
        t1 = clock()
        ft()
        t2 = clock()
        ta.append(t1 - t0), tt.append(t2 - t1), r.append((t1 - t0) / max(t2 - t1, 1e-9))
    print(f"| {name:<30} | {statistics.median(ta) * 1e3:8.3f} | "
          f"{statistics.median(tt) * 1e3:8.3f} | {statistics.median(r):5.2f} |", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--dtype", default="float32,bfloat16")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    print(f"cpu: {ampy._C.cpu_info()}")
    for dt in args.dtype.split(","):
        for n in (int(t) for t in args.threads.split(",")):
            ampy.set_num_threads(n)
            torch.set_num_threads(n)
            print(f"\n{dt}, {n} thread(s)\n| op | ampy ms | torch ms | ampy/torch |\n"
                  f"|---|---:|---:|---:|")
            for name, fa, ft in cases(dt, rng):
                bench(name, fa, ft, args.repeat,
                      time.thread_time if args.clock == "cpu" else time.perf_counter)


if __name__ == "__main__":
    main()
