"""conv2d forward + backward for the ResNet-18 layer shapes, ampy vs torch (CPU),
in float32 and under bfloat16 autocast, at 1 and 2 threads.

    python benchmarks/bench_conv.py [--quick] [--batch 32] [--threads 1,2]
                                    [--level avx512bf16] [--clock cpu]

One step = F.conv2d(x, w, b) then backward of a fixed incoming gradient, so the
input, weight and bias gradients are all computed (x requires grad, as inside a
network). Float32 parameters and input; "bf16" runs the step under
autocast("cpu", dtype=bfloat16) in both libraries (their casts included).
Interleaved timing: each round times ampy and torch back to back (the order
alternates), ratio = median over rounds of ampy time / torch time (< 1: ampy is
faster). The header prints the CPU path ampy's GEMM takes for each dtype.
--split times the three products of each layer on their own instead (the
forward, the input gradient and the weight gradient, inputs already in the
dtype, no bias): ampy's kernels (ampy._C.conv2d_fwd / conv2d_bwd_input /
conv2d_bwd_weight) against torch's F.conv2d and aten.convolution_backward
with one output mask bit each.
--level pins ampy's CPU level (portable, avx2, avx512, avx512bf16, amx); to put
torch on the same footing set ONEDNN_MAX_CPU_ISA (e.g. AVX512_CORE_BF16) in the
environment before running.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ampy  # noqa: E402
import torch  # noqa: E402
from ampy import _C  # noqa: E402
from ampy.nn import functional as F  # noqa: E402

# (C_in, H, C_out, kernel, stride, padding): ResNet-18's distinct conv layers at 224x224
LAYERS = [(3, 224, 64, 7, 2, 3), (64, 56, 64, 3, 1, 1), (64, 56, 128, 3, 2, 1),
          (64, 56, 128, 1, 2, 0), (128, 28, 128, 3, 1, 1), (128, 28, 256, 3, 2, 1),
          (256, 14, 256, 3, 1, 1), (256, 14, 512, 3, 2, 1), (512, 7, 512, 3, 1, 1)]
QUICK = [LAYERS[1], LAYERS[4], LAYERS[6], LAYERS[8]]


def make_step(lib, layer, batch, dt):
    c, h, o, k, s, p = layer
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) * 0.05).astype(np.float32)
    oh = (h + 2 * p - k) // s + 1
    g = rng.standard_normal((batch, o, oh, oh)).astype(np.float32)
    if lib == "ampy":
        M, fn, mk = ampy, F.conv2d, ampy.tensor
    else:
        M, fn, mk = torch, torch.nn.functional.conv2d, torch.from_numpy
    xt, wt = mk(x).requires_grad_(), mk(w).requires_grad_()
    bt = mk(np.zeros(o, np.float32)).requires_grad_()
    gt = mk(g).to(M.bfloat16) if dt == "bf16" else mk(g)

    def step():
        xt.grad = wt.grad = bt.grad = None
        if dt == "bf16":
            with M.autocast("cpu", dtype=M.bfloat16):
                y = fn(xt, wt, bt, stride=s, padding=p)
        else:
            y = fn(xt, wt, bt, stride=s, padding=p)
        y.backward(gt)
    return step


def make_split(layer, batch, dt):
    """{op: (ampy fn, torch fn)} for the forward, input and weight gradients."""
    c, h, o, k, s, p = layer
    rng = np.random.default_rng(0)
    oh = (h + 2 * p - k) // s + 1
    arrs = [rng.standard_normal(sh).astype(np.float32)
            for sh in ((batch, c, h, h), (o, c, k, k), (batch, o, oh, oh))]
    adt, tdt = (ampy.bfloat16, torch.bfloat16) if dt == "bf16" else (ampy.float32, torch.float32)
    ax, aw, ag = (ampy.tensor(a).to(adt) for a in arrs)
    tx, tw, tg = (torch.from_numpy(a).to(tdt) for a in arrs)
    geom = (s, s, p, p, 1, 1, 1)

    def tb(mask):
        return lambda: torch.ops.aten.convolution_backward(
            tg, tx, tw, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, mask)
    return {"fwd": (lambda: _C.conv2d_fwd(ax, aw, None, (oh, oh), geom),
                    lambda: torch.nn.functional.conv2d(tx, tw, None, s, p)),
            "dx": (lambda: _C.conv2d_bwd_input(ag, aw, None, (batch, c, h, h), geom),
                   tb([True, False, False])),
            "dw": (lambda: _C.conv2d_bwd_weight(ax, ag, (o, c, k, k), geom),
                   tb([False, True, False]))}


def interleaved(fa, ft, rounds, min_time, clock=time.perf_counter):
    fa(), ft(), fa(), ft()
    ta, tt, ratios = [], [], []
    t_end = time.perf_counter() + min_time
    r = 0
    while r < rounds or time.perf_counter() < t_end:
        pair = []
        for f in ((fa, ft) if r % 2 == 0 else (ft, fa)):
            t0 = clock()
            f()
            pair.append(clock() - t0)
        a, t = pair if r % 2 == 0 else pair[::-1]
        ta.append(a), tt.append(t), ratios.append(a / t)
        r += 1
    return statistics.median(ta), statistics.median(tt), statistics.median(ratios)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="4 layers, 3 rounds")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--level", default=None, help="ampy CPU level to pin")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--split", action="store_true",
                    help="time the forward, input and weight gradients separately")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: time 1-thread rows with the calling thread's CPU time "
                         "(both libraries compute on it then), which leaves out the time a "
                         "loaded machine keeps the process descheduled")
    args = ap.parse_args()
    if args.level:
        _C._set_cpu_level(args.level)
    rounds = args.rounds or (3 if args.quick else 7)
    layers = QUICK if args.quick else LAYERS
    paths = {n: _C.gemm_impl_name(d) for n, d in (("f32", ampy.float32),
                                                   ("bf16", ampy.bfloat16))}
    print(f"batch {args.batch}; ampy GEMM path: f32={paths['f32']} bf16={paths['bf16']}; "
          f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '(unset)')}")
    print(f"ms per forward+backward step (median; clock {args.clock} for 1 thread, wall for 2); "
          "ratio = ampy / torch (< 1: ampy faster)")
    print(f"{'layer (Cin,H,Cout,k,s,p)':<26}{'dt':>7}{'thr':>4}{'ampy ms':>10}{'torch ms':>10}"
          f"{'ratio':>7}")
    for nt in (int(t) for t in args.threads.split(",")):
        ampy.set_num_threads(nt)
        torch.set_num_threads(nt)
        for layer in layers:
            for dt in ("f32", "bf16"):
                clock = time.thread_time if args.clock == "cpu" and nt == 1 else \
                    time.perf_counter
                if args.split:
                    pairs = make_split(layer, args.batch, dt).items()
                else:
                    pairs = [("", (make_step("ampy", layer, args.batch, dt),
                                   make_step("torch", layer, args.batch, dt)))]
                for op, (fa, ft) in pairs:
                    a, t, ratio = interleaved(fa, ft, rounds, 0.0, clock)
                    print(f"{str(layer):<26}{dt + op:>7}{nt:>4}{a * 1e3:>10.2f}"
                          f"{t * 1e3:>10.2f}{ratio:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
