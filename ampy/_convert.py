"""Data into tensors: tensor(), as_tensor(), from_numpy() and the range checks
torch applies to Python scalars written into a tensor (fill_, setitem, copy_).

Below the Tensor class (it tests `_C.TensorBase`), so indexing, the Tensor
methods and the math can convert their operands without importing creation.
"""
import math
import numbers

import numpy as np

from . import _C
from . import _devices
from . import _dtype as D

__all__ = ["tensor", "as_tensor", "as_tensor_like", "from_numpy"]

_TENSOR = _C.TensorBase


def place(t, device, requires_grad):
    """t moved to `device` (None or a CPU device: left where it is) and marked
    as requiring grad when asked."""
    dev = check_device(device)
    if dev is not None:
        t = t.to(dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def check_device(device):
    """None for the CPU, else the CUDA device (ampy.device), after checking
    that one is usable (raised here, before any work: a short traceback)."""
    if device is None:
        return None
    d = device if isinstance(device, _devices.device) else _devices.device(device)
    if d.type == "cpu":
        return None
    cuda = _devices.cuda()
    if not cuda.is_available():
        raise cuda._unavailable() from None
    return d


_NP_WIDEN = {np.dtype(np.int8): np.int64, np.dtype(np.int16): np.int64,
             np.dtype(np.uint16): np.int64, np.dtype(np.uint32): np.int64,
             np.dtype(np.uint64): np.int64, np.dtype(np.longdouble): np.float64}


_I64_MAX = (1 << 63) - 1


def _check_uint64(arr, dtype):
    """ampy has no uint64: a uint64 array becomes int64 only when every value
    fits (or float64 for a float dtype); never wrap to negative values."""
    if dtype is not None and dtype.is_floating_point:
        return arr.astype(np.float64)
    if dtype is D.bool:
        return np.asarray(arr != 0)
    if arr.size and int(arr.max()) > _I64_MAX:
        raise ValueError(f"can't convert a uint64 array holding {int(arr.max())} to int64 without "
                         f"overflow (ampy has no uint64 dtype; pass dtype=ampy.float64 to get "
                         f"floats)")
    return arr


def _int_overflow(data):
    """True when nested Python data holding no float has an int outside int64
    (torch: ValueError "Overflow when unpacking long long"; a float anywhere
    makes it a float tensor, where big ints are fine)."""
    big, flt, stack = False, False, [data]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, float) or isinstance(v, np.floating):
            flt = True
        elif isinstance(v, int) and not isinstance(v, bool):
            big = big or not -(1 << 63) <= v <= _I64_MAX
    return big and not flt


def _check_py_ints(arr, data, dt):
    """Python ints beyond int64 in data (which NumPy turned into uint64,
    object or float64 `arr`) raise as torch, unless a float or bool dtype
    takes them. The scan runs only when arr shows such a value."""
    if dt is not None and (dt is D.bool or dt.is_floating_point):
        return
    if arr.dtype.kind in "uO" or (arr.dtype.kind == "f" and np.any(np.abs(arr) >= 2.0 ** 63)):
        if _int_overflow(data):
            raise ValueError("Overflow when unpacking long long")


def _from_array(arr, dtype, infer_default_float):
    if arr.dtype == np.uint64:
        arr = _check_uint64(arr, dtype)
    if arr.dtype in _NP_WIDEN:
        arr = arr.astype(_NP_WIDEN[arr.dtype])
    if arr.dtype.kind == "c":
        raise TypeError("ampy has no complex dtypes")
    if arr.dtype == object:
        raise TypeError("tensor(): could not infer a dtype from the data (ragged or objects)")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    src = _C.from_numpy(np.ascontiguousarray(arr) if any(s < 0 for s in arr.strides) else arr)
    if dtype is None:
        dtype = src.dtype
        if infer_default_float and dtype is D.float64:
            dtype = D.get_default_dtype()
    return _C.cast(src, dtype)


def _check_int_range(arr, dt):
    """Python numbers stored into an integer dtype must fit, as in torch:
    floats (NaN and inf included) within [lowest, max]; ints within
    [lowest, max], except that uint8 also takes -255..-1 (two's complement)."""
    info = np.iinfo(dt._np)
    if arr.dtype.kind == "f":
        a = arr.astype(np.float64)
        ok = np.isfinite(a) & (a >= info.min) & (a <= float(info.max))
    elif arr.dtype.kind in "iu":
        lo = -int(info.max) if info.min == 0 else int(info.min)
        ok = (arr >= lo) & (arr <= info.max) if arr.size else np.ones(0, bool)
    elif arr.dtype.kind == "O" and arr.size:
        lo = -int(info.max) if info.min == 0 else int(info.min)
        ok = np.array([isinstance(v, numbers.Number) and not isinstance(v, complex)
                       and math.isfinite(v) and lo <= v <= int(info.max) for v in arr.flat])
    else:
        return
    if not np.all(ok):
        raise RuntimeError(f"value cannot be converted to type {dt.name} without overflow")


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data` (nested sequences, NumPy arrays,
    scalars, tensors). Python floats become the default dtype (float32)."""
    dt = D.to_dtype(dtype) if dtype is not None else None
    if isinstance(data, _TENSOR):
        t = _C.cast(data.detach() if not data.is_cuda else data.cpu(), dt or data.dtype)
    elif isinstance(data, np.ndarray):
        t = _from_array(data, dt, False)
    elif isinstance(data, np.generic):
        t = _from_array(np.asarray(data), dt, False)
    else:
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError) as e:
            raise ValueError(f"tensor(): could not build a tensor from the data: {e}") from None
        _check_py_ints(arr, data, dt)
        if arr.dtype.kind == "O" and dt is not None and dt.is_floating_point:
            arr = np.array(data, dtype=np.float64)
        if dt is not None and dt.is_floating_point and arr.dtype.kind in "biuf":
            arr = arr.astype(np.float64) if dt is D.float64 or arr.dtype.kind != "f" else arr
        if dt is not None and not dt.is_floating_point and dt is not D.bool:
            _check_int_range(arr, dt)
        t = _from_array(arr, dt, True)
    return place(t, device, requires_grad)


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, _TENSOR) and (dtype is None or D.to_dtype(dtype) is data.dtype):
        return data if device is None else data.to(device)
    if isinstance(data, np.ndarray) and (dtype is None or D.to_dtype(dtype)._np == data.dtype):
        try:
            return place(_C.from_numpy(data), device, False)
        except (TypeError, ValueError):
            pass
    return tensor(data, dtype=dtype, device=device)


def as_tensor_like(value, like, fill=False):
    """value as a tensor to be written into `like` (scalars take like's dtype),
    range-checked as torch checks a Python scalar written by fill_ (fill=True)
    or by setitem / copy_ (fill=False)."""
    if isinstance(value, _TENSOR):
        return value
    if fill:
        check_fill(value, like.dtype)
    else:
        check_setitem(value, like.dtype)
    if isinstance(value, (bool, int, float, np.generic)):
        return tensor(value, dtype=like.dtype if not isinstance(value, float) or
                      like.dtype.is_floating_point else D.float64)
    return tensor(value, dtype=like.dtype)


def from_numpy(arr):
    """A tensor sharing the memory of a NumPy array (zero copy)."""
    return _C.from_numpy(arr)


def check_fill(v, dtype):
    """A Python fill value must fit the dtype, as in torch (inf fits a float
    dtype; uint8 also takes -255..-1, two's complement; an int must fit
    int64, or uint64 for a float or bool dtype)."""
    if isinstance(v, (_TENSOR, bool)) or not isinstance(v, numbers.Real):
        return
    if isinstance(v, numbers.Integral) and not -(1 << 63) <= int(v) < (1 << 64):
        raise OverflowError("int too big to convert")
    if dtype is D.bool:
        return
    if not dtype.is_floating_point:
        _check_int_range(np.asarray(v if isinstance(v, numbers.Integral) else float(v)), dtype)
    elif dtype is not D.float64:
        f = float(v)
        if math.isfinite(f) and abs(f) > D.finfo(dtype).max:
            raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")


def check_setitem(v, dtype):
    """A Python scalar stored by setitem, as torch checks it: an int must fit
    int64 (ValueError); integer dtypes take values in range only (NaN and inf
    raise); float32 checks overflow, float16/bfloat16 round to inf (torch)."""
    if isinstance(v, (_TENSOR, bool)) or not isinstance(v, numbers.Real):
        return
    if isinstance(v, numbers.Integral) and not -(1 << 63) <= int(v) <= _I64_MAX:
        raise ValueError("Overflow when unpacking long long")
    if dtype is D.float32 or not dtype.is_floating_point:
        check_fill(v, dtype)


def scalar(v, dtype):
    if isinstance(v, _TENSOR):
        return v
    if dtype is D.bool and isinstance(v, numbers.Real):
        v = v != 0  # as torch: 0.5 and NaN fill True (not truncated to an int first)
    t = _C.empty((), D.float64 if dtype.is_floating_point else D.int64)
    t._numpy()[()] = v
    return t


