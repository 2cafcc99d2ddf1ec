"""conv3d / conv_transpose3d forward + backward at video / 3-d U-Net layer shapes,
ampy vs torch (CPU), float32 and under bfloat16 autocast.

    python benchmarks/bench_conv3d.py [--rounds 5] [--threads 1] [--clock cpu]

One step = the op on (x, w, b) then backward of a fixed incoming gradient (x
requires grad, so the input, weight and bias gradients are all computed).
Interleaved timing as bench_conv.py: ratio = median over rounds of ampy time /
torch time (< 1: ampy is faster).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ampy  # noqa: E402
import torch  # noqa: E402
from bench_conv import interleaved  # noqa: E402

# (name, op, x shape, out channels, kernel, stride, padding)
LAYERS = [("c3d-conv1", "conv3d", (2, 3, 16, 56, 56), 32, 3, 1, 1),
          ("c3d-mid", "conv3d", (2, 64, 8, 28, 28), 64, 3, 1, 1),
          ("down-s2", "conv3d", (2, 64, 8, 28, 28), 128, 3, 2, 1),
          ("r2plus1d-1x3x3", "conv3d", (2, 64, 8, 28, 28), 64, (1, 3, 3), 1, (0, 1, 1)),
          ("unet-up-k2s2", "conv_transpose3d", (2, 64, 4, 14, 14), 32, 2, 2, 0)]


def make_step(lib, layer, dt):
    _, op, xs, o, k, s, p = layer
    rng = np.random.default_rng(0)
    ks = (k,) * 3 if isinstance(k, int) else k
    c = xs[1]
    wshape = (o, c) + ks if op == "conv3d" else (c, o) + ks
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(wshape) * 0.05).astype(np.float32)
    M = ampy if lib == "ampy" else torch
    fn = getattr(M.nn.functional, op)
    mk = ampy.tensor if lib == "ampy" else torch.from_numpy
    xt, wt = mk(x).requires_grad_(), mk(w).requires_grad_()
    bt = mk(np.zeros(o, np.float32)).requires_grad_()
    with torch.no_grad():
        yshape = getattr(torch.nn.functional, op)(torch.from_numpy(x), torch.from_numpy(w),
                                                  stride=s, padding=p).shape
    g = mk(rng.standard_normal(tuple(yshape)).astype(np.float32))
    g = g.to(M.bfloat16) if dt == "bf16" else g

    def step():
        xt.grad = wt.grad = bt.grad = None
        if dt == "bf16":
            with M.autocast("cpu", dtype=M.bfloat16):
                y = fn(xt, wt, bt, stride=s, padding=p)
        else:
            y = fn(xt, wt, bt, stride=s, padding=p)
        y.backward(g)
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="cpu")
    ap.add_argument("--only", default=None, help="comma-separated layer names")
    args = ap.parse_args()
    ampy.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.clock == "cpu" and args.threads == 1 else time.perf_counter
    print(f"threads {args.threads}, clock {args.clock}; ms per forward+backward step (median)")
    for layer in LAYERS:
        if args.only and layer[0] not in args.only.split(","):
            continue
        for dt in ("f32", "bf16"):
            a, t, r = interleaved(make_step("ampy", layer, dt), make_step("torch", layer, dt),
                                  args.rounds, 0.0, clock)
            print(f"{layer[0]:16s} {dt:5s} ampy {a * 1e3:8.1f}  torch {t * 1e3:8.1f}  "
                  f"ratio {r:5.2f}", flush=True)


if __name__ == "__main__":
    main()
