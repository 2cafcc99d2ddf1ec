"""AMP kernel benchmark: ampy's non-finite check + unscale and fused Adam/AdamW with fp32
master weights, against torch's CPU ops and the bandwidth ceiling of the same bytes, 1 thread.

    python benchmarks/bench_amp.py [--quick] [--rounds N] [--only unscale|adam|writeback]

Workloads (the issue's): unscale + check over 16M elements in 64 tensors (fp16 grads,
then fp32 grads) vs torch._amp_foreach_non_finite_check_and_unscale_; one Adam / AdamW
step over 16M parameters, ampy with fp16 params + fp32 master + fp16 grads (28 bytes per
parameter: grad 2, master 4+4, exp_avg 4+4, exp_avg_sq 4+4, param 2) vs torch.optim.Adam /
AdamW on fp32 params (its standard CPU setup; 36 bytes per parameter) in each variant torch
offers on the CPU (foreach=False, foreach=True, fused=True); the GradScaler step (inv_scale
and found_inf given) with the unscaled gradients written back into .grad from the same
pass (what GradScaler.step does, 30 bytes per parameter) vs the same kernel without the
write-back (the previous behaviour, 28) vs a separate unscale pass then the step (32).

Interleaved timing: every round calls each contender once, back to back, in a rotating
order; reported are the median GB/s over rounds (bytes each kernel must read and write,
counted for its own dtypes) and, for the ratios, the median over rounds of the per-round
time ratio (fairest on a shared, noisy machine). "x bw" = GB/s over the bandwidth ceiling
of the same working set (`_harness.ceiling_kernel`: a copy or a triad moving the kernel's own
bytes read + written, the fastest of them), timed in the same rounds.
--clock cpu uses the thread's CPU time (every contender runs on the calling thread).
The unscale calls alternate inv_scale 0.5 / 2.0 so the in-place data stays bounded.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("AMPY_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ampy  # noqa: E402
from ampy.amp import functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import ceiling_kernel  # noqa: E402


def sizes(total, n, rng):
    """n tensor sizes summing to total, uneven (as a model's parameters are)."""
    w = rng.uniform(0.2, 1.8, n)
    s = np.maximum((w / w.sum() * total).astype(np.int64), 1)
    s[-1] += total - s.sum()
    return [int(x) for x in s]


def ceiling(nbytes):
    """Contenders moving the same nbytes (in + out) as the kernel: copies and a
    triad (the kernels read more streams than they write)."""
    return {f"ceil{i}": f for i, f in enumerate(ceiling_kernel(nbytes, 1, inputs=2))}


def ceiling_bw(times, nbytes):
    """Bytes per second of the fastest ceiling contender (median over rounds)."""
    return max(nbytes / statistics.median(v) for k, v in times.items() if k.startswith("ceil"))


def interleave(contenders, rounds, timer):
    """{name: [seconds per round]}; each round calls every contender once."""
    names = list(contenders)
    for f in contenders.values():
        f()
    out = {nm: [] for nm in names}
    for r in range(rounds):
        for nm in names[r % len(names):] + names[:r % len(names)]:
            t = timer()
            contenders[nm]()
            out[nm].append(timer() - t)
    return out


def ratio(times, a, b):
    """Median over rounds of time(b) / time(a): how many times faster a is than b."""
    return statistics.median(tb / ta for ta, tb in zip(times[a], times[b]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4M elements instead of 16M")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--only", choices=["unscale", "adam", "writeback"], default=None)
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    ampy.set_num_threads(1)
    timer = time.thread_time if args.clock == "cpu" else time.perf_counter
    total = (4 if args.quick else 16) << 20
    rng = np.random.default_rng(0)
    shapes = sizes(total, 64, rng)

    print(f"1 thread, {total >> 20}M elements in {len(shapes)} tensors, {args.rounds} "
          f"interleaved rounds, clock {args.clock}; GB/s = median, ratios = median of "
          "per-round ratios")
    print(f"{'kernel':<44} {'GB/s':>7} {'x bw':>5} {'vs torch':>9}")

    if args.only in (None, "unscale"):
        bench_unscale(args, torch, rng, shapes, total, timer)
    if args.only in (None, "adam"):
        bench_adam(args, torch, rng, shapes, total, timer)
    if args.only in (None, "writeback"):
        bench_writeback(args, rng, shapes, total, timer)


def bench_unscale(args, torch, rng, shapes, total, timer):
    for name, npdt, tdt in (("fp16", np.float16, torch.float16),
                            ("fp32", np.float32, torch.float32)):
        arrays = [rng.uniform(-1, 1, n).astype(npdt) for n in shapes]
        ag = [ampy.from_numpy(a.copy()) for a in arrays]
        tg = [torch.from_numpy(a.copy()) for a in arrays]
        af, tf = ampy.zeros(1), torch.zeros(1)
        ainv = [ampy.from_numpy(np.array([v], np.float32)) for v in (0.5, 2.0)]
        tinv = [torch.tensor([v]) for v in (0.5, 2.0)]
        state = {"a": 0, "t": 0}

        def run_ampy():
            F.non_finite_check_and_unscale_(ag, af, ainv[state["a"]])
            state["a"] ^= 1

        def run_torch():
            torch._amp_foreach_non_finite_check_and_unscale_(tg, tf, tinv[state["t"]])
            state["t"] ^= 1

        nbytes = 2 * total * np.dtype(npdt).itemsize
        t = interleave({"ampy": run_ampy, "torch": run_torch, **ceiling(nbytes)}, args.rounds,
                       timer)
        bw = ceiling_bw(t, nbytes)
        g = nbytes / statistics.median(t["ampy"]) / 1e9
        gt = nbytes / statistics.median(t["torch"]) / 1e9
        print(f"{'unscale+check ' + name + ' grads, ampy':<44} {g:7.1f} "
              f"{g / (bw / 1e9):5.2f} "
              f"{ratio(t, 'ampy', 'torch'):8.2f}x")
        print(f"{'  torch _amp_foreach_non_finite_check_and_unscale_':<44} {gt:7.1f} "
              f"{gt / (bw / 1e9):5.2f}")
        print(f"{'  bandwidth ceiling, same bytes':<44} {bw / 1e9:7.1f}")


def bench_adam(args, torch, rng, shapes, total, timer):
    for decoupled in (False, True):
        opt_name = "AdamW" if decoupled else "Adam"
        hp = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2,
                  amsgrad=False, maximize=False, decoupled_weight_decay=decoupled)
        w32 = [rng.uniform(-1, 1, n).astype(np.float32) for n in shapes]
        g16 = [rng.uniform(-1e-3, 1e-3, n).astype(np.float16) for n in shapes]
        params = [ampy.from_numpy(w.astype(np.float16)) for w in w32]
        masters = [ampy.from_numpy(w.copy()) for w in w32]
        grads = [ampy.from_numpy(g) for g in g16]
        m = [ampy.zeros(n) for n in shapes]
        v = [ampy.zeros(n) for n in shapes]
        steps = [ampy.zeros(1) for _ in shapes]

        def run_ampy():
            F.adam_step_(params, grads, m, v, None, steps, master_params=masters, **hp)

        nb_ampy, nb_torch = 28 * total, 36 * total
        contenders = {"ampy": run_ampy, **ceiling(nb_ampy)}
        tparams = {}
        cls = torch.optim.AdamW if decoupled else torch.optim.Adam
        for variant, kw in (("foreach=False", dict(foreach=False)),
                            ("foreach=True", dict(foreach=True)),
                            ("fused=True", dict(fused=True))):
            ps = [torch.nn.Parameter(torch.from_numpy(w.copy())) for w in w32]
            for p, g in zip(ps, g16):
                p.grad = torch.from_numpy(g.astype(np.float32))
            try:
                opt = cls(ps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, **kw)
                opt.step()
            except (RuntimeError, TypeError) as e:  # a variant this torch lacks on the CPU
                print(f"  (torch {opt_name} {variant}: {e})")
                continue
            contenders["torch " + variant] = opt.step
            tparams[variant] = ps
        t = interleave(contenders, max(3, args.rounds // 2), timer)
        bw = ceiling_bw(t, nb_ampy)
        g = nb_ampy / statistics.median(t["ampy"]) / 1e9
        torch_names = [k for k in t if k.startswith("torch")]
        best = min(torch_names, key=lambda k: statistics.median(t[k]))
        print(f"{opt_name + ' fp16 params+fp32 master, fp16 grads, ampy':<44} {g:7.1f} "
              f"{g / (bw / 1e9):5.2f} {ratio(t, 'ampy', best):8.2f}x (vs fastest: {best})")
        for k in torch_names:
            gt = nb_torch / statistics.median(t[k]) / 1e9
            print(f"{'  ' + k + ' fp32 (36 B/param)':<44} {gt:7.1f} {gt / (bw / 1e9):5.2f} "
                  f"{ratio(t, 'ampy', k):8.2f}x")
        print(f"{'  bandwidth ceiling, ampy bytes':<44} {bw / 1e9:7.1f}")


def bench_writeback(args, rng, shapes, total, timer):
    """GradScaler's fused Adam step: grads unscaled and written back in the
    same pass, vs no write-back, vs a separate unscale pass + step."""
    hp = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2, amsgrad=False,
              maximize=False)
    w32 = [rng.uniform(-1, 1, n).astype(np.float32) for n in shapes]
    params = [ampy.from_numpy(w.astype(np.float16)) for w in w32]
    masters = [ampy.from_numpy(w.copy()) for w in w32]
    grads = [ampy.from_numpy(rng.uniform(-1e-3, 1e-3, n).astype(np.float16)) for n in shapes]
    m = [ampy.zeros(n) for n in shapes]
    v = [ampy.zeros(n) for n in shapes]
    steps = [ampy.zeros(1) for _ in shapes]
    inv = [ampy.from_numpy(np.array([x], np.float32)) for x in (0.5, 2.0)]
    found = ampy.zeros(1)
    flip = {"k": 0}

    def step(unscale_grads, inv_scale):
        F.adam_step_(params, grads, m, v, None, steps, master_params=masters, inv_scale=inv_scale,
                     found_inf=found, unscale_grads=unscale_grads, **hp)

    def fused_write():  # alternating 0.5 / 2.0 keeps the written-back grads bounded
        step(True, inv[flip["k"]])
        flip["k"] ^= 1

    def fused_nowrite():
        step(False, inv[0])

    def separate():
        F.non_finite_check_and_unscale_(grads, found, inv[flip["k"]])
        flip["k"] ^= 1
        step(False, None)

    t = interleave({"write": fused_write, "nowrite": fused_nowrite, "separate": separate,
                    **ceiling(30 * total)}, max(3, args.rounds // 2), timer)
    bw = ceiling_bw(t, 30 * total)
    print(f"{'GradScaler Adam step, fp16 grads + fp32 master':<44} {'GB/s':>7} {'x bw':>5} "
          f"{'t/t(wb)':>10}")
    for key, label, nb in (("write", "fused, grads written back (30 B/param)", 30),
                           ("nowrite", "fused, no write-back (28 B/param)", 28),
                           ("separate", "unscale pass + step (32 B/param)", 32)):
        g = nb * total / statistics.median(t[key]) / 1e9
        print(f"{'  ' + label:<44} {g:7.1f} {g / (bw / 1e9):5.2f} "
              f"{ratio(t, 'write', key):9.2f}x")
    print(f"{'  bandwidth ceiling, write-back bytes':<44} {bw / 1e9:7.1f}")


if __name__ == "__main__":
    main()
