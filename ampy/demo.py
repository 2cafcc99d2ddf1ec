"""python -m ampy.demo — mixed-precision training in one command.

Trains the same MLP on the 8x8 digits (1797 images, shipped in
ampy/data/digits.npz; nothing is downloaded) twice, from the same initial
weights: in float32, then with AMP (autocast float16 + GradScaler). Shows a
progress bar, prints a table (test accuracy, time per epoch, steps skipped,
final loss scale) and writes a PNG with both loss curves and the loss-scale
trajectory. Runs on the CPU (CUDA when ampy has it); a minute at most on two
cores.

    python -m ampy.demo [--epochs 20] [--dtype float16|bfloat16] [--out amp_demo.png]

``--backend torch`` runs the identical script with torch (if installed), for
comparison: the two libraries share the API, which is ampy's point.
"""
import argparse
import importlib
import os
import sys
import time

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.npz")


def load_digits(seed=0, n_test=360):
    """(x_train, y_train, x_test, y_test) as NumPy arrays: pixels scaled to
    [0, 1] float32, labels int64, a fixed shuffled split."""
    with np.load(DATA) as d:
        x = d["images"].reshape(len(d["images"]), 64).astype(np.float32) / 16.0
        y = d["target"].astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    x, y = x[perm], y[perm]
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


class Progress:
    """A one-line text progress bar (no tqdm): ``[#####.....] 12/20 loss 0.12``.
    Redraws in place on a terminal, prints one line per update elsewhere
    only every ``every`` updates."""

    def __init__(self, total, label, width=24, file=None):
        self.total, self.label, self.width = total, label, width
        self.file = file or sys.stderr
        self.tty = getattr(self.file, "isatty", lambda: False)()
        self.t0 = time.perf_counter()
        self.n = 0

    def update(self, n=1, **info):
        self.n += n
        if not self.tty and self.n != self.total:
            return
        done = int(self.width * self.n / self.total)
        extra = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in info.items())
        line = (f"{self.label:<8} [{'#' * done}{'.' * (self.width - done)}] "
                f"{self.n}/{self.total} {extra} {time.perf_counter() - self.t0:5.1f}s")
        end = "\n" if self.n >= self.total else ""
        self.file.write(("\r" if self.tty else "") + line + end)
        self.file.flush()


def _lib(name):
    return importlib.import_module(name)


def make_model(lib, hidden=256):
    nn = lib.nn
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def train(lib, data, state, *, amp, dtype="float16", epochs=20, batch_size=64, lr=0.05,
          device="cpu", seed=0, label=""):
    """Train from ``state`` (a state_dict of NumPy arrays); returns a dict with
    per-step losses and scales, skipped steps, test accuracy, timings and the
    trained model."""
    nn = lib.nn
    x_tr, y_tr, x_te, y_te = data
    model = make_model(lib)
    model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    if device != "cpu":
        model = model.to(device)
    opt = lib.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scaler = lib.amp.GradScaler(device, growth_interval=50, enabled=amp)
    half = getattr(lib, dtype)
    xs, ys = lib.tensor(x_tr).to(device), lib.tensor(y_tr).to(device)
    steps_per_epoch = (len(x_tr) + batch_size - 1) // batch_size
    order = np.random.default_rng(seed)
    losses, scales, skipped, epoch_times = [], [], [], []
    bar = Progress(epochs, label)
    for _ in range(epochs):
        t0 = time.perf_counter()
        perm = order.permutation(len(x_tr))
        for b in range(steps_per_epoch):
            idx = lib.tensor(perm[b * batch_size:(b + 1) * batch_size]).to(device)
            x, y = xs[idx], ys[idx]
            opt.zero_grad()
            with lib.autocast(device, dtype=half, enabled=amp):
                loss = nn.functional.cross_entropy(model(x), y)
            scale_before = scaler.get_scale()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(float(loss.item()))
            scales.append(scale_before)
            last = getattr(scaler, "last_step_skipped", None)
            skipped.append(bool(last) if last is not None
                           else scaler.get_scale() < scale_before)
        epoch_times.append(time.perf_counter() - t0)
        bar.update(loss=float(np.mean(losses[-steps_per_epoch:])))
    with lib.no_grad():
        pred = model(lib.tensor(x_te).to(device)).argmax(1)
    acc = float((pred.cpu().numpy() == y_te).mean())
    return {"losses": losses, "scales": scales, "skipped": skipped, "accuracy": acc,
            "epoch_time": float(np.median(epoch_times)), "final_scale": scaler.get_scale(),
            "amp": amp, "model": model}


def initial_state(lib, seed=0):
    lib.manual_seed(seed)
    return {k: v.detach().cpu().numpy().copy() for k, v in make_model(lib).state_dict().items()}


def table(rows):
    head = f"{'run':<22}{'test acc':>9}{'s/epoch':>10}{'skipped':>9}{'final scale':>13}"
    lines = [head, "-" * len(head)]
    for name, r in rows:
        scale = f"{r['final_scale']:.0f}" if r["amp"] else "-"
        lines.append(f"{name:<22}{r['accuracy']:>9.3f}{r['epoch_time']:>10.3f}"
                     f"{sum(r['skipped']):>9d}{scale:>13}")
    return "\n".join(lines)


def plot(rows, out, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for name, r in rows:
        ls = np.asarray(r["losses"])
        k = max(1, len(ls) // 100)
        smooth = np.convolve(ls, np.ones(k) / k, mode="valid")
        ax1.plot(np.arange(len(smooth)) + k - 1, smooth, label=name)
    ax1.set(xlabel="step", ylabel="training loss", yscale="log", title="loss")
    ax1.legend()
    for name, r in rows:
        if r["amp"]:
            sc = np.asarray(r["scales"])
            ax2.step(np.arange(len(sc)), sc, where="post", label=f"{name} loss scale")
            sk = np.flatnonzero(r["skipped"])
            ax2.plot(sk, sc[sk], "rv", label=f"skipped steps ({len(sk)})")
    ax2.set(xlabel="step", ylabel="loss scale", yscale="log", title="GradScaler")
    ax2.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ampy.demo", description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--dtype", choices=("float16", "bfloat16"), default="float16")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--out", default="amp_demo.png", help="PNG path (default: ./amp_demo.png)")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="ampy", help="ampy (default) or torch, for comparison")
    args = ap.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1:
        ap.error("--epochs and --batch-size must be >= 1")
    lib = _lib(args.backend)
    device = args.device
    if device == "auto":
        cuda = getattr(lib, "cuda", None)
        device = "cuda" if cuda is not None and cuda.is_available() else "cpu"
    data = load_digits(args.seed)
    state = initial_state(lib, args.seed)
    print(f"{args.backend} demo: MLP 64-256-256-10 on 8x8 digits ({len(data[0])} train / "
          f"{len(data[2])} test), {args.epochs} epochs, batch {args.batch_size}, {device}")
    kw = dict(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, device=device,
              seed=args.seed, dtype=args.dtype)
    rows = [("float32", train(lib, data, state, amp=False, label="float32", **kw)),
            (f"AMP {args.dtype}+scaler", train(lib, data, state, amp=True, label="AMP", **kw))]
    print(table(rows))
    if not args.no_plot:
        out = os.path.abspath(args.out)
        plot(rows, out, f"{args.backend}: float32 vs AMP ({args.dtype} autocast + GradScaler)")
        print(f"wrote {out}")
    return rows


if __name__ == "__main__":
    main()
