"""python -m ampy.demo — what mixed precision does, in one command.

Trains a small character-level GPT (2 pre-norm blocks, d=128, context 64) on
English-like text that ampy generates from a small grammar (nothing is
downloaded), four ways from the same initial weights on the same batches:

  float32              the reference
  bf16 autocast        linear layers and attention matmuls in bfloat16
  fp16 + GradScaler    float16 autocast with dynamic loss scaling
  fp16, no scaler      float16 autocast at loss scale 1: what the scaler is for

It prints a table (time per step and speed-up over float32, activation
memory from ampy's allocator counters, final training loss, validation loss
and accuracy, skipped steps, final loss scale, and the share of gradients
that flushed to zero in float16: measured on probe steps against a float32
gradient at the same weights and batch), says which CPU path ran, and writes
a PNG (loss curves, loss-scale trajectory with skipped steps, flushed share
per layer).

    python -m ampy.demo [--steps 120] [--threads N] [--out amp_demo.png] [--compare-torch] [--quick]

``--compare-torch`` runs the same model and batches through torch (when
installed) for the first ``--torch-steps`` steps, side by side, and measures
the GEMM rates of both libraries in float32, bfloat16 and float16.
"""
import argparse
import os
import sys
import time

import numpy as np

import ampy

from . import _demo_data, _demo_report, _demo_train
from ._demo_digits import DATA, initial_state, load_digits, make_model, train  # noqa: F401
from ._demo_report import Progress  # noqa: F401

QUICK = dict(steps=6, batch=8, T=32, d=64, n_layer=2, n_head=4, probes=3, eval_batches=1)


def config(args):
    if args.quick:
        kw = dict(QUICK)
        kw["steps"] = args.steps or kw["steps"]
    else:
        kw = {"steps": args.steps or _demo_train.Config.steps, "batch": args.batch}
    return _demo_train.Config(lr=args.lr, seed=args.seed, **kw)


def run_all(lib, data, cfg, label=""):
    """The four modes of ``lib``; one progress bar each."""
    results = []
    for mode in _demo_train.MODES:
        bar = Progress(cfg.steps, f"{label}{mode.name}")
        results.append(_demo_train.train(lib, data, cfg, mode,
                                         progress=lambda s, loss: bar.update(loss=loss)))
    return results


def gemm_rates(libs, n=512, rounds=5):
    """{library name: {dtype: GFLOP/s}} of an n x n x n matmul in float32,
    bfloat16 and float16: the best of ``rounds`` calls after a warm-up, the
    libraries and dtypes interleaved round by round (a loaded machine then
    slows them alike)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    cases = []
    for lib in libs:
        for name in ("float32", "bfloat16", "float16"):
            dt = getattr(lib, name)
            x, y = lib.tensor(a).to(dt), lib.tensor(b).to(dt)
            lib.matmul(x, y)
            cases.append((lib.__name__, name, lib.matmul, x, y))
    best = {}
    for _ in range(rounds):
        for key_lib, name, mm, x, y in cases:
            t = _timed(lambda: mm(x, y))
            best[key_lib, name] = min(t, best.get((key_lib, name), t))
    out = {}
    for (key_lib, name), t in best.items():
        out.setdefault(key_lib, {})[name] = 2.0 * n ** 3 / t / 1e9
    return out


def _threads(n):
    return f"{n} thread{'' if n == 1 else 's'}"


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def compare_torch(results, data, cfg, steps):
    """Torch through the same modes for ``steps`` steps; prints the
    side-by-side table and the GEMM rates. None when torch is missing."""
    try:
        import torch
    except ImportError:
        print("--compare-torch: torch is not installed (pip install torch); skipped")
        return None
    torch.set_num_threads(ampy.get_num_threads())  # the same cores for both
    tcfg = _demo_train.Config(**{**cfg.__dict__, "steps": steps, "probes": 0})
    print(f"\ntorch {torch.__version__}, {_threads(torch.get_num_threads())}, the first {steps} "
          f"steps of every mode (same initial weights and batches):")
    tres = run_all(torch, data, tcfg, label="torch ")
    print(_demo_report.compare_table(results, tres, steps))
    rates = gemm_rates([ampy, torch])
    ra, rt = rates["ampy"], rates["torch"]
    print("\nGEMM 512x512x512, GFLOP/s:   " +
          "   ".join(f"{k}: ampy {ra[k]:.1f} / torch {rt[k]:.1f}" for k in ra))
    print(f"float16 here: torch runs at {rt['float16'] / rt['float32']:.1%} of its float32 "
          f"rate, ampy at {ra['float16'] / ra['float32']:.0%} of its own. "
          + ("On CPUs without AVX512-FP16, torch's float16 CPU matmul has no fast kernel, "
             "while ampy's float16 GEMM converts to fp32 and runs at fp32 FMA speed."
             if not ampy._C.cpu_info().get("avx512_fp16") else
             "This CPU has AVX512-FP16."))
    return tres


def _parser():
    ap = argparse.ArgumentParser(prog="python -m ampy.demo",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=None,
                    help=f"training steps per mode (default {_demo_train.Config.steps}; "
                         f"--quick: {QUICK['steps']})")
    ap.add_argument("--batch", type=int, default=_demo_train.Config.batch)
    ap.add_argument("--lr", type=float, default=_demo_train.Config.lr)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="amp_demo.png", help="PNG path (default: ./amp_demo.png)")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for ampy (and torch with --compare-torch); default: ampy's")
    ap.add_argument("--quick", action="store_true",
                    help="a tiny model for a few steps (seconds; what the tests run)")
    ap.add_argument("--compare-torch", action="store_true",
                    help="run the same through torch, side by side (needs torch)")
    ap.add_argument("--torch-steps", type=int, default=10,
                    help="steps per mode for --compare-torch (default 10: torch's float16 "
                         "CPU matmul is slow)")
    return ap


def main(argv=None):
    ap = _parser()
    args = ap.parse_args(argv)
    if (args.steps is not None and args.steps < 1) or args.batch < 1 or args.torch_steps < 1 \
            or (args.threads is not None and args.threads < 1):
        ap.error("--steps, --batch, --threads and --torch-steps must be >= 1")
    if args.threads is not None:
        ampy.set_num_threads(args.threads)
    cfg = config(args)
    data = _demo_data.CharData(n_chars=20_000 if args.quick else 200_000, seed=args.seed)
    print(f"ampy demo: character GPT ({cfg.n_layer} blocks, d={cfg.d}, {cfg.n_head} heads, "
          f"context {cfg.T}, vocab {data.vocab}) on generated text, {cfg.steps} steps of "
          f"batch {cfg.batch} per mode, AdamW lr {cfg.lr}, {_threads(ampy.get_num_threads())}")
    print(_demo_report.cpu_path_line(ampy._C.cpu_info()))
    if not args.compare_torch and not args.quick:
        r = gemm_rates([ampy])["ampy"]
        print("ampy GEMM 512x512x512, GFLOP/s: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items())
              + " (--compare-torch measures torch's too: its float16 CPU matmul is slow on "
                "CPUs without AVX512-FP16)")
    results = run_all(ampy, data, cfg)
    print(_demo_report.table(results))
    for line in _demo_report.reading(results):
        print(line)
    if args.compare_torch:
        compare_torch(results, data, cfg, min(args.torch_steps, cfg.steps))
    if not args.no_plot:
        out = os.path.abspath(args.out)
        headline = _demo_report.reading(results)[0] if results[-1].act_probes else ""
        _demo_report.plot(results, out, headline)
        print(f"wrote {out}: left, the four loss curves; middle, the loss scale (skipped steps "
              f"in red); right, the share of gradients that flush to zero in float16 per layer "
              f"without and with the scaler")
    return results


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
