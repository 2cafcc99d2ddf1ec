"""scaled_dot_product_attention and one GPT training step, ampy vs torch (CPU).

    python benchmarks/bench_attention.py [--quick] [--threads 1,2] [--level avx512bf16]

Rows: causal self-attention, batch 1 x 8 heads x head dim 64, at T = 512 and
T = 2048, forward and forward+backward, float32 and bfloat16; ratio = ampy
time / torch time (< 1: ampy faster). `extra MiB` is ampy's allocator peak
during the call beyond its inputs and outputs (the fused kernel's workspace),
beside what one head's T x T float32 score matrix would take. Then one
training step (forward, backward, AdamW) of a small GPT (4 layers, d 256,
8 heads, T 256, batch 8) in float32 and under bf16 autocast.

--level forces ampy's CPU level (e.g. avx512bf16 on an AMX machine); for the
same path in torch run with ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16. The ampy
path printed is the GEMM kernel its bf16 products take (_C.gemm_impl_name).
Timings are medians; ampy's and torch's calls alternate per sample-set, so
both see the same background load. Not a test: nothing asserts.
"""
import argparse
import functools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ampy  # noqa: E402
import torch  # noqa: E402
from _harness import median_time as _median_time  # noqa: E402

median_time = functools.partial(_median_time, warmup=1)


def _qkv(lib, T, dt, grad, B=1, H=8, D=64, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(3):
        a = rng.standard_normal((B, H, T, D)).astype(np.float32)
        if lib is torch:
            t = torch.from_numpy(a).to(getattr(torch, dt))
        else:
            t = ampy.from_numpy(a).to(getattr(ampy, dt))
        out.append(t.requires_grad_() if grad else t)
    return out


def _sdpa_fns(T, dt, backward):
    aq = _qkv(ampy, T, dt, backward)
    tq = _qkv(torch, T, dt, backward)
    ag = ampy.ones(*aq[0].shape, dtype=aq[0].dtype)
    tg = torch.ones(*tq[0].shape, dtype=tq[0].dtype)

    def a():
        o = ampy.nn.functional.scaled_dot_product_attention(*aq, is_causal=True)
        if backward:
            o.backward(ag)

    def t():
        o = torch.nn.functional.scaled_dot_product_attention(*tq, is_causal=True)
        if backward:
            o.backward(tg)
    return a, t, aq


def _extra_mib(fn, inputs, backward):
    """ampy's allocator peak during fn beyond inputs (held) and outputs."""
    ampy.reset_peak_memory_stats()
    base = ampy.memory_allocated()
    fn()
    peak = ampy.max_memory_allocated() - base
    q = inputs[0]
    io = q.numel() * q.element_size() * (4 if backward else 1) + q.numel() // q.shape[-1] * 4
    for t in inputs:
        t.grad = None
    return max(0, peak - io) / 2**20


def bench_sdpa(T, dt, backward, reps):
    a, t, ins = _sdpa_fns(T, dt, backward)
    ta = median_time(a, reps=reps)
    tt = median_time(t, reps=reps)
    extra = _extra_mib(a, ins, backward)
    return ta, tt, extra, T * T * 4 / 2**20


def _gpt(lib, layers=4, C=256, H=8, T=256, V=512):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            B, Tn, Cn = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(Cn, dim=2)
            q, k, v = (z.view(B, Tn, H, Cn // H).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, Tn, Cn))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx, tgt):
            x = self.wte(idx) + self.wpe(lib.arange(idx.shape[1], dtype=lib.int64))
            for b in self.h:
                x = b(x)
            return F.cross_entropy(self.lm_head(self.ln_f(x)).view(-1, V), tgt.view(-1))

    return GPT()


def _gpt_step_fn(lib, mode, B=8, T=256, V=512):
    torch.manual_seed(0)
    model = _gpt(lib)
    if lib is ampy:
        tm = _gpt(torch)
        model.load_state_dict({k: ampy.from_numpy(v.detach().numpy().copy())
                               for k, v in tm.state_dict().items()})
    opt = lib.optim.AdamW(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    conv = torch.from_numpy if lib is torch else ampy.from_numpy
    x, y = conv(x), conv(y)

    def step():
        opt.zero_grad()
        if mode == "float32":
            loss = model(x, y)
        else:
            with lib.autocast("cpu", dtype=lib.bfloat16):
                loss = model(x, y)
        loss.backward()
        opt.step()
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="few repetitions (a sanity number)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--level", default=None, help="force ampy's CPU level")
    args = p.parse_args()
    if args.level:
        ampy._C._set_cpu_level(args.level)
    reps = 3 if args.quick else 11
    print(f"ampy bf16 GEMM path: {ampy._C.gemm_impl_name(ampy.bfloat16)}, "
          f"f32: {ampy._C.gemm_impl_name(ampy.float32)}; torch {torch.__version__}\n")
    for n in (int(s) for s in args.threads.split(",")):
        ampy.set_num_threads(n)
        torch.set_num_threads(n)
        print(f"threads {n}\n")
        print("| op | T | dtype | ampy ms | torch ms | ratio | ampy extra MiB | T*T f32 MiB |")
        print("|---|---|---|---|---|---|---|---|")
        for T in (512, 2048):
            for dt in ("float32", "bfloat16"):
                for bw in (False, True):
                    ta, tt, extra, quad = bench_sdpa(T, dt, bw, reps)
                    name = "sdpa fwd+bwd" if bw else "sdpa fwd"
                    print(f"| {name} | {T} | {dt} | {ta * 1e3:.2f} | {tt * 1e3:.2f} | "
                          f"{ta / tt:.2f} | {extra:.2f} | {quad:.0f} |")
        print("\n| GPT step (4x256, T 256, batch 8) | ampy ms | torch ms | ratio |")
        print("|---|---|---|---|")
        for mode in ("float32", "bf16 autocast"):
            fa, ft = _gpt_step_fn(ampy, mode), _gpt_step_fn(torch, mode)
            ta, tt = median_time(fa, reps=reps), median_time(ft, reps=reps)
            print(f"| {mode} | {ta * 1e3:.1f} | {tt * 1e3:.1f} | {ta / tt:.2f} |")
        print()


if __name__ == "__main__":
    main()
