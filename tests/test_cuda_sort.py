"""The CUDA twin of the row sorts (cuda/sort.cu): sort / argsort / topk of
CUDA tensors against the CPU's (tested against torch in test_sorting.py).
The network orders (key, position) by the CPU's total order, so values and
indices are the CPU's bit for bit, in both the shared-memory path (rows of
up to 1024 after padding to a power of two) and the multi-launch path for
longer rows. These need a GPU (requires_cuda: skipped without one); the
network itself is replayed on the host against the CPU sort in
tests/c/test_cuda_twin_math.c (test_cuda_cnn.py runs it here)."""
import numpy as np
import pytest

import ampy

from _helpers import AMPY_DTYPE, DTYPE_NAMES, assert_same_bits, requires_cuda, sample

pytestmark = requires_cuda


def _rows(shape, name, seed=0):
    """Values with ties, and (floating dtypes) NaN, -0.0 and infinities."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, size=shape).astype(np.float64)
    x = ampy.tensor(a).to(AMPY_DTYPE[name])
    if AMPY_DTYPE[name].is_floating_point and a.size >= 12:
        flat = x.reshape(-1)
        flat[:12] = sample((12,), AMPY_DTYPE[name])
    return x


@pytest.mark.parametrize("name", DTYPE_NAMES)
@pytest.mark.parametrize("n", [1, 7, 64, 1000, 1025, 5000])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_on_cuda_equals_the_cpu(name, n, descending):
    x = _rows((3, n), name, n)
    vc, ic = x.sort(1, descending=descending)
    vg, ig = x.cuda().sort(1, descending=descending)
    assert vg.device == ig.device and vg.is_cuda
    assert_same_bits(vg.cpu(), vc)
    np.testing.assert_array_equal(ig.cpu().numpy(), ic.numpy())


@pytest.mark.parametrize("name", ["float32", "bfloat16", "float16", "float64", "int64", "int32"])
@pytest.mark.parametrize("n, k", [(10, 3), (1024, 1024), (3000, 40), (50257, 5)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_on_cuda_equals_the_cpu(name, n, k, largest):
    x = _rows((2, n), name, k)
    vc, ic = x.topk(k, largest=largest)
    vg, ig = x.cuda().topk(k, largest=largest)
    assert_same_bits(vg.cpu(), vc)
    np.testing.assert_array_equal(ig.cpu().numpy(), ic.numpy())


def test_sort_of_a_middle_dim_and_its_gradient():
    x = _rows((4, 9, 5), "float32").requires_grad_()
    xg = x.detach().cuda().requires_grad_()
    vc, _ = x.sort(1)
    vg, _ = xg.sort(1)
    g = _rows((4, 9, 5), "float32", 1)
    vc.backward(g)
    vg.backward(g.cuda())
    assert_same_bits(xg.grad.cpu(), x.grad)
    assert_same_bits(ampy.argsort(x.detach().cuda(), 1, descending=True).cpu(),
                     ampy.argsort(x.detach(), 1, descending=True))


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("dt", ["float32", "float64", "bfloat16"])
def test_multinomial_on_cuda_draws_the_cpus_samples(replacement, dt):
    """The same generator state gives the same samples on both devices (the
    uniforms come from the generator's host stream; the running sums and the
    key order are the CPU's)."""
    rng = np.random.default_rng(7)
    w = rng.random((4, 300)) * (rng.random((4, 300)) > 0.3)
    p = ampy.tensor(w).to(AMPY_DTYPE[dt])
    ns = 50
    got = {}
    for dev in ("cpu", "cuda"):
        g = ampy.Generator().manual_seed(11)
        got[dev] = ampy.multinomial(p.to(dev), ns, replacement, generator=g).cpu().numpy()
    np.testing.assert_array_equal(got["cuda"], got["cpu"])


@pytest.mark.parametrize("rows, message", [
    ([[1.0, 2.0], [0.0, 0.0]], "sum of probabilities <= 0"),
    ([[1.0, float("nan")]], "`inf`, `nan` or element < 0"),
    ([[1.0, -1.0]], "`inf`, `nan` or element < 0"),
])
def test_multinomial_on_cuda_raises_the_cpus_errors(rows, message):
    import re
    p = ampy.tensor(rows).cuda()
    with pytest.raises(RuntimeError, match=re.escape(message)):
        ampy.multinomial(p, 1, True)
