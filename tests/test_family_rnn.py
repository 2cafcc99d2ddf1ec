"""A 2-layer LSTM language model (Embedding -> LSTM -> Linear, with and
without weight tying) trained on ampy and on torch 2.13 side by side: the
same initial weights (torch's state_dict), the same token batches, 20 SGD
steps (momentum 0.9), in float32, bfloat16 autocast and float16 autocast +
GradScaler (growth every 4 steps, an overflow forced on step 9).

Tolerances. float32: the cells follow torch's order of operations, so the
losses agree to float32 GEMM-order noise (1e-5 relative after 20 steps).
Half precision: each step's projections and states are rounded to the half
type; the loss (a log-softmax over ~30 tokens, about log 30 = 3.4) moves by
a few half epsilons of the logits, so bfloat16 (eps 2^-8) losses agree
within 1e-2 and float16 (eps 2^-11) within 2e-3, absolute (measured: 1e-3
and 3e-4). The loss-scale
trajectory of GradScaler must be identical.

torch's float16 nn.LSTM under CPU autocast runs oneDNN's LSTM, which this
CPU lacks (RuntimeError "could not create a primitive descriptor"); the torch
side of the float16 run therefore runs its LSTM as autocast's lower-precision
policy defines it: float16 copies of the weights and input (recorded casts,
so float32 gradients flow back), torch's native float16 LSTM.
"""
import contextlib

import numpy as np
import pytest
import torch

import ampy

VOCAB, EMB, HID, SEQ, BATCH, STEPS = 30, 16, 16, 12, 4, 20
FORCED = 9  # loss * inf: the step is skipped and the scale backs off, in both

pytestmark = pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved")


def _model(lib, tie):
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, EMB)
            self.lstm = nn.LSTM(EMB, HID, num_layers=2)
            self.head = nn.Linear(HID, VOCAB)
            if tie:
                self.head.weight = self.embed.weight

        def forward(self, tokens, half_lstm=None):
            x = self.embed(tokens)
            if half_lstm is None:
                y, _ = self.lstm(x)
            else:
                y = half_lstm(self.lstm, x)
            return self.head(y)

    return LM()


def _torch_fp16_lstm(lstm, x):
    """torch's float16 LSTM on float16 copies (autocast's lower-precision cast)."""
    with torch.autocast("cpu", enabled=False):
        params = {k: v.half() for k, v in lstm.named_parameters()}
        y, _ = torch.func.functional_call(lstm, params, (x.half(),))
    return y


def _data():
    rng = np.random.default_rng(0)
    text = np.cumsum(rng.integers(1, 4, size=SEQ * BATCH * 8 + 1)) % VOCAB  # a learnable walk
    out = []
    for k in range(8):
        chunk = text[k * SEQ * BATCH:(k + 1) * SEQ * BATCH + 1]
        x = chunk[:-1].reshape(BATCH, SEQ).T.copy()
        y = chunk[1:].reshape(BATCH, SEQ).T.copy()
        out.append((x.astype(np.int64), y.astype(np.int64)))
    return out


def _run(lib, mode, tie, init, data):
    model = _model(lib, tie)
    model.load_state_dict({k: lib.tensor(v) for k, v in init.items()})
    opt = lib.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0**12, growth_interval=4) \
        if mode == "float16" else None
    half_lstm = _torch_fp16_lstm if (lib is torch and mode == "float16") else None
    rec = []
    for step in range(STEPS):
        x, y = (lib.tensor(a) for a in data[step % len(data)])
        opt.zero_grad()
        ctx = (lib.autocast("cpu", dtype=getattr(lib, mode)) if mode != "float32"
               else contextlib.nullcontext())
        with ctx:
            logits = model(x, half_lstm)
            loss = lib.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        if scaler is None:
            loss.backward()
            opt.step()
            rec.append((float(loss.item()), None))
        else:
            value = float(loss.item())
            if step == FORCED:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            rec.append((value, scaler.get_scale()))
    return rec


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("mode,tol", [("float32", 1e-5), ("bfloat16", 1e-2),
                                      ("float16", 2e-3)])
def test_lstm_language_model_trains_like_torch(mode, tol, tie):
    torch.manual_seed(0)
    init = {k: v.detach().numpy().copy() for k, v in _model(torch, tie).state_dict().items()}
    data = _data()
    ra = _run(ampy, mode, tie, init, data)
    rt = _run(torch, mode, tie, init, data)
    la, lt = np.array([r[0] for r in ra]), np.array([r[0] for r in rt])
    if mode == "float32":
        np.testing.assert_allclose(la, lt, rtol=tol)
    else:
        np.testing.assert_allclose(la, lt, atol=tol)
    assert [r[1] for r in ra] == [r[1] for r in rt]  # the scale trajectory, exactly
    assert la[-1] < la[0] - 0.05  # it learns (20 steps from uniform logits)
