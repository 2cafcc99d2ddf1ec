"""Strided layouts for the strided-layout sweep (tests/test_strided_sweep.py):
tensors of given values built over a junk-filled storage in a chosen layout
(permuted, stepped, reversed, expanded, offset), in ampy and in torch."""
import numpy as np
import torch
from hypothesis import strategies as st

import ampy

from _helpers import FLOAT_NAMES, NP_DTYPE as NP

JUNK = -77.0  # what the storage holds outside a view: reading it shows in the result


class Layout:
    """perm: storage order of the dims (innermost last); steps: slicing steps;
    flips: dims walked backwards; offset: storage offset; expand: dims with
    stride 0; zero: dim 0 has size 0."""

    def __init__(self, nd, perm=None, steps=None, flips=None, offset=0, expand=()):
        self.perm = tuple(range(nd)) if perm is None else tuple(perm)
        self.steps = steps or (1,) * nd
        self.flips = flips or (False,) * nd
        self.offset, self.expand = offset, tuple(expand)

    def __repr__(self):
        return (f"Layout(perm={self.perm}, steps={self.steps}, flips={self.flips}, "
                f"offset={self.offset}, expand={self.expand})")


KINDS = ("transposed", "stepped", "flipped", "expanded", "offset", "zero")


def fixed_layout(kind, nd, written=False, grad_out=False):
    if kind == "transposed":
        return Layout(nd, perm=tuple(reversed(range(nd))))
    if kind == "stepped" or (kind == "expanded" and written):
        return Layout(nd, steps=(2,) * nd, offset=1)
    if kind == "flipped":
        return Layout(nd, flips=(True,) * nd)
    if kind == "expanded":
        return Layout(nd, expand=range(nd) if grad_out else range(min(nd, 1)))
    if kind == "offset":
        return Layout(nd, offset=5)
    return Layout(nd, perm=tuple(reversed(range(nd))), offset=3)  # zero: 0-size, odd strides


@st.composite
def layouts(draw, nd, written=False):
    return Layout(nd, perm=draw(st.permutations(range(nd))),
                  steps=tuple(draw(st.sampled_from((1, 1, 2, 3))) for _ in range(nd)),
                  flips=tuple(draw(st.booleans()) for _ in range(nd)),
                  offset=draw(st.sampled_from((0, 1, 7))),
                  expand=() if written else
                  tuple(d for d in range(nd) if draw(st.integers(0, 3)) == 0))


def _storage_np(dtype):
    return np.float32 if dtype in FLOAT_NAMES else {"int64": np.int64, "bool": np.bool_}[dtype]


def strided(vals, dtype, lay):
    """An ampy tensor holding vals (ndarray, already constant along lay.expand)
    in layout lay, over a storage whose other elements hold JUNK."""
    store, shape, strides, off = _storage(vals, dtype, lay)
    base = ampy.tensor(store)
    if dtype in FLOAT_NAMES and dtype != "float32":
        base = base.to(getattr(ampy, dtype))
    # the binding's raw view: as_strided (like torch's) refuses the negative strides of a flip
    x = base._view(shape, strides, off)
    assert x.stride() == strides
    return x


def _storage(vals, dtype, lay):
    """(storage ndarray, shape, strides, offset) of vals in layout lay."""
    shape, nd = vals.shape, vals.ndim
    strides, acc = [0] * nd, 1
    for d in reversed(lay.perm):
        strides[d] = acc * lay.steps[d]
        acc *= max(shape[d], 1) * lay.steps[d]
    off = lay.offset
    for d in range(nd):
        if d in lay.expand and shape[d] > 0:
            strides[d] = 0
        elif lay.flips[d] and shape[d] > 1:
            off += (shape[d] - 1) * strides[d]
            strides[d] = -strides[d]
    store = np.full(lay.offset + acc, JUNK if dtype in FLOAT_NAMES else 1, dtype=_storage_np(dtype))
    pos = np.full(shape, off, dtype=np.int64)
    for d in range(nd):
        pos += (np.arange(shape[d]) * strides[d]).reshape((-1,) + (1,) * (nd - 1 - d))
    store[pos] = vals
    return store, tuple(shape), tuple(strides), off


def values(kind, shape, dtype, rng, lay=None):
    """Values of one input (rounded to dtype), constant along lay.expand."""
    if kind == "f":
        v = rng.normal(size=shape) * 1.5
    elif kind == "p":
        v = rng.uniform(0.5, 2.0, size=shape)
    elif kind == "u":
        v = rng.uniform(-0.9, 0.9, size=shape)
    elif kind == "b":
        v = rng.random(shape) < 0.5
    else:
        v = rng.integers(0, int(kind[1:]) if kind[0] == "i" else 10, size=shape)
    if lay is not None:
        for d in lay.expand:
            if shape[d] > 0:
                v = np.broadcast_to(np.take(v, [0], axis=d), shape)
    v = np.array(v, order="C")  # (ascontiguousarray would make a 0-d value 1-d)
    if v.dtype.kind == "f":
        v = v.astype(NP[dtype]).astype(np.float32)
    return v


def input_dtype(kind, dtype):
    return "bool" if kind == "b" else ("int64" if kind[0] in "in" else dtype)


def contiguous(vals, dtype):
    return strided(vals, dtype, Layout(vals.ndim))


def to_torch(vals, dtype):
    t = torch.tensor(vals)
    return t.to(getattr(torch, dtype)) if vals.dtype.kind == "f" else t


def as_np(t):
    t = t.detach()
    return (t.double() if t.dtype.is_floating_point else t).numpy()


def torch_strided(vals, dtype, lay):
    """The torch tensor of strided(vals, dtype, lay) (None: negative strides,
    which torch cannot view)."""
    if any(f and n > 1 for f, n in zip(lay.flips, vals.shape)):
        return None
    store, shape, strides, off = _storage(vals, dtype, lay)
    return to_torch(store, dtype).as_strided(shape, strides, off)
