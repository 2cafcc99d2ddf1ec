"""float16 GEMMs of the transformer-block step (bench_gemm_shapes.py's cases), three
ways interleaved: ampy's AMX-BF16 split kernel ("amx", gemm_amx_f16.c), ampy's AVX-512
FMA kernel ("avx512") and torch, 1 thread.

    python benchmarks/bench_gemm_f16amx.py [--rounds 11] [--only NAME] [--cpu-time]

Each round runs the three back to back in a rotating order; reported: the median ms
of each and the medians of the per-round ratios amx / torch and amx / avx512.
--cpu-time measures time.thread_time() (CPU time of the thread) instead of wall time.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ampy  # noqa: E402
from ampy import _C  # noqa: E402
from bench_gemm_shapes import cases  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--only", default="")
    ap.add_argument("--cpu-time", action="store_true")
    args = ap.parse_args()
    if not _C.gemm_impl_available("amx"):
        print("AMX is not usable on this CPU/OS; nothing to compare")
        return
    clock = time.thread_time if args.cpu_time else time.perf_counter
    ampy.set_num_threads(1)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    store = []

    def mk_t(shape):
        a = rng.standard_normal(shape).astype(np.float32)
        store.append(a)
        return torch.from_numpy(a).to(torch.float16)
    tc = cases(torch, torch.float16, mk_t)
    arrays = iter(list(store))
    ac = cases(ampy, ampy.float16, lambda shape: ampy.from_numpy(next(arrays)).to(ampy.float16))

    def with_impl(name, f):
        def g():
            _C.gemm_set_impl(name)
            try:
                f()
            finally:
                _C.gemm_set_impl("auto")
        return g
    print(f"{'gemm (float16)':26s} {'amx ms':>8s} {'avx512':>8s} {'torch':>8s} "
          f"{'amx/torch':>9s} {'amx/avx512':>10s} {'avx512/torch':>12s}")
    tot = [0.0, 0.0, 0.0]
    for (name, fa), (_, ft) in zip(ac, tc):
        if args.only and args.only not in name:
            continue
        fs = [with_impl("amx", fa), with_impl("avx512", fa), ft]
        for f in fs:
            f()
        times = [[], [], []]
        for r in range(args.rounds):
            for j in range(3):
                i = (r + j) % 3
                t0 = clock()
                fs[i]()
                times[i].append((clock() - t0) * 1e3)
        med = [statistics.median(t) for t in times]
        rat = lambda x, y: statistics.median([p / q for p, q in zip(times[x], times[y])])  # noqa
        for i in range(3):
            tot[i] += med[i]
        print(f"{name:26s} {med[0]:8.3f} {med[1]:8.3f} {med[2]:8.3f} {rat(0, 2):9.2f} "
              f"{rat(0, 1):10.2f} {rat(1, 2):12.2f}", flush=True)
    print(f"{'total':26s} {tot[0]:8.2f} {tot[1]:8.2f} {tot[2]:8.2f} {tot[0] / tot[2]:9.2f} "
          f"{tot[0] / tot[1]:10.2f} {tot[1] / tot[2]:12.2f}")


if __name__ == "__main__":
    main()
