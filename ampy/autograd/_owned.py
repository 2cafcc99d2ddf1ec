"""The engine's owned gradient buffers: the gradients of select / narrow /
basic-getitem nodes summed straight into one buffer of their input's shape
(laid out as the permute / transpose before them wants), instead of one
zero-padded tensor per slice. A CPU buffer filled by int selects starts
uninitialized: each select writes 0 + g into its part, and `_settle` zeros the
parts no gradient reached before anything reads the buffer (run_backward in
_engine.py drives it)."""
from .. import _C
from .. import _views as V
from .._convert import scalar

from ._node import AccumulateGrad, Meta
from ._ops import O, wrap_dim, zeros
from ._recording import _is_tensor


_SCATTER_OPS = ("select", "narrow", "getitem")


def _basic_key(key):
    """An index of ints and slices only (a view, each element at most once)."""
    if key.__class__ is tuple:
        return all(k.__class__ in (int, slice) for k in key)
    return key.__class__ in (int, slice)


def _plain(node, capture, create_graph):
    """A select/narrow/basic-getitem node whose gradient is only summed into
    the engine's buffer: no hooks see it, nothing captures it, no graph is
    recorded."""
    return (node._op_name in _SCATTER_OPS and not create_graph and capture is None and
            not node._pre_hooks and not node._post_hooks and node._out_meta is None and
            (node._op_name != "getitem" or _basic_key(node.args[1])))


def _part(node, t):
    """The view of t that the select/narrow/getitem `node` took of its input."""
    if node._op_name == "getitem":
        return O.getitem(t, node.args[1])
    if node._op_name == "select":
        _, dim, index = node.args[:3]
        return V.select(t, wrap_dim(dim, t.ndim), index)
    _, dim, start, length = node.args[:4]
    d = wrap_dim(dim, t.ndim)
    start = start.item() if hasattr(start, "item") else start
    return V.narrow(t, d, start + t.shape[d] if start < 0 else start, length)


def _into_owned(node, grads, buffers, owned):
    """select/narrow/getitem backward straight into an engine-owned buffer: buf[key] += g
    instead of building zeros with g at key and adding the whole tensor (the
    q, k, v = qkv[0], qkv[1], qkv[2] pattern). True when done."""
    g = grads[0] if grads else None
    nxt, nr = node.next_functions[0]
    buf = buffers.get(nxt) if nxt is not None else None
    old = buf[nr] if buf is not None else None
    if g is None or old is None:
        return False
    if owned.get(id(old)) is not old:
        return False
    x = node.args[0]
    if g.dtype is not old.dtype or x.dtype is not old.dtype or \
            tuple(x.shape) != tuple(old.shape):
        return False
    lazy = owned.lazy.get(id(old)) if owned.lazy else None
    sel = _select_of(node, old) if lazy is not None else None
    if sel is not None:
        dim, index = sel
        if dim == lazy[1] and index not in lazy[2]:  # still unwritten: no zeros to read
            part = V.select(old, dim, index)
            if tuple(part.shape) != tuple(g.shape):
                return False
            O.add(g, 0.0, out=part)  # (the bits of 0 + g: torch's sum turns -0 into +0)
            lazy[2].add(index)
            return True
    part = _part(node, old)
    if tuple(part.shape) != tuple(g.shape):
        return False
    if lazy is not None:
        _settle(owned, old)
    O.add_(part, g)
    return True


def _select_of(node, t):
    """(dim, index) with both wrapped when the select/getitem `node` takes
    t.select(dim, index) with a Python int index, else None."""
    if node._op_name == "select":
        _, dim, index = node.args[:3]
        dim = wrap_dim(dim, t.ndim)
    elif node._op_name == "getitem" and t.ndim:
        dim, index = 0, node.args[1]
    else:
        return None
    if index.__class__ is not int or not -t.shape[dim] <= index < t.shape[dim]:
        return None
    return dim, index + t.shape[dim] if index < 0 else index


class _Owned(dict):
    """The engine's owned buffers (id -> tensor), and in `lazy` those of them
    whose memory is only partly written (_fresh_owned): id -> [tensor, dim,
    set of the indices along dim written so far]."""
    __slots__ = ("lazy",)

    def __init__(self):
        super().__init__()
        self.lazy = {}


def _settle(owned, t):
    """Zeros into the parts of a lazily filled buffer that no gradient
    reached, before anything else reads it (no-op for other tensors)."""
    e = owned.lazy.pop(id(t), None)
    if e is None or e[0] is not t:
        return
    z, dim, done = e
    zero = None
    for i in range(z.shape[dim]):
        if i not in done:
            zero = scalar(0, z.dtype) if zero is None else zero
            _C.copy_(V.select(z, dim, i), zero)


def _permuted_zeros(nxt, shape, dtype, like, fill=True):
    """Zeros of `shape` laid out so that the backward of nxt (the permute or
    transpose that produced the indexed tensor) turns them back into a
    contiguous tensor: its reshape back is then a view, not a copy. None when
    nxt is neither op or its input does not fit. fill=False: uninitialized
    memory (CPU only)."""
    name = nxt._op_name
    if name not in ("permute", "transpose"):
        return None
    src = nxt.args[0]
    if src.__class__ is not Meta and not _is_tensor(src):
        return None
    z = zeros(src.shape, dtype, like) if fill else _C.empty(tuple(src.shape), dtype)
    if name == "transpose":
        z = V.transpose(z, nxt.args[1], nxt.args[2])
    else:
        dims = nxt.args[1]
        if len(dims) == 1 and not isinstance(dims[0], int):
            dims = tuple(dims[0])
        z = V.permute(z, *dims)
    return z if tuple(z.shape) == tuple(shape) else None


def _fresh_owned(node, grads, buffers, owned, deps):
    """The first gradient reaching a plain select/narrow/getitem whose input
    came from a permute or transpose nobody hooks: zeros in that input's
    layout (_permuted_zeros) with g put in at the key, as the engine's own
    buffer. Put as torch's buffers give it: copied when it is the only
    gradient coming (a signed zero stays), added to the zeros when more will
    be summed in (torch's sum turns -0 into +0). True when done."""
    g = grads[0] if grads else None
    nxt, nr = node.next_functions[0]
    if g is None or nxt is None or nxt.__class__ is AccumulateGrad or \
            nxt._tensor_pre_hooks or nxt._retains or nxt._pre_hooks:
        return False
    buf = buffers.get(nxt)
    if buf is not None and buf[nr] is not None:
        return False
    x = node.args[0]
    if g.dtype is not x.dtype:
        return False
    # a select on the CPU: the other indices are left unwritten until another
    # select's gradient fills them or the buffer is read (_settle zeros the rest)
    sel = _select_of(node, x) if g._device_index < 0 else None
    lazy = sel is not None
    z = _permuted_zeros(nxt, x.shape, g.dtype, g, fill=not lazy)
    if z is None:
        return False
    if lazy:
        dim, index = sel
        part = V.select(z, dim, index)
    else:
        part = _part(node, z)
    if tuple(part.shape) != tuple(g.shape):
        return False
    if deps[nxt] > 1:
        if lazy:
            O.add(g, 0.0, out=part)  # (0 + g into unwritten memory: no zeros to read)
        else:
            O.add_(part, g)
    else:
        O.copy_(part, g)
    if buf is None:
        m = nxt._out_meta
        buf = buffers[nxt] = [None] if m is None else [None] * len(m)
    buf[nr] = z
    owned[id(z)] = z
    if lazy:
        owned.lazy[id(z)] = [z, dim, {index}]
    return True
