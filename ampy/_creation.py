"""Tensor creation: tensor, from_numpy, zeros/ones/empty/full, arange, linspace,
*_like, and the random generators rand/randn/randint (seeded by manual_seed)."""
import math
import numbers

import numpy as np

from . import _C
from . import _dtype as D
from ._convert import (_I64_MAX, _check_int_range, as_tensor, check_device, check_fill, from_numpy,
                       place, scalar, tensor)
from ._tensor import Tensor
from ._views import check_int64_sizes

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange",
           "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand",
           "randn", "randint", "rand_like", "randn_like", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "Generator", "default_generator"]


def _size_args(size, fn="size"):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    elif len(size) == 1 and hasattr(size[0], "__len__") and not isinstance(size[0], int):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError(f"{fn}(): argument 'size' must be a tuple of ints, but found element "
                            f"of type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(size)}")
        out.append(int(s))
    return check_int64_sizes(tuple(out), fn)


def empty(*size, dtype=None, device=None, requires_grad=False, **_):
    size = _size_args(size, "empty")
    return place(_C.empty(size, D.to_dtype(dtype) if dtype is not None else
                            D.get_default_dtype()), device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, **_):
    check_device(device)
    size = _size_args((size,) if isinstance(size, int) else tuple(size), "full")
    if dtype is None:
        dtype = (D.bool if isinstance(fill_value, bool) else
                 D.int64 if isinstance(fill_value, numbers.Integral) else D.get_default_dtype())
    dtype = D.to_dtype(dtype)
    check_fill(fill_value, dtype)
    t = _C.empty(size, dtype)
    _C.copy_(t, scalar(fill_value, dtype))
    return place(t, device, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False, **_):
    return full(_size_args(size, "zeros"), 0, dtype=dtype or D.get_default_dtype(),
                device=device, requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, **_):
    return full(_size_args(size, "ones"), 1, dtype=dtype or D.get_default_dtype(),
                device=device, requires_grad=requires_grad)


def _like(x, dtype):
    return D.to_dtype(dtype) if dtype is not None else x.dtype


def zeros_like(x, dtype=None, device=None, requires_grad=False, **_):
    check_device(device)
    return zeros(tuple(x.shape), dtype=_like(x, dtype), device=device or x.device,
                 requires_grad=requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False, **_):
    check_device(device)
    return ones(tuple(x.shape), dtype=_like(x, dtype), device=device or x.device,
                requires_grad=requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False, **_):
    check_device(device)
    return empty(tuple(x.shape), dtype=_like(x, dtype), device=device or x.device,
                 requires_grad=requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False, **_):
    check_device(device)
    return full(tuple(x.shape), fill_value, dtype=_like(x, dtype), device=device or x.device,
                requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    vals = [float(v) if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(math.isfinite(v) for v in vals):
        raise RuntimeError("unsupported range: arange bounds must be finite")
    if (end - start) * step < 0:
        raise RuntimeError(f"upper bound and larger bound inconsistent with step sign")
    n = max(0, math.ceil((end - start) / step))
    if dtype is None:
        dtype = (D.int64 if all(isinstance(v, numbers.Integral) for v in vals)
                 else D.get_default_dtype())
    dtype = D.to_dtype(dtype)
    if not dtype.is_floating_point:
        # as torch: integer dtypes step from the truncated start by the
        # truncated step; int64 also takes its length from the truncated bounds
        for v in (start, end, step):
            if not -2.0 ** 63 <= v < 2.0 ** 63:  # NaN too
                raise RuntimeError("value cannot be converted to type int64 without overflow")
        start, step, iend = int(start), int(step), int(end)
        if dtype is D.int64:
            if step == 0:
                raise RuntimeError("step must be nonzero")
            if (iend - start) * step < 0:
                raise RuntimeError("upper bound and larger bound inconsistent with step sign")
            q = iend - start + step - (1 if step > 0 else -1)
            n = max(0, abs(q) // abs(step) * (1 if (q >= 0) == (step > 0) else -1))
    t = _C.empty((n,), dtype)
    _C.fill_arange(t, float(start), float(step))
    return place(t, device, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
        raise TypeError(f"linspace(): argument 'steps' must be int, not {type(steps).__name__}")
    for name, v in (("start", start), ("end", end)):
        if not isinstance(v, (numbers.Real, Tensor)):
            raise TypeError(f"linspace(): argument '{name}' must be a number, "
                            f"not {type(v).__name__}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    if not dtype.is_floating_point:  # as torch: the ends are first converted to the dtype
        if dtype is not D.bool:
            _check_int_range(np.array([float(start), float(end)]), dtype)
        start, end = (int(float(v)) if math.isfinite(float(v)) else float(v)
                      for v in (start, end))
    t = _C.empty((steps,), dtype)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    if steps == 1:
        end = start  # torch.linspace(a, b, 1) is [a]; fill_linspace fills the top half from end
    _C.fill_linspace(t, float(start), float(end), float(step))
    return place(t, device, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    m = n if m is None else m
    t = zeros(n, m, dtype=dtype)
    k = min(n, m)
    if k:
        diag = t._view((k,), (m + 1,), 0)
        _C.copy_(diag, scalar(1, t.dtype))
    return place(t, device, requires_grad)


# ---- random numbers ----------------------------------------------------------
class Generator:
    """A counter-based (Philox4x32-10) generator: (seed, offset). Each call
    consumes a block of counters, so results depend only on the seed and the
    sequence of calls — the same on every machine and thread count."""

    def __init__(self, device="cpu"):
        self._seed = 67280421310721
        self._offset = 0

    def manual_seed(self, seed):
        seed = int(seed)
        if seed < -(1 << 63) or seed >= (1 << 64):
            raise ValueError(f"Overflow when unpacking long long {seed}")
        self._seed = seed & ((1 << 64) - 1)
        self._offset = 0
        return self

    def seed(self):
        import os
        return self.manual_seed(int.from_bytes(os.urandom(8), "little")).initial_seed()

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return tensor([self._seed & 0xFFFFFFFF, self._seed >> 32, self._offset & 0xFFFFFFFF,
                       self._offset >> 32], dtype=D.int64)

    def set_state(self, state):
        # (seed, offset) is the whole state: Philox is counter-based and
        # normals are made per element, so nothing else is cached.
        if not isinstance(state, Tensor):
            raise TypeError(f"set_state: argument 'new_state' must be the Tensor of "
                            f"get_state(), not {type(state).__name__}")
        s = state.reshape(-1).tolist() if not state.dtype.is_floating_point else None
        if s is None or len(s) != 4 or not all(0 <= v < (1 << 32) for v in s):
            raise RuntimeError("set_state: expected the 4-element state of get_state() "
                               "(integers in [0, 2**32))")
        self._seed = s[0] | (s[1] << 32)
        self._offset = s[2] | (s[3] << 32)

    def _take(self, n):
        """Reserve counters for n values; returns (seed, offset)."""
        off = self._offset
        self._offset += n  # element i uses counter block off + i
        return self._seed, off


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator (returns it, like torch.manual_seed)."""
    default_generator.manual_seed(seed)
    return default_generator


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def _random(kind, size, dtype, generator, a=0.0, b=1.0):
    g = generator or default_generator
    t = _C.empty(size, dtype)
    s, off = g._take(t.numel())
    _C.fill_random(t, kind, s, off, float(a), float(b))
    return t


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    check_device(device)  # (before the generator advances)
    dt = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    if not dt.is_floating_point:
        raise TypeError(f"\"check_uniform_bounds\" not implemented for '{dt.name}'")
    return place(_random(_C.RANDOM_UNIFORM, _size_args(size, "rand"), dt, generator), device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    check_device(device)  # (before the generator advances)
    dt = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    if not dt.is_floating_point:
        raise TypeError(f"\"normal_kernel_cpu\" not implemented for '{dt.name}'")
    return place(_random(_C.RANDOM_NORMAL, _size_args(size, "randn"), dt, generator), device, requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    check_device(device)  # (before the generator advances)
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    low, high = _randint_bound(low, "low"), _randint_bound(high, "high")
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    dt = D.to_dtype(dtype) if dtype is not None else D.int64
    if dt.is_floating_point:  # torch's update_from/update_to
        low, high = _float_bound(low, dt, 1), _float_bound(high, dt, -1)
        if not low < high:
            raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than 'to' "
                               f"casted to dtype, but got from={low} >= to={high}")
    _randint_check_dtype(low, high - 1, dt)
    size = _size_args((size,), "randint")
    g = generator or default_generator
    t = _C.empty(size, dt)
    s, off = g._take(t.numel())
    _C.fill_randint(t, s, off, low, (high - low) & ((1 << 64) - 1))
    return place(t, device, requires_grad)


def _float_bound(v, dt, side):
    """torch's update_from (side 1) / update_to (side -1): move a bound inward
    to the next integer whose neighbour v + side survives a round trip
    through the float dtype, so that no draw rounds outside [from, to). The
    neighbour is rounded to the dtype once, exactly (torch's static_cast from
    int64; a detour through float64 would round twice)."""
    digits = _RANDINT_DIGITS[dt.name]
    back = _round_int_to_digits(v + side, digits)
    if dt is D.float16 and abs(back) > 65504:
        return v  # the neighbour rounds to inf: torch leaves the bound as it is
    if (back < v) if side > 0 else (back >= v):
        n = max(abs(v + side).bit_length() - 1, 0)
        v = back + side * (1 << (n - digits + 1))
    return v


def _round_int_to_digits(v, digits):
    """The integer v rounded to `digits` significant bits, half to even."""
    m = abs(v)
    shift = m.bit_length() - digits
    if shift > 0:
        q, r = divmod(m, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        m = q << shift
    return -m if v < 0 else m


def _randint_bound(v, name):
    """A bound of randint: an int (or 0-d integer tensor) that fits int64,
    used exactly (never through a double)."""
    if isinstance(v, bool) or not (isinstance(v, numbers.Integral) or (
            isinstance(v, Tensor) and v.ndim == 0 and not v.dtype.is_floating_point
            and v.dtype is not D.bool)):
        raise TypeError(f"randint(): argument '{name}' must be int, not {type(v).__name__}")
    v = int(v)
    if not -(1 << 63) <= v <= _I64_MAX:
        raise ValueError("Overflow when unpacking long long")
    return v


# torch's C++ type names in random_'s range messages
_RANDINT_NAMES = {"uint8": "unsigned char", "int32": "int", "int64": "long int", "bool": "bool",
                  "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
                  "float64": "double"}
_RANDINT_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _randint_check_dtype(lo, hi_inc, dt):
    """torch's check_from_to_in_range: both ends within the dtype's range
    (RuntimeError), and for floats a warning past the exactly representable
    integers."""
    name = _RANDINT_NAMES[dt.name]
    if dt is D.bool:
        vmin, vmax = 0, 1
    elif dt.is_floating_point:
        vmin, vmax = -float(D.finfo(dt).max), float(D.finfo(dt).max)
    else:
        info = np.iinfo(dt._np)
        vmin, vmax = int(info.min), int(info.max)
    for v, what in ((lo, "from"), (hi_inc, "to - 1")):
        if not vmin <= v <= vmax:
            raise RuntimeError(f"{what} is out of bounds for {name}")
    if dt.is_floating_point:
        import warnings
        digits = _RANDINT_DIGITS[dt.name]
        for v, what in ((lo, "from"), (hi_inc, "to - 1")):
            if not -(1 << digits) <= v <= (1 << digits):
                warnings.warn(f"{what} is out of bounds [-(2^{digits}), 2^{digits}]. Due to "
                              f"precision limitations {name} can support discrete uniform "
                              f"distribution only within this range. This warning will become "
                              f"an error in version 1.7 release, please fix the code in advance",
                              UserWarning, stacklevel=3)


def rand_like(x, dtype=None, **kw):
    return rand(*x.shape, dtype=dtype or x.dtype, **kw)


def randn_like(x, dtype=None, **kw):
    return randn(*x.shape, dtype=dtype or x.dtype, **kw)
