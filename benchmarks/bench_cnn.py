"""The cnn ops (batch_norm, group_norm, max/avg/adaptive pools, pad,
interpolate) forward + backward, and one training step of the CNN family's
model, ampy vs torch (CPU), in float32 and bfloat16, at 1 and 2 threads.

    python benchmarks/bench_cnn.py [--quick] [--threads 1,2] [--level avx512bf16]

Ops: float32 or bfloat16 activations of shape (32, 64, 28, 28) (batch norm
and group norm with float32 parameters, as under autocast), the op then the
backward of a fixed incoming gradient. Family step: the ResNet-style model of
tests/test_family_cnn.py on a batch of 32 (1, 32, 32) images:
zero_grad, forward, cross entropy, backward, SGD-momentum step, in float32
and under autocast("cpu", dtype=bfloat16) in both libraries. Interleaved
timing: each round times ampy and torch back to back, ratio = median of
ampy time / torch time (< 1: ampy is faster). --level pins ampy's CPU level;
set ONEDNN_MAX_CPU_ISA (e.g. AVX512_CORE_BF16) for torch to match.
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

SHAPE = (32, 64, 28, 28)

OPS = {
    "batch_norm train": lambda M, x, p: M.nn.functional.batch_norm(x, None, None, p[0], p[1],
                                                                   True),
    "group_norm 8": lambda M, x, p: M.nn.functional.group_norm(x, 8, p[0], p[1]),
    "max_pool2d 3/2/1": lambda M, x, p: M.nn.functional.max_pool2d(x, 3, 2, 1),
    "avg_pool2d 2": lambda M, x, p: M.nn.functional.avg_pool2d(x, 2),
    "adaptive_avg (7,7)": lambda M, x, p: M.nn.functional.adaptive_avg_pool2d(x, (7, 7)),
    "pad reflect 1": lambda M, x, p: M.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"),
    "bilinear x2": lambda M, x, p: M.nn.functional.interpolate(x, scale_factor=2,
                                                               mode="bilinear"),
}


def _inputs(M, dt):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    w, b = np.ones(SHAPE[1], np.float32), np.zeros(SHAPE[1], np.float32)
    conv = (lambda a: ampy.tensor(a)) if M is ampy else torch.from_numpy
    xt = conv(x).to(getattr(M, dt)).requires_grad_()
    return xt, (conv(w).requires_grad_(), conv(b).requires_grad_())


def op_step(M, name, dt):
    x, p = _inputs(M, dt)
    g = None

    def step():
        nonlocal g
        y = OPS[name](M, x, p)
        if g is None:
            g = M.ones_like(y)
        y.backward(g)
    return step


def family_step(M, mode, batch=32):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    import test_family_cnn as fam  # the family's model, built from M
    net = fam.make_net(M)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((batch, 1, 32, 32)).astype(np.float32)
    ys = rng.integers(0, 10, batch)
    x = ampy.tensor(xs) if M is ampy else torch.from_numpy(xs)
    y = ampy.tensor(ys) if M is ampy else torch.from_numpy(ys)
    opt = M.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        if mode == "bf16":
            with M.autocast("cpu", dtype=M.bfloat16):
                loss = M.nn.functional.cross_entropy(net(x), y)
        else:
            loss = M.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    return step


def compare(fa, ft, rounds):
    fa(), ft(), fa(), ft()
    ta, tt, ratios = [], [], []
    for r in range(rounds):
        order = (fa, ft) if r % 2 == 0 else (ft, fa)
        times = {}
        for f in order:
            t0 = time.perf_counter()
            f()
            times[f] = time.perf_counter() - t0
        ta.append(times[fa])
        tt.append(times[ft])
        ratios.append(times[fa] / times[ft])
    return statistics.median(ta), statistics.median(tt), statistics.median(ratios)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="few rounds (a sanity number)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--level", default=None, help="force ampy's CPU level")
    args = ap.parse_args()
    if args.level:
        _C._set_cpu_level(args.level)
    rounds = 3 if args.quick else 11
    print(f"ampy CPU level: {_C.cpu_info().get('level', '?')}  "
          f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '-')}")
    print(f"{'case':28s} {'dtype':6s} {'thr':>3s} {'ampy ms':>9s} {'torch ms':>9s} "
          f"{'ampy/torch':>10s}")
    for nt in (int(t) for t in args.threads.split(",")):
        ampy.set_num_threads(nt)
        torch.set_num_threads(nt)
        for name in OPS:
            for dt in ("float32", "bfloat16"):
                a, t, r = compare(op_step(ampy, name, dt), op_step(torch, name, dt), rounds)
                print(f"{name:28s} {dt[:6]:6s} {nt:3d} {a * 1e3:9.2f} {t * 1e3:9.2f} {r:10.2f}")
        for mode in ("fp32", "bf16"):
            a, t, r = compare(family_step(ampy, mode), family_step(torch, mode), rounds)
            print(f"{'family CNN train step':28s} {mode:6s} {nt:3d} {a * 1e3:9.2f} "
                  f"{t * 1e3:9.2f} {r:10.2f}")


if __name__ == "__main__":
    main()
