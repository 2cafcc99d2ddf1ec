"""ampy.cuda — NVIDIA GPUs: devices, memory, and CUDA tensors (torch.cuda's names).

Importing this package never fails and makes no CUDA call beyond
``cudaGetDeviceCount``: on a machine without ``ampy._C_cuda`` (no nvcc at build
time), without a driver or without a GPU, :func:`is_available` returns False
and everything else raises a clear RuntimeError. CUDA tensors go through the
same ops as CPU tensors: ampy._C's bindings send them to this module's
kernels (the ampy_cuda_api table). Only when a device is usable does it wrap
the ops declared CPU-only with the CPU fallback of ampy/cuda/_fallback.py.

Semantics: each device has one current stream; ampy's kernels and copies run
on it asynchronously; ``item()``, ``tolist()``, ``numpy()``, printing and
``.cpu()`` synchronise. Memory comes from a caching allocator
(:func:`memory_allocated`, :func:`memory_reserved`, :func:`empty_cache`).
"""
from .. import _C

__all__ = ["is_available", "device_count", "current_device", "set_device", "synchronize",
           "get_device_name", "get_device_capability", "is_bf16_supported",
           "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "memory_stats", "empty_cache",
           "manual_seed", "manual_seed_all", "device", "set_sync_checks", "get_sync_checks"]

import importlib.util as _ilu

_K = None
if _ilu.find_spec("ampy._C_cuda") is None:  # not built here (no nvcc at install time)
    _IMPORT_ERROR = "not built: no nvcc was found when ampy was installed"
else:
    try:
        from .. import _C_cuda as _K
        _K._init(_C.TensorBase, _C._TENSOR_LAYOUT)
        _C._register_cuda(_K._api())
        _IMPORT_ERROR = ""
    except (ImportError, RuntimeError) as _e:  # another Python, a stale build, another layout
        import warnings as _w
        _K = None
        _IMPORT_ERROR = str(_e)
        _w.warn(f"ampy: CUDA disabled, ampy._C_cuda failed to load: {_e}", RuntimeWarning)


_count = None
_reason = ""


def _probe():
    global _count, _reason
    if _count is None:
        if _K is None:
            _count, _reason = 0, f"ampy._C_cuda is not available ({_IMPORT_ERROR or 'not built'})"
        else:
            _count, _reason = _K._device_count()
    return _count


def is_available():
    """True when ampy._C_cuda is built and at least one CUDA device is usable."""
    return _probe() > 0


def device_count():
    return _probe()


def _driver_found():
    """Whether an NVIDIA kernel driver or its user-space library is installed."""
    import ctypes.util
    import os
    return os.path.exists("/proc/driver/nvidia/version") or bool(ctypes.util.find_library("cuda"))


def _unavailable(prefix="ampy", use="device='cpu'"):
    """The RuntimeError for a CUDA request on a machine where none is usable,
    in words a new user can act on (``_reason`` is the runtime's own)."""
    check = (f"Check with ampy.cuda.is_available() (False here) and use {use}; "
             f"`nvidia-smi` shows whether the driver sees a GPU.")
    if _K is None:
        what = (f"ampy was installed without CUDA support ({_IMPORT_ERROR or 'not built'}); "
                f"reinstall it on a machine with the CUDA toolkit (nvcc on PATH) to use a GPU.")
    elif "cudaErrorInsufficientDriver" in _reason or "cudaErrorNoDevice" in _reason:
        if not _driver_found():
            what = "no NVIDIA GPU or driver was found on this machine."
        elif "cudaErrorNoDevice" in _reason:
            what = "the NVIDIA driver is installed but it sees no GPU."
        else:
            what = ("the NVIDIA driver is older than the CUDA runtime ampy was built with: "
                    "update the driver.")
    else:
        what = f"{_reason}."
    return RuntimeError(f"{prefix}: CUDA is not available: {what} {check}")


def _require():
    """Raise when no CUDA device is usable. Entry points that take a device
    (creation functions, Tensor.to/.cuda, Module.to/.cuda, load's
    map_location) call it before any work, so the traceback is short."""
    if _probe() == 0:
        raise _unavailable() from None


def _lazy():
    if _probe() == 0:
        raise _unavailable() from None
    return _K


def _index(device):
    """A device index from None / int / 'cuda:1' / ampy.device."""
    if device is None:
        return _lazy().current_device()
    if isinstance(device, int):
        idx = device
    else:
        from .._tensor import device as _device
        d = device if isinstance(device, _device) else _device(device)
        if d.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {d}")
        idx = d.index if d.index is not None else _lazy().current_device()
    n = _probe()
    if not 0 <= idx < max(n, 1) or n == 0:
        _lazy()
        raise RuntimeError(f"CUDA error: invalid device ordinal {idx} ({n} devices)")
    return idx


def current_device():
    return _lazy().current_device()


def set_device(device):
    _lazy().set_device(_index(device))


def synchronize(device=None):
    """Wait for all work queued on the device's current stream."""
    _lazy().synchronize(_index(device))


def get_device_name(device=None):
    return _lazy().get_device_name(_index(device))


def get_device_capability(device=None):
    ma, mi, _ = _lazy().get_device_caps(_index(device))
    return (ma, mi)


def is_bf16_supported():
    return is_available() and get_device_capability()[0] >= 8


def memory_stats(device=None):
    return _lazy().memory_stats(_index(device))


def memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes"]


def max_memory_allocated(device=None):
    return memory_stats(device)["max_allocated_bytes"]


def memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes"]


def max_memory_reserved(device=None):
    return memory_stats(device)["max_reserved_bytes"]


def reset_peak_memory_stats(device=None):
    _lazy().reset_peak_memory_stats(_index(device))


def empty_cache():
    """Release the allocator's unused cached blocks to the driver (no-op without CUDA)."""
    if _probe() > 0:
        _K.empty_cache()


def _stream_handle(device):
    return _lazy()._stream(_index(device))


def manual_seed(seed):
    """Seed the CUDA generators. ampy draws random numbers with the CPU's Philox
    stream (the same values on every device), so this seeds that stream."""
    from .. import _creation
    _creation.default_generator.manual_seed(seed)


def manual_seed_all(seed):
    manual_seed(seed)


def _manual_seed_all(seed):
    """Called by ampy.manual_seed: device-side dropout draws from the default
    generator's (seed, offset), so nothing else needs seeding."""


class device:
    """Context manager that changes the current CUDA device (torch.cuda.device)."""

    def __init__(self, device):
        self.idx = _index(device) if device is not None else None
        self.prev = None

    def __enter__(self):
        if self.idx is not None:
            self.prev = current_device()
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev is not None:
            set_device(self.prev)
        return False


def _to_device(x, dev):
    """Forward of the op "to_device": a copy of x on `dev` (ampy.device)."""
    if dev.type == "cpu":
        if not x.is_cuda:
            return x
        out = _C.empty(tuple(x.shape), x.dtype)
    else:
        idx = _index(dev)
        if x._device_index == idx:
            return x
        out = _C._empty_device(tuple(x.shape), x.dtype, idx)
    _C.copy_(out, x)
    return out


def set_sync_checks(on=True):
    """Raise errors found by device-side argument checks at the op itself.

    By default ampy's CUDA kernels check device-resident arguments (index
    ranges of advanced indexing and embedding, class targets of
    cross_entropy/nll_loss, integer division by zero) without making the host
    wait: the first failure is recorded on the device and raised at the next
    synchronisation (``item()``, ``tolist()``, ``numpy()``, ``.cpu()``,
    printing, :func:`synchronize`), like torch's device-side asserts. With
    ``set_sync_checks(True)`` (or ``AMPY_CUDA_SYNC_CHECKS=1`` in the
    environment) each checking op synchronises after its check and raises the
    CPU's error before writing anything (slower: one host wait per such op)."""
    _lazy().set_sync_checks(bool(on))


def get_sync_checks():
    """Whether device-side argument checks raise at the op (see set_sync_checks)."""
    return bool(_K.get_sync_checks()) if _K is not None and hasattr(_K, "get_sync_checks") \
        else False


def _add_blas_paths():
    """Directories where the nvidia-cublas wheel (a torch dependency) keeps
    libcublas, searched after the default loader path at the first GEMM."""
    import os
    import sys
    seen = set()
    for base in sys.path:
        for sub in (("nvidia", "cu13", "lib"), ("nvidia", "cublas", "lib")):
            d = os.path.join(base, *sub)
            if d not in seen and os.path.isdir(d):
                seen.add(d)
                try:
                    _K._blas_add_path(d)
                except ValueError:
                    return


def _install():
    """With a GPU: cuBLAS's search path, and the CPU fallback of the ops
    declared CPU-only (ampy/cuda/_fallback.py). Everything else is routed by
    ampy._C's bindings themselves."""
    _add_blas_paths()
    _fallback.install()


if is_available():
    _install()


from . import amp  # noqa: E402  (ampy.cuda.amp: the old torch.cuda.amp names)
