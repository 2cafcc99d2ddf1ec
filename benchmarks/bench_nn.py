"""Forward+backward time of the fused nn ops, ampy vs torch (CPU), medians.

    python benchmarks/bench_nn.py

Each row: one forward and one backward through the public API (autograd
included) on the same data; ratio = ampy time / torch time (< 1: ampy faster).
"""
import functools

import numpy as np
import torch

import ampy
from ampy.nn import functional as F
from _harness import median_time as _median_time

median_time = functools.partial(_median_time, reps=15, warmup=3)

TD = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def case_layer_norm(m, n, dt):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, n)).astype(np.float32)
    ax = ampy.tensor(x).to(getattr(ampy, dt)).requires_grad_(True)
    aw, ab = ampy.ones(n, requires_grad=True), ampy.zeros(n, requires_grad=True)
    tx = torch.tensor(x).to(TD[dt]).requires_grad_(True)
    tw, tb = torch.ones(n, requires_grad=True), torch.zeros(n, requires_grad=True)
    ag, tg = ampy.ones(m, n, dtype=getattr(ampy, dt)), torch.ones(m, n, dtype=TD[dt])
    if dt != "float32":  # torch needs weight in the input dtype except bf16-with-fp32
        tw, tb = tw.detach().to(TD[dt]).requires_grad_(), tb.detach().to(TD[dt]).requires_grad_()
        aw, ab = aw.detach().to(getattr(ampy, dt)).requires_grad_(), \
            ab.detach().to(getattr(ampy, dt)).requires_grad_()

    def a():
        F.layer_norm(ax, (n,), aw, ab).backward(ag)

    def t():
        torch.nn.functional.layer_norm(tx, (n,), tw, tb).backward(tg)
    return a, t


def case_cross_entropy(m, c, dt):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, c)).astype(np.float32)
    y = rng.integers(0, c, m)
    ax = ampy.tensor(x).to(getattr(ampy, dt)).requires_grad_(True)
    tx = torch.tensor(x).to(TD[dt]).requires_grad_(True)
    ay, ty = ampy.tensor(y), torch.tensor(y)

    def a():
        F.cross_entropy(ax, ay, label_smoothing=0.1).backward()

    def t():
        torch.nn.functional.cross_entropy(tx, ty, label_smoothing=0.1).backward()
    return a, t


def main():
    torch.set_num_threads(ampy.get_num_threads())
    print(f"threads: {ampy.get_num_threads()}  (ampy and torch)")
    print(f"{'op':<14}{'shape':<16}{'dtype':<10}{'ampy ms':>9}{'torch ms':>10}{'ratio':>8}")
    for name, mk, shapes in (("layer_norm", case_layer_norm, [(8192, 256), (4096, 1024),
                                                              (64, 256)]),
                             ("cross_entropy", case_cross_entropy, [(4096, 1000), (256, 10),
                                                                    (512, 32000)])):
        for shape in shapes:
            for dt in ("float32", "bfloat16"):
                a, t = mk(*shape, dt)
                ta, tt = median_time(a), median_time(t)
                print(f"{name:<14}{str(shape):<16}{dt:<10}{ta * 1e3:>9.3f}{tt * 1e3:>10.3f}"
                      f"{ta / tt:>8.2f}")


if __name__ == "__main__":
    main()
