"""The non-zero padding modes of Conv1d/Conv2d ("reflect", "replicate",
"circular"): the input is padded by indexing each spatial dim with the
source position of every padded position (an int64 index, so autograd sums
the gradient of repeated positions back, as F.pad's backward does).
"""
from ... import _creation as C
from ... import _dtype as D

__all__ = ["pad_nd"]


def _source(i, n, mode):
    if mode == "circular":
        return i % n
    if mode == "replicate":
        return min(max(i, 0), n - 1)
    if i < 0:  # reflect: the edge itself is not repeated
        return -i
    return 2 * (n - 1) - i if i >= n else i


def _check(x, dim, before, after, mode):
    n = x.shape[dim]
    if mode == "reflect" and (before >= n or after >= n):
        raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                           f"input dimension, but got: padding ({before}, {after}) at dimension "
                           f"{dim} of input {list(x.shape)}")
    if mode == "circular" and (before > n or after > n):
        raise RuntimeError("Padding value causes wrapping around more than once.")
    if mode == "replicate" and n == 0 and (before or after):
        raise RuntimeError(f"Expected the padded dimension {dim} of input {list(x.shape)} to be "
                           f"non-empty")


def pad_nd(x, pad, mode):
    """x padded on its last len(pad) // 2 dims; pad is F.pad's list
    (last dim's (before, after) first)."""
    for k in range(len(pad) // 2):
        dim = x.ndim - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        if before == 0 and after == 0:
            continue
        _check(x, dim, before, after, mode)
        n = x.shape[dim]
        idx = C.tensor([_source(i, n, mode) for i in range(-before, n + after)], dtype=D.int64)
        if x.is_cuda:
            idx = idx.to(x.device)
        key = (Ellipsis, idx) + (slice(None),) * k
        x = x[key]
    return x
