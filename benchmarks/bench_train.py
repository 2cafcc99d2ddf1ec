"""Time per training step, ampy vs torch on the same CPU, same model and data.

    python benchmarks/bench_train.py [--repeat 10] [--quick] [--models mlp,block]
                                     [--modes float32,bfloat16,float16] [--threads N]
                                     [--level avx512bf16]

Models (issue 4): an MLP (batch 256, 784-1024-1024-10, cross-entropy) and a
transformer block (batch 32, seq 128, d 256, 4 heads: layer_norm, linear,
matmul, softmax, gelu; MSE loss), each trained with AdamW in three modes:
float32, autocast bfloat16, autocast float16 + GradScaler. ampy's and torch's
steps run alternately, so both see the same background load; prints a
Markdown table of medians and the median per-pair ratio ampy / torch
(< 1: ampy is faster). Also the dispatch overhead on
tiny tensors (µs per op), outside and inside an autocast region.

--level pins ampy's CPU level (portable, avx2, avx512, avx512bf16, amx); for a
like-for-like run on an AMX machine, pin avx512bf16 and start the script with
ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 so torch leaves AMX too. The header names
the GEMM path each dtype takes.

Not a test: nothing here asserts. A mode ampy cannot run yet prints the
missing piece instead of a time.
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ampy  # noqa: E402
from _harness import median_time  # noqa: E402

try:
    import torch
except ImportError:  # the benchmark still times ampy alone
    torch = None


def paired_times(fa, fb, repeat, warmup=2, clock=time.perf_counter):
    """Median seconds of fa and fb and the median of the per-pair ratios
    fa/fb, timing them alternately (a, b, a, b, ...) so that both see the
    same background load on a shared machine."""
    for _ in range(warmup):
        fa()
        fb()
    ta, tb, r = [], [], []
    for _ in range(repeat):
        t0 = clock()
        fa()
        t1 = clock()
        fb()
        t2 = clock()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
        r.append((t1 - t0) / (t2 - t1))
    return statistics.median(ta), statistics.median(tb), statistics.median(r)


# ------------------------------------------------------------------ models
def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def block(lib, d=256, heads=4):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            dh = d // heads
            qkv = self.qkv(self.ln1(x)).reshape(b, t, 3, heads, dh).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]                       # (b, h, t, dh)
            att = F.softmax(lib.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh)), dim=-1)
            o = lib.matmul(att, v).permute(0, 2, 1, 3).reshape(b, t, d)
            x = x + self.proj(o)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return Block()


def make_step(lib, name, mode):
    """A closure running one training step, from identical weights/data."""
    rng = np.random.default_rng(0)
    if torch is not None:
        torch.manual_seed(0)
        ref = mlp(torch) if name == "mlp" else block(torch)
        state = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    model = mlp(lib) if name == "mlp" else block(lib)
    if torch is not None:
        model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    if name == "mlp":
        x = lib.tensor(rng.standard_normal((256, 784)).astype(np.float32))
        y = lib.tensor(rng.integers(0, 10, 256))
        loss_fn = lib.nn.functional.cross_entropy
    else:
        x = lib.tensor(rng.standard_normal((32, 128, 256)).astype(np.float32))
        y = lib.tensor(rng.standard_normal((32, 128, 256)).astype(np.float32))
        loss_fn = lib.nn.functional.mse_loss
    opt = lib.optim.AdamW(model.parameters(), lr=1e-4)
    enabled = mode != "float32"
    dtype = lib.bfloat16 if mode == "bfloat16" else lib.float16
    scaler = lib.amp.GradScaler("cpu", enabled=(mode == "float16"))

    def step():
        opt.zero_grad()
        with lib.autocast("cpu", dtype=dtype, enabled=enabled):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    return step


MODES = {"float32": "float32", "bfloat16": "bf16 autocast", "float16": "fp16 + GradScaler"}


def _row(cells, widths):
    return "| " + " | ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))) + " |"


def _table(head, rows):
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    print(_row(head, widths))
    print("|" + "|".join(("-" * (w + 1) + ":") if i >= 2 else ("-" * (w + 2))
                         for i, w in enumerate(widths)) + "|")
    for r in rows:
        print(_row(r, widths))


def bench_models(repeat, models, modes):
    print(f"\nTraining step, median of {repeat} (AdamW; ampy and torch steps interleaved; "
          f"threads: ampy {ampy.get_num_threads()}, torch "
          f"{torch.get_num_threads() if torch else '-'}; ratio = median of per-pair ratios)\n")
    rows = []
    for name in models:
        for mode in modes:
            try:
                fa = make_step(ampy, name, mode)
                if torch is not None:
                    ta, tt, ratio = paired_times(fa, make_step(torch, name, mode), repeat)
                    cells = [f"{ta * 1e3:.1f}", f"{tt * 1e3:.1f}", f"{ratio:.2f}x"]
                else:
                    cells = [f"{median_time(fa, repeat) * 1e3:.1f}", "-", "-"]
            except Exception as e:  # noqa: BLE001 (report what ampy lacks, keep going)
                cells = ["n/a", "-", f"({type(e).__name__}: {str(e)[:60]})"]
            rows.append([name, MODES[mode]] + cells)
            print(f"  {name} {MODES[mode]}: " + " / ".join(cells), file=sys.stderr, flush=True)
    _table(["model", "mode", "ampy ms", "torch ms", "ampy/torch"], rows)


# ---------------------------------------------------------- dispatch overhead
DISPATCH_CASES = [
    ("x.to(float16) (cast)", lambda m, a, w: a.to(m.float16)),
    ("a + b", lambda m, a, w: a + a),
    ("a + b, requires_grad", lambda m, a, w: w + w),
    ("matmul(2x4, 4x2)", lambda m, a, w: m.matmul(a.reshape(2, 4), a.reshape(4, 2))),
    ("linear(2x4, W 2x4, b), requires_grad",
     lambda m, a, w: m.nn.functional.linear(a.reshape(2, 4), w.reshape(2, 4), w[:2])),
    ("relu + sum + backward (3 ops)", lambda m, a, w: m.relu(w).sum().backward()),
]


def bench_dispatch(repeat):
    n = 1000
    print(f"\nDispatch overhead on 8-element tensors, µs per op (median of {repeat} x {n}, "
          f"interleaved; CPU time of the calling thread, which excludes time spent waiting "
          f"for a core on a loaded machine)\n")
    rows = []
    for region in (False, True):
        for label, fn in DISPATCH_CASES:
            loops = []
            for m in (ampy, torch):
                if m is None:
                    continue
                a = m.ones(8)
                w = m.ones(8).requires_grad_()

                def loop(m=m, a=a, w=w):
                    with m.autocast("cpu", dtype=m.float16, enabled=region):
                        for _ in range(n):
                            fn(m, a, w)
                loops.append(loop)
            name = label + (" [autocast fp16]" if region else "")
            try:
                if len(loops) == 2:
                    ta, tt, r = paired_times(loops[0], loops[1], repeat, warmup=1,
                                             clock=time.thread_time)
                    rows.append([name, "", f"{ta / n * 1e6:.2f}", f"{tt / n * 1e6:.2f}",
                                 f"{r:.2f}x"])
                else:
                    ta = median_time(loops[0], repeat, warmup=1)  # wall clock
                    rows.append([name, "", f"{ta / n * 1e6:.2f}", "-", "-"])
            except Exception as e:  # noqa: BLE001
                rows.append([name, "", "n/a", "-", f"({type(e).__name__})"])
    _table(["op", "", "ampy µs", "torch µs", "ampy/torch"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="float32 only, 3 repeats")
    ap.add_argument("--models", default="mlp,block", help="comma list of mlp, block")
    ap.add_argument("--modes", default="float32,bfloat16,float16",
                    help="comma list of float32, bfloat16, float16")
    ap.add_argument("--no-dispatch", action="store_true", help="skip the per-op overhead table")
    ap.add_argument("--no-models", action="store_true", help="skip the training-step table")
    ap.add_argument("--threads", type=int, default=0,
                    help="intra-op threads for both libraries (0: leave their defaults)")
    ap.add_argument("--level", default=None,
                    help="ampy CPU level to pin (portable, avx2, avx512, avx512bf16, amx)")
    args = ap.parse_args(argv)
    if args.level:
        try:
            ampy._C._set_cpu_level(args.level)
        except (ValueError, RuntimeError) as e:
            ap.error(f"--level: {e}")
    paths = ", ".join(f"{n}={ampy._C.gemm_impl_name(d)}" for n, d in
                      (("f32", ampy.float32), ("bf16", ampy.bfloat16), ("f16", ampy.float16)))
    print(f"ampy CPU level {ampy._C.cpu_info()['level']}; "
          f"GEMM paths {paths}; ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '(unset)')}")
    if args.threads > 0:
        ampy.set_num_threads(args.threads)
        if torch is not None:
            torch.set_num_threads(args.threads)
    repeat = 3 if args.quick else args.repeat
    modes = ["float32"] if args.quick else args.modes.split(",")
    for m in modes:
        if m not in MODES:
            ap.error(f"--modes: unknown mode {m!r}")
    models = args.models.split(",")
    for m in models:
        if m not in ("mlp", "block"):
            ap.error(f"--models: unknown model {m!r}")
    if not args.no_dispatch:
        bench_dispatch(repeat)
    if not args.no_models:
        bench_models(repeat, models, modes)


if __name__ == "__main__":
    main()
