"""In-place random fills of a tensor (uniform_, normal_, random_, bernoulli_,
exponential_, geometric_, log_normal_, cauchy_) and the sampling functions
bernoulli, normal, poisson and randint_like, all drawing from ampy's Philox
generators (ampy/_creation.py).

Values are drawn into a fresh contiguous CPU buffer: normals by the C kernel
(_C.fill_random), integers exactly by _C.fill_randint, the other
distributions from 53-bit uniforms transformed in float64. The buffer is then
copied into the target once (rounded once to its dtype), so a strided view
is filled in place and only its own elements change. The fills record no
history of their own: on a tensor with history the copy is recorded (its old
values get a zero gradient, as torch's), on a leaf that requires grad they
raise as torch does unless grad mode is off. The sampling functions give a
zero gradient to their tensor arguments, as torch's do.
"""
import math
import numbers

import numpy as np

from . import _C
from . import _dtype as D
from ._creation import (_RANDINT_DIGITS, _float_bound, _randint_check_dtype, _size_args,
                        default_generator, randint)
from ._convert import from_numpy, place
from ._tensor import Tensor
from . import autograd
from ._creation import zeros
from ._scatter import _mismatch
from ._shape import broadcast_shapes
from .autograd.function import Function

__all__ = ["bernoulli", "normal", "poisson", "randint_like"]

# torch's ScalarType names in its "not implemented for" messages
_TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "uint8": "Byte",
                "bool": "Bool"}
_CPP_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
              "uint8": "unsigned char", "bool": "bool"}
_LIMIT_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                "bfloat16": "BFloat16"}


def _fmt(v):
    """A number as torch's messages print it (C++ stream style: 1, 0.5, 3e+38)."""
    return f"{float(v):g}" if isinstance(v, float) else str(v)


def _not_impl(kernel, dt):
    return NotImplementedError(f"\"{kernel}\" not implemented for '{_TORCH_NAMES[dt.name]}'")


def _need_float(t, kernel):
    if not t.dtype.is_floating_point:
        raise _not_impl(kernel, t.dtype)


def _real(v, fn, name):
    if isinstance(v, Tensor) and v.numel() == 1:
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{fn}(): argument '{name}' must be float, not {type(v).__name__}")
    return float(v)


def _gen(generator):
    return default_generator if generator is None else generator


# ---- the target: checks before drawing, one copy after ------------------------------
def _check_target(self, fn):
    if not isinstance(self, Tensor):
        raise TypeError(f"{fn}(): argument 'self' must be Tensor, not {type(self).__name__}")
    if self._requires_grad and autograd.is_grad_enabled():
        if self.grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        if self._is_view_of_grad:
            raise NotImplementedError(
                f"{fn}: in-place modification of a view of a tensor that requires grad is not "
                f"supported by ampy's autograd; clone() the view first")


def _store(self, buf):
    """Copy the contiguous CPU buffer buf into self (cast once to self's dtype)."""
    if self._requires_grad and autograd.is_grad_enabled():
        src = buf if buf.dtype is self.dtype else _C.cast(buf, self.dtype)
        self.copy_(src if self.is_cpu else src.to(self.device))  # recorded: zero gradient
        return self
    if buf is not self:
        _C.copy_(self, buf if self.is_cpu else buf.to(self.device))
    return self


def _direct(self):
    """self itself when it can be filled directly (contiguous, on the CPU, no
    history to record), else a fresh buffer of its shape and dtype."""
    if (self.is_cpu and self.is_contiguous() and
            not (self._requires_grad and autograd.is_grad_enabled())):
        return self
    return _C.empty(tuple(self.shape), self.dtype)


def _unit(n, generator):
    """n float64 uniforms in [0, 1) with 53 random bits each (numpy array)."""
    t = _C.empty((n,), D.int64)
    if n:
        s, off = _gen(generator)._take(n)
        _C.fill_randint(t, s, off, 0, 1 << 53)
    return t._numpy().astype(np.float64) * (2.0 ** -53)


def _from_f64(arr, shape):
    """The float64 numpy array as a contiguous ampy tensor of the given shape."""
    return from_numpy(np.ascontiguousarray(arr, dtype=np.float64).reshape(shape))


def _store_f64(self, arr):
    return _store(self, _from_f64(arr, tuple(self.shape)))


# ---- uniform_ / normal_ -------------------------------------------------------------
def _bounds(args, kwargs, fn, names, defaults):
    """torch's (from, to) style positional-or-keyword arguments ('from' is a
    Python keyword, so it comes in **kwargs)."""
    if len(args) > len(names):
        raise TypeError(f"{fn}() takes at most {len(names)} arguments ({len(args)} given)")
    vals = dict(zip(names, defaults))
    for n, v in zip(names, args):
        vals[n] = v
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{fn}() got an unexpected keyword argument '{k}'")
        if names.index(k) < len(args):
            raise TypeError(f"{fn}() got multiple values for argument '{k}'")
        vals[k] = v
    return [vals[n] for n in names]


def uniform_(self, *args, generator=None, **kwargs):
    """Fill self in place with U[from, to) draws (torch.Tensor.uniform_)."""
    lo, hi = _bounds(args, kwargs, "uniform_", ("from", "to"), (0.0, 1.0))
    lo, hi = _real(lo, "uniform_", "from"), _real(hi, "uniform_", "to")
    _check_target(self, "uniform_")
    _need_float(self, "check_uniform_bounds")
    fmax = float(D.finfo(self.dtype).max)
    for v, name in ((lo, "from"), (hi, "to")):
        if not -fmax <= v <= fmax:
            raise RuntimeError(f"{name} is out of bounds for {_CPP_NAMES[self.dtype.name]}")
    if lo > hi:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={_fmt(lo)} > to={_fmt(hi)}")
    if hi - lo > fmax:
        raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<"
                           f"{_LIMIT_NAMES[self.dtype.name]}>::max(), but found to={_fmt(hi)} "
                           f"and from={_fmt(lo)} which result in to-from to exceed the limit")
    v = lo + (hi - lo) * _unit(self.numel(), generator)
    buf = _C.cast(_from_f64(v, tuple(self.shape)), self.dtype)
    back = _C.cast(buf, D.float64)._numpy().reshape(-1)
    up = back >= hi  # rounded up to `to`: moved back to `from` (as torch)
    if lo < hi and up.any():
        v[up] = lo
        buf = _C.cast(_from_f64(v, tuple(self.shape)), self.dtype)
    return _store(self, buf)


def _check_std(std, fn="normal"):
    if not std >= 0.0:
        raise RuntimeError(f"{fn} expects std >= 0.0, but found std {_fmt(std)}")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill self in place with N(mean, std**2) draws (torch.Tensor.normal_)."""
    mean, std = _real(mean, "normal_", "mean"), _real(std, "normal_", "std")
    _check_target(self, "normal_")
    _check_std(std)
    _need_float(self, "normal_kernel_cpu")
    buf = _direct(self)
    if buf.numel():
        s, off = _gen(generator)._take(buf.numel())
        _C.fill_random(buf, _C.RANDOM_NORMAL, s, off, mean, std)
    return _store(self, buf)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill self with exp(N(mean, std**2)) draws (torch.Tensor.log_normal_)."""
    mean, std = _real(mean, "log_normal_", "mean"), _real(std, "log_normal_", "std")
    _check_target(self, "log_normal_")
    if not std > 0.0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_fmt(std)}")
    _need_float(self, "log_normal_cpu")
    z = _C.empty((self.numel(),), D.float64)
    if z.numel():
        s, off = _gen(generator)._take(z.numel())
        _C.fill_random(z, _C.RANDOM_NORMAL, s, off, mean, std)
    return _store_f64(self, np.exp(z._numpy()))


def _continuous(self, what):
    if not self.dtype.is_floating_point:
        name = _TORCH_NAMES[self.dtype.name] if what == "Exponential" else \
            _CPP_NAMES[self.dtype.name]
        raise RuntimeError(f"{what} distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified {name}")


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill self with Exp(lambd) draws, density lambd * exp(-lambd * x)."""
    lambd = _real(lambd, "exponential_", "lambd")
    _check_target(self, "exponential_")
    if not lambd > 0.0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_fmt(lambd)}")
    _continuous(self, "Exponential")
    u = _unit(self.numel(), generator)
    return _store_f64(self, -np.log1p(-u) / lambd)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill self with Cauchy(median, sigma) draws."""
    median = _real(median, "cauchy_", "median")
    sigma = _real(sigma, "cauchy_", "sigma")
    _check_target(self, "cauchy_")
    if not sigma > 0.0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_fmt(sigma)}")
    _continuous(self, "Cauchy")
    u = _unit(self.numel(), generator)
    return _store_f64(self, median + sigma * np.tan(np.pi * (u - 0.5)))


def geometric_(self, p, *, generator=None):
    """Fill self with the number of Bernoulli(p) trials up to the first
    success (values 1, 2, ...)."""
    p = _real(p, "geometric_", "p")
    _check_target(self, "geometric_")
    if not 0.0 < p < 1.0:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_fmt(p)}")
    if self.dtype is D.bool:
        raise _not_impl("geometric_cpu", self.dtype)
    u = 1.0 - _unit(self.numel(), generator)  # (0, 1]
    with np.errstate(divide="ignore"):
        k = np.maximum(np.ceil(np.log(u) / np.log1p(-p)), 1.0)
    if not self.dtype.is_floating_point:  # (large draws wrap as torch's integer cast)
        k = np.minimum(k, 2.0 ** 63 - 1024)
        return _store(self, from_numpy(k.astype(np.int64).reshape(tuple(self.shape))))
    return _store_f64(self, k)


# ---- random_ ------------------------------------------------------------------------
def _int_arg(v, name):
    if isinstance(v, Tensor) and v.ndim == 0 and not v.dtype.is_floating_point:
        v = int(v.item())
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"random_(): argument '{name}' must be int, not {type(v).__name__}")
    v = int(v)
    if not -(1 << 63) <= v < (1 << 63):
        raise ValueError("Overflow when unpacking long long")
    return v


def _dtype_top(dt):
    """The largest value random_() draws for dtype dt (inclusive)."""
    if dt.is_floating_point:
        return 1 << _RANDINT_DIGITS[dt.name]
    if dt is D.bool:
        return 1
    return int(np.iinfo(dt._np).max)


def random_(self, *args, generator=None, **kwargs):
    """Fill self with integers uniform over [from, to - 1]: random_() over
    the dtype's range ([0, 2**mantissa] for floats), random_(to) over
    [0, to), random_(from, None) from `from` to the dtype's top."""
    if len(args) == 1 and not kwargs:
        lo, hi = 0, _int_arg(args[0], "to")
    else:
        lo, hi = _bounds(args, kwargs, "random_", ("from", "to"), (0, None))
        lo = _int_arg(lo, "from")
        hi = None if hi is None else _int_arg(hi, "to")
        if not args and not kwargs:
            lo, hi = 0, None
    _check_target(self, "random_")
    dt = self.dtype
    if hi is None:
        top = _dtype_top(dt)
        if dt.is_floating_point:
            _randint_check_dtype(lo, lo, dt)
        else:
            _randint_check_dtype(lo, top, dt)
        if lo > top:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={lo} >= to={top + 1}")
        hi = top + 1
    else:
        if hi <= lo:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={lo} >= to={hi}")
        if dt.is_floating_point:
            lo, hi = _float_bound(lo, dt, 1), _float_bound(hi, dt, -1)
            if not lo < hi:
                raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than "
                                   f"'to' casted to dtype, but got from={lo} >= to={hi}")
        _randint_check_dtype(lo, hi - 1, dt)
    buf = _direct(self)
    if buf.numel():
        s, off = _gen(generator)._take(buf.numel())
        _C.fill_randint(buf, s, off, lo, (hi - lo) & ((1 << 64) - 1))
    return _store(self, buf)


# ---- bernoulli ----------------------------------------------------------------------
def _prob_tensor(p, shape):
    """p (a float tensor) as a float64 numpy array of `shape` (broadcast),
    its values checked in [0, 1]."""
    if not p.dtype.is_floating_point:
        raise _not_impl("bernoulli_tensor_cpu_p_", p.dtype)
    pe = p.detach()
    if tuple(pe.shape) != tuple(shape):
        pe = pe.expand(*shape)
    a = _C.cast(pe, D.float64)._numpy()
    if a.size and not ((a >= 0) & (a <= 1)).all():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return a.reshape(-1)


def _check_p(p, fn="bernoulli_"):
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"{fn} expects p to be in [0, 1], but got p={_fmt(p)}")


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill self with 1 with probability p (a float, or a float tensor
    broadcast to self), else 0."""
    _check_target(self, "bernoulli_")
    if isinstance(p, Tensor):
        pa = _prob_tensor(p, tuple(self.shape))
    else:
        pa = _real(p, "bernoulli_", "p")
        _check_p(pa)
    u = _unit(self.numel(), generator)
    return _store_f64(self, (u < pa).astype(np.float64))


def _zero_grad_of(out, inputs):
    """out (fresh, no history) given a zero gradient to each tensor of
    `inputs` that requires grad, as torch's sampling functions do."""
    need = [t for t in inputs if isinstance(t, Tensor) and t._requires_grad]
    if not need or not autograd.is_grad_enabled() or not out.dtype.is_floating_point:
        return out
    return _Sampled.apply(out, *need)


def _make_sampled():

    class _Sampled(Function):
        """The identity on a fresh sample, with zero gradients for its
        parameters (torch's derivatives of normal/bernoulli/poisson)."""

        @staticmethod
        def forward(ctx, out, *params):
            ctx.metas = [(tuple(p.shape), p.dtype, p.device) for p in params]
            return _C.cast(out, out.dtype)

        @staticmethod
        def backward(ctx, grad):
            return (None,) + tuple(zeros(*s, dtype=dt).to(dev) for s, dt, dev in ctx.metas)

    return _Sampled


_Sampled = _make_sampled()


def bernoulli(input, p=None, *, generator=None):
    """Draws of 0/1 in input's shape and dtype: with probability input (its
    values in [0, 1]) or, given p, with probability p everywhere."""
    if not isinstance(input, Tensor):
        raise TypeError(f"bernoulli(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if isinstance(p, Tensor):
        raise TypeError("bernoulli(): argument 'p' must be float, not Tensor")
    if p is None:
        if not input.dtype.is_floating_point:
            raise _not_impl("bernoulli_tensor_cpu_p_", input.dtype)
        pa = _prob_tensor(input, tuple(input.shape))
    else:
        pa = _real(p, "bernoulli", "p")
        _check_p(pa, "bernoulli_")
    u = _unit(input.numel(), generator)
    res = _C.cast(_from_f64((u < pa).astype(np.float64), tuple(input.shape)), input.dtype)
    if input.is_cuda:
        res = res.to(input.device)
    return _zero_grad_of(res, (input,))


def _tensor_bernoulli(self, p=None, *, generator=None):
    """Tensor.bernoulli: ampy.bernoulli(self, p)."""
    return bernoulli(self, p, generator=generator)


# ---- normal -------------------------------------------------------------------------
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False, layout=None, pin_memory=False):
    """torch.normal's four forms: normal(mean_tensor, std_tensor) (broadcast,
    mean's dtype), normal(mean_tensor, std=1.0), normal(mean, std_tensor),
    and normal(mean, std, size) (the default dtype, or dtype=)."""
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal() missing required argument 'size' (mean and std are "
                            "numbers)")
        m, s = _real(mean, "normal", "mean"), _real(std, "normal", "std")
        _check_std(s)
        shape = _size_args((size,) if isinstance(size, int) else (tuple(size),), "normal")
        dt = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
        if not dt.is_floating_point:
            raise _not_impl("normal_kernel_cpu", dt)
        res = _C.empty(shape, dt)
        if res.numel():
            sd, off = _gen(generator)._take(res.numel())
            _C.fill_random(res, _C.RANDOM_NORMAL, sd, off, m, s)
        return place(res, device, requires_grad)
    if size is not None:
        raise TypeError("normal(): 'size' is only accepted when mean and std are numbers")
    ref = mean if mt else std
    dt = ref.dtype
    if not dt.is_floating_point:
        raise _not_impl("normal_kernel_cpu", dt)
    if st and not std.dtype.is_floating_point and not mt:
        raise _not_impl("normal_kernel_cpu", std.dtype)
    if mt and st:
        shape = broadcast_shapes(tuple(mean.shape), tuple(std.shape))
        if shape is None:
            raise RuntimeError(_mismatch(tuple(mean.shape), tuple(std.shape)))
    else:
        shape = tuple(ref.shape)
    if st:
        sa = _C.cast(std.detach().expand(*shape), D.float64)._numpy().reshape(-1)
        if sa.size and not (sa >= 0).all():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        sa = _real(std, "normal", "std")
        _check_std(sa)
    ma = (_C.cast(mean.detach().expand(*shape), D.float64)._numpy().reshape(-1) if mt
          else _real(mean, "normal", "mean"))
    n = math.prod(shape)
    z = _C.empty((n,), D.float64)
    if n:
        sd, off = _gen(generator)._take(n)
        _C.fill_random(z, _C.RANDOM_NORMAL, sd, off, 0.0, 1.0)
    res = _C.cast(_from_f64(ma + sa * z._numpy(), shape), dt)
    if ref.is_cuda:
        res = res.to(ref.device)
    return _zero_grad_of(res, (mean, std))


# ---- poisson ------------------------------------------------------------------------
def _poisson_small(lam, generator):
    """Inversion by sequential search (rates below 10): one uniform each."""
    u = _unit(lam.size, generator)
    k = np.zeros(lam.size)
    p = np.exp(-lam)
    cdf = p.copy()
    todo = np.nonzero(u > cdf)[0]
    j = 0
    while todo.size:
        j += 1
        p[todo] *= lam[todo] / j
        cdf[todo] += p[todo]
        k[todo] = j
        todo = todo[(u[todo] > cdf[todo]) & (p[todo] > 0)]
    return k


def _poisson_large(lam, generator):
    """Hörmann's transformed rejection (PTRS) for rates of 10 and more: two
    uniforms per round for each draw not yet accepted."""
    k = np.zeros(lam.size)
    todo = np.arange(lam.size)
    lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
    while todo.size:
        lm = lam[todo]
        u2 = _unit(2 * todo.size, generator).reshape(2, -1)
        U, V = u2[0] - 0.5, u2[1]
        slam, loglam = np.sqrt(lm), np.log(lm)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        us = 0.5 - np.abs(U)
        kk = np.floor((2 * a / np.maximum(us, 1e-300) + b) * U + lm + 0.43)
        ok = (us >= 0.07) & (V <= vr)
        rest = ~ok & (kk >= 0) & ~((us < 0.013) & (V > us))
        if rest.any():
            r = np.nonzero(rest)[0]
            lhs = np.log(np.maximum(V[r], 1e-300)) + np.log(invalpha[r]) - np.log(
                a[r] / (us[r] * us[r]) + b[r])
            rhs = -lm[r] + kk[r] * loglam[r] - lgamma(kk[r] + 1)
            ok[r[lhs <= rhs]] = True
        k[todo[ok]] = kk[ok]
        todo = todo[~ok]
    return k


def poisson(input, generator=None):
    """Poisson draws with the rates in input (non-negative), in input's dtype."""
    if not isinstance(input, Tensor):
        raise TypeError(f"poisson(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise _not_impl("poisson_cpu", input.dtype)
    lam = _C.cast(input.detach(), D.float64)._numpy().reshape(-1)
    if lam.size and not (lam >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    k = np.zeros(lam.size)
    small = np.nonzero((lam > 0) & (lam < 10))[0]
    large = np.nonzero(lam >= 10)[0]
    if small.size:
        k[small] = _poisson_small(lam[small], generator)
    if large.size:
        k[large] = _poisson_large(lam[large], generator)
    res = _C.cast(_from_f64(k, tuple(input.shape)), input.dtype)
    if input.is_cuda:
        res = res.to(input.device)
    return _zero_grad_of(res, (input,))


# ---- randint_like -------------------------------------------------------------------
def randint_like(input, low=0, high=None, *, dtype=None, generator=None, device=None,
                 requires_grad=False, layout=None, memory_format=None):
    """randint over [low, high) in input's shape (and dtype unless given);
    randint_like(input, high) draws from [0, high)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"randint_like(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if high is None:
        low, high = 0, low
    dt = D.to_dtype(dtype) if dtype is not None else input.dtype
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dt,
                   device=device if device is not None else
                   (input.device if input.is_cuda else None), requires_grad=requires_grad)
