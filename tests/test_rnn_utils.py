"""nn.utils.rnn.pad_sequence against torch 2.13: values (as bits) in every
dtype, batch_first, padding_value, padding_side, gradients to each sequence,
strided sequences, dtype of mixed inputs, errors (inputs unchanged), and
that the recurrent layers still reject a PackedSequence with a TypeError."""
import numpy as np
import pytest
import torch

import ampy
from ampy import nn
from ampy.nn.utils.rnn import pad_sequence

from _helpers import bits

TRNN = torch.nn.utils.rnn


def _seqs(lengths, trail=(3,), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n,) + trail).astype(np.float32) for n in lengths]


def _np(t):
    return t.detach().float().numpy() if isinstance(t, torch.Tensor) else \
        np.asarray(t.detach().to(ampy.float32))


@pytest.mark.parametrize("dt", ("float32", "float64", "float16", "bfloat16", "int64"))
@pytest.mark.parametrize("batch_first", (False, True))
@pytest.mark.parametrize("side", ("right", "left"))
@pytest.mark.parametrize("trail", ((), (3,), (2, 2)))
def test_values_match_torch(dt, batch_first, side, trail):
    arrays = _seqs((4, 1, 3, 4), trail)
    ta = [torch.from_numpy(a).to(getattr(torch, dt)) for a in arrays]
    aa = [ampy.tensor(a).to(getattr(ampy, dt)) for a in arrays]
    kw = dict(batch_first=batch_first, padding_value=-2.5 if dt != "int64" else 7,
              padding_side=side)
    yt, ya = TRNN.pad_sequence(ta, **kw), pad_sequence(aa, **kw)
    assert tuple(ya.shape) == tuple(yt.shape)
    assert str(ya.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1]
    assert np.array_equal(bits(ya), bits(yt))  # casts and padding as bits


@pytest.mark.parametrize("side", ("right", "left"))
@pytest.mark.parametrize("batch_first", (False, True))
def test_gradients_match_torch(side, batch_first):
    arrays = _seqs((2, 5, 3))
    ta = [torch.from_numpy(a).requires_grad_() for a in arrays]
    aa = [ampy.tensor(a).requires_grad_() for a in arrays]
    yt = TRNN.pad_sequence(ta, batch_first, 1.5, side)
    ya = pad_sequence(aa, batch_first, 1.5, side)
    g = np.random.default_rng(3).standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.from_numpy(g))
    ya.backward(ampy.tensor(g))
    for a, t in zip(aa, ta):
        assert np.array_equal(_np(a.grad), t.grad.numpy())


def test_strided_and_tuple_and_tensor_inputs():
    base = _seqs((6,), (4,))[0]
    # a tuple of two strided sequences: (4, 3) every other column of the transpose, and
    # (2, 3) a row and column slice
    aa = (ampy.tensor(base).t()[:, ::2], ampy.tensor(base)[1:3, :3])
    ta = (torch.from_numpy(base).t()[:, ::2], torch.from_numpy(base)[1:3, :3])
    assert not aa[0].is_contiguous() and not aa[1].is_contiguous()
    for side in ("right", "left"):
        assert np.array_equal(_np(pad_sequence(aa, padding_side=side)),
                              _np(TRNN.pad_sequence(ta, padding_side=side)))
    # a tensor is a sequence of its rows, as torch iterates it
    assert np.array_equal(_np(pad_sequence(ampy.tensor(base))),
                          _np(TRNN.pad_sequence(torch.from_numpy(base))))


def test_mixed_dtypes_take_the_first():
    a, b = _seqs((3, 2))
    yt = TRNN.pad_sequence([torch.from_numpy(a), torch.from_numpy(b).double()])
    ya = pad_sequence([ampy.tensor(a), ampy.tensor(b).double()])
    assert yt.dtype is torch.float32 and ya.dtype is ampy.float32
    assert np.array_equal(_np(ya), _np(yt))


def test_autograd_under_autocast_keeps_dtype():
    """pad_sequence is no autocast op: a float32 sequence stays float32."""
    a, b = _seqs((3, 2))
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        ya = pad_sequence([ampy.tensor(a), ampy.tensor(b)])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = TRNN.pad_sequence([torch.from_numpy(a), torch.from_numpy(b)])
    assert ya.dtype is ampy.float32 and yt.dtype is torch.float32


BAD = [  # (args builder, kwargs, exception, fragment of torch's message, of ampy's)
    (lambda M: [M.ones(3, 2), M.ones(2, 3)], {}, RuntimeError, "must match",
     "trailing sizes do not match"),
    (lambda M: [], {}, RuntimeError, "received an empty list of sequences",
     "received an empty list of sequences"),
    (lambda M: [M.ones(3, 2), M.ones(1, 2)], dict(padding_side="middle"), RuntimeError,
     "Expected padding_side to be one of left or right, but got middle.",
     "Expected padding_side to be one of left or right, but got middle."),
    (lambda M: [M.ones(3, 2), 1], {}, TypeError, "expected Tensor as element 1",
     "expected Tensor as element 1"),
    (lambda M: [M.tensor(1.0), M.tensor(2.0)], {}, RuntimeError, "", "0-dimensional"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments_raise_as_torch(i):
    build, kw, exc, msg_t, msg_a = BAD[i]
    with pytest.raises(exc) as et:
        TRNN.pad_sequence(build(torch), **kw)
    assert msg_t in str(et.value)
    seqs = build(ampy)
    before = [np.asarray(s).copy() for s in seqs if isinstance(s, ampy.Tensor)]
    with pytest.raises(exc) as ea:
        pad_sequence(seqs, **kw)
    assert msg_a in str(ea.value)
    after = [np.asarray(s) for s in seqs if isinstance(s, ampy.Tensor)]
    assert all(np.array_equal(x, y) for x, y in zip(before, after))


def test_packed_sequence_input_still_rejected():
    packed = TRNN.pack_sequence([torch.ones(3, 2), torch.ones(1, 2)])
    with pytest.raises(TypeError, match="PackedSequence input is not supported"):
        nn.LSTM(2, 3)(packed)


def test_public_names():
    assert nn.utils.rnn.pad_sequence is pad_sequence
    assert "pad_sequence" in nn.utils.rnn.__all__
