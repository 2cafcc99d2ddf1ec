"""Train a small character-level LSTM language model with ampy's mixed precision.

    python examples/lstm_lm.py                 # bfloat16 autocast (the CPU default)
    python examples/lstm_lm.py --dtype float16 # float16 autocast + GradScaler
    python examples/lstm_lm.py --dtype float32

The text is generated here (no download): sentences drawn from a tiny
grammar, so the model has real structure to learn. Embedding -> 2-layer LSTM
-> Linear with the decoder tied to the embedding, as in the classic
word-language-model example; the training loop is torch's AMP recipe with
`import torch` replaced by `import ampy`. Runs in well under a minute.
"""
import argparse
import contextlib
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampy  # noqa: E402
from ampy import nn  # noqa: E402


def make_text(n_sentences, seed=0):
    rng = np.random.default_rng(seed)
    subjects = ["the cat", "a dog", "my friend", "the old man", "a bird", "the child"]
    verbs = ["sees", "likes", "chases", "finds", "hears", "follows"]
    objects = ["the ball", "a tree", "the river", "a small house", "the moon", "the red car"]
    endings = [".", " today.", " again.", " at night."]
    parts = [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
             f"{rng.choice(endings)} " for _ in range(n_sentences)]
    return "".join(parts)


class CharLM(nn.Module):
    def __init__(self, vocab, hidden, layers=2, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=layers, dropout=dropout)
        self.drop = nn.Dropout(dropout)
        self.decoder = nn.Linear(hidden, vocab)
        self.decoder.weight = self.embed.weight  # weight tying

    def forward(self, tokens, state=None):
        y, state = self.lstm(self.drop(self.embed(tokens)), state)
        return self.decoder(self.drop(y)), state


def batches(ids, seq, batch, rng):
    """(seq, batch) inputs and next-character targets from random offsets."""
    starts = rng.integers(0, len(ids) - seq - 1, batch)
    x = np.stack([ids[s:s + seq] for s in starts], 1)
    y = np.stack([ids[s + 1:s + seq + 1] for s in starts], 1)
    return ampy.tensor(x), ampy.tensor(y)


def sample(model, stoi, itos, prompt, n=60):
    model.eval()
    with ampy.no_grad():
        x = ampy.tensor(np.array([[stoi[c]] for c in prompt], np.int64))
        logits, state = model(x)
        out = prompt
        for _ in range(n):
            nxt = int(np.argmax(logits[-1, 0].float().numpy()))
            out += itos[nxt]
            logits, state = model(ampy.tensor(np.array([[nxt]], np.int64)), state)
    model.train()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--steps", type=int, default=150)
    args = ap.parse_args()

    text = make_text(3000)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], np.int64)
    ampy.manual_seed(0)
    model = CharLM(len(chars), 128)
    opt = ampy.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = ampy.amp.GradScaler("cpu", enabled=args.dtype == "float16")
    rng = np.random.default_rng(0)
    t0 = time.time()
    for step in range(1, args.steps + 1):
        x, y = batches(ids, 48, 16, rng)
        opt.zero_grad()
        ctx = (ampy.autocast("cpu", dtype=getattr(ampy, args.dtype))
               if args.dtype != "float32" else contextlib.nullcontext())
        with ctx:
            logits, _ = model(x)
            loss = nn.functional.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        if step % 25 == 0 or step == 1:
            print(f"step {step:4d}  loss {loss.item():.3f}  ppl {math.exp(loss.item()):7.2f}  "
                  f"scale {scaler.get_scale() if scaler.is_enabled() else '-'}  "
                  f"{time.time() - t0:5.1f}s")
    print("sample:", sample(model, stoi, chars, "the cat "))


if __name__ == "__main__":
    main()
