"""A character-level GPT trained with ampy on text that ships with this script.

    python examples/gpt.py [--steps 300] [--dtype bfloat16|float16|float32]

A nanoGPT-style model (token + position embeddings, pre-norm blocks with
causal self-attention through scaled_dot_product_attention(is_causal=True),
a GELU MLP, the output layer tied to the token embedding) trained with AdamW
under CPU autocast (bfloat16 by default; float16 adds a GradScaler). It
prints the loss as it learns and a short sample. No download; about half a
minute on two cores.
"""
import argparse
import math
import time

import numpy as np

import ampy
from ampy import nn
from ampy.nn import functional as F

TEXT = """\
Mixed precision training keeps a master copy of the weights in single precision,
runs the forward and backward passes in half precision, and scales the loss so
that small gradients survive the narrow exponent range of float16. Bfloat16 keeps
the exponent range of float32 and needs no scaling; it trades mantissa bits for
range. Attention compares every position with every earlier one, so the work
grows with the square of the sequence length, but a fused kernel that walks the
keys in blocks never has to hold the whole score matrix in memory at once.
"""


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.n_head = H
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block_size, C=64, H=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, C)
        self.wpe = nn.Embedding(block_size, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab, bias=False)
        self.lm_head.weight = self.wte.weight          # weight tying
        for p in self.parameters():
            if p.ndim == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        pos = ampy.arange(idx.shape[1], dtype=ampy.int64)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def sample(model, stoi, itos, block_size, n=120, temperature=0.5, seed=0):
    """Continue the text's first block_size characters (softmax sampling at
    `temperature`)."""
    rng = np.random.default_rng(seed)
    ids = [stoi[c] for c in TEXT[:block_size]]
    model.eval()
    with ampy.no_grad():
        for _ in range(n):
            ctx = ampy.from_numpy(np.array([ids[-block_size:]], dtype=np.int64))
            logits = model(ctx)[0, -1].float().numpy().astype(np.float64) / temperature
            p = np.exp(logits - logits.max())
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    model.train()
    return "".join(itos[i] for i in ids[block_size:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    args = ap.parse_args()
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    itos = {i: c for c, i in stoi.items()}
    data = np.array([stoi[c] for c in TEXT], dtype=np.int64)
    block_size, batch = 64, 16
    ampy.manual_seed(0)
    rng = np.random.default_rng(0)
    model = GPT(len(chars), block_size)
    opt = ampy.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    dt = getattr(ampy, args.dtype)
    scaler = ampy.amp.GradScaler("cpu", enabled=args.dtype == "float16")
    print(f"{len(data)} characters, vocabulary {len(chars)}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, autocast {args.dtype}")
    t0 = time.time()
    for step in range(args.steps + 1):
        i = rng.integers(0, len(data) - block_size - 1, size=batch)
        x = ampy.from_numpy(np.stack([data[j:j + block_size] for j in i]))
        y = ampy.from_numpy(np.stack([data[j + 1:j + block_size + 1] for j in i]))
        opt.zero_grad()
        with ampy.autocast("cpu", dtype=dt, enabled=args.dtype != "float32"):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, len(chars)), y.view(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.3f}  (uniform: "
                  f"{math.log(len(chars)):.3f})  {time.time() - t0:.1f}s")
    print(f"prompt: {TEXT[:block_size]!r}")
    print(f"sample: {sample(model, stoi, itos, block_size)!r}")


if __name__ == "__main__":
    main()
