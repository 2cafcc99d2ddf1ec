"""sort / argsort / topk / multinomial / randperm against torch 2.13.

Sorting moves elements without arithmetic, so values are compared as bits and
indices exactly (torch with stable=True: ampy's sort is always stable; topk
inputs have distinct values, since torch leaves the order of ties open).
multinomial is checked for its distribution (chi-square against the exact
probabilities), not against torch's random stream.
"""
import numpy as np
import pytest
import torch

import ampy

from _helpers import (AMPY_DTYPE, DTYPE_NAMES, FLOAT_NAMES, TORCH_DTYPE, assert_same_bits,
                      same_bits_or_both_nan,
                      bits, host_f64, requires_cuda, sample)

SORTABLE = DTYPE_NAMES  # torch sorts every dtype ampy has


def _torch(t):
    """The ampy CPU tensor t as a torch tensor of the same dtype and values."""
    return torch.from_numpy(host_f64(t)).to(TORCH_DTYPE[t.dtype.name])


def _ties(shape, name, seed=0):
    """Values with many ties (integers 0..4) in dtype `name`."""
    a = np.random.default_rng(seed).integers(0, 5, size=shape).astype(np.float64)
    return ampy.tensor(a).to(AMPY_DTYPE[name])


def _distinct(shape, name, seed=0):
    """Distinct values in dtype `name` (a permutation of small integers)."""
    n = int(np.prod(shape))
    a = np.random.default_rng(seed).permutation(n).astype(np.float64) - n // 3
    if name == "uint8":
        a = a - a.min()
    return ampy.tensor(a.reshape(shape)).to(AMPY_DTYPE[name])


# ---------------------------------------------------------------- sort
@pytest.mark.parametrize("name", SORTABLE)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_bits_and_indices_match_torch(name, dim, descending, cpu_path):
    for x in (sample((4, 12, 3), AMPY_DTYPE[name]), _ties((4, 12, 3), name)):
        before = bits(x)
        v, i = ampy.sort(x, dim=dim, descending=descending, stable=True)
        tv, ti = torch.sort(_torch(x), dim=dim, descending=descending, stable=True)
        assert v.dtype is x.dtype and i.dtype is ampy.int64
        assert same_bits_or_both_nan(v, tv)
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
        np.testing.assert_array_equal(bits(x), before)


def test_sort_nan_order_and_signed_zeros_as_torch():
    a = [3.0, np.nan, 1.0, np.nan, -0.0, 0.0, -np.inf, np.inf]
    x, t = ampy.tensor(a), torch.tensor(a)
    for desc in (False, True):
        v, i = x.sort(descending=desc)
        tv, ti = t.sort(descending=desc, stable=True)
        assert same_bits_or_both_nan(v, tv)
        assert i.tolist() == ti.tolist()
    assert ampy.argsort(x, descending=True).tolist() == torch.argsort(t, descending=True,
                                                                     stable=True).tolist()


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int64"])
def test_sort_strided_inputs(name):
    base = sample((6, 24), AMPY_DTYPE[name])
    tb = _torch(base)
    for view, tview in ((base.t(), tb.t()), (base[::2, 1::3], tb[::2, 1::3]),
                        (base[1:, :].expand(2, 5, 24), tb[1:, :].expand(2, 5, 24))):
        for dim in (0, -1):
            v, i = view.sort(dim, True)
            tv, ti = tview.sort(dim=dim, descending=True, stable=True)
            assert same_bits_or_both_nan(v, tv)
            np.testing.assert_array_equal(i.numpy(), ti.numpy())


def test_sort_0d_empty_and_result_type():
    r = ampy.sort(ampy.tensor(5.0))
    assert r.values.ndim == 0 and r.indices.item() == 0 and float(r.values) == 5.0
    assert type(r).__name__ == "sort" and r[0] is r.values
    for shape, dim in (((0, 3), 0), ((0, 3), 1), ((2, 0), 1)):
        v, i = ampy.zeros(*shape).sort(dim)
        assert tuple(v.shape) == shape and tuple(i.shape) == shape


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_sort_and_argsort_grad_as_torch(name):
    x = sample((3, 12), AMPY_DTYPE[name], specials=False).requires_grad_(True)
    t = _torch(x.detach()).requires_grad_(True)
    g = sample((3, 12), AMPY_DTYPE[name], seed=1, specials=False)
    ampy.sort(x, 0, True)[0].backward(g)
    torch.sort(t, dim=0, descending=True, stable=True)[0].backward(_torch(g))
    assert_same_bits(x.grad, t.grad)
    assert ampy.argsort(x.detach(), 1).tolist() == torch.argsort(t.detach(), dim=1,
                                                                 stable=True).tolist()


def test_sort_bad_arguments_raise_as_torch():
    x = ampy.ones(3, 4)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.sort(2)
    with pytest.raises(TypeError, match="'input'"):
        ampy.sort([1, 2])
    with pytest.raises(TypeError, match="'dim'"):
        ampy.sort(x, 1.0)


# ---------------------------------------------------------------- topk
@pytest.mark.parametrize("name", [n for n in DTYPE_NAMES if n != "bool"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_bits_and_indices_match_torch(name, largest, cpu_path):
    x = _distinct((5, 40), name)
    t = _torch(x)
    for k, dim in ((0, 1), (1, -1), (7, 1), (40, 1), (3, 0), (5, 0)):
        v, i = ampy.topk(x, k, dim, largest)
        tv, ti = torch.topk(t, k, dim, largest)
        assert same_bits_or_both_nan(v, tv)
        np.testing.assert_array_equal(i.numpy(), ti.numpy())


def test_topk_nan_counts_as_largest_and_long_rows():
    a = np.random.default_rng(3).permutation(50257).astype(np.float32)
    a[1234] = np.nan
    x, t = ampy.tensor(a).reshape(1, -1), torch.tensor(a).reshape(1, -1)
    for largest in (True, False):
        v, i = x.topk(200, largest=largest)
        tv, ti = t.topk(200, largest=largest)
        assert same_bits_or_both_nan(v, tv)
        assert i.tolist() == ti.tolist()


def test_topk_ties_keep_input_order_and_sorted_false_gives_the_same_set():
    x = ampy.tensor([[1.0, 3.0, 3.0, 2.0, 3.0]])
    assert x.topk(2).indices.tolist() == [[1, 2]]
    assert sorted(x.topk(3, sorted=False).indices[0].tolist()) == [1, 2, 4]


def test_topk_strided_and_0d():
    base = _distinct((8, 30), "float32")
    tb = _torch(base)
    for view, tview in ((base.t(), tb.t()), (base[1::2, ::3], tb[1::2, ::3])):
        v, i = view.topk(3, 0)
        tv, ti = tview.topk(3, 0)
        assert same_bits_or_both_nan(v, tv)
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
    v, i = ampy.tensor(2.5).topk(1)
    assert v.ndim == 0 and float(v) == 2.5 and i.item() == 0


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_topk_grad_as_torch(name):
    x = _distinct((4, 9), name).requires_grad_(True)
    t = _torch(x.detach()).requires_grad_(True)
    g = sample((4, 3), AMPY_DTYPE[name], specials=False)
    x.topk(3, 1)[0].backward(g)
    t.topk(3, 1)[0].backward(_torch(g))
    assert_same_bits(x.grad, t.grad)


def test_topk_bad_arguments_raise_as_torch():
    x = ampy.ones(3, 4)
    before = bits(x)
    for k in (5, -1):
        with pytest.raises(RuntimeError, match="selected index k out of range"):
            x.topk(k)
        with pytest.raises(RuntimeError, match="selected index k out of range"):
            torch.ones(3, 4).topk(k)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.topk(1, dim=2)
    with pytest.raises(RuntimeError, match="bool"):
        ampy.ones(3, dtype=ampy.bool).topk(1)
    with pytest.raises(TypeError, match="'k'"):
        x.topk(1.5)
    np.testing.assert_array_equal(bits(x), before)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_autocast_leaves_sort_and_topk_alone_as_torch(dtype):
    x = sample((3, 12), ampy.float32)
    with ampy.autocast("cpu", dtype=AMPY_DTYPE[dtype]):
        got = (x.sort()[0].dtype, x.topk(2)[0].dtype)
    with torch.autocast("cpu", dtype=TORCH_DTYPE[dtype]):
        t = _torch(x)
        want = (t.sort()[0].dtype, t.topk(2)[0].dtype)
    assert [g.name for g in got] == [str(w).split(".")[1] for w in want]


# ---------------------------------------------------------------- multinomial
def _chi2(counts, probs):
    n = counts.sum()
    expected = n * probs
    keep = expected > 0
    assert counts[~keep].sum() == 0, "a category of probability zero was drawn"
    return float((((counts - expected) ** 2)[keep] / expected[keep]).sum()), int(keep.sum()) - 1


# chi-square critical values at p = 1e-6 for the degrees of freedom used below
_CRIT = {3: 30.7, 11: 44.6}


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_multinomial_with_replacement_has_the_right_distribution(name, cpu_path):
    w = np.array([0.1, 0.2, 0.0, 0.3, 0.4])
    p = ampy.tensor(np.stack([w, w[::-1]]) * 7).to(AMPY_DTYPE[name])  # unnormalised rows
    g = ampy.Generator().manual_seed(11)
    out = ampy.multinomial(p, 20000, replacement=True, generator=g)
    assert out.dtype is ampy.int64 and tuple(out.shape) == (2, 20000)
    for r, probs in enumerate((w, w[::-1])):
        stat, df = _chi2(np.bincount(out[r].numpy(), minlength=5).astype(float), probs)
        assert stat < _CRIT[df], (r, stat)


def test_multinomial_without_replacement_has_the_right_pair_distribution():
    w = np.array([0.1, 0.2, 0.3, 0.4])
    g = ampy.Generator().manual_seed(5)
    out = ampy.multinomial(ampy.tensor(np.tile(w, (30000, 1))), 2, generator=g).numpy()
    assert (out[:, 0] != out[:, 1]).all()
    counts = np.zeros((4, 4))
    np.add.at(counts, (out[:, 0], out[:, 1]), 1)
    probs = np.array([[w[i] * w[j] / (1 - w[i]) if i != j else 0 for j in range(4)]
                      for i in range(4)])
    stat, df = _chi2(counts.ravel(), probs.ravel())
    assert stat < _CRIT[df], stat


def test_multinomial_without_replacement_draws_zeros_last_and_every_category():
    p = ampy.tensor([[0.0, 1.0, 0.0, 2.0]])
    out = ampy.multinomial(p, 4)[0].tolist()
    assert sorted(out) == [0, 1, 2, 3] and set(out[:2]) == {1, 3}
    assert ampy.multinomial(ampy.tensor([0.0, 5.0, 0.0]), 3, True).tolist() == [1, 1, 1]


def test_multinomial_generator_reproducible_and_1d_shape():
    p = ampy.tensor([0.2, 0.5, 0.3])
    a = ampy.multinomial(p, 7, True, generator=ampy.Generator().manual_seed(3))
    b = p.multinomial(7, True, generator=ampy.Generator().manual_seed(3))
    assert a.tolist() == b.tolist() and tuple(a.shape) == (7,)
    assert tuple(ampy.multinomial(ampy.ones(0, 3), 2).shape) == (0, 2)


@pytest.mark.parametrize("probs,n,repl,match", [
    ([[-1.0, 1.0]], 1, False, "element < 0"),
    ([[np.nan, 1.0]], 1, False, "`nan`"),
    ([[np.inf, 1.0]], 1, True, "`inf`"),
    ([[0.0, 0.0]], 1, True, "sum of probabilities <= 0"),
    ([[1.0, 1.0]], 3, False, "n_sample > prob_dist.size"),
    ([[1.0, 1.0]], 0, True, "n_sample <= 0"),
    ([[[1.0, 1.0]]], 1, True, "1 or 2 dim"),
])
def test_multinomial_bad_inputs_raise_as_torch(probs, n, repl, match):
    x = ampy.tensor(probs)
    before = bits(x)
    with pytest.raises(RuntimeError, match=match):
        ampy.multinomial(x, n, repl)
    with pytest.raises(RuntimeError, match=match):
        torch.multinomial(torch.tensor(probs), n, repl)
    np.testing.assert_array_equal(bits(x), before)
    with pytest.raises(RuntimeError, match="floating-point dtypes for input, got: Long"):
        ampy.multinomial(ampy.tensor([1, 2]), 1)


# ---------------------------------------------------------------- randperm
def test_randperm_is_a_uniform_permutation():
    g = ampy.Generator().manual_seed(1)
    assert sorted(ampy.randperm(100, generator=g).tolist()) == list(range(100))
    firsts = np.bincount([ampy.randperm(4, generator=g)[0].item() for _ in range(4000)],
                         minlength=4).astype(float)
    stat, df = _chi2(firsts, np.full(4, 0.25))
    assert stat < _CRIT[df]
    a = ampy.randperm(9, generator=ampy.Generator().manual_seed(2))
    assert a.tolist() == ampy.randperm(9, generator=ampy.Generator().manual_seed(2)).tolist()
    assert a.dtype is ampy.int64 and ampy.randperm(3, dtype=ampy.float32).dtype is ampy.float32
    assert ampy.randperm(0).numel() == 0
    with pytest.raises(RuntimeError, match="negative dimension"):
        ampy.randperm(-1)


@requires_cuda
def test_sorting_ops_on_cuda_tensors_give_the_cpu_bits():
    x = sample((3, 12), ampy.float32).cuda()
    v, i = x.sort(1)
    cv, ci = x.cpu().sort(1)
    assert_same_bits(v.cpu(), cv) and i.device == x.device
    assert_same_bits(x.topk(2)[0].cpu(), x.cpu().topk(2)[0])


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int32", "float64"])
def test_topk_of_long_ordered_rows(name):
    """Rows in increasing / decreasing order (every element beats the running
    threshold, or none does) and a constant run, with k far below the length."""
    n = 3000
    a = np.arange(n, dtype=np.float64) - 1000
    rows = np.stack([a, a[::-1], np.where(np.arange(n) % 7 == 0, 5.0, -1.0) * (a > 0)])
    x = ampy.tensor(rows).to(AMPY_DTYPE[name])
    t = _torch(x)
    for k, largest in ((5, True), (5, False), (300, True), (1, True)):
        v, i = x.topk(k, 1, largest)
        tv, ti = t.sort(dim=1, descending=largest, stable=True)
        assert same_bits_or_both_nan(v, tv[:, :k])
        np.testing.assert_array_equal(i.numpy(), ti[:, :k].numpy())
