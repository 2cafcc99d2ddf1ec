"""Train a small ResNet-style CNN on the 8x8 digits ampy ships, with mixed
precision: bf16 autocast, or fp16 autocast with a GradScaler (--fp16).

    python examples/cnn.py [--fp16] [--epochs 4]

The loop is torch's AMP recipe with `torch` replaced by `ampy`: Conv2d +
BatchNorm2d + ReLU, a residual block, MaxPool2d, AdaptiveAvgPool2d, flatten,
Linear, SGD with momentum. Runs in well under a minute on a laptop CPU.
"""
import argparse
import os
import time

import numpy as np

import ampy
from ampy import nn
from ampy.amp import GradScaler, autocast

DIGITS = os.path.join(os.path.dirname(ampy.__file__), "data", "digits.npz")


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = nn.functional.relu(self.bn1(self.conv1(x)))
        return nn.functional.relu(self.bn2(self.conv2(y)) + x)


class Net(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        self.block = Block(width)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1),
                                  nn.Linear(width, 10))

    def forward(self, x):
        return self.head(self.pool(self.block(self.stem(x))))


def load(seed=0, n_test=360):
    with np.load(DIGITS) as d:
        x = d["images"].astype(np.float32)[:, None] / 16.0
        y = d["target"].astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    x, y = x[perm], y[perm]
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fp16", action="store_true", help="fp16 autocast + GradScaler")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    ampy.manual_seed(0)
    x_tr, y_tr, x_te, y_te = load()
    model = Net()
    opt = ampy.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    dtype = ampy.float16 if args.fp16 else ampy.bfloat16
    scaler = GradScaler("cpu", enabled=args.fp16)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        perm = rng.permutation(len(x_tr))
        total, n = 0.0, 0
        for i in range(0, len(perm) - args.batch_size + 1, args.batch_size):
            idx = perm[i:i + args.batch_size]
            x, y = ampy.tensor(x_tr[idx]), ampy.tensor(y_tr[idx])
            opt.zero_grad()
            with autocast("cpu", dtype=dtype):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            total, n = total + loss.item(), n + 1
        model.eval()
        with ampy.no_grad(), autocast("cpu", dtype=dtype):
            pred = model(ampy.tensor(x_te)).argmax(1).numpy()
        acc = float((pred == y_te).mean())
        extra = f"  scale {scaler.get_scale():g}" if args.fp16 else ""
        print(f"epoch {epoch + 1}: loss {total / n:.4f}  test accuracy {acc:.3f}{extra}")
    print(f"{'fp16 + GradScaler' if args.fp16 else 'bf16'} autocast, "
          f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
