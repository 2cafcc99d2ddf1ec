"""The CPU fallback for ops that have no CUDA kernel.

Every op with a device path runs CUDA tensors through its one forward: the
``_C`` bindings it calls send CUDA tensors to the device kernels themselves,
through the ``ampy_cuda_api`` table (csrc/include/ampy/cuda.h). The device
decision is made there, in C, and nowhere in Python, with one exception,
made here: an op declared CPU-only (``OpDef.devices == ("cpu",)``) has no
kernel to reach, so when a GPU is usable :func:`install` wraps its forward
once: CUDA arguments are copied to the host, the forward runs there, the
results are copied back (in-place writes into the original device tensors)
and a one-time warning names the op. Ops that declare no devices support
both.
"""
import warnings

from .. import _C
from .. import _dispatch

_BOTH = ("cpu", "cuda")
_warned = set()


def devices(op):
    """The devices op declares (OpDef.devices), both when it declares none."""
    return getattr(op, "devices", None) or _BOTH


def _is_cuda(x):
    return isinstance(x, _C.TensorBase) and x._device_index >= 0


def _any_cuda(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if _is_cuda(a) or (isinstance(a, (list, tuple)) and any(_is_cuda(b) for b in a)):
            return True
    return False


def _to_host(x, moved):
    if _is_cuda(x):
        h = _C.empty(tuple(x.shape), x.dtype)
        _C.copy_(h, x)
        moved.append((x, h, h._version))
        return h
    if isinstance(x, (list, tuple)):
        return type(x)(_to_host(v, moved) for v in x)
    return x


def _back(r, moved, device):
    for orig, host, _ in moved:
        if r is host:
            return orig
    if isinstance(r, _C.TensorBase) and r._device_index < 0:
        out = _C._empty_device(tuple(r.shape), r.dtype, device)
        _C.copy_(out, r)
        if r.requires_grad:
            out.requires_grad_(True)
        return out
    if isinstance(r, (list, tuple)):
        return type(r)(_back(v, moved, device) for v in r)
    return r


def on_cpu(op, forward):
    """forward, running CUDA arguments on the CPU (see the module doc)."""
    def run(*args, **kwargs):
        if not _any_cuda(args, kwargs):
            return forward(*args, **kwargs)
        if op.name not in _warned:
            _warned.add(op.name)
            warnings.warn(f"ampy: op '{op.name}' has no CUDA kernel yet; running it on the CPU "
                          f"(copies to and from the device)", RuntimeWarning, stacklevel=3)
        moved = []
        hargs = _to_host(args, moved)
        hkw = {k: _to_host(v, moved) for k, v in kwargs.items()}
        device = moved[0][0]._device_index
        r = forward(*hargs, **hkw)
        for orig, host, ver in moved:
            if host._version != ver:  # written in place: copy the result back
                _C.copy_(orig, host)
                orig._bump_version()
        return _back(r, moved, device)
    run.__name__ = run.__qualname__ = getattr(forward, "__name__", op.name)
    run.__doc__ = forward.__doc__
    run.ampy_cpu_fallback = True
    return run


def install(table=None):
    """Wrap the forward of every CPU-only op of the table (once)."""
    for op in (table if table is not None else _dispatch.ops()).values():
        if "cuda" not in devices(op) and not getattr(op.forward, "ampy_cpu_fallback", False):
            op.forward = on_cpu(op, op.forward)
