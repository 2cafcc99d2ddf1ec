"""GEMM benchmark: ampy.matmul (float32 / float16 / bfloat16 in, fp32 accumulation)
against NumPy float32 (OpenBLAS) and torch (CPU) of the same dtype, 1 and 2 threads,
with the machine's compute ceilings measured in the same run.

    python benchmarks/bench_gemm.py [--quick]

Ceilings: a small C probe (compiled with gcc on the fly) times independent
`vfmadd231ps zmm` chains (fp32 FMA peak, 2 FLOP/lane) and, where the CPU has AMX,
TDPBF16PS on registers only (16x16x32 multiply-adds per instruction); "% peak" is
ampy's rate over the FMA peak for float32/float16 and over the AMX peak for bfloat16.
Shapes are M x N x K (C is M x N); 8192x3072x768 is a transformer MLP up-projection.
Times are wall-clock medians after a warm-up; GFLOP = 2*M*N*K / 1e9. Each library
runs in its own process per thread count (idle spinning OpenMP/OpenBLAS threads
would otherwise steal cores from the next library), the processes are repeated
--rounds times interleaved, and the best of the per-round medians is shown (on a
shared, noisy machine this is the least disturbed measurement of each).
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
static double run(void*(*f)(void*), int nt, double flop_per_thread){
  pthread_t th[64]; float o[64]; double t=now();
  for(int i=1;i<nt;i++) pthread_create(&th[i],0,f,&o[i]);
  f(&o[0]); for(int i=1;i<nt;i++) pthread_join(th[i],0);
  return flop_per_thread*nt/(now()-t)/1e9;
}
int main(int argc,char**argv){
  int nt=atoi(argv[1]);
  double fma=run(fma_run,nt,16.0*16*2*IT);
  double amx=0;
  if(__builtin_cpu_supports("amx-bf16") && syscall(SYS_arch_prctl,0x1023,18)==0)
    amx=run(amx_run,nt,4.0*16*16*32*2*AIT);
  printf("%f %f\n",fma,amx); return 0;
}
"""


def measure_peaks(threads):
    """{'fma': GFLOP/s, 'amx': GFLOP/s or 0} per thread count, median of 3 probe runs;
    None when there is no gcc / no AVX-512."""
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
            runs = [list(map(float, subprocess.run([exe, str(t)], capture_output=True,
                                                   text=True, check=True).stdout.split()))
                    for _ in range(3)]
            out[t] = {"fma": statistics.median(r[0] for r in runs),
                      "amx": statistics.median(r[1] for r in runs)}
        return out


def time_median(fn, min_reps=5, min_time=0.6):
    fn()  # warm-up (workspace, page faults, thread pool)
    times = []
    t_start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - t_start < min_time and
                                    len(times) < 50):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


DTYPES = ["f32", "f16", "bf16"]


def worker(lib, shapes):
    """Runs in a child process (one per library and thread count, so idle spinning
    threads of one library never compete with another). Returns {(shape, dtype): GFLOP/s}."""
    out = {}
    for (m, n, k) in shapes:
        flop = 2.0 * m * n * k
        rng = np.random.default_rng(0)
        a32 = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b32 = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        if lib == "numpy":
            out[f"{m}x{n}x{k}/f32"] = flop / time_median(lambda: a32 @ b32) / 1e9
            continue
        for name in DTYPES:
            if lib == "ampy":
                import ampy
                from ampy import _gemm
                dt = {"f32": ampy.float32, "f16": ampy.float16, "bf16": ampy.bfloat16}[name]
                a, b = ampy.from_numpy(a32).to(dt), ampy.from_numpy(b32).to(dt)
                fn = lambda: _gemm.matmul(a, b)  # noqa: E731
            else:
                import torch
                dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]
                ta, tb = torch.from_numpy(a32).to(dt), torch.from_numpy(b32).to(dt)
                fn = lambda: ta @ tb  # noqa: E731
            out[f"{m}x{n}x{k}/{name}"] = flop / time_median(fn) / 1e9
    return out


def run_worker(lib, threads, shapes):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), AMPY_NUM_THREADS=str(threads))
    spec = ";".join(f"{m},{n},{k}" for m, n, k in shapes)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", lib,
                        "--threads", str(threads), "--shapes", spec], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"warning: {lib} worker failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return {}
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer shapes (a smoke run)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="repeat every worker; report the best median (default 2)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--shapes", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        if args.worker == "torch":
            import torch
            torch.set_num_threads(args.threads)
        shapes = [tuple(map(int, x.split(","))) for x in args.shapes.split(";")]
        print(json.dumps(worker(args.worker, shapes)))
        return
    threads = [1, 2]
    squares = [256, 512, 1024] if args.quick else [256, 512, 1024, 1536, 2048]
    shapes = [(s, s, s) for s in squares] + ([] if args.quick else
                                              [(4096, 1024, 1024), (8192, 3072, 768)])
    libs = ["numpy", "ampy"] + (["torch"] if importlib.util.find_spec("torch") else [])
    peaks = measure_peaks(threads)
    print(f"ampy gemm implementations: f32={_C.gemm_impl_name(ampy.float32)} "
          f"f16={_C.gemm_impl_name(ampy.float16)} bf16={_C.gemm_impl_name(ampy.bfloat16)}")
    for t in threads:
        if peaks:
            print(f"ceiling, {t} thread(s): fp32 FMA {peaks[t]['fma']:.1f} GFLOP/s, "
                  f"AMX bf16 {peaks[t]['amx']:.1f} GFLOP/s")
    print("\nGFLOP/s (median). r_np = ampy / NumPy float32; r_t = ampy / torch same dtype; "
          "%pk = % of the FMA (f32, f16) or AMX (bf16) ceiling")
    hdr = f"{'M x N x K':>16} {'thr':>3} {'numpy32':>8}"
    for name in DTYPES:
        hdr += f" | {'ampy_' + name:>10} {'%pk':>5} {'r_np':>5} {'torch':>7} {'r_t':>5}"
    print(hdr)
    for t in threads:
        res = {lib: {} for lib in libs}
        for _ in range(args.rounds):  # libraries interleaved, best median kept
            for lib in libs:
                for key, v in run_worker(lib, t, shapes).items():
                    res[lib][key] = max(v, res[lib].get(key, 0.0))
        for (m, n, k) in shapes:
            key = f"{m}x{n}x{k}"
            npv = res["numpy"].get(key + "/f32", float("nan"))
            line = f"{key:>16} {t:>3} {npv:8.1f}"
            for name in DTYPES:
                v = res["ampy"].get(f"{key}/{name}", float("nan"))
                ceil = (peaks[t]["amx"] if name == "bf16" and peaks[t]["amx"] else
                        peaks[t]["fma"]) if peaks else 0
                pk = f"{100 * v / ceil:5.1f}" if ceil else "  n/a"
                tv = res.get("torch", {}).get(f"{key}/{name}")
                line += (f" | {v:10.1f} {pk} {v / npv:5.2f} "
                         + (f"{tv:7.1f} {v / tv:5.2f}" if tv else f"{'n/a':>7} {'':>5}"))
            print(line, flush=True)


if __name__ == "__main__":
    main()
