"""Per-op dispatch overhead of the autograd hook on a tiny tensor, vs torch.

    python benchmarks/bench_dispatch.py

For a 10-element op (add when ampy/_math.py is present, else clone) it
reports the median time per call of: the op's forward called directly, the
op through dispatch with no autograd hook, through dispatch with the hook
installed but nothing requiring grad (the path every op takes), and with an
input that requires grad (the graph is recorded); torch's times for the same
op with and without requires_grad, and the ratios. Benchmarks are not tests.
"""
import statistics
import timeit

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ampy  # noqa: E402
from ampy import _dispatch  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _median_us(fn, number=20000, repeat=7):
    fn()
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def main():
    have_add = "add" in _dispatch.ops()
    name = "add" if have_add else "clone"
    op = _dispatch.get_op(name)
    a = ampy.tensor(np.arange(10, dtype=np.float32))
    b = ampy.tensor(np.ones(10, dtype=np.float32))
    ag = ampy.tensor(np.arange(10, dtype=np.float32), requires_grad=True)
    args = (a, b) if have_add else (a,)
    gargs = (ag, b) if have_add else (ag,)
    disp = _dispatch.dispatch
    hooks = _dispatch._hooks

    rows = []
    rows.append(("ampy forward (no dispatch)", _median_us(lambda: op.forward(*args))))
    saved = hooks.autograd
    hooks.autograd = None
    try:
        rows.append(("ampy dispatch, no autograd hook", _median_us(lambda: disp(op, *args))))
    finally:
        hooks.autograd = saved
    t_off = _median_us(lambda: disp(op, *args))
    rows.append(("ampy dispatch + hook, nothing requires grad", t_off))
    t_rec = _median_us(lambda: disp(op, *gargs), number=5000)
    rows.append(("ampy dispatch + hook, records the graph", t_rec))
    with ampy.autograd.no_grad():
        rows.append(("ampy dispatch + hook, inside no_grad", _median_us(lambda: disp(op,
                                                                                  *gargs))))
    if torch is not None:
        ta, tb = torch.arange(10, dtype=torch.float32), torch.ones(10)
        tg = torch.arange(10, dtype=torch.float32, requires_grad=True)
        f = (lambda x: torch.add(x, tb)) if have_add else (lambda x: x.clone())
        torch_off = _median_us(lambda: f(ta))
        torch_rec = _median_us(lambda: f(tg), number=5000)
        rows.append(("torch, nothing requires grad", torch_off))
        rows.append(("torch, records the graph", torch_rec))
    print(f"op: {name} on 10 float32 elements, median of 7 repeats (µs per call)")
    w = max(len(r[0]) for r in rows)
    for label, us in rows:
        print(f"  {label:<{w}}  {us:8.2f}")
    base = rows[0][1]
    print(f"  hook cost when nothing requires grad: {t_off - rows[1][1]:.2f} µs "
          f"({t_off / base:.2f}x the bare forward)")
    if torch is not None:
        print(f"  ratio ampy/torch, nothing requires grad: {t_off / torch_off:.2f}x")
        print(f"  ratio ampy/torch, recording:              {t_rec / torch_rec:.2f}x")


if __name__ == "__main__":
    main()
