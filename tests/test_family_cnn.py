"""The CNN family, trained side by side with torch 2.13 CPU: a small
ResNet-style network (Conv2d + BatchNorm2d + ReLU, a residual block,
MaxPool2d, a strided conv, AdaptiveAvgPool2d, flatten, Linear) on generated
10-class images, from torch's initial weights (its state_dict loaded into
ampy), 20 steps of SGD with momentum, in float32, under bf16 autocast, and
under fp16 autocast with a GradScaler (ampy.amp.GradScaler against
torch.amp.GradScaler on the CPU).

Tolerances. Float32: every op rounds in float32 on both sides, but conv's
fp32 GEMM accumulates in another order than oneDNN's, so each step's
numbers differ by a few float32 ulps and SGD carries the difference on;
losses agree to 1e-5 relative over 20 steps (about 100 ulps; the measured
gap is 1.2e-7). Autocast: a conv output that lands next to a bf16 / fp16
rounding boundary can round to the neighbouring half value on one side (one
half ulp, 2^-8 relative for bf16, 2^-11 for fp16), and 20 steps of SGD carry
that on; the bounds are 1e-2 (bf16, measured 2.7e-3) and 5e-3 (fp16,
measured 5.7e-4) relative. The
GradScaler's scale trajectory (the skipped steps of an overflowing start,
the growth after clean ones) must be identical, step for step, as must the
running statistics (float32 after 20 steps, autocast after two).
"""
import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")

STEPS, BATCH, CLASSES, SIZE = 20, 16, 10, 12


def make_net(M):
    nn = M.nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.relu = nn.ReLU()

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(y)) + x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(8), nn.ReLU())
            self.block = Block(8)
            self.pool = nn.MaxPool2d(2)
            self.down = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1),
                                      nn.BatchNorm2d(16), nn.ReLU())
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, CLASSES)

        def forward(self, x):
            x = self.pool(self.block(self.stem(x)))
            x = self.gap(self.down(x))
            return self.fc(M.flatten(x, 1))

    return Net()


def data():
    """Images whose class sets the mean of one of ten 3x3 tiles, plus noise."""
    rng = np.random.default_rng(0)
    ys = rng.integers(0, CLASSES, size=(STEPS, BATCH))
    xs = rng.standard_normal((STEPS, BATCH, 1, SIZE, SIZE)).astype(np.float32) * 0.5
    for s in range(STEPS):
        for b in range(BATCH):
            r, c = divmod(int(ys[s, b]), 4)
            xs[s, b, 0, 3 * r:3 * r + 3, 3 * c:3 * c + 3] += 1.5
    return xs, ys


def pair():
    torch.manual_seed(0)
    net_t = make_net(torch)
    net_a = make_net(ampy)
    net_a.load_state_dict(net_t.state_dict())
    return net_a, net_t


def run(M, net, mode, xs, ys, init_scale=2.0 ** 24):
    """Train STEPS steps; returns (losses, scales)."""
    opt = M.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    scaler = M.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=3) \
        if mode == "fp16" else None
    dt = {"bf16": M.bfloat16, "fp16": M.float16}.get(mode)
    losses, scales = [], []
    for s in range(len(xs)):
        x = M.tensor(xs[s]) if M is ampy else torch.from_numpy(xs[s])
        y = M.tensor(ys[s]) if M is ampy else torch.from_numpy(ys[s])
        opt.zero_grad()
        if dt is None:
            loss = M.nn.functional.cross_entropy(net(x), y)
        else:
            with M.autocast("cpu", dtype=dt):
                loss = M.nn.functional.cross_entropy(net(x), y)
        assert loss.dtype is (ampy.float32 if M is ampy else torch.float32)
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


def _stats(net, M):
    out = {}
    for name, b in net.state_dict().items():
        if "running" in name:
            out[name] = b.detach().numpy() if M is torch else b.numpy()
    return out


@pytest.fixture(autouse=True)
def _torch_one_thread():
    """torch on one thread: its pool oversubscribes a small shared machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("mode,rtol", [("fp32", 1e-5), ("bf16", 1e-2), ("fp16", 5e-3)])
def test_cnn_trains_like_torch(mode, rtol):
    xs, ys = data()
    net_a, net_t = pair()
    la, sa = run(ampy, net_a, mode, xs, ys)
    lt, st = run(torch, net_t, mode, xs, ys)
    np.testing.assert_allclose(la, lt, rtol=rtol)
    assert la[-1] < la[0]  # it learns
    assert sa == st  # the loss-scale trajectory, step for step
    if mode == "fp16":
        assert sa[0] < 2.0 ** 24  # the overflowing start was skipped and backed off
        assert any(b > a for a, b in zip(sa, sa[1:]))  # and the scale grew again
    assert int(net_a.state_dict()["stem.1.num_batches_tracked"].item()) == STEPS
    if mode == "fp32":
        _same_stats(net_a, net_t, 1e-4)


def _same_stats(net_a, net_t, rtol):
    """Running stats average batch statistics of activations of size
    sqrt(running_var): they agree to rtol of that size."""
    st_t, st_a = _stats(net_t, torch), _stats(net_a, ampy)
    for name, v in st_t.items():
        got = st_a[name]
        assert got.dtype == np.float32
        size = float(np.sqrt(np.max(st_t[name.replace("mean", "var")])))
        np.testing.assert_allclose(got, v, rtol=rtol, atol=rtol * size, err_msg=name)


@pytest.mark.parametrize("mode", ["bf16", "fp16"])
def test_autocast_step_running_stats_match_torch(mode):
    """Under autocast SGD amplifies the half-ulp differences of single conv
    outputs step by step (the weights drift apart by 1e-4 relative after one
    bf16 step, 3e-2 after ten, while the losses stay within 3e-3), so the
    running stats are compared after two steps: to 1e-3 of the activations'
    size (bf16: 256 ulps of float32 over the two steps' drift)."""
    xs, ys = data()
    net_a, net_t = pair()
    run(ampy, net_a, mode, xs[:2], ys[:2])
    run(torch, net_t, mode, xs[:2], ys[:2])
    _same_stats(net_a, net_t, 1e-3)


def test_eval_mode_and_state_dict_round_trip():
    """After training, eval-mode outputs match torch, and ampy's state_dict
    (with num_batches_tracked) loads back into torch."""
    xs, ys = data()
    net_a, net_t = pair()
    run(ampy, net_a, "fp32", xs[:5], ys[:5])
    run(torch, net_t, "fp32", xs[:5], ys[:5])
    net_a.eval()
    net_t.eval()
    out_a = net_a(ampy.tensor(xs[0])).detach().numpy()
    out_t = net_t(torch.from_numpy(xs[0])).detach().numpy()
    np.testing.assert_allclose(out_a, out_t, rtol=1e-4, atol=1e-5)
    back = make_net(torch)
    back.load_state_dict({k: torch.from_numpy(np.array(v.detach().numpy()))
                          for k, v in net_a.state_dict().items()})
    back.eval()
    np.testing.assert_allclose(back(torch.from_numpy(xs[0])).detach().numpy(), out_a,
                               rtol=1e-4, atol=1e-5)
