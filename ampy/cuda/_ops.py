"""CUDA forwards for the op table, and the device hook that picks them.

``install()`` (called by ampy.cuda only when a GPU is usable) does three things:

1. sets ``OpDef.cuda`` for every op with a device path (``cuda_table()``):
   the explicit CUDA forwards of ``_CUDA_FORWARDS`` (GEMM through cuBLAS,
   cat/stack; the ``cuda_op`` decorator in _kernels.py), and the ops whose own
   forward calls only bindings that route CUDA tensors to the device kernels
   through the ampy_cuda_api table (``_ROUTED_IN_C``: every element-wise op
   -> cuda/ewise.cu; reductions, softmax, scans -> cuda/reduce.cu; layer_norm,
   cross_entropy, nll_loss, embedding, dropout, mse_loss -> cuda/nn.cu);
2. installs the op table's device hook: for arguments that hold a CUDA tensor
   it returns ``op.cuda``; ops that only build views or call ``_C.cast`` /
   ``_C.copy_`` (``_DEVICE_AGNOSTIC``, and getitem/setitem with basic keys)
   run their usual forward; any other op falls back to the CPU -- CUDA
   arguments copied to the host, the forward run there, results copied back,
   in-place writes copied back into the original device tensors -- with a
   one-time warning naming the op (ops without a device path and not in
   the table);
3. makes ``Tensor.item`` synchronise and copy for CUDA tensors, and routes
   advanced indexing of CUDA tensors (ampy/_indexing.py's hook and the
   autograd rule's index_put_accumulate) to ampy/cuda/_advindex.py.
"""
import warnings

from .. import _C
from .. import _dispatch

_CUDA_FORWARDS = {}

# Ops whose CPU forward is already device-agnostic: views (metadata only) and
# the casts/copies that _C routes to the device (csrc/py/device_py.c).
_DEVICE_AGNOSTIC = {"to_dtype", "to_device", "clone", "copy_", "view", "reshape", "transpose",
                    "permute", "unsqueeze", "squeeze", "expand", "flatten", "narrow", "select",
                    "as_strided", "detach", "contiguous"}

# Ops whose forward only calls _C.ewise / _C.result_type / _C.reduce /
# _C.softmax / _C.nn_* / _C.fill_random: those bindings run CUDA tensors on
# the device themselves (cuda/ewise.cu, reduce.cu, nn.cu through the
# ampy_cuda_api table), so the
# usual forward is the CUDA forward. Completed at install() with every name
# of _C.ewise_ops() and its in-place variant.
_ROUTED_IN_C = {
    "add", "add_", "sub", "sub_", "div", "div_", "pow", "pow_", "where", "lerp", "lerp_",
    "addcmul", "addcmul_", "addcdiv", "addcdiv_", "clamp", "clamp_", "gelu", "softplus",
    "leaky_relu", "elu", "round",
    "sum", "mean", "prod", "all", "any", "norm", "amax", "amin", "max_dim", "min_dim",
    "argmax", "argmin", "var", "std", "logsumexp", "softmax", "log_softmax", "cumsum", "cumprod",
    # ampy/nn/_ops.py: forward and backward call _C.nn_* (cuda/nn.cu)
    "layer_norm", "cross_entropy", "nll_loss", "embedding", "dropout", "mse_loss",
    # ampy/_indexing.py: basic keys are views / copy_; advanced keys call
    # ampy/cuda/_advindex.py for CUDA tensors (cuda/index.cu)
    "getitem", "setitem",
}

_warned = set()


def routed_ops():
    """Names of the ops whose own forward runs CUDA tensors on the device
    (through _C's routing), with every element-wise op and its in-place form."""
    table = _dispatch.ops()
    names = set(_ROUTED_IN_C)
    for n in _C.ewise_ops():
        names.update(x for x in (n, n + "_") if x in table)
    return names


def cuda_op(name):
    """Register fn as the CUDA forward of op `name`."""
    def wrap(fn):
        _CUDA_FORWARDS[name] = fn
        return fn
    return wrap


def _is_cuda(x):
    return getattr(x, "_device_index", -1) >= 0 and isinstance(x, _C.TensorBase)


def _any_cuda(args, kwargs):
    for a in args:
        if _is_cuda(a):
            return True
        if isinstance(a, (list, tuple)) and any(_is_cuda(b) for b in a):
            return True
    return any(_is_cuda(v) for v in kwargs.values())


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


def _cpu_fallback(op):
    def run(*args, **kwargs):
        if op.name not in _warned:
            _warned.add(op.name)
            warnings.warn(f"ampy: op '{op.name}' has no CUDA kernel yet; running it on the CPU "
                          f"(copies to and from the device)", RuntimeWarning, stacklevel=3)
        moved = []
        hargs = _to_host(args, moved)
        hkw = {k: _to_host(v, moved) for k, v in kwargs.items()}
        device = moved[0][0]._device_index
        r = op.forward(*hargs, **hkw)
        for orig, host, ver in moved:
            if host._version != ver:  # written in place: copy the result back
                _C.copy_(orig, host)
                orig._bump_version()
        return _back(r, moved, device)
    return run


def _basic_key(key):
    """A key of ints, slices, None and Ellipsis only: indexing is a view (and
    setitem a copy_), which works on any device."""
    ks = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, slice) or
               (isinstance(k, int) and not isinstance(k, bool)) for k in ks)


def _device_hook(op, args, kwargs):
    if not _any_cuda(args, kwargs):
        return op.forward
    if op.cuda is not None:
        return op.cuda
    if op.name in _DEVICE_AGNOSTIC:
        return op.forward
    if op.name in ("getitem", "setitem"):  # basic keys: views; advanced: _advindex.py
        return op.forward
    return _cpu_fallback(op)


_base_item = _C.TensorBase.item


def _item(self):
    if self._device_index >= 0:
        h = _C.empty(tuple(self.shape), self.dtype)
        _C.copy_(h, self)  # a device-to-host copy synchronises
        return _base_item(h)
    return _base_item(self)


def _routed(op):
    """The CUDA forward of a routed op: its own forward, looked up at call
    time (so a later re-definition of the forward is picked up)."""
    def run(*args, **kwargs):
        return op.forward(*args, **kwargs)
    run.__name__ = run.__qualname__ = op.name + "_cuda"
    run.routed_in_c = True
    return run


def cuda_table():
    """{op name: CUDA forward} for every op with a device path: the explicit
    CUDA forwards (GEMM, cat, stack) and the ops routed through _C. Computed
    without installing anything (test_cuda_build.py checks it on machines
    without a GPU)."""
    from . import _kernels  # noqa: F401  (fills _CUDA_FORWARDS)
    table = _dispatch.ops()
    out = {name: _routed(table[name]) for name in routed_ops()}
    out.update({n: fn for n, fn in _CUDA_FORWARDS.items() if n in table})
    return out


def install():
    for name, fn in cuda_table().items():
        _dispatch.get_op(name).cuda = fn
    _dispatch.set_hooks(device=_device_hook)
    from .._tensor import Tensor
    Tensor.item = _item
    from . import _advindex
    _advindex.install()
