"""Shape arithmetic shared by every layer: dimension wrapping, broadcasting,
contiguous strides and element counts (pure Python, no tensors)."""

__all__ = ["wrap_dim", "broadcast_shapes", "contiguous_strides", "numel"]


def wrap_dim(d, ndim):
    """A dim in [-ndim, ndim) as an index in [0, ndim); a 0-d tensor takes
    dims -1 and 0 (torch's maybe_wrap_dim). IndexError when out of range."""
    n = ndim if ndim > 0 else 1
    if not isinstance(d, int):
        d = d.__index__()
    if d < -n or d >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d + n if d < 0 else d


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to, or None when they do not
    (callers raise their own op's message)."""
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, v in enumerate(s):
            j = n - len(s) + i
            if out[j] == 1:
                out[j] = v
            elif v != 1 and v != out[j]:
                return None
    return tuple(out)


def contiguous_strides(shape):
    """Row-major strides of `shape` (a size-0 or size-1 dim counts as 1, as in
    torch); RuntimeError when a stride does not fit an int64."""
    st, out = 1, []
    for s in reversed(shape):
        if st >= 1 << 63:
            raise RuntimeError("Stride calculation overflowed")
        out.append(st)
        st *= max(s, 1)
    out.reverse()
    return tuple(out)


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n
