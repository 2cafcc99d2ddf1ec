"""The CUDA runtime on a GPU: devices, the caching allocator, host <-> device copies
and sync points, device checks between operands, the backward of a device move, and
a training step that runs every op on the device. The GPU cases of each op live with
its concern (test_cast.py, test_gemm.py, test_elementwise.py, ...); everything here
skips without a GPU (test_cuda_build.py covers that machine).
"""
import warnings

import numpy as np
import pytest

import ampy
import ampy.cuda

from _helpers import requires_cuda

pytestmark = requires_cuda


def test_cuda_devices_and_memory():
    assert ampy.cuda.device_count() >= 1
    assert isinstance(ampy.cuda.get_device_name(0), str)
    ampy.cuda.empty_cache()
    base = ampy.cuda.memory_allocated()
    x = ampy.zeros(1 << 20, device="cuda")
    assert x.is_cuda and x.device == ampy.device("cuda", 0)
    assert ampy.cuda.memory_allocated() >= base + 4 * (1 << 20)
    assert ampy.cuda.max_memory_allocated() >= ampy.cuda.memory_allocated()
    del x
    assert ampy.cuda.memory_allocated() == base
    reserved = ampy.cuda.memory_reserved()
    y = ampy.zeros(1 << 20, device="cuda")  # reuses the cached block
    assert ampy.cuda.memory_reserved() == reserved
    del y
    ampy.cuda.empty_cache()
    assert ampy.cuda.memory_reserved() <= reserved


def test_cuda_round_trip_and_sync_points():
    x = ampy.randn(7, 33)
    g = x.cuda()
    assert g.is_cuda and not x.is_cuda
    np.testing.assert_array_equal(g.cpu().numpy(), x.numpy())
    assert g[0, 0].item() == x[0, 0].item()
    assert g.tolist() == x.tolist()
    assert "cuda" in repr(g) or repr(g)


def test_cuda_mixed_devices_rejected():
    with pytest.raises(RuntimeError, match="device"):
        ampy.ones(3).cuda() + ampy.ones(3)


def test_cuda_to_device_backward_returns_grad_to_source():
    x = ampy.randn(5, 3).requires_grad_(True)
    (x.cuda() * 2.0).sum().backward()
    assert not x.grad.is_cuda
    np.testing.assert_array_equal(x.grad.numpy(), np.full((5, 3), 2.0, np.float32))


def test_cuda_training_step_uses_no_cpu_fallback():
    """A transformer-like block forward/backward/step on CUDA runs every op on
    the device: the CPU fallback would warn."""
    nn = ampy.nn
    F = nn.functional
    ampy.manual_seed(0)
    emb = nn.Embedding(50, 32).cuda()
    lin = nn.Linear(32, 32).cuda()
    ln = nn.LayerNorm(32).cuda()
    head = nn.Linear(32, 50).cuda()
    params = list(emb.parameters()) + list(lin.parameters()) + list(ln.parameters()) + \
        list(head.parameters())
    opt = ampy.optim.AdamW(params, lr=1e-3)
    idx = ampy.randint(0, 50, (4, 16)).cuda()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        h = emb(idx)
        h = h + F.dropout(F.gelu(lin(ln(h))), 0.1)
        att = F.softmax(h @ h.transpose(1, 2) / 32 ** 0.5, -1) @ h
        att = ampy.cat([att[:, :8], att[:, 8:]], 1)  # basic indexing: views on the device
        loss = F.cross_entropy(head(att).reshape(-1, 50), idx.reshape(-1), label_smoothing=0.1)
        loss.backward()
        opt.step()
    assert np.isfinite(loss.item())
