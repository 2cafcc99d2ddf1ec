"""Element-wise and reduction throughput/latency: ampy vs torch (CPU) and NumPy.

Prints the median time per call over many repeats after a warm-up, and the
ratio torch/ampy (> 1: ampy faster), then ampy's GB/s (bytes read + written
per call / median time) and its percentage of the memory-bandwidth ceiling
of the same working set (_harness.ceiling_percent: a float32 copy moving the
row's bytes in + out, or for rows with two inputs a triad c = a + b when that
is faster, at the row's thread count, timed in alternation with the kernel;
so a row whose data sit in L2 is held to an L2 copy). Rows marked r only read (a reduction):
with no write-allocate traffic they may pass 100 %. Rows under 64 KiB are
call-overhead bound; their percentage says little. Not a test: timings on a
shared VM are noisy.

    python benchmarks/bench_elementwise.py [--threads N]
    python benchmarks/bench_elementwise.py --vecmath [--sizes 4M,16M]

--vecmath prints only the transcendental table (exp, log, tanh, sigmoid, silu,
gelu, gelu tanh, softmax, log_softmax, layer_norm; float32 and bfloat16): GB/s
of each library (bytes read + written per call / median time), the ratio
torch time / ampy time (>= 1: ampy at least as fast) and ampy's percentage of
the copy ceiling of the same working set.
"""
import argparse
import functools
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ampy  # noqa: E402
from _harness import ceiling_percent  # noqa: E402
from _harness import median_time as _median_time  # noqa: E402

# 10 samples, each a group of calls lasting ~min_time / 10 in all
median_time = functools.partial(_median_time, reps=10, warmup=3, min_time=0.2)


def fmt(t):
    return f"{t * 1e6:9.2f} us" if t < 1e-3 else f"{t * 1e3:9.3f} ms"


THREADS = 1


def row(name, fa, tt, tn, nbytes=None, read_only=False, inputs=1):
    ta = median_time(fa)
    bw = ""
    if nbytes:
        pct = ceiling_percent(fa, nbytes, THREADS, inputs)
        bw = f"{nbytes / ta / 1e9:6.1f} GB/s {pct:4.0f}%{'r' if read_only else ''}"
    tn_s = fmt(tn) if tn is not None else " " * 12
    print(f"{name:34s} {fmt(ta)} {fmt(tt)} {tn_s} {tt / ta:6.2f}x  {bw}", flush=True)


def vecmath_table(sizes):
    """Transcendental element-wise ops and softmax/layer_norm rows, large arrays."""
    tf, af = torch.nn.functional, ampy.nn.functional
    print(f"{'op':16s} {'dtype':8s} {'n':>5s} {'ampy GB/s':>10s} {'torch GB/s':>10s} "
          f"{'torch/ampy':>10s} {'ampy % of copy ceiling':>23s}")
    rng = np.random.default_rng(1)
    for n in sizes:
        x32 = (rng.standard_normal(n) * 3).astype(np.float32)
        for dt in ("float32", "bfloat16"):
            tx = torch.from_numpy(x32).to(getattr(torch, dt))
            ax = ampy.tensor(x32).to(dt)
            tpos, apos = tx.abs() + 0.01, ampy.abs(ax) + 0.01
            tm, am = tx.view(-1, 1024), ax.view(-1, 1024)
            w32 = rng.standard_normal(1024).astype(np.float32)
            tw, aw = torch.from_numpy(w32).to(tx.dtype), ampy.tensor(w32).to(dt)
            cases = [
                ("exp", lambda: ampy.exp(ax), lambda: torch.exp(tx)),
                ("log", lambda: ampy.log(apos), lambda: torch.log(tpos)),
                ("tanh", lambda: ampy.tanh(ax), lambda: torch.tanh(tx)),
                ("sigmoid", lambda: ampy.sigmoid(ax), lambda: torch.sigmoid(tx)),
                ("silu", lambda: af.silu(ax), lambda: tf.silu(tx)),
                ("gelu", lambda: af.gelu(ax), lambda: tf.gelu(tx)),
                ("gelu tanh", lambda: af.gelu(ax, approximate="tanh"),
                 lambda: tf.gelu(tx, approximate="tanh")),
                ("softmax -1", lambda: ampy.softmax(am, -1), lambda: torch.softmax(tm, -1)),
                ("log_softmax -1", lambda: ampy.log_softmax(am, -1),
                 lambda: torch.log_softmax(tm, -1)),
                ("layer_norm 1024", lambda: af.layer_norm(am, (1024,), aw, aw),
                 lambda: tf.layer_norm(tm, (1024,), tw, tw)),
            ]
            nbytes = 2 * n * tx.element_size()
            for name, fa, ft in cases:
                ta, tt = median_time(fa, min_time=0.1), median_time(ft, min_time=0.1)
                pct = ceiling_percent(fa, nbytes, THREADS)
                print(f"{name:16s} {dt:8s} {n >> 20:4d}M {nbytes / ta / 1e9:10.2f} "
                      f"{nbytes / tt / 1e9:10.2f} {tt / ta:10.2f}x {pct:22.0f}%", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--vecmath", action="store_true", help="only the transcendental table")
    ap.add_argument("--sizes", default="4M,16M", help="element counts for --vecmath")
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    ampy.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    if args.vecmath:
        print(f"threads={args.threads}; CPU path {ampy._C.cpu_info()['level']}")
        vecmath_table([int(v[:-1]) << 20 if v.endswith("M") else int(v)
                       for v in args.sizes.split(",")])
        return
    rng = np.random.default_rng(0)

    print(f"threads={args.threads}; CPU path {ampy._C.cpu_info()['level']}; ceiling: a copy of "
          "the same bytes in + out")
    print(f"{'op':34s} {'ampy':>12s} {'torch':>12s} {'numpy':>12s} {'torch/ampy':>7s}  "
          "ampy GB/s, % of ceiling")

    for n in (10, 1 << 20):
        a, b = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
        xa, xb = ampy.tensor(a), ampy.tensor(b)
        ta, tb = torch.tensor(a), torch.tensor(b)
        nb = 3 * n * 4
        row(f"x + y  float32 n={n}", lambda: xa + xb, median_time(lambda: ta + tb),
            median_time(lambda: a + b), nb, inputs=2)
        oa, ot, on = ampy.empty_like(xa), torch.empty_like(ta), np.empty_like(a)
        row(f"add(x, y, out=)  float32 n={n}",  # a separate out: the inputs stay N(0, 1)
            lambda: ampy.add(xa, xb, out=oa),
            median_time(lambda: torch.add(ta, tb, out=ot)),
            median_time(lambda: np.add(a, b, out=on)), nb, inputs=2)
        row(f"x * 0.5  float32 n={n}", lambda: xa * 0.5,
            median_time(lambda: ta * 0.5), median_time(lambda: a * 0.5), 2 * n * 4)
        ha, hb, tha, thb = xa.half(), xb.half(), ta.half(), tb.half()
        row(f"x + y  float16 n={n}", lambda: ha + hb,
            median_time(lambda: tha + thb), None, 3 * n * 2, inputs=2)
        row(f"exp(x)  float32 n={n}", lambda: ampy.exp(xa),
            median_time(lambda: torch.exp(ta)), median_time(lambda: np.exp(a)), 2 * n * 4)
        row(f"gelu(x)  float32 n={n}", lambda: ampy.gelu(xa),
            median_time(lambda: torch.nn.functional.gelu(ta)), None, 2 * n * 4)
        row(f"sum(x)  float32 n={n}", lambda: ampy.sum(xa),
            median_time(lambda: torch.sum(ta)), median_time(lambda: np.sum(a)), n * 4, True)

    m = rng.normal(size=(1024, 1024)).astype(np.float32)
    xm, tm = ampy.tensor(m), torch.tensor(m)
    row("sum(dim=0) 1024x1024", lambda: xm.sum(0), median_time(lambda: tm.sum(0)),
        median_time(lambda: m.sum(0)), m.nbytes, True)
    row("sum(dim=1) 1024x1024", lambda: xm.sum(1), median_time(lambda: tm.sum(1)),
        median_time(lambda: m.sum(1)), m.nbytes, True)
    row("softmax(dim=-1) 1024x1024", lambda: ampy.softmax(xm, -1),
        median_time(lambda: torch.softmax(tm, -1)), None, 2 * m.nbytes)
    row("log_softmax(dim=-1) 1024x1024", lambda: ampy.log_softmax(xm, -1),
        median_time(lambda: torch.log_softmax(tm, -1)), None, 2 * m.nbytes)
    row("x.T + 1 (strided) 1024x1024", lambda: xm.T + 1,
        median_time(lambda: tm.T + 1), median_time(lambda: m.T + 1), 2 * m.nbytes)
    # more transposed / permuted rows (ampy writes a contiguous result; torch keeps the input's
    # layout for x.T + 1, so the last row gives torch a contiguous out= for a like comparison)
    ym, tym = ampy.tensor(m), torch.tensor(m)
    hm, thm = xm.half(), tm.half()
    m3 = rng.normal(size=(64, 128, 128)).astype(np.float32)
    x3, t3 = ampy.tensor(m3), torch.tensor(m3)
    tout = torch.empty(1024, 1024)
    row("x.T + y (strided) 1024x1024", lambda: xm.T + ym,
        median_time(lambda: tm.T + tym), None, 3 * m.nbytes, inputs=2)
    row("x.T * 2 float16 1024x1024", lambda: hm.T * 2,
        median_time(lambda: thm.T * 2), None, m.nbytes)
    row("exp(x.T) 1024x1024", lambda: ampy.exp(xm.T),
        median_time(lambda: torch.exp(tm.T)), None, 2 * m.nbytes)
    row("x.T.float() float16 1024x1024", lambda: hm.T.float(),
        median_time(lambda: thm.T.float()), None, 3 * m.nbytes // 2)
    row("x.T.contiguous() 1024x1024", lambda: xm.T.contiguous(),
        median_time(lambda: tm.T.contiguous()), None, 2 * m.nbytes)
    row("x.permute(2,0,1) + 1 64x128x128", lambda: x3.permute(2, 0, 1) + 1,
        median_time(lambda: t3.permute(2, 0, 1) + 1), None, 2 * m3.nbytes)
    row("x.T + 1, torch out= contiguous", lambda: xm.T + 1,
        median_time(lambda: torch.add(tm.T, 1, out=tout)), None, 2 * m.nbytes)


if __name__ == "__main__":
    main()
