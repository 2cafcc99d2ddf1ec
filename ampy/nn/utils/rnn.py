"""torch.nn.utils.rnn.pad_sequence: a list of (L_i, *) tensors as one
(L_max, B, *) (or (B, L_max, *) with batch_first) tensor, each sequence
followed (padding_side="right") or preceded ("left") by padding_value.

Built from ops (cat with a constant block, then stack), so the result is
differentiable in every sequence. The result has the first sequence's dtype
and device, as torch's: the others are cast to it. PackedSequence,
pack_padded_sequence and pad_packed_sequence are not provided (the
recurrent layers reject a PackedSequence with a TypeError).
"""
from ... import _creation as C
from ..._math_reduce import cat, stack
from ..._tensor import Tensor

__all__ = ["pad_sequence"]


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
