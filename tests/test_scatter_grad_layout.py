"""The gradient of q, k, v = permute(qkv)[0], [1], [2]: the engine writes the
three slices' gradients into one buffer laid out like the permute's input, so
the permute and reshape backward need no copy. The gradients must be torch's
bits (the same copies and additions, only the memory layout differs), signed
zeros included, and hooks on the permuted tensor must still see it.
"""
import numpy as np
import pytest
import torch

import ampy
from _helpers import stable_seed


def _both(shape, dtype):
    rng = np.random.default_rng(stable_seed("scatter_grad_layout", shape, dtype))
    x = rng.standard_normal(shape).astype(np.float32)
    x[..., 0] = -0.0  # signed zeros: copied, not added to +0
    ta = torch.tensor(x).to(getattr(torch, dtype)).requires_grad_()
    aa = ampy.tensor(x).to(getattr(ampy, dtype)).requires_grad_()
    return aa, ta


def _qkv(x, b, t, heads, dh, index, w):
    """q * w0 + v * w1 (contiguous gradients) and k^T * w2 (a transposed one)."""
    qkv = (x * 1.0).reshape(b, t, 3, heads, dh).permute(2, 0, 3, 1, 4)
    q, k, v = index(qkv)
    return q * w[0] + v * w[1], k.transpose(-2, -1) * w[2]


INDEXERS = {
    "getitem": lambda t: (t[0], t[1], t[2]),
    "select": lambda t: (t.select(0, 0), t.select(0, 1), t.select(0, 2)),
    "narrow": lambda t: tuple(t.narrow(0, i, 1).squeeze(0) for i in range(3)),
    "unbind_order": lambda t: (t[2], t[0], t[1]),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("how", sorted(INDEXERS))
def test_qkv_gradient_bits_match_torch(dtype, how):
    b, t, heads, dh = 2, 5, 3, 4
    aa, ta = _both((b, t, 3 * heads * dh), dtype)
    rng = np.random.default_rng(stable_seed("g", dtype, how))
    g = rng.standard_normal((b, heads, t, dh)).astype(np.float32)
    w = [float(v) for v in rng.standard_normal(3)]
    g2 = rng.standard_normal((b, heads, dh, t)).astype(np.float32)
    ya, ya2 = _qkv(aa, b, t, heads, dh, INDEXERS[how], w)
    yt, yt2 = _qkv(ta, b, t, heads, dh, INDEXERS[how], w)
    ampy.autograd.backward([ya, ya2], [ampy.tensor(g).to(ya.dtype), ampy.tensor(g2).to(ya.dtype)])
    torch.autograd.backward([yt, yt2], [torch.tensor(g).to(yt.dtype),
                                        torch.tensor(g2).to(yt.dtype)])
    ga = aa.grad.float().numpy().view(np.uint32)
    gt = ta.grad.float().numpy().view(np.uint32)
    np.testing.assert_array_equal(ga, gt)


@pytest.mark.parametrize("how", ["getitem", "select"])
def test_signed_zero_gradient_is_copied(how):
    x = ampy.zeros(2, 3, 4, requires_grad=True)
    tx = torch.zeros(2, 3, 4, requires_grad=True)
    for lib, t in ((ampy, x), (torch, tx)):
        p = t.permute(1, 0, 2)
        parts = INDEXERS[how](p)
        (parts[0] * -0.0 + parts[1] * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy().view(np.uint32), tx.grad.numpy().view(np.uint32))


def test_hook_on_the_permuted_tensor_sees_a_full_gradient():
    x = ampy.arange(24.0).reshape(2, 3, 4).requires_grad_()
    tx = torch.arange(24.0).reshape(2, 3, 4).requires_grad_()
    seen = {}
    for name, t in (("ampy", x), ("torch", tx)):
        p = t.permute(2, 0, 1)
        p.register_hook(lambda g, name=name: seen.__setitem__(name, g.detach().clone()))
        (p[0] * 3.0 + p[1] * 5.0 + p[3]).sum().backward()
    np.testing.assert_array_equal(seen["ampy"].numpy(), seen["torch"].numpy())
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_transposed_input_and_retain_graph():
    x = ampy.arange(12.0).reshape(3, 4).requires_grad_()
    tx = torch.arange(12.0).reshape(3, 4).requires_grad_()
    for t in (x, tx):
        p = (t * 1.0).transpose(0, 1)
        y = (p[0] * 2.0 + p[1:3].sum(0) * 7.0).sum()
        y.backward(retain_graph=True)
        y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_grad_of_an_input_through_the_permuted_slices():
    x = ampy.arange(24.0).reshape(2, 3, 4).requires_grad_()
    tx = torch.arange(24.0).reshape(2, 3, 4).requires_grad_()
    outs = []
    for lib, t in ((ampy, x), (torch, tx)):
        p = (t * 2.0).permute(1, 2, 0)
        y = (p[0] * p[1] + p[2]).sum()
        outs.append(lib.autograd.grad(y, t)[0])
    np.testing.assert_array_equal(outs[0].numpy(), outs[1].numpy())


@pytest.mark.parametrize("permuted", [False, True])
@pytest.mark.parametrize("how", ["getitem", "select"])
def test_single_slice_keeps_a_negative_zero(how, permuted):
    """One slice's gradient only: torch copies it into zeros, so -0 stays -0."""
    grads = []
    for lib in (ampy, torch):
        x = lib.ones(3, 3, 4, requires_grad=True)
        p = (x * 1.0).permute(1, 0, 2) if permuted else x * 1.0
        (INDEXERS[how](p)[1] * -0.0).sum().backward()
        grads.append(x.grad.numpy().view(np.uint32))
    np.testing.assert_array_equal(grads[0], grads[1])


def _dirty_cache(nbytes):
    """Leave a freed block of garbage (NaN bits) in ampy's large-block cache,
    so that an uninitialized buffer of that size would show it."""
    junk = ampy.full((nbytes // 4,), float("nan"))
    del junk


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("used", [(0, 2), (1,), (2, 0, 1), (0, 0, 2), (2, 1, 1, 0)])
def test_lazily_filled_buffer_zeros_the_slices_no_gradient_reached(dtype, used):
    """The first slice's gradient goes into uninitialized memory (no zeros
    are read or written for the other slices); slices that never get a
    gradient are zeroed before the buffer is read, and a slice taken twice
    is summed, as torch's buffers give it: bits equal torch's."""
    b, t, heads, dh = 8, 64, 4, 64  # a 3 MiB float32 buffer: the cached-block path
    rng = np.random.default_rng(stable_seed("lazy", dtype, used))
    x = rng.standard_normal((b, t, 3 * heads * dh)).astype(np.float32)
    g = rng.standard_normal((len(used), b, heads, t, dh)).astype(np.float32)
    g[:, :, :, :, 0] = -0.0
    grads = []
    for lib in (ampy, torch):
        xt = lib.tensor(x).to(getattr(lib, dtype)).requires_grad_()
        qkv = (xt * 1.0).reshape(b, t, 3, heads, dh).permute(2, 0, 3, 1, 4)
        outs = [qkv[i] * lib.tensor(g[j]).to(xt.dtype) for j, i in enumerate(used)]
        if lib is ampy:
            _dirty_cache(xt.numel() * xt.element_size())
        lib.autograd.backward([o.sum() for o in outs])
        grads.append(xt.grad.float().numpy().view(np.uint32))
    np.testing.assert_array_equal(grads[0], grads[1])


def test_lazily_filled_buffer_then_a_narrow_and_a_select_on_another_dim():
    """After select gradients, a narrow's (and a select on another dim) must
    see the zeros of the slices not yet written: the buffer is settled first."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6, 3, 5)).astype(np.float32)
    grads = []
    for lib in (ampy, torch):
        xt = lib.tensor(x).requires_grad_()
        p = (xt * 1.0).permute(2, 0, 1, 3)
        y = (p[0] * 2.0).sum() + (p.narrow(0, 1, 2) * 3.0).sum() + (p.select(1, 2) * 5.0).sum()
        y.backward()
        grads.append(xt.grad.numpy().view(np.uint32))
    np.testing.assert_array_equal(grads[0], grads[1])
