"""Helpers shared by the test files: bit views, dtype maps, ulp distances and
machine epsilons, the CPU levels and GEMM implementations this machine can force,
the markers for GPU-only and long tests, and the CPU-against-CUDA comparisons of
the GPU cases.

The fixtures built on these (``cpu_path``, ``impl``) are in conftest.py, so every
test file gets them without an import.
"""
import contextlib
import os
import sys
import warnings
import zlib

import ml_dtypes
import numpy as np
import pytest

import ampy
import ampy.cuda
from ampy import _C

# ---- dtype maps ----------------------------------------------------------------------

DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "uint8", "bool")
FLOAT_NAMES = ("float32", "float16", "bfloat16", "float64")


class DtypeMap(dict):
    """A dict keyed by dtype name ("float16") that also answers for an ampy dtype
    (ampy.float16) and a NumPy dtype; iterating it yields the names."""

    def _name(self, key):
        if isinstance(key, ampy.dtype):
            return key.name
        if isinstance(key, (np.dtype, type)):
            try:
                return np.dtype(key).name
            except TypeError:
                return key
        return key

    def __getitem__(self, key):
        return dict.__getitem__(self, self._name(key))

    def __contains__(self, key):
        return dict.__contains__(self, self._name(key))

    def get(self, key, default=None):
        return dict.get(self, self._name(key), default)


AMPY_DTYPE = DtypeMap((n, getattr(ampy, n)) for n in DTYPE_NAMES)
NP_DTYPE = DtypeMap(float32=np.float32, float16=np.float16, bfloat16=ml_dtypes.bfloat16,
                    float64=np.float64, int64=np.int64, int32=np.int32, uint8=np.uint8,
                    bool=np.bool_)
ALL_DTYPES = tuple(AMPY_DTYPE[n] for n in DTYPE_NAMES)
FLOAT_DTYPES = tuple(AMPY_DTYPE[n] for n in FLOAT_NAMES)
HALF_DTYPES = (ampy.float16, ampy.bfloat16)

try:
    import torch
except ImportError:  # the files that need torch importorskip it themselves
    torch = None
TORCH_DTYPE = DtypeMap((n, getattr(torch, n)) for n in DTYPE_NAMES) if torch else DtypeMap()

# ---- bits ----------------------------------------------------------------------------

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def host_array(x):
    """x as a NumPy array on the host: an ampy tensor (any device, grad or not),
    a torch tensor (bfloat16 as its int16 bits) or anything np.asarray takes."""
    if isinstance(x, ampy.Tensor):
        return x.detach().cpu().numpy()
    th = sys.modules.get("torch")
    if th is not None and isinstance(x, th.Tensor):
        x = x.detach().cpu()
        return (x.view(th.int16) if x.dtype == th.bfloat16 else x).numpy()
    return np.asarray(x)


def bits(x):
    """The bit patterns of x (see host_array) as a C-contiguous copy of unsigned
    integers of the same item size and shape: uint8 for 1-byte dtypes up to uint64
    for 8-byte ones. A copy, so a snapshot taken before a call stays put."""
    a = np.array(host_array(x), order="C", copy=True)
    return a.view(_UINT[a.dtype.itemsize])


def same_bits(a, b):
    """a and b (see host_array) have one dtype, one shape and the same bits."""
    a, b = host_array(a), host_array(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(bits(a), bits(b))


def _nan_mask(x):
    """Where x (see host_array) is NaN; torch's bfloat16 is read as its values, not
    as the int16 bits host_array gives."""
    th = sys.modules.get("torch")
    if th is not None and isinstance(x, th.Tensor):
        x = x.detach().cpu()
        return np.isnan(x.to(th.float64).numpy()) if x.is_floating_point() else \
            np.zeros(tuple(x.shape), bool)
    return np.isnan(np.asarray(host_array(x), np.float64))


def same_bits_or_both_nan(a, b):
    """Same bits wherever a is a number, NaN exactly where a is NaN (any payload)."""
    nan = _nan_mask(a)
    return (np.array_equal(nan, _nan_mask(b))
            and np.array_equal(bits(a)[~nan], bits(b)[~nan]))


# ---- tolerances ----------------------------------------------------------------------

EPS = DtypeMap(float32=2.0**-23, float16=2.0**-10, bfloat16=2.0**-7, float64=2.0**-52)
"""Machine epsilon (the spacing of the dtype's numbers just above 1)."""
UNIT_ROUNDOFF = DtypeMap((n, e / 2) for n, e in EPS.items())
"""The largest relative error of one round-to-nearest to the dtype."""

_SIGNED = {2: np.int16, 4: np.int32, 8: np.int64}


def ulp_distance(got, ref):
    """Distance in units in the last place between two arrays of one float dtype
    (float16, bfloat16, float32 or float64): NaN against NaN counts 0, NaN against
    a number 2**40; +0 and -0 are 0 apart."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    ib = _SIGNED[got.dtype.itemsize]
    mask = np.iinfo(ib).max

    def ordered(a):
        i = np.ascontiguousarray(a).view(ib).astype(np.int64)
        return np.where(i < 0, -(i & mask), i)

    d = np.abs(ordered(got) - ordered(ref))
    gn, rn = np.isnan(got.astype(np.float64)), np.isnan(ref.astype(np.float64))
    return np.where(gn & rn, 0, np.where(gn | rn, 1 << 40, d))


# ---- CPU levels and GEMM implementations ---------------------------------------------

_LEVEL_FEATURES = {"portable": (), "avx2": ("avx2",), "avx512": ("avx512",),
                   "avx512bf16": ("avx512_bf16",), "amx": ("avx512_bf16", "amx_bf16")}
CPU_LEVELS = tuple(_LEVEL_FEATURES)
"""Every level ampy._C._set_cpu_level can force, lowest first."""


def cpu_level_missing(level):
    """The CPU features `level` needs that this CPU lacks (empty: it can run)."""
    info = _C.cpu_info()
    return [f for f in _LEVEL_FEATURES[level] if not info[f]]


GEMM_IMPLS = ("portable", "avx2", "avx512", "avx512bf16", "amx")
IMPLS = [i for i in GEMM_IMPLS if _C.gemm_impl_available(i)]
"""The GEMM implementations this CPU can run (the ``impl`` fixture's params)."""

# ---- markers -------------------------------------------------------------------------

HAS_CUDA = ampy.cuda.is_available()
requires_cuda = pytest.mark.cuda
"""A test that needs a CUDA GPU: conftest.py skips it where ampy.cuda has none;
``pytest -m cuda`` selects all of them."""

without_cuda = pytest.mark.skipif(HAS_CUDA, reason="checks the machine without a GPU (a CUDA "
                                                  "GPU is usable here)")
"""A test of what happens without a GPU (the messages, the CPU-only paths)."""

LONG = os.environ.get("AMPY_TEST_LONG") == "1"
SHORT = bool(os.environ.get("AMPY_TEST_SHORT"))
"""AMPY_TEST_SHORT: fewer random cases (the ASan run sets it)."""


def long_run(why):
    """Mark a test that runs only with AMPY_TEST_LONG=1 (and selects with -m slow)."""
    def mark(fn):
        fn = pytest.mark.skipif(not LONG, reason=f"{why}: set AMPY_TEST_LONG=1")(fn)
        return pytest.mark.slow(fn)
    return mark


# ---- CPU against CUDA (the GPU cases of each concern file) -------------------------------

HAS_TORCH_CUDA = bool(torch is not None and torch.cuda.is_available())
requires_torch_cuda = pytest.mark.skipif(not HAS_TORCH_CUDA, reason="torch has no CUDA here")
"""For the GPU cases compared with torch on the GPU (with requires_cuda)."""


def sample(shape, dt, seed=0, specials=True):
    """A CPU tensor of dtype dt: normal values times 3, led by 0, -0, +-inf, NaN,
    +-1, 0.5, 1e-30, +-80 and 2.5 when `specials` (and the tensor has 12 elements);
    for integer dtypes the values times 10, rounded, finite and in range."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(int(np.prod(shape))) * 3).astype(np.float64)
    if specials and a.size >= 12:
        a[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 1e-30, 80.0, -80.0, 2.5]
    if dt in (ampy.int64, ampy.int32, ampy.uint8):
        a = np.nan_to_num(np.round(a * 10), posinf=7, neginf=-7)
        a = a % (200 if dt is ampy.uint8 else 1e9)
    return ampy.from_numpy(a.reshape(shape)).to(dt)


def host_f64(t):
    """An ampy tensor on the host as float64 NumPy (bool stays bool)."""
    t = t.detach().cpu()
    return t.double().numpy() if t.dtype is not ampy.bool else t.numpy()


def assert_same_bits(got, want):
    np.testing.assert_array_equal(bits(got), bits(want))


def assert_close_ulps(got, want, dt, ulps=8):
    """Within ulps machine epsilons of dt, relative and absolute (NaN equals NaN)."""
    e = EPS.get(dt, 0.0) * ulps
    np.testing.assert_allclose(host_f64(got), host_f64(want), equal_nan=True, rtol=e, atol=e)


@contextlib.contextmanager
def sync_checks(on=True):
    """ampy.cuda.set_sync_checks(on) for a with-block."""
    prev = ampy.cuda.get_sync_checks()
    ampy.cuda.set_sync_checks(on)
    try:
        yield
    finally:
        ampy.cuda.set_sync_checks(prev)


@contextlib.contextmanager
def no_cpu_fallback():
    """The CPU fallback's RuntimeWarning (an op without a CUDA kernel) becomes an
    error in the with-block."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def grads_cpu_gpu(fn, *inputs, need=None):
    """Run fn on CPU and CUDA copies of inputs and backpropagate the float sum of
    the output; returns ((out_cpu, grads_cpu), (out_gpu, grads_gpu))."""
    res = []
    for dev in ("cpu", "cuda"):
        ts = [t.to(dev).detach().requires_grad_(need is None or need[i]) if
              (t.dtype.is_floating_point) else t.to(dev) for i, t in enumerate(inputs)]
        out = fn(*ts)
        (out.float().sum() if out.dim() else out.float()).backward()
        res.append((out, [t.grad for t in ts if t.dtype.is_floating_point]))
    return res


def stable_seed(*parts):
    """A 32-bit seed from parts (strings, numbers, tuples), the same in every
    process: Python's hash() of a string changes per run (PYTHONHASHSEED), so
    seeding with it draws other data each run and a failure cannot be replayed."""
    return zlib.crc32(repr(parts).encode())


def conv_geometry(case):
    """A conv test case (n, c, h, w, o, (kh, kw), s, p, d) with s / p / d ints or pairs:
    ((sh, sw), (ph, pw), (dh, dw), oh, ow), the output size as torch computes it."""
    n, c, h, w, o, (kh, kw), s, p, d = case
    pair = (lambda v: v if isinstance(v, tuple) else (v, v))
    (sh, sw), (ph, pw), (dh, dw) = pair(s), pair(p), pair(d)
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return (sh, sw), (ph, pw), (dh, dw), oh, ow


def randn_f32(shape, seed):
    """Standard normal float32 values of `shape` from seed `seed`."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def assert_raises_as_torch(case, ampy_ns, torch_ns, rand):
    """case = (fn, exc, msg): fn(ns, make) builds its inputs with make(*shape) and calls
    into ns; torch and ampy must both raise exc with msg in the text, and ampy's inputs
    must hold their values after the raise."""
    import torch
    fn, exc, msg = case
    made = []

    def make_ampy(*s):
        made.append((ampy.tensor(rand(*s)), rand(*s)))
        return made[-1][0]

    with pytest.raises(exc) as ei_t:
        fn(torch_ns, lambda *s: torch.from_numpy(rand(*s)))
    assert msg in str(ei_t.value)
    with pytest.raises(exc) as ei:
        fn(ampy_ns, make_ampy)
    assert msg in str(ei.value)
    for t, before in made:
        assert np.array_equal(np.asarray(t), before)
