"""A nanoGPT-style GPT trained side by side with torch 2.13 CPU from the same
initial weights: token + position Embedding, pre-norm blocks (LayerNorm,
causal self-attention through scaled_dot_product_attention(is_causal=True)
on the transposed head views of one qkv projection, GELU MLP), weight tying
(lm_head.weight is wte.weight), AdamW; 20 steps in float32, under bf16
autocast, and under fp16 autocast with GradScaler (ampy.amp.GradScaler
against torch.amp.GradScaler on cpu).

Tolerances. float32: both sides compute the same float32 formulas with
different summation orders (u = 2^-24 per rounding); the loss, a mean of
log-softmax terms, agrees to ~1e-7 relative at step 0 and AdamW's
normalised steps keep the trajectories within 1e-5 relative over 20 steps
(measured: 1.3e-7).
Autocast: the GEMMs and attention round to 8 (bf16) or 11 (fp16)
significant bits; elements whose float32 value falls near a rounding
boundary round differently on the two sides, which moves the loss by
O(u_half / sqrt(n)) per step: bf16 5e-3 and fp16 1e-3 relative bound the
20-step drift (measured: 4.5e-4 and 4.4e-5). The loss-scale trajectory (skips on overflow, growth every
4 good steps) is compared exactly: the scale starts at 2^24, so the first
steps overflow in fp16 on both sides by whole binades, then it settles
between 2^17 and 2^19, growing and backing off.
"""
import math

import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")

V, T, C, H, L = 48, 16, 32, 4, 2


def build(M):
    nn, F = M.nn, M.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)

        def forward(self, x):
            B, Tn, Cn = x.shape
            q, k, v = self.c_attn(x).split(Cn, dim=2)
            q, k, v = (t.view(B, Tn, H, Cn // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, Tn, Cn))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(C)
            self.c_fc = nn.Linear(C, 4 * C)
            self.gelu = nn.GELU()
            self.mlp_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx, targets):
            pos = M.arange(idx.shape[1], dtype=M.int64)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    return GPT()


def _batches(n=20, B=4, seed=0):
    rng = np.random.default_rng(seed)
    text = rng.integers(0, V, size=4000)
    text[1::2] = (text[0::2] * 7 + 3) % V            # learnable structure
    out = []
    for _ in range(n):
        i = rng.integers(0, len(text) - T - 1, size=B)
        x = np.stack([text[j:j + T] for j in i])
        y = np.stack([text[j + 1:j + T + 1] for j in i])
        out.append((x, y))
    return out


def _models():
    torch.manual_seed(0)
    tm = build(torch)
    for mod in tm.modules():                         # nanoGPT's init
        if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(mod.weight, mean=0.0, std=0.02)
        if isinstance(mod, torch.nn.Linear) and mod.bias is not None:
            torch.nn.init.zeros_(mod.bias)
    am = build(ampy)
    am.load_state_dict({k: ampy.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    assert am.lm_head.weight is am.wte.weight
    return am, tm


def _train(M, model, mode, steps=20):
    opt = M.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    scaler = None
    if mode == "fp16":
        scaler = (M.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=4))
    conv = (lambda a: torch.from_numpy(a)) if M is torch else ampy.from_numpy
    losses, scales = [], []
    for x, y in _batches(steps):
        opt.zero_grad()
        if mode == "fp32":
            loss = model(conv(x), conv(y))
        else:
            dt = M.bfloat16 if mode == "bf16" else M.float16
            with M.autocast("cpu", dtype=dt):
                loss = model(conv(x), conv(y))
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(float(scaler.get_scale()))
        losses.append(float(loss.item()))
    return np.array(losses), scales


@pytest.mark.parametrize("mode,rtol", [("fp32", 1e-5), ("bf16", 5e-3), ("fp16", 1e-3)])
def test_gpt_trains_like_torch(mode, rtol):
    am, tm = _models()
    la, sa = _train(ampy, am, mode)
    lt, st = _train(torch, tm, mode)
    assert np.all(np.isfinite(la))
    np.testing.assert_allclose(la, lt, rtol=rtol)
    assert la[-5:].mean() < la[:5].mean()              # it learns
    assert sa == st
    if mode == "fp16":
        assert sa[0] < 2.0 ** 24 and len(set(sa)) > 2    # backed off, then grew


def test_gpt_initial_loss_is_log_vocab_scale():
    am, _ = _models()
    x, y = _batches(1)[0]
    loss = float(am(ampy.from_numpy(x), ampy.from_numpy(y)).item())
    assert abs(loss - math.log(V)) < 0.1
