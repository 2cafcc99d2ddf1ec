"""nn.utils.rnn.pad_sequence against torch 2.13: values (as bits) in every
dtype, batch_first, padding_value, padding_side, gradients to each sequence,
strided sequences, dtype of mixed inputs, errors (inputs unchanged); pack_padded_sequence,
pad_packed_sequence and pack_sequence (data, batch_sizes and indices equal to
torch's, gradients as bits); nn.LSTM/GRU/RNN on a PackedSequence (outputs,
final states and all gradients against torch, sorted or not, with and
without initial states, autocast dtypes)."""
import numpy as np
import pytest
import torch

import ampy
from ampy import nn
from ampy.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence,
                               pad_packed_sequence, pad_sequence)

from _helpers import bits, requires_cuda

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


# ------------------------------------------------------------ packing
PACK_CASES = [([5, 3, 2, 2], True), ([2, 5, 2, 3], False), ([1, 4, 4, 1], False),
              ([3], True)]


def _same_packed(a, t):
    assert np.array_equal(_np(a.data), _np(t.data))
    assert a.batch_sizes.dtype is ampy.int64 and a.batch_sizes.tolist() == t.batch_sizes.tolist()
    for x, y in ((a.sorted_indices, t.sorted_indices), (a.unsorted_indices, t.unsorted_indices)):
        assert (x is None) == (y is None)
        if x is not None:
            assert x.tolist() == y.tolist()


@pytest.mark.parametrize("lengths,srt", PACK_CASES)
@pytest.mark.parametrize("batch_first", (False, True))
@pytest.mark.parametrize("as_tensor", (False, True))
def test_pack_and_pad_packed_match_torch(lengths, srt, batch_first, as_tensor):
    x = np.random.default_rng(1).standard_normal((5, len(lengths), 3)).astype(np.float32)
    x = x.transpose(1, 0, 2).copy() if batch_first else x
    xa, xt = ampy.tensor(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
    la = ampy.tensor(lengths, dtype=ampy.int64) if as_tensor else lengths
    lt = torch.tensor(lengths) if as_tensor else lengths
    pa = pack_padded_sequence(xa, la, batch_first, enforce_sorted=srt)
    pt = TRNN.pack_padded_sequence(xt, lt, batch_first, enforce_sorted=srt)
    assert isinstance(pa, PackedSequence)
    _same_packed(pa, pt)
    ya, na = pad_packed_sequence(pa, batch_first, padding_value=-1.0, total_length=6)
    yt, nt = TRNN.pad_packed_sequence(pt, batch_first, padding_value=-1.0, total_length=6)
    assert np.array_equal(_np(ya), _np(yt)) and na.tolist() == nt.tolist()
    assert na.dtype is ampy.int64
    g = np.random.default_rng(2).standard_normal(tuple(yt.shape)).astype(np.float32)
    ya.backward(ampy.tensor(g))
    yt.backward(torch.from_numpy(g))
    assert np.array_equal(_np(xa.grad), xt.grad.numpy())


def test_pack_sequence_matches_torch():
    arrays = _seqs((2, 4, 1))
    pa = pack_sequence([ampy.tensor(a) for a in arrays], enforce_sorted=False)
    pt = TRNN.pack_sequence([torch.from_numpy(a) for a in arrays], enforce_sorted=False)
    _same_packed(pa, pt)
    assert pa.to(ampy.float64).data.dtype is ampy.float64


PACK_BAD = [
    (lambda M, x: M.pack_padded_sequence(x, [2, 5, 2, 3]), RuntimeError,
     "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True"),
    (lambda M, x: M.pack_padded_sequence(x, [5, 0, 2, 3], enforce_sorted=False), RuntimeError,
     "Length of all samples has to be greater than 0"),
    (lambda M, x: M.pack_padded_sequence(x, [5, 5]), RuntimeError,
     "Expected `len(lengths)` to be equal to batch_size, but got 2 (batch_size=4)"),
    (lambda M, x: M.pad_packed_sequence(M.pack_padded_sequence(x, [5, 3, 2, 1]),
                                        total_length=3), ValueError,
     "Expected total_length to be at least the length of the longest sequence in input, but "
     "got total_length=3 and max sequence length being 5"),
]


@pytest.mark.parametrize("i", range(len(PACK_BAD)))
def test_pack_errors_as_torch(i):
    fn, exc, msg = PACK_BAD[i]
    x = np.random.default_rng(0).standard_normal((5, 4, 2)).astype(np.float32)
    with pytest.raises(exc) as et:
        fn(TRNN, torch.from_numpy(x))
    xa = ampy.tensor(x)
    with pytest.raises(exc) as ea:
        fn(ampy.nn.utils.rnn, xa)
    assert msg in str(et.value) and msg in str(ea.value)
    assert np.array_equal(np.asarray(xa), x)


def test_lengths_must_be_a_1d_int64_cpu_tensor():
    x = ampy.zeros((5, 4, 2))
    with pytest.raises(RuntimeError, match="'lengths' argument should be a 1D CPU int64 tensor, "
                                           "but got 2D cpu Long tensor"):
        pack_padded_sequence(x, ampy.tensor([[5, 4, 3, 2]], dtype=ampy.int64))
    with pytest.raises(RuntimeError, match="is longer than the input's 5 time steps"):
        pack_padded_sequence(x, [6, 4, 3, 2])  # torch reads past its input here


def _layer_pair(cls, dtype, **kw):
    torch.manual_seed(0)
    t = getattr(torch.nn, cls)(3, 4, **kw).to(getattr(torch, dtype))
    a = getattr(nn, cls)(3, 4, **kw).to(getattr(ampy, dtype))
    a.load_state_dict({k: ampy.tensor(v.detach().float().numpy()).to(getattr(ampy, dtype))
                       for k, v in t.state_dict().items()})
    return a, t


LAYERS = [("LSTM", dict(num_layers=2, bidirectional=True)), ("LSTM", dict(proj_size=2)),
          ("LSTM", dict(batch_first=True)), ("GRU", dict(num_layers=2, bidirectional=True)),
          ("GRU", dict(batch_first=True)), ("RNN", dict(nonlinearity="relu", bidirectional=True)),
          ("RNN", dict(num_layers=2))]


@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("with_hx", (False, True))
@pytest.mark.parametrize("srt", (False, True))
@pytest.mark.parametrize("cls,kw", LAYERS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(LAYERS)])
def test_recurrent_layers_take_packed_input(cls, kw, srt, with_hx, dtype):
    """Outputs, final states and every gradient (input, initial states,
    parameters) equal to torch's within float32/float64 rounding."""
    a, t = _layer_pair(cls, dtype, **kw)
    lengths = [5, 3, 3, 1] if srt else [2, 5, 1, 3]
    bf = kw.get("batch_first", False)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 5, 3) if bf else (5, 4, 3))
    dirs = 2 if kw.get("bidirectional") else 1
    hsz = (kw.get("num_layers", 1) * dirs, 4, kw.get("proj_size") or 4)
    csz = hsz[:2] + (4,)
    mk_a = lambda v: ampy.tensor(v).to(getattr(ampy, dtype)).requires_grad_()
    mk_t = lambda v: torch.from_numpy(v).to(getattr(torch, dtype)).requires_grad_()
    arrays = [x] + ([rng.standard_normal(hsz)] + ([rng.standard_normal(csz)] if cls == "LSTM"
                                                  else []) if with_hx else [])
    ta, tt = [mk_a(v) for v in arrays], [mk_t(v) for v in arrays]
    results = []
    for M, U, ins, layer in ((ampy.nn.utils.rnn, ampy, ta, a), (TRNN, torch, tt, t)):
        packed = M.pack_padded_sequence(ins[0], lengths, bf, enforce_sorted=srt)
        hx = None if not with_hx else (tuple(ins[1:]) if cls == "LSTM" else ins[1])
        out, hn = layer(packed, hx)
        assert type(out).__name__ == "PackedSequence"
        y, _ = M.pad_packed_sequence(out, bf)
        states = list(hn) if cls == "LSTM" else [hn]
        loss = (y * y).sum() + sum((s * s * (k + 2)).sum() for k, s in enumerate(states))
        grads = U.autograd.grad(loss, list(ins) + list(layer.parameters()))
        results.append([_np(v).astype(np.float64) for v in [y] + states + list(grads)])
    tol = 1e-5 if dtype == "float32" else 1e-12
    assert len(results[0]) == len(results[1]) == 1 + len(states) + len(arrays) + \
        len(list(t.parameters()))
    for got, want in zip(*results):
        assert np.abs(want).max() > 0.01  # no vacuous comparison
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("cls", ("LSTM", "GRU"))
def test_packed_under_autocast_dtypes_match_torch(cls):
    """torch's packed overloads are on no CPU autocast list: their linears run
    in bfloat16, the states and outputs promote to float32."""
    a, t = _layer_pair(cls, "float32")
    x = np.random.default_rng(5).standard_normal((5, 4, 3)).astype(np.float32)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        oa, ha = a(pack_padded_sequence(ampy.tensor(x), [5, 3, 2, 2]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ot, ht = t(TRNN.pack_padded_sequence(torch.from_numpy(x), [5, 3, 2, 2]))
    sa, st = (list(ha), list(ht)) if cls == "LSTM" else ([ha], [ht])
    assert oa.data.dtype is ampy.float32 and ot.data.dtype is torch.float32
    assert [s.dtype for s in sa] == [ampy.float32] * len(sa)
    assert [s.dtype for s in st] == [torch.float32] * len(st)
    np.testing.assert_allclose(_np(oa.data), _np(ot.data), atol=2e-2)


def test_packed_hidden_state_of_the_wrong_size_raises():
    a, t = _layer_pair("GRU", "float32")
    x = np.zeros((5, 4, 3), np.float32)
    for M, U, layer in ((ampy.nn.utils.rnn, ampy, a), (TRNN, torch, t)):
        with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 4, 4\), got "
                                               r"\[1, 3, 4\]"):
            layer(M.pack_padded_sequence(U.tensor(x), [5, 3, 2, 2]), U.zeros(1, 3, 4))


def test_torchs_packed_sequence_is_rejected():
    packed = TRNN.pack_sequence([torch.ones(3, 2), torch.ones(1, 2)])
    with pytest.raises(TypeError, match="this PackedSequence is not ampy's"):
        nn.LSTM(2, 3)(packed)


def test_public_names():
    assert nn.utils.rnn.pad_sequence is pad_sequence
    for name in ("pad_sequence", "PackedSequence", "pack_padded_sequence", "pad_packed_sequence",
                 "pack_sequence"):
        assert name in nn.utils.rnn.__all__ and hasattr(TRNN, name)


@requires_cuda
def test_packed_lstm_on_cuda_equals_the_cpu():
    a, _ = _layer_pair("LSTM", "float32", bidirectional=True)
    x = np.random.default_rng(6).standard_normal((5, 4, 3)).astype(np.float32)
    pc = pack_padded_sequence(ampy.tensor(x), [2, 5, 1, 3], enforce_sorted=False)
    oc, (hc, cc) = a(pc)
    pg = pack_padded_sequence(ampy.tensor(x).cuda(), [2, 5, 1, 3], enforce_sorted=False)
    og, (hg, cg) = a.cuda()(pg)
    for u, v in ((oc.data, og.data), (hc, hg), (cc, cg)):
        np.testing.assert_allclose(_np(u), _np(v.cpu()), rtol=1e-4, atol=1e-4)
    yg, lg = pad_packed_sequence(og)
    assert lg.tolist() == [2, 5, 1, 3] and yg.is_cuda
