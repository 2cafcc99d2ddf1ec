"""LSTM forward+backward and one LSTM language-model training step, ampy vs
torch (CPU), float32 and bfloat16 autocast, 1 and 2 threads, medians.

    python benchmarks/bench_rnn.py                # full sizes
    python benchmarks/bench_rnn.py --short        # a quick sanity run
    python benchmarks/bench_rnn.py --clock cpu    # 1-thread rows on thread CPU time

Rows: `lstm` is nn.LSTM(512, 512) over a (T, B, 512) sequence, forward and
backward (autograd included); `lm step` is Embedding -> 2-layer LSTM ->
Linear (tied), cross entropy, backward and an SGD step. Rounds alternate
ampy, torch, ampy, torch, ...; ratio = the median of the per-round ratios
ampy time / torch time (< 1: ampy faster), which survives background load
better than the medians of the times (also printed). torch runs its default
CPU LSTM (oneDNN's, torch.backends.mkldnn enabled). The CPU path is ampy's selected level
(`ampy._C._set_cpu_level` forces a lower one; for torch on an AMX
machine set ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 to compare the same path).
"""
import contextlib
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampy  # noqa: E402


def _autocast(lib, dt):
    if dt == "float32":
        return contextlib.nullcontext()
    return lib.autocast("cpu", dtype=getattr(lib, dt))


def case_lstm(lib, T, B, H, dt):
    torch.manual_seed(0)
    tm = torch.nn.LSTM(H, H)
    m = tm if lib is torch else ampy.nn.LSTM(H, H)
    if lib is ampy:
        m.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = lib.tensor(np.random.default_rng(0).standard_normal((T, B, H)).astype(np.float32))

    def run():
        m.zero_grad()
        with _autocast(lib, dt):
            y, (h, c) = m(x)
        y.float().sum().backward()
    return run


def case_lm(lib, T, B, H, V, dt):
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, H)
            self.lstm = nn.LSTM(H, H, num_layers=2)
            self.head = nn.Linear(H, V)
            self.head.weight = self.embed.weight

        def forward(self, t):
            return self.head(self.lstm(self.embed(t))[0])

    model = LM()
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.integers(0, V, (T, B)))
    y = lib.tensor(rng.integers(0, V, (T * B,)))

    def run():
        opt.zero_grad()
        with _autocast(lib, dt):
            loss = lib.nn.functional.cross_entropy(model(x).reshape(-1, V), y)
        loss.backward()
        opt.step()
    return run


def interleaved(fa, ft, reps, warmup, clock):
    """(median ampy s, median torch s, median of the per-round ratios)."""
    for _ in range(warmup):
        fa()
        ft()
    ta, tt = [], []
    for _ in range(reps):
        for f, out in ((fa, ta), (ft, tt)):
            t0 = clock()
            f()
            out.append(clock() - t0)
    ratios = [a / t for a, t in zip(ta, tt)]
    return statistics.median(ta), statistics.median(tt), statistics.median(ratios)


def main():
    short = "--short" in sys.argv
    cpu_clock = "--clock" in sys.argv and sys.argv[sys.argv.index("--clock") + 1] == "cpu"
    reps, warmup = (3, 1) if short else (9, 2)
    T, B = (8, 16) if short else (35, 32)
    lm_h, vocab = (256, 2000) if short else (512, 10000)
    print(f"ampy CPU path: {ampy._C.cpu_info()['level']}  (machine shared: numbers are noisy)")
    print(f"{'case':<10}{'shape':<26}{'dtype':<10}{'thr':>4}{'ampy ms':>10}{'torch ms':>10}"
          f"{'ratio':>7}")
    for threads in (1, 2):
        ampy.set_num_threads(threads)
        torch.set_num_threads(threads)
        clock = time.thread_time if cpu_clock and threads == 1 else time.perf_counter
        for dt in ("float32", "bfloat16"):
            rows = [("lstm", f"T={T} B={B} H=512", lambda lib: case_lstm(lib, T, B, 512, dt)),
                    ("lm step", f"T={T} B={B} H={lm_h} V={vocab}",
                     lambda lib: case_lm(lib, T, B, lm_h, vocab, dt))]
            for name, shape, mk in rows:
                ta, tt, ratio = interleaved(mk(ampy), mk(torch), reps, warmup, clock)
                print(f"{name:<10}{shape:<26}{dt:<10}{threads:>4}{ta * 1e3:>10.2f}"
                      f"{tt * 1e3:>10.2f}{ratio:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
