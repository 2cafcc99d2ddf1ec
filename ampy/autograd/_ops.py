"""The ops backward rules are written with, and the helpers they share.

`O.mul(a, b)` runs op "mul" of the op table. Normally it calls the op's
forward directly (no autocast, no recording: backward runs in the dtype the
forward used); under `create_graph=True` it goes through `dispatch`, so the
backward computation is itself recorded and can be differentiated again.
"""
from .. import _C
from .. import _dtype as D
from .._dispatch import dispatch, get_op
from .._shape import wrap_dim
from ._grad_mode import _state

__all__ = ["O", "sum_to", "zeros", "cast", "upcast", "is_expandable_to", "wrap_dim"]


class _OpCaller:
    __slots__ = ("name", "op")

    def __init__(self, name):
        self.name = name
        self.op = None

    def __call__(self, *args, **kwargs):
        op = self.op
        if op is None:
            op = self.op = get_op(self.name)
        if _state.create_graph:
            return dispatch(op, *args, **kwargs)
        return op.forward(*args, **kwargs)


class _Ops:
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        caller = _OpCaller(name)
        setattr(self, name, caller)
        return caller


O = _Ops()


def is_expandable_to(shape, desired):
    """True when a tensor of `shape` broadcasts to `desired`."""
    if len(shape) > len(desired):
        return False
    for s, t in zip(reversed(tuple(shape)), reversed(tuple(desired))):
        if s != t and s != 1:
            return False
    return True


def sum_to(g, shape):
    """Sum g over the dims along which `shape` was broadcast to g's shape."""
    shape = tuple(shape)
    gs = tuple(g.shape)
    if gs == shape:
        return g
    lead = len(gs) - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and gs[lead + i] != 1)
    if dims:
        g = O.sum(g, dims, keepdim=True)
    return O.reshape(g, shape) if tuple(g.shape) != shape else g


def zeros(shape, dtype, like=None):
    """Zeros of `shape` and `dtype` on the device of `like` (one memset: the
    same bits as filling with +0.0 for every dtype)."""
    z = _C.fused_zeros(tuple(shape), dtype)
    if like is not None and like._device_index >= 0:
        z = O.to_device(z, like.device)
    return z


def cast(t, dtype):
    """t in `dtype` (t itself when it already is)."""
    if t.dtype is dtype:
        return t
    return O.to_dtype(t, dtype)


_HALF = (D.float16, D.bfloat16)


def upcast(t):
    """fp16/bf16 -> fp32 for composite rules: like torch's fused backward
    kernels, they compute in fp32 and round once (the engine casts back)."""
    return O.to_dtype(t, D.float32) if t.dtype in _HALF else t


def detached(t):
    """A new tensor object on t's memory, without history."""
    return t._view(t.shape, t.stride(), 0)


def is_float(t):
    return t.dtype.is_floating_point

