"""RMSprop / Adagrad / Adadelta step benchmark: ampy.optim's fused step vs
torch.optim's (foreach=False, its CPU default, and foreach=True), float32
params, at 1 and 2 threads, plus ampy with bfloat16 params and fp32 master
weights. Reports ms per step and the ratio torch / ampy (> 1: ampy faster).

    python benchmarks/bench_optim_adaptive.py [--quick] [--params N]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _harness import median_time  # noqa: E402

CONFIGS = [("RMSprop", dict(lr=1e-3)), ("RMSprop", dict(lr=1e-3, momentum=0.9, centered=True)),
           ("Adagrad", dict(lr=1e-2)), ("Adadelta", dict())]


def _shapes(total):
    """A transformer-like mix: a few big matrices and many small vectors."""
    out, left = [], total
    while left > 0:
        n = min(left, 1 << 20)
        out += [(n,), (min(left - n, 1024) or 1,)]
        left -= n + out[-1][0]
    return out


def _ampy_opt(ampy, name, kw, shapes, rng, dtype="float32"):
    ps = []
    for s in shapes:
        p = ampy.nn.Parameter(ampy.tensor(rng.standard_normal(s).astype(np.float32)).to(
            getattr(ampy, dtype)))
        p.grad = ampy.tensor(rng.standard_normal(s).astype(np.float32)).to(getattr(ampy, dtype))
        ps.append(p)
    extra = dict(master_weights=True) if dtype != "float32" else {}
    return getattr(ampy.optim, name)(ps, **kw, **extra)


def _torch_opt(torch, name, kw, shapes, rng, foreach):
    ps = []
    for s in shapes:
        p = torch.nn.Parameter(torch.tensor(rng.standard_normal(s).astype(np.float32)))
        p.grad = torch.tensor(rng.standard_normal(s).astype(np.float32))
        ps.append(p)
    return getattr(torch.optim, name)(ps, **kw, foreach=foreach)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--params", type=int, default=None)
    args = ap.parse_args()
    import torch

    import ampy
    total = args.params or ((1 << 20) if args.quick else (8 << 20))
    reps = 3 if args.quick else 11
    shapes = _shapes(total)
    rng = np.random.default_rng(0)
    print(f"{total} params in {len(shapes)} tensors; ms per step (median of {reps}); "
          f"ratio = torch / ampy")
    print(f"{'optimizer':<34}{'thr':>4}{'ampy':>9}{'bf16+m':>9}{'torch':>9}{'t-fe':>9}"
          f"{'ratio':>7}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        ampy.set_num_threads(threads)
        for name, kw in CONFIGS:
            a = _ampy_opt(ampy, name, kw, shapes, rng)
            h = _ampy_opt(ampy, name, kw, shapes, rng, "bfloat16")
            t = _torch_opt(torch, name, kw, shapes, rng, False)
            f = _torch_opt(torch, name, kw, shapes, rng, True)
            ta, th, tt, tf = (median_time(o.step, reps=reps) * 1e3 for o in (a, h, t, f))
            label = name + ("" if not kw or list(kw) == ["lr"] else " " + ",".join(
                k for k in kw if k != "lr"))
            print(f"{label:<34}{threads:>4}{ta:>9.2f}{th:>9.2f}{tt:>9.2f}{tf:>9.2f}"
                  f"{min(tt, tf) / ta:>7.2f}")


if __name__ == "__main__":
    main()
