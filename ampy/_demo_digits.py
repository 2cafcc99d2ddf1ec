"""The 8x8-digits MLP that ampy's first demo trained, kept for the notebook
(examples/amp_tour.ipynb) and the leak tests (tests/test_leaks.py): the data
(1797 images, shipped in ampy/data/digits.npz), the model builder and a
float32 / AMP training loop. ``python -m ampy.demo`` now trains a character
GPT (ampy/demo.py); these names are re-exported there.
"""
import os
import time

import numpy as np

from ._demo_report import Progress

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
    with lib.autograd.no_grad():
        pred = model(lib.tensor(x_te).to(device)).argmax(1)
    acc = float((pred.cpu().numpy() == y_te).mean())
    return {"losses": losses, "scales": scales, "skipped": skipped, "accuracy": acc,
            "epoch_time": float(np.median(epoch_times)), "final_scale": scaler.get_scale(),
            "amp": amp, "model": model}


def initial_state(lib, seed=0):
    lib.manual_seed(seed)
    return {k: v.detach().cpu().numpy().copy() for k, v in make_model(lib).state_dict().items()}
