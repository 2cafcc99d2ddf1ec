"""The torch.amp training loop, run on ampy and on torch 2.13 (CPU) side by side.

Same initial weights (torch's, loaded through ``load_state_dict``), same data,
50 steps, for SGD(momentum) and AdamW, float16 and bfloat16 autocast:

- losses and parameters match within half-precision tolerance at every step;
- the loss scale and the growth tracker are identical at every step, with a
  tiny growth_interval (growth inside the run) and steps where the loss is
  multiplied by inf to force an overflow (the step must be skipped by both).
"""
import numpy as np
import pytest
import torch

import ampy

from _helpers import requires_cuda

STEPS = 50
FORCED = {6, 7, 19, 33}           # loss * inf on these steps
D_IN, D_HID, N_CLS, BATCH = 12, 32, 5, 16


pytestmark = pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved")


def _build(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(D_IN, D_HID), nn.GELU(), nn.Linear(D_HID, D_HID), nn.ReLU(),
                         nn.Linear(D_HID, N_CLS))


def _data():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((D_IN, N_CLS))
    out = []
    for _ in range(8):
        x = rng.standard_normal((BATCH, D_IN)).astype(np.float32)
        out.append((x, np.argmax(x @ w + 0.5 * rng.standard_normal((BATCH, N_CLS)), 1)))
    return out


def _run(lib, opt_name, dtype, init, data):
    model = _build(lib)
    model.load_state_dict({k: lib.tensor(v) for k, v in init.items()})
    params = model.parameters()
    opt = (lib.optim.SGD(params, lr=0.05, momentum=0.9) if opt_name == "sgd"
           else lib.optim.AdamW(params, lr=2e-3, weight_decay=0.01))
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
    half = getattr(lib, dtype)
    rec = []
    for step in range(STEPS):
        x, y = data[step % len(data)]
        x, y = lib.tensor(x), lib.tensor(y)
        opt.zero_grad()
        with lib.autocast("cpu", dtype=half):
            out = model(x)
            loss = lib.nn.functional.cross_entropy(out, y)
        value = float(loss.item())
        if step in FORCED:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        rec.append({"loss": value, "out_dtype": str(out.dtype).split(".")[-1],
                    "loss_dtype": str(loss.dtype).split(".")[-1],
                    "scale": scaler.get_scale(), "tracker": scaler._get_growth_tracker(),
                    "params": {k: np.array(v.detach().float().tolist(), np.float32)
                               for k, v in model.state_dict().items()}})
    return rec


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_training_loop_matches_torch(opt_name, dtype):
    torch.manual_seed(0)
    init = {k: v.detach().numpy().copy() for k, v in _build(torch).state_dict().items()}
    data = _data()
    ra = _run(ampy, opt_name, dtype, init, data)
    rt = _run(torch, opt_name, dtype, init, data)
    tol = 1e-2 if dtype == "float16" else 4e-2
    grew = False
    for step, (a, t) in enumerate(zip(ra, rt)):
        where = f"step {step} ({opt_name}, {dtype})"
        assert (a["out_dtype"], a["loss_dtype"]) == (t["out_dtype"], t["loss_dtype"]), where
        assert a["scale"] == t["scale"] and a["tracker"] == t["tracker"], where
        assert abs(a["loss"] - t["loss"]) <= tol * max(1.0, abs(t["loss"])), where
        for k, v in t["params"].items():
            np.testing.assert_allclose(a["params"][k], v, rtol=tol, atol=tol, err_msg=where + k)
        grew |= step > 0 and a["scale"] > ra[step - 1]["scale"]
    scales = [r["scale"] for r in ra]
    assert grew, "growth_interval=3 must make the scale grow inside the run"
    for s in FORCED:  # forced overflow: backoff (and, since the step was skipped, no change)
        assert scales[s] == (scales[s - 1] if s else 2.0**10) * 0.5
        for k in ra[s]["params"]:
            np.testing.assert_array_equal(ra[s]["params"][k], ra[s - 1]["params"][k])


# ================================================================ CUDA
# The training loop on a GPU against the CPU; skipped without a GPU.

@requires_cuda
def test_training_loop_on_cuda_runs_and_matches_cpu():
    """The AMP training loop with device="cuda": ops without CUDA kernels run via the
    CPU fallback, so the numbers must match the CPU run closely."""
    nn = ampy.nn
    from ampy.amp import GradScaler, autocast
    losses = {}
    for dev in ("cpu", "cuda"):
        ampy.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(dev)
        opt = ampy.optim.AdamW(model.parameters(), lr=1e-2)
        scaler = GradScaler(dev)
        x, y = ampy.randn(64, 16).to(dev), ampy.randint(0, 4, (64,)).to(dev)
        out = []
        for _ in range(5):
            opt.zero_grad()
            with autocast(dev, dtype=ampy.float16):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            out.append(loss.item())
        losses[dev] = out
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=2e-2)
