"""Benchmark of the four AMP casts (not a test).

f32->f16, f32->bf16, f16->f32, bf16->f32 at 16M elements (fits this
machine's 300 MB L3) and 128M elements (DRAM), 1 and 2 threads, two modes:
  reused    the output exists: ampy _C.copy_(out, x), np.copyto(out, x),
            torch out.copy_(x)
  alloc     a fresh output each call: ampy x.half() ..., NumPy x.astype(),
            torch x.half() / .bfloat16() / .float()
The ceiling is measured on each cast's own working set: a float32 copy
moving the same bytes in + out (6 B/element for every cast here) through
ampy's C copy or np.copyto, whichever is faster (for the narrowing casts,
which read twice what they write, also a triad c = a + b), timed in alternation with
the reused-output cast ("% ceil": the median of the per-round ratios,
_harness.ceiling_percent). GB/s count bytes read + written. Each figure is
the median of >= 10 timed runs after warm-up.

Usage: python benchmarks/bench_cast.py [--sizes 16M,128M] [--reps 10] [--threads 1,2]
"""
import argparse
import datetime
import platform
import sys

import ml_dtypes
import numpy as np
import torch

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(
    __import__("os").path.abspath(__file__))))
import ampy  # noqa: E402
from ampy import _C  # noqa: E402
from _harness import ceiling_percent, median_time  # noqa: E402


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


CASTS = [  # name, source numpy dtype, ampy dst, torch dst, method name
    ("f32->f16", np.float32, ampy.float16, torch.float16, "half"),
    ("f32->bf16", np.float32, ampy.bfloat16, torch.bfloat16, "bfloat16"),
    ("f16->f32", np.float16, ampy.float32, torch.float32, "float"),
    ("bf16->f32", ml_dtypes.bfloat16, ampy.float32, torch.float32, "float"),
]


def make_source(n, np_dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    return x if np_dtype is np.float32 else x.astype(np_dtype)


def to_torch(a):
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def bench_size(n, reps, threads, rows):
    gb = lambda nbytes, t: nbytes / t / 1e9  # noqa: E731
    # numpy is single-threaded: measure it once per size
    np_cache = {}
    for nt in threads:
        ampy.set_num_threads(nt)
        torch.set_num_threads(nt)
        for name, src_dt, a_dt, t_dt, meth in CASTS:
            x = make_source(n, src_dt)
            ax, tx = ampy.from_numpy(x), to_torch(x)
            out_np = np.empty(n, a_dt.to_numpy())
            a_out = ampy.from_numpy(out_np)
            t_out = torch.empty(n, dtype=t_dt)
            nbytes = n * (x.itemsize + out_np.itemsize)
            r = {}
            r["ampy"] = gb(nbytes, median_time(lambda: _C.copy_(a_out, ax), reps))
            r["ampy_alloc"] = gb(nbytes, median_time(lambda: getattr(ax, meth)(), reps))
            r["torch"] = gb(nbytes, median_time(lambda: t_out.copy_(tx), reps))
            r["torch_alloc"] = gb(nbytes, median_time(lambda: getattr(tx, meth)(), reps))
            if name not in np_cache:
                npr = reps
                np_cache[name] = (
                    gb(nbytes, median_time(lambda: np.copyto(out_np, x, casting="unsafe"), npr,
                                           warmup=1)),
                    gb(nbytes, median_time(lambda: x.astype(out_np.dtype), npr, warmup=1)))
            r["np_copyto"], r["np_astype"] = np_cache[name]
            r["ceil"] = ceiling_percent(lambda: _C.copy_(a_out, ax), nbytes, nt,
                                        2 if x.itemsize > out_np.itemsize else 1)
            rows.append((n, nt, name, r))
            del x, ax, tx, out_np, a_out, t_out


def fmt_n(n):
    return f"{n >> 20}M"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="16M,128M")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--threads", default="1,2")
    args = p.parse_args()
    sizes = [int(s[:-1]) << 20 if s.endswith("M") else int(s) for s in args.sizes.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    print(f"bench_cast  {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"CPU: {cpu_model()}  ({ampy._C.cpu_info()['level']} path), "
          f"numpy {np.__version__}, torch {torch.__version__}, ampy {ampy.__version__}")
    print("GB/s = (bytes read + written) / median time; % ceil = the reused-output cast against "
          "a copy of the same bytes, timed in alternation")
    rows = []
    for n in sizes:
        bench_size(n, max(args.reps, 10), threads, rows)
    hdr = (f"{'size':>5} {'thr':>3} {'cast':<10}| {'ampy':>6} {'np.cpto':>7} {'np.astp':>7} "
           f"{'torch':>6} | {'vs torch':>8} {'vs astype':>9} {'% ceil':>7} | "
           f"{'ampy.alc':>8} {'torch.alc':>9} {'alc ratio':>9}")
    print(hdr)
    print("-" * len(hdr))
    for n, nt, name, r in rows:
        print(f"{fmt_n(n):>5} {nt:>3} {name:<10}| {r['ampy']:6.1f} {r['np_copyto']:7.2f} "
              f"{r['np_astype']:7.2f} {r['torch']:6.1f} | "
              f"{r['ampy'] / r['torch']:7.2f}x {r['ampy'] / r['np_astype']:8.1f}x "
              f"{r['ceil']:6.0f}% | {r['ampy_alloc']:8.1f} {r['torch_alloc']:9.1f} "
              f"{r['ampy_alloc'] / r['torch_alloc']:8.2f}x")
    print("columns: reused output (ampy _C.copy_, np.copyto, torch copy_), NumPy astype "
          "(allocating); ratios ampy/peer, ampy's % of the copy ceiling; alloc = "
          "x.half()/.bfloat16()/.float()")


if __name__ == "__main__":
    main()
