"""Per-GEMM timing of the transformer-block training step of bench_train.py
(`--models block`: batch 32, seq 128, d 256, 4 heads, MLP 1024), ampy vs torch
of the same dtype, 1 thread.

    python benchmarks/bench_gemm_shapes.py [--dtypes f32,bf16,f16] [--rounds 15]

Every GEMM of the step with the step's shapes and strides: for each linear
(qkv 256->768, proj 256->256, fc1 256->1024, fc2 1024->256) the forward
X @ W.T, dX = dY @ W and dW = dY.T @ X (4096-long K, A read transposed); for
attention q @ k.T, att @ v and their four gradients, with q, k, v the
permuted views of the qkv output. Rounds are interleaved (ampy and torch back
to back, order alternating); reported: median ms of each and the median of
the per-round ratio ampy / torch.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ampy  # noqa: E402
from ampy import _C  # noqa: E402

B, T, D, H, HID = 32, 128, 256, 4, 1024
DH = D // H


def cases(lib, dt, mk):
    """(name, thunk) for each GEMM; mk(shape) makes a random tensor."""
    out = []
    for name, (i, o) in (("qkv", (D, 3 * D)), ("proj", (D, D)), ("fc1", (D, HID)),
                         ("fc2", (HID, D))):
        x, w, dy = mk((B * T, i)), mk((o, i)), mk((B * T, o))
        out.append((f"{name} fwd {B*T}x{o}x{i}", lambda x=x, w=w: lib.matmul(x, w.T)))
        out.append((f"{name} dX  {B*T}x{i}x{o}", lambda dy=dy, w=w: lib.matmul(dy, w)))
        out.append((f"{name} dW  {o}x{i}x{B*T}", lambda dy=dy, x=x: lib.matmul(dy.T, x)))
    qkv = mk((B, T, 3, H, DH)).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    att = mk((B, H, T, T))
    do = mk((B, T, H, DH)).permute(0, 2, 1, 3)
    out += [
        ("q@kT    128x128x64 x128", lambda: lib.matmul(q, k.transpose(-2, -1))),
        ("att@v   128x64x128 x128", lambda: lib.matmul(att, v)),
        ("dO@vT   128x128x64 x128", lambda: lib.matmul(do, v.transpose(-2, -1))),
        ("attT@dO 128x64x128 x128", lambda: lib.matmul(att.transpose(-2, -1), do)),
        ("dS@k    128x64x128 x128", lambda: lib.matmul(att, k)),
        ("dST@q   128x64x128 x128", lambda: lib.matmul(att.transpose(-2, -1), q)),
    ]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    ampy.set_num_threads(1)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    for dn in args.dtypes.split(","):
        tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dn]
        adt = {"f32": ampy.float32, "bf16": ampy.bfloat16, "f16": ampy.float16}[dn]
        store = {}

        def mk_t(shape):
            a = rng.standard_normal(shape).astype(np.float32)
            store[len(store)] = a
            return torch.from_numpy(a).to(tdt)
        tc = cases(torch, tdt, mk_t)
        arrays = iter(list(store.values()))

        def mk_a(shape):
            return ampy.from_numpy(next(arrays)).to(adt)
        ac = cases(ampy, adt, mk_a)
        print(f"--- {dn}  (ampy impl {_C.gemm_impl_name(adt)})")
        print(f"{'gemm':28s} {'ampy ms':>9s} {'torch ms':>9s} {'ratio':>7s}")
        tot_a = tot_t = 0.0
        for (name, fa), (_, ft) in zip(ac, tc):
            if args.only and args.only not in name:
                continue
            fa(), ft()
            ta, tt, rr = [], [], []
            for r in range(args.rounds):
                order = (fa, ft) if r % 2 == 0 else (ft, fa)
                res = {}
                for f in order:
                    t0 = time.perf_counter()
                    f()
                    res[f] = time.perf_counter() - t0
                ta.append(res[fa] * 1e3)
                tt.append(res[ft] * 1e3)
                rr.append(res[fa] / res[ft])
            ma, mt = statistics.median(ta), statistics.median(tt)
            tot_a += ma
            tot_t += mt
            print(f"{name:28s} {ma:9.3f} {mt:9.3f} {statistics.median(rr):7.2f}", flush=True)
        print(f"{'total':28s} {tot_a:9.2f} {tot_t:9.2f} {tot_a / tot_t:7.2f}")


if __name__ == "__main__":
    main()
