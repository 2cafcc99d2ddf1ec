"""GPU benchmarks of ampy's CUDA backend vs torch on the same device, with the
device's own ceilings (a device-to-device copy, torch.matmul) measured in the
same run. Prints medians and ratios; the summary table comes last.

    python benchmarks/bench_gpu.py [--quick]

Timing: ampy queues work on its own stream, so each measurement is a host
clock around N launches closed by a synchronise (ampy.cuda.synchronize or
torch.cuda.synchronize), after warm-up; the median of several repeats is
reported. Inputs are random (never zeros), shared with torch through DLPack.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import ampy  # noqa: E402
import ampy.cuda  # noqa: E402

QUICK = "--quick" in sys.argv
ROWS = []  # (section, case, ampy, peer, ratio text)


def timeit(fn, sync, iters=10, repeats=5, warmup=2):
    both_sync()  # inputs made by torch on its own stream are ready
    for _ in range(warmup):
        fn()
    sync()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) / iters)
    return statistics.median(ts)


def a_sync():
    ampy.cuda.synchronize()


def t_sync():
    torch.cuda.synchronize()


def both_sync():
    ampy.cuda.synchronize()
    torch.cuda.synchronize()


def copy_bandwidth():
    n = 1 << 28  # 1 GiB of float32
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    t_torch = timeit(lambda: dst.copy_(src), t_sync)
    a_src, a_dst = ampy.from_dlpack(src), ampy.from_dlpack(dst)
    t_ampy = timeit(lambda: a_dst.copy_(a_src), a_sync)
    bw_t = 2 * n * 4 / t_torch / 1e9
    bw_a = 2 * n * 4 / t_ampy / 1e9
    print(f"copy d2d 1 GiB: torch {bw_t:.0f} GB/s, ampy {bw_a:.0f} GB/s (read + write)")
    ROWS.append(("copy", "d2d 1 GiB (GB/s)", f"{bw_a:.0f}", f"{bw_t:.0f}", f"{bw_a / bw_t:.2f}x"))
    return max(bw_t, bw_a)


def gemm():
    import ampy as _kernels  # the GEMM ops route CUDA tensors to cuBLAS in _C
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 768, 3072), (8192, 3072, 768),
              (4096, 11008, 4096)]
    if QUICK:
        shapes = shapes[:1] + shapes[2:3]
    for tdt, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda", dtype=tdt)
            w = torch.randn(n, k, device="cuda", dtype=tdt)  # a @ w.T, as nn.Linear
            aa, aw = ampy.from_dlpack(a), ampy.from_dlpack(w)
            iters = 5 if m * n * k >= 8192 ** 3 else 20
            tt = timeit(lambda: torch.matmul(a, w.t()), t_sync, iters=iters)
            ta = timeit(lambda: _kernels.mm(aa, aw.t()), a_sync, iters=iters)
            tf_t, tf_a = 2 * m * n * k / tt / 1e12, 2 * m * n * k / ta / 1e12
            ROWS.append(("gemm", f"{name} {m}x{n}x{k} (TFLOP/s)", f"{tf_a:.0f}", f"{tf_t:.0f}",
                         f"{tf_a / tf_t:.2f}x"))
            print(f"gemm {name} {m}x{n}x{k}: ampy {tf_a:.0f} TFLOP/s, torch {tf_t:.0f}")


def unscale(copy_bw):
    from ampy.amp import functional as _amp  # routes CUDA tensors in _C
    total = 128 << 20 if not QUICK else 32 << 20
    for tdt, isz in ((torch.float32, 4), (torch.float16, 2)):
        sizes = [total // 64] * 64
        grads = [torch.randn(s, device="cuda", dtype=tdt) for s in sizes]
        mine = [ampy.from_dlpack(g) for g in grads]
        found_t, inv_t = torch.zeros(1, device="cuda"), torch.full((1,), 1.0 / 1024, device="cuda")
        found_a, inv_a = ampy.from_dlpack(found_t.clone()), ampy.from_dlpack(inv_t.clone())
        # inv != 1 writes every element: one read + one write
        tt = timeit(lambda: torch._amp_foreach_non_finite_check_and_unscale_(grads, found_t, inv_t),
                    t_sync)
        ta = timeit(lambda: _amp.non_finite_check_and_unscale_(mine, found_a, inv_a), a_sync)
        bw_a, bw_t = 2 * total * isz / ta / 1e9, 2 * total * isz / tt / 1e9
        name = "fp32" if isz == 4 else "fp16"
        ROWS.append(("unscale", f"{name} {total >> 20}M el, 64 tensors (GB/s)", f"{bw_a:.0f}",
                     f"{bw_t:.0f}", f"{bw_a / bw_t:.2f}x torch, {bw_a / copy_bw:.2f}x copy"))
        print(f"unscale {name}: ampy {bw_a:.0f} GB/s, torch {bw_t:.0f} GB/s, copy {copy_bw:.0f}")


def adam(copy_bw):
    from ampy.amp import functional as _amp  # routes CUDA tensors in _C
    n_total = 100_000_000 if not QUICK else 25_000_000
    sizes = [n_total // 50] * 50
    # ampy: fp16 params + fp32 masters + fp16 grads + fp32 moments
    masters = [torch.randn(s, device="cuda") for s in sizes]
    params = [m.half() for m in masters]
    grads = [torch.randn(s, device="cuda", dtype=torch.float16) for s in sizes]
    ms = [torch.zeros(s, device="cuda") for s in sizes]
    vs = [torch.zeros(s, device="cuda") for s in sizes]
    steps = [torch.zeros(1, device="cuda") for _ in sizes]
    A = lambda xs: [ampy.from_dlpack(x) for x in xs]  # noqa: E731
    ap, am, ag, amm, av, ast = A(params), A(masters), A(grads), A(ms), A(vs), A(steps)
    inv, found = ampy.from_dlpack(torch.ones(1, device="cuda")), \
        ampy.from_dlpack(torch.zeros(1, device="cuda"))

    def step_ampy():
        _amp.adam_step_(ap, ag, amm, av, None, ast, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                        weight_decay=0.01, amsgrad=False, maximize=False,
                        decoupled_weight_decay=True, master_params=am, inv_scale=inv,
                        found_inf=found)

    ta = timeit(step_ampy, a_sync, iters=5)
    bytes_a = n_total * (2 + 4 + 4 + 4 + 4 + 4 + 4 + 2)  # grad, master rw, m rw, v rw, param w
    del masters, params, grads, ms, vs, am, ap, ag, amm, av
    torch.cuda.empty_cache()
    # torch: fused AdamW on fp32 params (its fastest path; no master-weight mode)
    tp = [torch.randn(s, device="cuda", requires_grad=True) for s in sizes]
    for p in tp:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(tp, lr=1e-3, weight_decay=0.01, fused=True)
    tt = timeit(opt.step, t_sync, iters=5)
    bytes_t = n_total * (4 + 4 + 4 + 4 + 4 + 4 + 4)  # grad, p rw, m rw, v rw
    bw_a, bw_t = bytes_a / ta / 1e9, bytes_t / tt / 1e9
    ROWS.append(("adamw", f"{n_total // 10**6}M params, masters (GB/s)", f"{bw_a:.0f}",
                 f"{bw_t:.0f}", f"{bw_a / bw_t:.2f}x torch, {bw_a / copy_bw:.2f}x copy"))
    ROWS.append(("adamw", "time per step (ms)", f"{ta * 1e3:.2f}", f"{tt * 1e3:.2f}",
                 f"{tt / ta:.2f}x faster" if ta < tt else f"{ta / tt:.2f}x slower"))
    print(f"adamw: ampy {ta * 1e3:.2f} ms ({bw_a:.0f} GB/s), torch fused {tt * 1e3:.2f} ms "
          f"({bw_t:.0f} GB/s)")


def kernels(copy_bw):
    """The element-wise, reduction, softmax and nn kernels (cuda/ewise.cu,
    reduce.cu, nn.cu) vs torch's on the same data (shared through DLPack).
    Memory-bound kernels also report GB/s against the copy ceiling."""
    from ampy.nn import functional as F
    tF = torch.nn.functional
    n = (1 << 26) if not QUICK else (1 << 24)
    cases = []
    for tdt, name in ((torch.float32, "fp32"), (torch.float16, "fp16")):
        isz = 4 if tdt is torch.float32 else 2
        a_t, b_t = torch.randn(n, device="cuda", dtype=tdt), torch.randn(n, device="cuda", dtype=tdt)
        a, b = ampy.from_dlpack(a_t), ampy.from_dlpack(b_t)
        cases += [
            (f"add {name} {n >> 20}M", lambda a=a, b=b: a + b, lambda: a_t + b_t, 3 * n * isz),
            (f"gelu {name} {n >> 20}M", lambda a=a: F.gelu(a), lambda: tF.gelu(a_t), 2 * n * isz),
            (f"mul scalar bcast {name}", lambda a=a: a.reshape(-1, 1024) * 1.5,
             lambda: a_t.view(-1, 1024) * 1.5, 2 * n * isz),
        ]
    x_t = torch.randn(8192, 4096, device="cuda", dtype=torch.float16)
    x = ampy.from_dlpack(x_t)
    cases += [
        ("sum rows fp16 8192x4096", lambda: x.sum(-1), lambda: x_t.sum(-1), x_t.numel() * 2),
        ("sum cols fp16 8192x4096", lambda: x.sum(0), lambda: x_t.sum(0), x_t.numel() * 2),
        ("amax fp16 8192x4096", lambda: ampy.amax(x, -1), lambda: x_t.amax(-1), x_t.numel() * 2),
        ("softmax fp16 8192x4096", lambda: ampy.softmax(x, -1), lambda: torch.softmax(x_t, -1),
         x_t.numel() * 4),
    ]
    h_t = torch.randn(8192, 1024, device="cuda", dtype=torch.float16)
    w_t, bb_t = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    h, w, bb = ampy.from_dlpack(h_t), ampy.from_dlpack(w_t), ampy.from_dlpack(bb_t)
    cases.append(("layer_norm fwd fp16 8192x1024", lambda: F.layer_norm(h.float(), (1024,), w, bb),
                  lambda: tF.layer_norm(h_t.float(), (1024,), w_t, bb_t), h_t.numel() * 8))
    logits_t = torch.randn(4096, 32000, device="cuda", dtype=torch.float16)
    tgt_t = torch.randint(0, 32000, (4096,), device="cuda")
    logits, tgt = ampy.from_dlpack(logits_t), ampy.from_dlpack(tgt_t)
    cases.append(("cross_entropy fwd 4096x32000 fp16", lambda: F.cross_entropy(logits, tgt),
                  lambda: tF.cross_entropy(logits_t, tgt_t), logits_t.numel() * 2))
    emb_t = torch.randn(32000, 768, device="cuda")
    idx_t = torch.randint(0, 32000, (8, 1024), device="cuda")
    emb, idx = ampy.from_dlpack(emb_t), ampy.from_dlpack(idx_t)
    cases.append(("embedding fwd 8x1024x768", lambda: F.embedding(idx, emb),
                  lambda: tF.embedding(idx_t, emb_t), idx_t.numel() * 768 * 8))
    for case, fa, ft, nbytes in cases:
        try:
            ta = timeit(fa, a_sync, iters=10)
            tt = timeit(ft, t_sync, iters=10)
        except Exception as e:  # noqa: BLE001 (report, continue)
            ROWS.append(("kernels", case, "FAILED", "", f"{type(e).__name__}: {str(e)[:60]}"))
            continue
        bw = nbytes / ta / 1e9
        ROWS.append(("kernels", f"{case} (us)", f"{ta * 1e6:.0f}", f"{tt * 1e6:.0f}",
                     f"{ta / tt:.2f}x torch's time, {bw:.0f} GB/s = {bw / copy_bw:.2f}x copy"))
        print(f"{case}: ampy {ta * 1e6:.0f} us, torch {tt * 1e6:.0f} us")


def fallback_report():
    """Ops that still take the CPU fallback in the transformer step (each
    warns once): listed so the next kernel to write is obvious."""
    import warnings
    from ampy import nn
    F = nn.functional
    caught = []
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always", RuntimeWarning)
        emb, lin, ln = nn.Embedding(100, 64).cuda(), nn.Linear(64, 64).cuda(), nn.LayerNorm(64).cuda()
        idx = ampy.randint(0, 100, (4, 32)).cuda()
        hh = emb(idx)
        hh = hh + F.dropout(F.gelu(lin(ln(hh))), 0.1)
        att = F.softmax(hh @ hh.transpose(1, 2) / 8.0, -1) @ hh
        loss = F.cross_entropy(att.reshape(-1, 64), idx.reshape(-1) % 64, label_smoothing=0.1)
        loss.backward()
        caught = sorted({str(w.message).split("'")[1] for w in ws if "no CUDA kernel" in str(w.message)})
    ROWS.append(("fallback", "ops on the CPU fallback (transformer step)", str(len(caught)), "",
                 ", ".join(caught)[:90] or "none"))


def train_step():
    """MLP (batch 256, 784-1024-1024-10) training step, fp16 autocast +
    GradScaler, vs torch.amp: Linear (cuBLAS), relu (ewise.cu), cross_entropy
    (nn.cu), GradScaler and fused AdamW (amp.cu/optim.cu), all on the device."""
    try:
        from ampy import nn
        from ampy.amp import GradScaler, autocast
    except ImportError as e:
        ROWS.append(("train", "MLP step", "n/a", "", f"training API missing ({e.name})"))
        return
    import torch.nn as tnn
    x_t = torch.randn(256, 784, device="cuda")
    y_t = torch.randint(0, 10, (256,), device="cuda")
    tm = tnn.Sequential(tnn.Linear(784, 1024), tnn.ReLU(), tnn.Linear(1024, 1024), tnn.ReLU(),
                        tnn.Linear(1024, 10)).cuda()
    topt = torch.optim.AdamW(tm.parameters(), lr=1e-3, fused=True)
    tsc = torch.amp.GradScaler("cuda")

    def torch_step():
        topt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = tnn.functional.cross_entropy(tm(x_t), y_t)
        tsc.scale(loss).backward()
        tsc.step(topt)
        tsc.update()

    am = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                       nn.Linear(1024, 10)).to("cuda")
    aopt = ampy.optim.AdamW(am.parameters(), lr=1e-3)
    asc = GradScaler("cuda")
    x_a, y_a = ampy.from_dlpack(x_t), ampy.from_dlpack(y_t)

    def ampy_step():
        aopt.zero_grad()
        with autocast("cuda", dtype=ampy.float16):
            loss = nn.functional.cross_entropy(am(x_a), y_a)
        asc.scale(loss).backward()
        asc.step(aopt)
        asc.update()

    tt = timeit(torch_step, t_sync, iters=10)
    ta = timeit(ampy_step, both_sync, iters=3, repeats=3)
    ROWS.append(("train", "MLP 784-1024-1024-10 b256 (ms)", f"{ta * 1e3:.2f}", f"{tt * 1e3:.2f}",
                 f"{ta / tt:.2f}x torch's time"))


def main():
    if not ampy.cuda.is_available() or not torch.cuda.is_available():
        print("bench_gpu: no CUDA device (ampy: %s)" % ampy.cuda._reason)
        return 1
    print(f"device: {ampy.cuda.get_device_name(0)}, torch {torch.__version__}")
    t0 = time.time()
    copy_bw = copy_bandwidth()
    for name, fn in (("gemm", gemm), ("unscale", lambda: unscale(copy_bw)),
                     ("adam", lambda: adam(copy_bw)), ("kernels", lambda: kernels(copy_bw)),
                     ("fallback", fallback_report), ("train", train_step)):
        try:
            fn()
        except Exception as e:  # one failing section must not hide the others
            ROWS.append((name, "FAILED", "", "", f"{type(e).__name__}: {str(e)[:70]}"))
        torch.cuda.empty_cache()
        ampy.cuda.empty_cache()
    print(f"\n== summary ({ampy.cuda.get_device_name(0)}, {time.time() - t0:.0f}s) ==")
    print(f"{'what':8} {'case':40} {'ampy':>8} {'torch':>8}  ratio")
    for sec, case, a, t, r in ROWS:
        print(f"{sec:8} {case:40} {a:>8} {t:>8}  {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
