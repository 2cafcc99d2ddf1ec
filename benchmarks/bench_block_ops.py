"""Per-op timings of the transformer block's element-wise / row kernels vs torch
(issue 4), at one thread: softmax forward (float32, half -> half, half ->
float32 via dtype=) and backward (the fused kernel vs torch's
_softmax_backward_data), multiplication by a Python scalar, the residual add
float32 + half -> float32, and layer_norm forward / backward (the C kernels vs
aten's native_layer_norm{,_backward}). Shapes are the block's: batch 32, seq
128, d 256, 4 heads.

    python benchmarks/bench_block_ops.py [--repeat 15] [--ops smf,smb,mul,add,ln]

ampy and torch calls alternate (A, B, A, B, ...) and are timed by
time.thread_time() (CPU time of the thread, less noisy than wall time on a
shared machine); prints the medians, the median per-pair ratio ampy / torch
(< 1: ampy is faster) and ampy's percentage of the memory-bandwidth ceiling
of the op's own working set (bytes read + written; _harness.ceiling_percent:
a copy, or a triad for two-input ops, of the same bytes timed in alternation
with the op). Not a test: nothing here asserts.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ampy  # noqa: E402
from ampy import _C  # noqa: E402
import torch  # noqa: E402
from _harness import ceiling_percent  # noqa: E402

ATT = (32, 4, 128, 128)
RES = (32, 128, 256)


def pair(rng, shape, dt, scale=1.0):
    a = (rng.standard_normal(shape) * scale).astype(np.float32)
    return ampy.tensor(a).to(getattr(ampy, dt)), torch.from_numpy(a.copy()).to(getattr(torch, dt))


def bench(name, fa, ft, repeat, nbytes, inputs=1):
    fa(), ft()
    ta, tt, r = [], [], []
    for _ in range(repeat):
        t0 = time.thread_time()
        fa()
        t1 = time.thread_time()
        ft()
        t2 = time.thread_time()
        ta.append(t1 - t0), tt.append(t2 - t1), r.append((t1 - t0) / max(t2 - t1, 1e-9))
    pct = ceiling_percent(fa, nbytes, 1, inputs)
    print(f"| {name:<28} | {statistics.median(ta) * 1e3:7.3f} | {statistics.median(tt) * 1e3:7.3f} "
          f"| {statistics.median(r):5.2f} | {pct:4.0f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--ops", default="smf,smb,mul,add,ln")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    args = ap.parse_args()
    ops = set(args.ops.split(","))
    ampy.set_num_threads(1)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    F = ampy.nn.functional
    R = args.repeat
    print(f"CPU path {_C.cpu_info()['level']}, 1 thread")
    print("| op | ampy ms | torch ms | ratio | ampy % ceil |")
    print("|---|---:|---:|---:|---:|")
    for dt in args.dtypes.split(","):
        x, xt = pair(rng, ATT, dt, 3.0)
        es, na, nr = x.element_size(), x.numel(), int(np.prod(RES))
        if "smf" in ops:
            bench(f"softmax fwd {dt}", lambda: F.softmax(x, dim=-1), lambda: torch.softmax(xt, -1), R, 2 * na * es)
            if dt != "float32":
                bench(f"softmax fwd {dt}->float32",
                      lambda: F.softmax(x, dim=-1, dtype=ampy.float32),
                      lambda: torch.softmax(xt, -1, dtype=torch.float32), R, na * (es + 4))
        if "smb" in ops:
            y, yt = F.softmax(x, dim=-1), torch.softmax(xt, -1)
            g, gt = pair(rng, ATT, dt)
            bench(f"softmax bwd {dt}", lambda: _C.fused_softmax_bwd(y, g),
                  lambda: torch._softmax_backward_data(gt, yt, -1, yt.dtype), R, 3 * na * es, 2)
        if "mul" in ops:
            bench(f"mul by scalar {dt}", lambda: x * 0.125, lambda: xt * 0.125, R, 2 * na * es)
        if "add" in ops:
            a, at = pair(rng, RES, "float32")
            b, bt = pair(rng, RES, dt)
            bench(f"add float32 + {dt}", lambda: a + b, lambda: at + bt, R, nr * (8 + es), 2)
        if "ln" in ops and dt != "float16":
            xa, xl = pair(rng, RES, dt)
            ga, gl = pair(rng, RES, dt)
            w, wt = pair(rng, (256,), "float32")
            bb, bbt = pair(rng, (256,), "float32")
            _, mean, rstd = _C.nn_layer_norm_fwd(xa, 256, w, bb, 1e-5, True)
            _, mt, rt = torch.ops.aten.native_layer_norm(xl, [256], wt, bbt, 1e-5)
            bench(f"layer_norm fwd {dt}", lambda: _C.nn_layer_norm_fwd(xa, 256, w, bb, 1e-5, True),
                  lambda: torch.ops.aten.native_layer_norm(xl, [256], wt, bbt, 1e-5), R,
                  2 * nr * es)
            bench(f"layer_norm bwd {dt}",
                  lambda: _C.nn_layer_norm_bwd(xa, 256, w, ga, mean, rstd, 1e-5, True, True, True),
                  lambda: torch.ops.aten.native_layer_norm_backward(
                      gl, xl, [256], mt, rt, wt, bbt, [True, True, True]), R, 3 * nr * es, 2)


if __name__ == "__main__":
    main()
