"""ampy dtypes: objects, conversions from strings/NumPy, promotion rules, finfo."""
import ml_dtypes
import numpy as np

from . import _C

__all__ = ["dtype", "float32", "float16", "bfloat16", "float64", "int64", "int32", "uint8",
           "bool", "half", "float", "double", "long", "int", "finfo", "iinfo",
           "promote_types", "get_default_dtype", "set_default_dtype"]

_builtin_bool, _builtin_float, _builtin_int = bool, float, int


class dtype:
    """An element type (ampy.float16, ...). Singletons: compare with `is` or `==`."""

    __slots__ = ("name", "itemsize", "is_floating_point", "is_signed", "_code", "_np")

    def __init__(self, name, code, itemsize, is_float, is_signed, np_dtype):
        self.name = name
        self._code = code
        self.itemsize = itemsize
        self.is_floating_point = is_float
        self.is_signed = is_signed
        self._np = np.dtype(np_dtype)

    is_complex = False

    def __repr__(self):
        return f"ampy.{self.name}"

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))

    def to_numpy(self):
        return self._np


# code order is the C enum ampy_dtype (csrc/include/ampy/dtype.h)
float32 = dtype("float32", 0, 4, True, True, np.float32)
float16 = dtype("float16", 1, 2, True, True, np.float16)
bfloat16 = dtype("bfloat16", 2, 2, True, True, ml_dtypes.bfloat16)
float64 = dtype("float64", 3, 8, True, True, np.float64)
int64 = dtype("int64", 4, 8, False, True, np.int64)
int32 = dtype("int32", 5, 4, False, True, np.int32)
uint8 = dtype("uint8", 6, 1, False, False, np.uint8)
bool = dtype("bool", 7, 1, False, False, np.bool_)  # noqa: A001 (torch's name)
half, float, double, long, int = float16, float32, float64, int64, int32  # noqa: A001

_BY_CODE = (float32, float16, bfloat16, float64, int64, int32, uint8, bool)
_ALIASES = {
    "float32": float32, "float": float32, "f32": float32, "fp32": float32,
    "float16": float16, "half": float16, "f16": float16, "fp16": float16,
    "bfloat16": bfloat16, "bf16": bfloat16,
    "float64": float64, "double": float64, "f64": float64,
    "int64": int64, "long": int64, "int32": int32, "int": int32,
    "uint8": uint8, "bool": bool,
}
_NP_TO = {d._np: d for d in _BY_CODE}
_default_dtype = [float32]


def _dtype_by_name(name):
    return _ALIASES[name]


def to_dtype(x, arg="dtype"):
    """Accept an ampy dtype, a name ("float16", "torch.bfloat16", "bf16"), a NumPy
    dtype or scalar type, a torch dtype, or a Python type (float -> float64, as torch)."""
    if isinstance(x, dtype):
        return x
    if isinstance(x, str):
        key = x[len("torch."):] if x.startswith("torch.") else x
        key = key[len("ampy."):] if key.startswith("ampy.") else key
        if key in _ALIASES:
            return _ALIASES[key]
        raise TypeError(f"{arg}: unknown dtype name {x!r}")
    if x is _builtin_float:
        return float64
    if x is _builtin_int:
        return int64
    if x is _builtin_bool:
        return bool
    mod = type(x).__module__
    if mod.startswith("torch"):  # torch.float16 -> by name, without importing torch
        return to_dtype(str(x), arg)
    try:
        nd = np.dtype(x)
    except TypeError:
        raise TypeError(f"{arg}: expected an ampy dtype, got {x!r}") from None
    if nd in _NP_TO:
        return _NP_TO[nd]
    raise TypeError(f"{arg}: NumPy dtype {nd} has no ampy equivalent")


def get_default_dtype():
    return _default_dtype[0]


def set_default_dtype(d):
    d = to_dtype(d)
    if d not in (float32, float64, float16, bfloat16):
        raise TypeError("only floating-point types are supported as the default type")
    _default_dtype[0] = d


def promote_types(a, b):
    """torch.promote_types: the smallest dtype both convert to without loss of
    category (bool < integer < floating); float16 with bfloat16 gives float32.
    The rule is the C library's (ampy_promote_types), the one every op uses."""
    return _C.promote_types(to_dtype(a), to_dtype(b))


class finfo:
    """Machine limits of a floating dtype (torch.finfo)."""

    def __init__(self, type=None):  # noqa: A002 (torch's signature)
        d = to_dtype(type) if type is not None else _default_dtype[0]
        if not d.is_floating_point:
            raise TypeError(f"finfo: {d} is not a floating point dtype")
        info = ml_dtypes.finfo(d._np) if d is bfloat16 else np.finfo(d._np)
        self.dtype = d
        self.bits = d.itemsize * 8
        self.eps = _builtin_float(info.eps)
        self.max = _builtin_float(info.max)
        self.min = _builtin_float(info.min)
        self.tiny = _builtin_float(info.tiny)
        self.smallest_normal = self.tiny
        self.resolution = 10.0 ** -_builtin_int(info.precision)  # torch: exact 10^-digits

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype.name})")


class iinfo:
    """Limits of an integer dtype (torch.iinfo)."""

    def __init__(self, type):  # noqa: A002
        d = to_dtype(type)
        if d.is_floating_point:
            raise TypeError(f"iinfo: {d} is not an integer dtype")
        info = np.iinfo(np.uint8 if d is bool else d._np)
        self.dtype = d
        self.bits = d.itemsize * 8
        self.max = _builtin_int(info.max)
        self.min = _builtin_int(info.min)
