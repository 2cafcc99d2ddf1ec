"""Benchmark: do two Python threads run ampy kernels in parallel? (not a test)

Each library is limited to one thread of its own (ampy.set_num_threads(1),
torch.set_num_threads(1)), so any parallelism comes from Python threads,
which is only possible when the kernel releases the GIL. For each workload:

    T1  one thread runs the work (REPS calls, about 80 ms)
    T2  two threads each run the same work at once (twice the work)

and the figure is the throughput speed-up 2*T1/T2: 2.0 = perfect parallelism
on two free cores, 1.0 = serialized (GIL held, or no free core). Each T is the
median of --runs timed runs after a warm-up; T1 and T2 runs alternate, so
load from other processes hits both alike. torch on the same workloads is the
peer.

Usage: python benchmarks/bench_threads.py [--runs 7] [--size 4M] [--gemm 384]
"""
import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampy  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20}.get(s[-1], 1)
    return int(s[:-1] if s[-1] in "KM" else s) * mult


def workloads(lib, n, g):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    m = rng.standard_normal((g, g)).astype(np.float32)
    grads_np = [rng.standard_normal(n // 4).astype(np.float32) for _ in range(4)]
    if lib == "ampy":
        T = ampy.tensor
        x, y, mm = T(a), T(b), T(m)
        xh, mh = x.half(), mm.half()
        grads = [T(v) for v in grads_np]
        found, inv = ampy.zeros((), dtype=ampy.float32), ampy.ones((), dtype=ampy.float32)
        unscale = (lambda: ampy.amp.functional.non_finite_check_and_unscale_(grads, found, inv))
    else:
        T = torch.from_numpy
        x, y, mm = T(a), T(b), T(m)
        xh, mh = x.half(), mm.half()
        grads = [T(v) for v in grads_np]
        found, inv = torch.zeros(1), torch.ones(1)
        unscale = (lambda: torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv))
    return {
        f"cast f32->f16 ({n >> 20}M)": lambda: x.half(),
        f"add f32 ({n >> 20}M)": lambda: x + y,
        f"mul f16 ({n >> 20}M)": lambda: xh * xh,
        f"sum f32 ({n >> 20}M)": lambda: x.sum(),
        f"gemm f32 {g}^3": lambda: mm @ mm,
        f"gemm f16 {g}^3": lambda: mh @ mh,
        f"finite+unscale ({n >> 20}M)": unscale,
    }


def _reps_for(fn, target=0.08):
    fn()
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return max(1, int(target / max(min(ts), 1e-6)))


class _Workers:
    """Two persistent worker threads (so per-thread library start-up costs,
    e.g. an OpenMP team or a BLAS buffer created on a thread's first call, are
    paid once, in the warm-up, not in every timed run)."""

    def __init__(self, fn, reps):
        self.fn, self.reps = fn, reps
        self.go = [threading.Semaphore(0), threading.Semaphore(0)]
        self.done = threading.Semaphore(0)
        self.stop = False
        self.threads = [threading.Thread(target=self._loop, args=(k,), daemon=True)
                        for k in range(2)]
        for t in self.threads:
            t.start()

    def _loop(self, k):
        while True:
            self.go[k].acquire()
            if self.stop:
                return
            for _ in range(self.reps):
                self.fn()
            self.done.release()

    def run(self, nthreads):
        t0 = time.perf_counter()
        for k in range(nthreads):
            self.go[k].release()
        for _ in range(nthreads):
            self.done.acquire()
        return time.perf_counter() - t0

    def close(self):
        self.stop = True
        for g in self.go:
            g.release()
        for t in self.threads:
            t.join()


def measure(fn, runs):
    reps = _reps_for(fn)
    w = _Workers(fn, reps)
    try:
        w.run(2)                      # warm both threads
        t1, t2 = [], []
        for _ in range(runs):
            t1.append(w.run(1))
            t2.append(w.run(2))
    finally:
        w.close()
    m1, m2 = statistics.median(t1), statistics.median(t2)
    return m1 / reps, m2 / reps, 2 * m1 / m2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--size", default="4M")
    ap.add_argument("--gemm", type=int, default=384)
    args = ap.parse_args(argv)
    n = _size(args.size)
    ampy.set_num_threads(1)
    libs = ["ampy"] + (["torch"] if torch is not None else [])
    if torch is not None:
        torch.set_num_threads(1)
    print(f"bench_threads: {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}, median of {args.runs} runs; speed-up = 2*T1/T2 "
          f"(2.0 parallel, 1.0 serialized)")
    print("T1 / T2 columns: milliseconds per call (T2: per call of each thread)")
    print(f"{'workload':<26}" + "".join(f"{lib + ' T1 ms':>13}{lib + ' T2 ms':>13}"
                                        f"{lib + ' x':>9}" for lib in libs))
    per_lib = {lib: workloads(lib, n, args.gemm) for lib in libs}
    ratios = {lib: [] for lib in libs}
    for name in per_lib["ampy"]:
        row = f"{name:<26}"
        for lib in libs:
            m1, m2, sp = measure(per_lib[lib][name], args.runs)
            ratios[lib].append(sp)
            row += f"{m1 * 1e3:>13.2f}{m2 * 1e3:>13.2f}{sp:>9.2f}"
        print(row, flush=True)
    print("median speed-up: " + ", ".join(f"{lib} {statistics.median(r):.2f}x"
                                           for lib, r in ratios.items()))


if __name__ == "__main__":
    main()
