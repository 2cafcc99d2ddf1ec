"""What the demo prints and draws: the progress bar, the CPU-path line, the
results table, the one-line reading of the results, and the PNG."""
import sys
import time

import numpy as np

MiB = float(1 << 20)


class Progress:
    """A one-line text progress bar (no dependency): ``[#####.....] 12/20 loss
    0.12``. Redraws in place on a terminal; elsewhere prints the first and
    the final line."""

    def __init__(self, total, label, width=24, file=None):
        self.total, self.label, self.width = total, label, width
        self.file = file or sys.stderr
        self.tty = getattr(self.file, "isatty", lambda: False)()
        self.t0 = time.perf_counter()
        self.n = 0

    def update(self, n=1, **info):
        self.n += n
        if not self.tty and self.n not in (1, self.total):
            return
        done = int(self.width * self.n / self.total)
        extra = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in info.items())
        line = (f"{self.label:<24} [{'#' * done}{'.' * (self.width - done)}] "
                f"{self.n}/{self.total} {extra} {time.perf_counter() - self.t0:5.1f}s")
        end = "\n" if self.n >= self.total or not self.tty else ""
        self.file.write(("\r" if self.tty else "") + line + end)
        self.file.flush()


def cpu_path_line(info):
    """One line: which of ampy's CPU paths ran (``ampy._C.cpu_info()``) and
    what that means for the speed of half-precision GEMMs."""
    level = info.get("level", "?")
    feats = ", ".join(f"{k} {'yes' if info.get(k) else 'no'}"
                      for k in ("avx512_bf16", "avx512_fp16", "amx_bf16"))
    if level == "amx":
        why = ("bf16 GEMMs run on AMX tiles (several times fp32's multiply-adds per cycle), so "
               "autocast speeds up the linear layers")
    elif level == "avx512bf16":
        why = ("bf16 GEMMs use vdpbf16ps (twice fp32 FMA's multiply-adds per cycle); fp16 GEMMs "
               "convert to fp32 and run fp32 FMAs")
    else:
        why = ("bf16/fp16 GEMMs convert to fp32 and run fp32 FMAs (no AMX/vdpbf16ps kernel on "
               "this level), so half precision saves activation memory but not GEMM "
               "time")
    return (f"CPU path: ampy._C level '{level}' ({feats}): {why}. Speed-ups depend on the "
            f"instructions a CPU has; these are the ones measured here.")


def _fmt(v, spec, none="-"):
    return none if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, spec)


def table(results):
    """The results table: one row per mode (Result objects of _demo_train)."""
    base = next((r.step_time for r in results if r.mode.dtype is None), None)
    head = (f"{'mode':<19}{'ms/step':>8}{'vs fp32':>8}{'act MiB':>8}{'peak MiB':>9}"
            f"{'loss':>7}{'val loss':>9}{'val acc':>8}{'skipped':>8}{'scale':>8}"
            f"{'flushed act':>12}{'flushed par':>12}")
    lines = [head, "-" * len(head)]
    for r in results:
        speed = base / r.step_time if base else None
        act = r.act_bytes / MiB if r.act_bytes is not None else None
        peak = r.peak_bytes / MiB if r.peak_bytes is not None else None
        fa = r.underflow_total("act") if r.act_probes else None
        fp = r.underflow_total("param") if r.probes else None
        lines.append(
            f"{r.mode.name:<19}{r.step_time * 1e3:>8.1f}{_fmt(speed, '.2f') + 'x':>8}"
            f"{_fmt(act, '.1f'):>8}{_fmt(peak, '.1f'):>9}{r.final_loss:>7.3f}"
            f"{_fmt(r.val_loss, '.3f'):>9}{_fmt(r.val_acc, '.3f'):>8}{sum(r.skipped):>8d}"
            f"{_fmt(r.final_scale, '.0f'):>8}{_fmt(fa, '.2%'):>12}{_fmt(fp, '.3%'):>12}")
    return "\n".join(lines)


def _by(results, name):
    return next((r for r in results if r.mode.name == name), None)


def reading(results):
    """The lines that say what the reader should see, from the numbers."""
    f32, bf, sc, raw = (_by(results, n) for n in ("float32", "bf16 autocast",
                                                  "fp16 + GradScaler", "fp16, no scaler"))
    out = []
    if raw is not None and raw.act_probes:
        a_raw, a_sc = raw.underflow_total("act"), sc.underflow_total("act") if sc else None
        p_raw = raw.underflow_total("param")
        line = (f"Without loss scaling, {a_raw:.1%} of the nonzero activation gradients and "
                f"{p_raw:.3%} of the nonzero weight gradients became exactly 0 in float16")
        if a_sc is not None:
            line += f" (with GradScaler: {a_sc:.2%} and {sc.underflow_total('param'):.3%})"
        out.append(line + ".")
        if a_raw < 0.01:
            out.append("The underflow effect in this run was small (under 1 % of the "
                       "activation gradients).")
    if raw is not None and sc is not None:
        gap = raw.val_loss - sc.val_loss
        noise = max((abs(r.val_loss - f32.val_loss) for r in (bf, sc) if r is not None),
                    default=0.0) if f32 is not None else 0.0
        line = (f"Validation loss {raw.val_loss:.3f} without the scaler vs {sc.val_loss:.3f} "
                f"with it ({'worse' if gap > 0 else 'better'} by {abs(gap):.3f}")
        if abs(gap) <= noise:
            line += (f"; the runs that lose nothing differ from float32 by up to {noise:.3f}, "
                     f"so on the loss the effect in this short run was small: AdamW rescales "
                     f"the surviving gradients")
        out.append(line + ").")
    if f32 is not None and bf is not None and f32.act_bytes:
        out.append(f"Half precision holds {bf.act_bytes / f32.act_bytes:.0%} of float32's "
                   f"activation memory; bf16 needs no scaler (float32's exponent range).")
    return out


def _plot_losses(ax, results):
    for r in results:
        ls = np.asarray(r.losses)
        k = max(1, len(ls) // 30)
        sm = np.convolve(ls, np.ones(k) / k, mode="valid")
        ax.plot(np.arange(len(sm)) + k - 1, sm, label=r.mode.name)
    ax.set(xlabel="step", ylabel="training loss", title="loss (same init, same batches)")
    ax.legend(fontsize=8)


def _plot_scale(ax, results):
    for r in results:
        if not r.mode.scaler:
            continue
        sc = np.asarray(r.scales)
        ax.step(np.arange(len(sc)), sc, where="post", label=f"{r.mode.name}: loss scale")
        sk = np.flatnonzero(r.skipped)
        ax.plot(sk, sc[sk], "rv", label=f"skipped steps ({len(sk)})")
    ax.axhline(1.0, color="C3", ls=":", label="no scaler (scale 1)")
    ax.set(xlabel="step", ylabel="loss scale", yscale="log", title="GradScaler")
    ax.legend(fontsize=8)


def _plot_underflow(ax, results):
    runs = [r for r in results if r.act_probes]
    groups = list(dict.fromkeys(list(runs[0].underflow("param")) +
                                list(runs[0].underflow("act")))) if runs else []
    x = np.arange(len(groups))
    w = 0.8 / max(1, 2 * len(runs))
    for i, r in enumerate(runs):
        for j, kind in enumerate(("act", "param")):
            u = r.underflow(kind)
            vals = [100 * u.get(g, 0.0) for g in groups]
            ax.bar(x + (2 * i + j) * w - 0.4 + w / 2, vals, w,
                   label=f"{r.mode.name}: {'activation' if kind == 'act' else 'weight'} grads")
    ax.set_xticks(x, groups, fontsize=8)
    ax.set(ylabel="% of nonzero grads that are 0 in fp16", yscale="log",
           title="gradients flushed to zero (log scale; none: no bar)")
    ax.set_ylim(1e-3, 3e3)  # headroom above the bars for the legend
    ax.legend(fontsize=7, loc="upper left", ncol=2)


def plot(results, out, headline):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    _plot_losses(axes[0], results)
    _plot_scale(axes[1], results)
    _plot_underflow(axes[2], results)
    fig.suptitle(headline, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=72)
    plt.close(fig)


def compare_table(ampy_results, torch_results, steps):
    """ampy against torch, mode by mode, over the first ``steps`` steps."""
    head = (f"{'mode':<19}{'ampy ms':>9}{'torch ms':>10}{'ampy speed-up':>14}"
            f"{'ampy loss@' + str(steps):>15}{'torch loss@' + str(steps):>16}")
    lines = [head, "-" * len(head)]
    for a in ampy_results:
        t = _by(torch_results, a.mode.name)
        if t is None:
            continue
        lines.append(f"{a.mode.name:<19}{a.step_time * 1e3:>9.1f}{t.step_time * 1e3:>10.1f}"
                     f"{t.step_time / a.step_time:>13.2f}x"
                     f"{a.losses[steps - 1]:>15.4f}{t.losses[steps - 1]:>16.4f}")
    return "\n".join(lines)
