"""GEMM benchmark: ampy.matmul (float32 / float16 / bfloat16 in, fp32 accumulation)
against NumPy float32 (OpenBLAS) and torch (CPU) of the same dtype, 1 and 2 threads,
with the machine's compute ceilings measured in the same run.

    python benchmarks/bench_gemm.py [--quick]

Ceilings: a small C probe (compiled with gcc on the fly) times independent
`vfmadd231ps zmm` chains (fp32 FMA peak, 2 FLOP/lane), where the CPU has AVX512-BF16
independent `vdpbf16ps zmm` chains (a k pair per lane: 4 FLOP/lane), and where it has
AMX TDPBF16PS on registers only (16x16x32 multiply-adds per instruction). Each ampy
column prints the GEMM path it took (gemm_impl_name: amx / amx-f16, avx512bf16,
avx512, avx2, portable) and "%pk", ampy's rate over the ceiling of that path: AMX for
amx and amx-f16, vdpbf16ps for avx512bf16, fp32 FMA otherwise.
Shapes are M x N x K (C is M x N); 8192x3072x768 is a transformer MLP up-projection.
Interleaved timing: one worker process per thread count holds every library; each
round calls ampy, NumPy and torch once each (the order rotates between rounds), so all
of them see the same machine load. Reported: the median over rounds of each library's
GFLOP/s and, for each ratio, the median over rounds of the per-round ratio (a ratio of
two calls made back to back, the fairest comparison on a shared, noisy machine).
GFLOP = 2*M*N*K / 1e9. Idle pool threads are told to sleep rather than spin
after a short spin (GOMP_SPINCOUNT=20000, OPENBLAS_THREAD_TIMEOUT=16: ~2^16 cycles) so
one library's idle threads do not slow the next call. --clock cpu times 1-thread rounds with the thread's CPU time
(time.thread_time: every library computes on the calling thread then), which removes
the time the process spends descheduled; 2-thread rounds always use wall time.
"""
import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ampy  # noqa: E402
from ampy import _C  # noqa: E402


PROBE_C = r"""
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
#define IT 20000000L
#define ACC(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
static void *fma_run(void *out){
  __m512 m=_mm512_set1_ps(0.9999999f), d=_mm512_set1_ps(1e-7f);
#define DECL(i) __m512 a##i=_mm512_set1_ps((float)i);
  ACC(DECL)
  for(long it=0;it<IT;it++){
#define STEP(i) a##i=_mm512_fmadd_ps(a##i,m,d);
    ACC(STEP)
    __asm__ volatile("" ::: "memory");
  }
  __m512 s=_mm512_setzero_ps();
#define SUM(i) s=_mm512_add_ps(s,a##i);
  ACC(SUM)
  *(float*)out=_mm512_reduce_add_ps(s); return 0;
}
#define AIT 2000000L
static void *amx_run(void *out){
  struct { uint8_t p,s,r[14]; uint16_t c[16]; uint8_t rows[16]; } cfg;
  memset(&cfg,0,64); cfg.p=1; for(int t=0;t<8;t++){cfg.c[t]=64;cfg.rows[t]=16;}
  __asm__ volatile("ldtilecfg %0"::"m"(cfg));
  static char z[1024] __attribute__((aligned(64)));
  _tile_loadd(4,z,64);_tile_loadd(5,z,64);_tile_loadd(6,z,64);_tile_loadd(7,z,64);
  _tile_zero(0);_tile_zero(1);_tile_zero(2);_tile_zero(3);
  for(long it=0;it<AIT;it++){_tile_dpbf16ps(0,4,6);_tile_dpbf16ps(1,4,7);_tile_dpbf16ps(2,5,6);_tile_dpbf16ps(3,5,7);}
  _tile_release(); *(float*)out=0; return 0;
}
__attribute__((target("avx512f,avx512bf16")))
static void *dp_run(void *out){
  __m512bh x=(__m512bh)_mm512_set1_epi16(0x3f80), y=(__m512bh)_mm512_set1_epi16(0x3380);
  ACC(DECL)
  for(long it=0;it<IT;it++){
#define DSTEP(i) a##i=_mm512_dpbf16_ps(a##i,x,y);
    ACC(DSTEP)
    __asm__ volatile("" ::: "memory");
  }
  __m512 s=_mm512_setzero_ps();
  ACC(SUM)
  *(float*)out=_mm512_reduce_add_ps(s); return 0;
}
static int cpu_clock;
static double cpu_now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static double run(void*(*f)(void*), int nt, double flop_per_thread){
  pthread_t th[64]; float o[64]; double t=now(), c=cpu_now();
  for(int i=1;i<nt;i++) pthread_create(&th[i],0,f,&o[i]);
  f(&o[0]); for(int i=1;i<nt;i++) pthread_join(th[i],0);
  double dt = (cpu_clock && nt==1) ? cpu_now()-c : now()-t;
  return flop_per_thread*nt/dt/1e9;
}
int main(int argc,char**argv){
  int nt=atoi(argv[1]); cpu_clock = argc>2 && argv[2][0]=='c';
  double fma=run(fma_run,nt,16.0*16*2*IT);
  double amx=0, dp=0;
  if(__builtin_cpu_supports("avx512bf16"))
    dp=run(dp_run,nt,16.0*16*4*IT);
  if(__builtin_cpu_supports("amx-bf16") && syscall(SYS_arch_prctl,0x1023,18)==0)
    amx=run(amx_run,nt,4.0*16*16*32*2*AIT);
  printf("%f %f %f\n",fma,amx,dp); return 0;
}
"""


def measure_peaks(threads, clock="wall"):
    """{'fma': GFLOP/s, 'amx': GFLOP/s or 0, 'dpbf16': GFLOP/s or 0} per thread count, best of 3 probe runs (a
    ceiling: noise only lowers it); None when there is no gcc / no AVX-512. clock="cpu"
    times the 1-thread probe with the thread's CPU time, like the GEMM rounds."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        return None
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "peak.c"), os.path.join(d, "peak")
        with open(src, "w") as f:
            f.write(PROBE_C)
        if subprocess.run([cc, "-O2", "-mavx512f", "-mfma", "-mamx-tile", "-mamx-bf16", src,
                           "-o", exe, "-lpthread"],
                          capture_output=True).returncode != 0:
            return None
        out = {}
        for t in threads:
            runs = [list(map(float, subprocess.run([exe, str(t), clock], capture_output=True,
                                                   text=True, check=True).stdout.split()))
                    for _ in range(3)]
            out[t] = {"fma": max(r[0] for r in runs), "amx": max(r[1] for r in runs),
                      "dpbf16": max(r[2] for r in runs)}
        return out


DTYPES = ["f32", "f16", "bf16"]


def path_ceiling(path, peak):
    """The compute ceiling (GFLOP/s) of a GEMM path, from measure_peaks' dict."""
    if not peak:
        return 0
    if path.startswith("amx"):
        return peak["amx"]
    if path == "avx512bf16":
        return peak["dpbf16"]
    return peak["fma"]


def make_calls(m, n, k, libs):
    """{name: zero-argument callable} for one shape: numpy f32, ampy_<dt>, torch_<dt>."""
    rng = np.random.default_rng(0)
    a32 = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b32 = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    calls = {"numpy_f32": lambda: a32 @ b32}
    from ampy import _gemm
    for name in DTYPES:
        dt = {"f32": ampy.float32, "f16": ampy.float16, "bf16": ampy.bfloat16}[name]
        a, b = ampy.from_numpy(a32).to(dt), ampy.from_numpy(b32).to(dt)
        calls["ampy_" + name] = lambda a=a, b=b: _gemm.matmul(a, b)
    if "torch" in libs:
        import torch
        for name in DTYPES:
            dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]
            ta, tb = torch.from_numpy(a32).to(dt), torch.from_numpy(b32).to(dt)
            calls["torch_" + name] = lambda ta=ta, tb=tb: ta @ tb
    return calls


def worker(libs, shapes, threads, clock, rounds, min_time):
    """Runs in a child process with the thread-count environment set. For each shape,
    returns {call name: [seconds per round]} with every round's calls interleaved."""
    timer = time.thread_time if (clock == "cpu" and threads == 1) else time.perf_counter
    out = {}
    for (m, n, k) in shapes:
        calls = make_calls(m, n, k, libs)
        names = list(calls)
        for f in calls.values():  # warm-up: workspaces, page faults, thread pools
            f()
        times = {nm: [] for nm in names}
        t_start = time.perf_counter()
        r = 0
        while r < rounds or (time.perf_counter() - t_start < min_time and r < 4 * rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for nm in order:
                t = timer()
                calls[nm]()
                times[nm].append(timer() - t)
            r += 1
        out[f"{m}x{n}x{k}"] = times
    return out


LEVEL = None  # --level: the CPU level main() pins, passed on to the workers


def run_worker(libs, threads, shapes, clock, rounds, min_time):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), AMPY_NUM_THREADS=str(threads),
               GOMP_SPINCOUNT="20000", OPENBLAS_THREAD_TIMEOUT="16")
    spec = ";".join(f"{m},{n},{k}" for m, n, k in shapes)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", ",".join(libs),
                        "--threads", str(threads), "--shapes", spec, "--clock", clock,
                        "--rounds", str(rounds), "--min-time", str(min_time),
                        "--dtypes", ",".join(DTYPES)] + (["--level", LEVEL] if LEVEL else []),
                       env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"warning: worker failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return {}
    return json.loads(r.stdout)


def summarize(times, flop, num, den):
    """(median GFLOP/s of `num`, median over rounds of time(den) / time(num))."""
    if num not in times:
        return float("nan"), float("nan")
    g = flop / statistics.median(times[num]) / 1e9
    if den not in times:
        return g, float("nan")
    return g, statistics.median(d / a for a, d in zip(times[num], times[den]))


def main():
    global DTYPES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer shapes (a smoke run)")
    ap.add_argument("--rounds", type=int, default=7,
                    help="interleaved rounds per shape, at least (default 7)")
    ap.add_argument("--min-time", type=float, default=3.0,
                    help="keep adding rounds (up to 4x --rounds) until a shape has run "
                         "this many seconds (default 3)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: time 1-thread rounds with thread CPU time (default wall)")
    ap.add_argument("--threads-list", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--shapes", help="M,N,K;M,N,K... (default: the standard set)")
    ap.add_argument("--dtypes", default=",".join(DTYPES),
                    help="input dtypes to time, of f32,f16,bf16 (default all)")
    ap.add_argument("--level", default=None,
                    help="pin ampy's CPU level (portable, avx2, avx512, avx512bf16, amx); "
                         "with ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 torch leaves AMX too")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    global LEVEL
    LEVEL = args.level
    if LEVEL:
        _C._set_cpu_level(LEVEL)
    DTYPES = [d for d in args.dtypes.split(",") if d]
    if not DTYPES or any(d not in ("f32", "f16", "bf16") for d in DTYPES):
        ap.error(f"--dtypes: expected a comma-separated subset of f32,f16,bf16, got "
                 f"{args.dtypes!r}")
    if args.worker:
        libs = args.worker.split(",")
        if "torch" in libs:
            import torch
            torch.set_num_threads(args.threads)
        shapes = [tuple(map(int, x.split(","))) for x in args.shapes.split(";")]
        print(json.dumps(worker(libs, shapes, args.threads, args.clock, args.rounds,
                                args.min_time)))
        return
    threads = [int(t) for t in args.threads_list.split(",")]
    if args.shapes:
        shapes = [tuple(map(int, x.split(","))) for x in args.shapes.split(";")]
    else:
        squares = [256, 512, 1024] if args.quick else [256, 512, 1024, 1536, 2048]
        shapes = [(s, s, s) for s in squares] + ([] if args.quick else
                                                  [(4096, 1024, 1024), (8192, 3072, 768)])
    libs = ["numpy", "ampy"] + (["torch"] if importlib.util.find_spec("torch") else [])
    paths = {name: _C.gemm_impl_name({"f32": ampy.float32, "f16": ampy.float16,
                                       "bf16": ampy.bfloat16}[name]) for name in DTYPES}
    print("ampy gemm implementations: " + " ".join(f"{k}={v}" for k, v in paths.items())
          + f" (CPU level {_C.cpu_info()['level']}; ONEDNN_MAX_CPU_ISA="
          + os.environ.get("ONEDNN_MAX_CPU_ISA", "(unset)") + ")")
    print(f"clock: {args.clock} (1 thread), wall (2 threads); >= {args.rounds} interleaved "
          "rounds per shape")
    print("\nGFLOP/s = median over rounds. r_np = ampy / NumPy float32 and r_t = ampy / "
          "torch same dtype, each the median of per-round ratios; path = ampy's GEMM path; "
          "%pk = % of that path's ceiling (AMX for amx*, vdpbf16ps for avx512bf16, fp32 FMA "
          "otherwise), probed before and after each thread count (best kept)")
    hdr = f"{'M x N x K':>16} {'thr':>3} {'numpy32':>8}"
    for name in DTYPES:
        hdr += (f" | {'ampy_' + name:>10} {'path':>10} {'%pk':>5} {'r_np':>5} {'torch':>7} "
                f"{'r_t':>5}")
    print(hdr)
    for t in threads:
        p0 = measure_peaks([t], args.clock)
        res = run_worker(libs, t, shapes, args.clock, args.rounds, args.min_time)
        p1 = measure_peaks([t], args.clock)
        peak = None
        if p0 and p1:
            peak = {kk: max(p0[t][kk], p1[t][kk]) for kk in ("fma", "amx", "dpbf16")}
        for (m, n, k) in shapes:
            key = f"{m}x{n}x{k}"
            times = res.get(key, {})
            flop = 2.0 * m * n * k
            npv, _ = summarize(times, flop, "numpy_f32", "numpy_f32")
            line = f"{key:>16} {t:>3} {npv:8.1f}"
            for name in DTYPES:
                v, r_np = summarize(times, flop, "ampy_" + name, "numpy_f32")
                tv, _ = summarize(times, flop, "torch_" + name, "torch_" + name)
                _, r_t = summarize(times, flop, "ampy_" + name, "torch_" + name)
                ceil = path_ceiling(paths[name], peak)
                pk = f"{100 * v / ceil:5.1f}" if ceil else "  n/a"
                line += (f" | {v:10.1f} {paths[name]:>10} {pk} {r_np:5.2f} {tv:7.1f} "
                         f"{r_t:5.2f}")
            print(line, flush=True)
        if peak:
            print(f"{'':>16} ceiling, {t} thread(s): fp32 FMA {peak['fma']:.1f} GFLOP/s, "
                  f"vdpbf16ps {peak['dpbf16']:.1f} GFLOP/s, AMX bf16 {peak['amx']:.1f} "
                  "GFLOP/s (0: not on this CPU)", flush=True)


if __name__ == "__main__":
    main()
