"""torch.nn.utils.rnn: pad_sequence, PackedSequence, pack_padded_sequence,
pad_packed_sequence and pack_sequence.

pad_sequence turns a list of (L_i, *) tensors into one (L_max, B, *) (or
(B, L_max, *) with batch_first) tensor, each sequence followed
(padding_side="right") or preceded ("left") by padding_value. The result has
the first sequence's dtype and device, as torch's: the others are cast to it.

A PackedSequence holds, time step after time step, the rows of the
sequences still running at that step (longest first): data (sum L_i, *),
batch_sizes (how many rows each step has, an int64 CPU tensor), and the
permutation that sorted the batch by length (None when the caller sorted it,
enforce_sorted=True). The recurrent layers take one (ampy/nn/modules/rnn.py).

Everything is built from ops (slices, cat, stack, index_select), so every
result is differentiable in its inputs.
"""
from typing import NamedTuple, Optional

from ... import _creation as C
from ... import _dtype as D
from ..._math_reduce import cat, stack
from ..._tensor import Tensor

__all__ = ["pad_sequence", "PackedSequence", "pack_padded_sequence", "pad_packed_sequence",
           "pack_sequence"]


def _sizes(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _check(sequences, padding_side):
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    seqs = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    for i, s in enumerate(seqs):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence(): expected Tensor as element {i} in argument "
                            f"'sequences', but got {type(s).__name__}")
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    first = seqs[0]
    for i, s in enumerate(seqs):
        if s.ndim == 0:
            raise RuntimeError(f"pad_sequence(): element {i} of 'sequences' is 0-dimensional; "
                               f"each sequence needs a length dimension")
        if tuple(s.shape[1:]) != tuple(first.shape[1:]):
            raise RuntimeError(f"pad_sequence(): element {i} of 'sequences' has size "
                               f"{_sizes(s.shape)}, whose trailing sizes do not match element "
                               f"0's {_sizes(first.shape)}")
        if s.device != first.device:
            raise RuntimeError(f"pad_sequence(): element {i} of 'sequences' is on {s.device}, "
                               f"element 0 on {first.device}")
    return seqs


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """torch.nn.utils.rnn.pad_sequence."""
    seqs = _check(sequences, padding_side)
    first = seqs[0]
    dtype, trail = first.dtype, tuple(first.shape[1:])
    longest = max(s.shape[0] for s in seqs)
    rows = []
    for s in seqs:
        s = s if s.dtype is dtype else s.to(dtype)
        short = longest - s.shape[0]
        if short:
            block = C.full((short,) + trail, padding_value, dtype=dtype, device=first.device)
            s = cat([s, block] if padding_side == "right" else [block, s], 0)
        rows.append(s)
    return stack(rows, 0 if batch_first else 1)


class PackedSequence(NamedTuple):
    """torch.nn.utils.rnn.PackedSequence's four fields."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Optional[Tensor] = None
    unsorted_indices: Optional[Tensor] = None

    def to(self, *args, **kwargs):
        """data moved/cast as Tensor.to; the indices follow its device."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = lambda t: None if t is None else t.to(device=data.device)
        return type(self)(data, self.batch_sizes, move(self.sorted_indices),
                          move(self.unsorted_indices))

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _lengths(lengths):
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1 or lengths.dtype is not D.int64 or lengths.is_cuda:
            kind = {D.int64: "Long", D.int32: "Int"}.get(lengths.dtype, str(lengths.dtype))
            raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"{lengths.ndim}D {lengths.device} {kind} tensor")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def _invert(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """torch.nn.utils.rnn.pack_padded_sequence: input (T, B, *) (or (B, T, *))
    with the B lengths on the CPU (a list or an int64 tensor)."""
    lens = _lengths(lengths)
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        order = None
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])  # stable, as torch's sort
    x = input.transpose(0, 1) if batch_first else input
    if len(lens) != x.shape[1]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lens)} (batch_size={x.shape[1]})")
    if any(n <= 0 for n in lens):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if max(lens) > x.shape[0]:  # (torch reads past the input here)
        raise RuntimeError(f"pack_padded_sequence(): a length of {max(lens)} is longer than "
                           f"the input's {x.shape[0]} time steps")
    sorted_idx = unsorted_idx = None
    if order is not None:
        sorted_idx = C.tensor(order, dtype=D.int64)
        unsorted_idx = C.tensor(_invert(order), dtype=D.int64)
        x = x.index_select(1, sorted_idx.to(device=x.device))
        lens = [lens[i] for i in order]
    sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = cat([x[t, :b] for t, b in enumerate(sizes)], 0)
    return PackedSequence(data, C.tensor(sizes, dtype=D.int64),
                          None if sorted_idx is None else sorted_idx.to(device=x.device),
                          None if unsorted_idx is None else unsorted_idx.to(device=x.device))


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """torch.nn.utils.rnn.pad_packed_sequence: (padded (T, B, *) or (B, T, *),
    lengths as an int64 CPU tensor), in the batch order before packing."""
    data = sequence.data
    sizes = [int(v) for v in sequence.batch_sizes.tolist()]
    steps, batch = len(sizes), sizes[0]
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and "
                             f"max sequence length being {steps}")
        steps = total_length
    trail = tuple(data.shape[1:])
    rows, off = [], 0
    for t in range(steps):
        b = sizes[t] if t < len(sizes) else 0
        r = data[off:off + b]
        off += b
        if b < batch:
            r = cat([r, C.full((batch - b,) + trail, padding_value, dtype=data.dtype,
                               device=data.device)], 0)
        rows.append(r)
    padded = stack(rows, 0)
    lens = [sum(1 for b in sizes if b > i) for i in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        inv = [int(i) for i in sequence.unsorted_indices.tolist()]
        lens = [lens[i] for i in inv]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, C.tensor(lens, dtype=D.int64)


def pack_sequence(sequences, enforce_sorted=True):
    """torch.nn.utils.rnn.pack_sequence: pad_sequence, then pack_padded_sequence."""
    lens = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lens, enforce_sorted=enforce_sorted)
