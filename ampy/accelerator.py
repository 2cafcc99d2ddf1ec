"""ampy.accelerator — torch.accelerator's device-generic names, mapped to
ampy.cuda (ampy's one accelerator): the accelerator is CUDA when ampy was
built with its CUDA module, as torch's is the backend it was compiled with;
everything that needs a device raises torch's RuntimeError when none is
usable.
"""
import warnings

from . import cuda as _cuda
from ._tensor import device as _device

__all__ = ["current_accelerator", "is_available", "device_count", "current_device_index",
           "current_device_idx", "set_device_index", "set_device_idx", "synchronize",
           "device_index", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "memory_stats", "empty_cache"]

_NONE = "Cannot access accelerator device when none is available."


def current_accelerator(check_available=False):
    """device("cuda") when ampy has its CUDA module (and, with
    check_available=True, a usable GPU); else None."""
    if _cuda._K is None or (check_available and not _cuda.is_available()):
        return None
    return _device("cuda")


def is_available():
    return current_accelerator() is not None and _cuda.is_available()


def device_count():
    return _cuda.device_count() if current_accelerator() is not None else 0


def _usable():
    if not is_available():
        raise RuntimeError(_NONE)


def _index(device):
    """An index from None (the current device), an int, "cuda:1" or a device."""
    if device is None:
        return current_device_index()
    if isinstance(device, int):
        return device
    d = device if isinstance(device, _device) else _device(device)
    if d.type != "cuda":
        raise ValueError(f"{d.type} doesn't match the current accelerator cuda.")
    return d.index if d.index is not None else current_device_index()


def current_device_index():
    _usable()
    return _cuda.current_device()


def current_device_idx():
    warnings.warn("Use `current_device_index` instead.", FutureWarning, stacklevel=2)
    return current_device_index()


def set_device_index(device, /):
    _usable()
    _cuda.set_device(_index(device))


def set_device_idx(device, /):
    warnings.warn("Use `set_device_index` instead.", FutureWarning, stacklevel=2)
    set_device_index(device)


def synchronize(device=None, /):
    _usable()
    _cuda.synchronize(_index(device))


class device_index:
    """Context manager: the current accelerator device is `device` inside
    (None: unchanged)."""

    def __init__(self, device, /):
        self.idx = device
        self.prev_idx = -1

    def __enter__(self):
        if self.idx is not None:
            self.prev_idx = current_device_index()
            set_device_index(self.idx)

    def __exit__(self, *exc_info):
        if self.idx is not None and self.prev_idx >= 0:
            set_device_index(self.prev_idx)


def _memory(name):
    def fn(device=None, /):
        _usable()
        return getattr(_cuda, name)(_index(device))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"ampy.cuda.{name} of the accelerator device."
    return fn


memory_allocated = _memory("memory_allocated")
max_memory_allocated = _memory("max_memory_allocated")
memory_reserved = _memory("memory_reserved")
max_memory_reserved = _memory("max_memory_reserved")
reset_peak_memory_stats = _memory("reset_peak_memory_stats")
memory_stats = _memory("memory_stats")


def empty_cache():
    _usable()
    _cuda.empty_cache()
