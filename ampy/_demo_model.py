"""The demo's model: a small character-level GPT, written once for any library
with torch's API (``lib`` is ``ampy`` or ``torch``).

Token + position embeddings, ``n_layer`` pre-norm blocks (causal
self-attention with a mask tensor built once, GELU MLP), a final LayerNorm
and a linear head; GPT-2's initialisation (normal std 0.02, residual
projections scaled by 1/sqrt(2 n_layer)). Under autocast the linear layers
and the attention matmuls run in the half dtype; layer_norm, softmax and
cross_entropy run in float32 (the autocast policy of torch and ampy).
"""
import math

import numpy as np


def _block_class(lib):
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self, d, n_head, T, mask):
            super().__init__()
            self.n_head = n_head
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.act = nn.GELU()
            self.out = nn.Linear(4 * d, d)
            self.mask = mask  # (T, T) float32: 0 on and below the diagonal, -inf above
            self.taps, self.prefix = None, ""  # see CharGPT.set_taps

        def tap(self, name, t):
            if self.taps is not None:
                t.retain_grad()
                self.taps[self.prefix + name] = t
            return t

        def attention(self, x):
            B, T, D = x.shape
            h, hd = self.n_head, D // self.n_head
            qkv = self.tap("qkv", self.qkv(x)).reshape(B, T, 3, h, hd).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = self.tap("scores", lib.matmul(q, k.transpose(-2, -1))) * (1.0 / math.sqrt(hd))
            att = lib.nn.functional.softmax(att + self.mask[:T, :T], dim=-1)
            y = lib.matmul(att.to(v.dtype), v)  # autocast: half x half
            return self.tap("proj", self.proj(y.transpose(1, 2).reshape(B, T, D)))

        def forward(self, x):
            x = x + self.attention(self.ln1(x))
            h = self.act(self.tap("fc", self.fc(self.ln2(x))))
            return x + self.tap("out", self.out(h))

    return Block


def _module_classes(lib):
    nn = lib.nn
    Block = _block_class(lib)

    class CharGPT(nn.Module):
        def __init__(self, vocab, d=128, n_layer=2, n_head=4, T=64):
            super().__init__()
            mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(T, d)
            self.register_buffer("pos_ids", lib.tensor(np.arange(T)))
            self.blocks = nn.ModuleList(Block(d, n_head, T, lib.tensor(mask))
                                        for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)
            self.taps = None

        def forward(self, idx):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(self.pos_ids[:T])
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln_f(x))
            if self.taps is not None:
                logits.retain_grad()
                self.taps["logits"] = logits
            return logits

        def set_taps(self, taps):
            """Retain the gradients of the linear layers' outputs (the
            activation gradients the backward GEMMs read) in ``taps``:
            {"b<i>.qkv", ..., "logits": tensor}; None stops it."""
            self.taps = taps
            for i, b in enumerate(self.blocks):
                b.taps, b.prefix = taps, f"b{i}."

    return CharGPT


def init_state(shapes, n_layer, seed=0):
    """GPT-2 initial weights as NumPy arrays: {name: array} for the given
    {name: shape}. Biases 0, LayerNorm weights 1, every other weight normal
    with std 0.02 (residual output projections 0.02 / sqrt(2 n_layer))."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes.items():
        if name.endswith("bias"):
            out[name] = np.zeros(shape, np.float32)
        elif ".ln" in name or name.startswith("ln_"):
            out[name] = np.ones(shape, np.float32)
        else:
            std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("proj.weight", "out.weight")) \
                else 0.02
            out[name] = (rng.standard_normal(shape) * std).astype(np.float32)
    return out


def build(lib, vocab, *, d=128, n_layer=2, n_head=4, T=64, seed=0, device="cpu"):
    """A CharGPT of ``lib`` with the seeded GPT-2 initial weights (the same
    numbers for every library and every run)."""
    model = _module_classes(lib)(vocab, d=d, n_layer=n_layer, n_head=n_head, T=T)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    state = init_state(shapes, n_layer, seed)
    with lib.no_grad():
        for n, p in model.named_parameters():
            p.copy_(lib.tensor(state[n]))
    return model.to(device) if device != "cpu" else model


def group_of(name):
    """The layer group of a parameter name or a tap name ("b0.qkv", "logits")."""
    if name.startswith(("tok.", "pos.")):
        return "embed"
    if name.startswith("blocks."):
        i, part = name.split(".")[1:3]
        return f"b{i}.attn" if part in ("ln1", "qkv", "proj") else f"b{i}.mlp"
    if name[:1] == "b" and "." in name:
        i, part = name[1:].split(".", 1)
        return f"b{i}.attn" if part in ("qkv", "scores", "proj") else f"b{i}.mlp"
    return "head"


def layer_groups(model):
    """{group label: [parameter names]}: the embeddings, each block's
    attention and MLP, and the head (with the final LayerNorm)."""
    groups = {}
    for name, _ in model.named_parameters():
        groups.setdefault(group_of(name), []).append(name)
    return groups
