"""index_put with accumulate=True (libampy's ampy_index_put_accumulate, reached
as ``_C.index_scatter(..., accumulate=True)`` and through the backward of
``x[idx]``) against torch's CPU ``index_put_(..., accumulate=True)``, bit for
bit: repeats are added one at a time in index order."""
import numpy as np
import pytest

import ampy
from ampy import _C

from _helpers import TORCH_DTYPE as TORCH_DT

torch = pytest.importorskip("torch")

DTYPES = [ampy.float32, ampy.float64, ampy.float16, ampy.bfloat16]


def _wide_bits(x):
    """Bits of x widened exactly (halves -> float32), as a NumPy array."""
    if isinstance(x, torch.Tensor):
        x = x if x.dtype == torch.float64 else x.float()
        a = x.numpy()
    else:
        a = (x if x.dtype is ampy.float64 else x.float()).numpy()
    return a.view(np.uint64 if a.dtype == np.float64 else np.uint32)


def _values(shape, dtype, seed):
    """torch values of `dtype` and the same values as an ampy tensor."""
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(TORCH_DT[dtype])
    wide = t if dtype is ampy.float64 else t.float()
    return t, ampy.tensor(wide.numpy()).to(dtype)


def _idx(vals):
    return ampy.tensor(np.asarray(vals, dtype=np.int64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeated_indices_match_torch(dtype):
    idx = [3, 1, 3, 3, 0, 1, 7, 3, 1, 1]
    tz, z = _values((8, 5), dtype, 1)
    tv, v = _values((len(idx), 5), dtype, 2)
    tz.index_put_((torch.tensor(idx),), tv, accumulate=True)
    _C.index_scatter(z, 1, [_idx(idx)], v, True)
    assert np.array_equal(_wide_bits(z), _wide_bits(tz))


@pytest.mark.parametrize("dtype", [ampy.float16, ampy.bfloat16])
def test_order_is_index_order(dtype):
    """2048 + 1 + 1 in float16 is 2048 added in index order (each 1 rounds
    away), 2050 in the reverse order: torch adds in index order."""
    big = 2048.0 if dtype is ampy.float16 else 256.0
    tv = torch.tensor([big, 1.0, 1.0], dtype=TORCH_DT[dtype])
    tz = torch.zeros(2, dtype=TORCH_DT[dtype]).index_put_((torch.tensor([1, 1, 1]),), tv,
                                                          accumulate=True)
    z = ampy.zeros(2, dtype=dtype)
    _C.index_scatter(z, 1, [_idx([1, 1, 1])], ampy.tensor([big, 1.0, 1.0]).to(dtype), True)
    assert np.array_equal(_wide_bits(z), _wide_bits(tz))
    assert z.float().tolist() == [0.0, big]


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_index_arrays_strided_destination(dtype):
    """Two indexed dims of a transposed (non-contiguous) destination."""
    i0, i1 = [0, 2, 0, 2, 1, 0], [1, 3, 1, 3, 0, 1]
    tbase, base = _values((4, 3, 6), dtype, 3)  # dst = base.transpose(0, 1): (3, 4, 6)
    tv, v = _values((len(i0), 6), dtype, 4)
    tbase.transpose(0, 1).index_put_((torch.tensor(i0), torch.tensor(i1)), tv, accumulate=True)
    dst = base.transpose(0, 1)
    assert not dst.is_contiguous()
    _C.index_scatter(dst, 2, [_idx(i0), _idx(i1)], v, True)
    assert np.array_equal(_wide_bits(base), _wide_bits(tbase))


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_values(dtype):
    """Values with stride 0 (one row expanded to every index tuple)."""
    idx = [2, 2, 0, 2, 4]
    tz, z = _values((5, 3), dtype, 5)
    trow, row = _values((1, 3), dtype, 6)
    tz.index_put_((torch.tensor(idx),), trow.expand(len(idx), 3), accumulate=True)
    _C.index_scatter(z, 1, [_idx(idx)], row.expand(len(idx), 3), True)
    assert np.array_equal(_wide_bits(z), _wide_bits(tz))


@pytest.mark.parametrize("dtype", DTYPES)
def test_negative_indices_and_scalar_rows(dtype):
    idx = [-1, 4, -5, 0, -1]
    tz, z = _values((5,), dtype, 7)
    tv, v = _values((len(idx),), dtype, 8)
    tz.index_put_((torch.tensor(idx),), tv, accumulate=True)
    _C.index_scatter(z, 1, [_idx(idx)], v, True)
    assert np.array_equal(_wide_bits(z), _wide_bits(tz))


@pytest.mark.parametrize("bad", [10, -11])
def test_bad_index_raises_and_changes_nothing(bad):
    z = ampy.arange(20, dtype=ampy.float32).reshape(10, 2)
    before = z.numpy().copy()
    ver = z._version
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 0 "
                                         f"with size 10"):
        _C.index_scatter(z, 1, [_idx([1, 1, bad, 2])], ampy.ones((4, 2)), True)
    assert np.array_equal(z.numpy(), before) and z._version == ver


def test_integer_destination_is_a_type_error():
    with pytest.raises(TypeError, match="accumulate=True"):
        _C.index_scatter(ampy.zeros(3, dtype=ampy.int64), 1, [_idx([0, 0])],
                         ampy.ones(2, dtype=ampy.int64), True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_getitem_backward_matches_torch(dtype):
    """The gradient of x[idx] with repeated indices (the autograd rule is one
    kernel call), bit for bit against torch's CPU autograd."""
    idx = [[0, 3, 3], [3, 1, 0], [3, 3, 3]]
    tx, x = _values((4, 6), dtype, 9)
    tg, g = _values((3, 3, 6), dtype, 10)
    tx.requires_grad_(True)
    x.requires_grad_(True)
    tx[torch.tensor(idx)].backward(tg)
    x[_idx(idx)].backward(g)
    assert np.array_equal(_wide_bits(x.grad), _wide_bits(tx.grad))


def test_rule_is_one_kernel_call():
    """No Python rounds left in the rule: the helpers of the old loop are gone."""
    from ampy.autograd import _rules_views as RV
    assert not any(hasattr(RV, n) for n in ("_take", "_all_equal", "_arange"))
